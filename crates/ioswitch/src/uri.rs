//! What a device string means.
//!
//! - a path: a regular file, a block device, `/dev/nvmeXnY`, `/dev/ngXnY`, `/dev/nvmeX`;
//! - a size, for a ramdisk: `1GiB`, `512MiB`, `ramdisk:64m`;
//! - a PCI address, for the user-space driver: `0000:00:05.0`, `pci:0000:00:05.0`.
//!
//! A bare size is only taken for a ramdisk when no file of that name exists, so a file
//! called `1GiB` in the current directory stays reachable (as `./1GiB`).

use crate::error::Error;
use crate::units::parse_size;
use std::path::{Path, PathBuf};

/// A parsed device URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A file system path.
    Path(PathBuf),
    /// A ramdisk of this many bytes.
    Ramdisk(u64),
    /// A PCI function, `DDDD:BB:DD.F` (lower-case hex).
    Pci(String),
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
        return pci_addr(addr).map(Target::Pci).map_err(bad);
    }
    if let Ok(addr) = pci_addr(uri) {
        if !Path::new(uri).exists() {
            return Ok(Target::Pci(addr));
        }
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

/// A PCI address `DDDD:BB:DD.F` (domain, bus, device 0-31, function 0-7), normalised to
/// lower case.
fn pci_addr(s: &str) -> Result<String, String> {
    let bad = || format!("{s:?} is not a PCI address (DDDD:BB:DD.F, e.g. 0000:00:05.0)");
    let (dbd, func) = s.split_once('.').ok_or_else(bad)?;
    let parts: Vec<&str> = dbd.split(':').collect();
    let [dom, bus, dev] = parts[..] else { return Err(bad()) };
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(dom, 4) || !hex(bus, 2) || !hex(dev, 2) || func.len() != 1 {
        return Err(bad());
    }
    let d = u8::from_str_radix(dev, 16).map_err(|_| bad())?;
    let f: u8 = func.parse().map_err(|_| bad())?;
    if d > 31 || f > 7 {
        return Err(format!("{s:?}: PCI device numbers are 00-1f and functions 0-7"));
    }
    Ok(s.to_ascii_lowercase())
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
    fn pci_addresses_name_pci_devices() {
        assert_eq!(parse("0000:00:05.0").unwrap(), Target::Pci("0000:00:05.0".into()));
        assert_eq!(parse("pci:0000:0A:1f.7").unwrap(), Target::Pci("0000:0a:1f.7".into()));
        let e = parse("pci:0000:00:20.0").unwrap_err().to_string();
        assert!(e.contains("00-1f"), "{e}");
        let e = parse("pci:00:05.0").unwrap_err().to_string();
        assert!(e.contains("not a PCI address"), "{e}");
        assert!(parse("pci:0000:00:05.8").is_err());
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
}
