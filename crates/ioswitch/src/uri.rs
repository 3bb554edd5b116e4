//! What a device string means.
//!
//! - a path: a regular file, a block device, `/dev/nvmeXnY`, `/dev/ngXnY`, `/dev/nvmeX`;
//! - a size, for a ramdisk: `1GiB`, `512MiB`, `ramdisk:64m`.
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
}
