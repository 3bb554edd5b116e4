//! What a device string means.
//!
//! - a path: a regular file, a block device, `/dev/nvmeXnY`, `/dev/ngXnY`, `/dev/nvmeX`;
//! - a size, for a ramdisk: `1GiB`, `512MiB`, `ramdisk:64m`;
//! - a PCI address, for an NVMe controller driven from user space: `0000:00:05.0`,
//!   `pci:0000:00:05.0` (domain:bus:device.function, hex, as sysfs and lspci -D write it).
//!
//! A bare size or a bare PCI address is only taken as such when no file of that name
//! exists, so a file called `1GiB` in the current directory stays reachable (as `./1GiB`);
//! the `ramdisk:` and `pci:` prefixes always mean what they say.

use crate::error::Error;
use crate::units::parse_size;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A parsed device URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A file system path.
    Path(PathBuf),
    /// A ramdisk of this many bytes.
    Ramdisk(u64),
    /// A PCI function (an NVMe controller), by its address.
    Pci(PciAddr),
}

/// A PCI function's address: domain, bus, device (0–31), function (0–7). Written as
/// sysfs names it, `0000:00:05.0`; parsed from that form (hex digits of either case;
/// a domain of 4 to 8 digits, as the kernel prints domains above 0xffff).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddr {
    /// PCI segment (domain).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0–31.
    pub dev: u8,
    /// Function number, 0–7.
    pub func: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.dev, self.func)
    }
}

/// Serialised as its text, `"0000:00:05.0"`.
impl serde::Serialize for PciAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for PciAddr {
    type Err = String;

    /// Parses `DDDD:BB:DD.F`; the error says which part is wrong and what it must be.
    fn from_str(s: &str) -> Result<PciAddr, String> {
        let shape =
            || format!("{s:?} is not a PCI address: expected domain:bus:device.function in hex, like 0000:00:05.0");
        let mut parts = s.split(':');
        let (Some(domain), Some(bus), Some(devfn), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(shape());
        };
        let Some((dev, func)) = devfn.split_once('.') else { return Err(shape()) };
        let hex = |what: &str, part: &str, digits: std::ops::RangeInclusive<usize>, max: u32| {
            if !digits.contains(&part.len()) || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                let n = if digits.start() == digits.end() {
                    format!("{}", digits.start())
                } else {
                    format!("{} to {}", digits.start(), digits.end())
                };
                return Err(format!("{s:?}: PCI {what} {part:?} must be {n} hex digits"));
            }
            match u32::from_str_radix(part, 16) {
                Ok(v) if v <= max => Ok(v),
                _ => Err(format!("{s:?}: PCI {what} {part:?} is out of range (at most {max:#x})")),
            }
        };
        Ok(PciAddr {
            domain: hex("domain", domain, 4..=8, u32::MAX)?,
            bus: hex("bus", bus, 2..=2, 0xff)? as u8,
            dev: hex("device", dev, 2..=2, 0x1f)? as u8,
            func: hex("function", func, 1..=1, 7)? as u8,
        })
    }
}

/// Whether `s` has the shape of a PCI address (`X:X:X.X`, hex digits only), right or
/// wrong in its details: such a string is parsed as one, so that a typo gets a PCI
/// error rather than "no such file".
fn looks_like_pci(s: &str) -> bool {
    let mut parts = s.split(':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(a), Some(b), Some(c), None) => {
            let hex = |p: &str| !p.is_empty() && p.bytes().all(|x| x.is_ascii_hexdigit());
            c.split_once('.').is_some_and(|(d, f)| hex(a) && hex(b) && hex(d) && hex(f))
        }
        _ => false,
    }
}

/// Parses a device URI.
pub fn parse(uri: &str) -> Result<Target, Error> {
    let bad = |why: String| Error::BadUri { uri: uri.into(), why };
    if uri.is_empty() {
        return Err(bad("empty device URI".into()));
    }
    if let Some(size) = uri.strip_prefix("ramdisk:") {
        return ramdisk(size).map(Target::Ramdisk).map_err(bad);
    }
    if let Some(addr) = uri.strip_prefix("pci:") {
        return addr.parse().map(Target::Pci).map_err(bad);
    }
    if looks_like_pci(uri) && !Path::new(uri).exists() {
        return uri.parse().map(Target::Pci).map_err(bad);
    }
    if let Some((scheme, _)) = uri.split_once("://") {
        return Err(bad(format!("scheme {scheme:?} is not supported (yet); give a path or a ramdisk size")));
    }
    let starts_with_digit = uri.as_bytes()[0].is_ascii_digit();
    if starts_with_digit && !Path::new(uri).exists() {
        return ramdisk(uri)
            .map(Target::Ramdisk)
            .map_err(|e| bad(format!("not an existing path, and not a ramdisk size: {e}")));
    }
    Ok(Target::Path(PathBuf::from(uri)))
}

fn ramdisk(size: &str) -> Result<u64, String> {
    let n = parse_size(size)?;
    if n == 0 || n % 512 != 0 {
        return Err(format!("ramdisk size {n} must be a positive multiple of 512 bytes"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_make_ramdisks_and_paths_stay_paths() {
        assert_eq!(parse("1GiB").unwrap(), Target::Ramdisk(1 << 30));
        assert_eq!(parse("ramdisk:64m").unwrap(), Target::Ramdisk(64 << 20));
        assert_eq!(parse("/dev/nvme0n1").unwrap(), Target::Path("/dev/nvme0n1".into()));
        assert_eq!(parse("./1GiB").unwrap(), Target::Path("./1GiB".into()));
    }

    #[test]
    fn bad_uris_say_what_is_wrong() {
        let e = parse("").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = parse("tcp://10.0.0.1:4420").unwrap_err().to_string();
        assert!(e.contains("\"tcp\""), "{e}");
        let e = parse("ramdisk:100").unwrap_err().to_string();
        assert!(e.contains("multiple of 512"), "{e}");
        let e = parse("12parsecs").unwrap_err().to_string();
        assert!(e.contains("12parsecs") && e.contains("unknown unit"), "{e}");
    }

    #[test]
    fn pci_addresses_parse_with_and_without_prefix() {
        let a = PciAddr { domain: 0, bus: 0, dev: 5, func: 0 };
        assert_eq!(parse("0000:00:05.0").unwrap(), Target::Pci(a));
        assert_eq!(parse("pci:0000:00:05.0").unwrap(), Target::Pci(a));
        assert_eq!(a.to_string(), "0000:00:05.0");
        let b = PciAddr { domain: 0x10000, bus: 0xe1, dev: 0x1f, func: 7 };
        assert_eq!(parse("pci:10000:E1:1f.7").unwrap(), Target::Pci(b));
        assert_eq!(b.to_string(), "10000:e1:1f.7");
        assert_eq!(parse(&b.to_string()).unwrap(), Target::Pci(b), "Display parses back");
        assert!(PciAddr { domain: 0, bus: 0, dev: 5, func: 0 } < PciAddr { domain: 0, bus: 0, dev: 5, func: 1 });
        // Paths with a slash never look like an address, whatever their last part.
        assert!(looks_like_pci("0000:00:05.0") && !looks_like_pci("./0000:00:05.0"));
        assert_eq!(parse("./0000:00:05.0").unwrap(), Target::Path("./0000:00:05.0".into()));
    }

    #[test]
    fn bad_pci_addresses_name_the_input_and_the_part_that_is_wrong() {
        for (uri, want) in [
            ("0000:00:20.0", "device \"20\" is out of range (at most 0x1f)"),
            ("0000:00:05.8", "function \"8\" is out of range (at most 0x7)"),
            ("00:00:05.0", "domain \"00\" must be 4 to 8 hex digits"),
            ("pci:0000:0:05.0", "bus \"0\" must be 2 hex digits"),
            ("pci:0000:00:05", "expected domain:bus:device.function"),
            ("pci:", "expected domain:bus:device.function"),
            ("pci:0000:00:0g.0", "device \"0g\" must be 2 hex digits"),
            ("pci:0000:00:00:05.0", "expected domain:bus:device.function"),
            ("1:2:3.4", "domain \"1\" must be 4 to 8 hex digits"),
        ] {
            let e = parse(uri).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::BadUri { .. }), "{uri}: {e:?}");
            assert!(msg.contains(&format!("{uri:?}")) && msg.contains(want), "{uri}: {msg}");
        }
    }
}
