//! Sizes written the way storage people write them: `4k`, `512MiB`, `1g`, `4096`.

/// Parses a byte size: a decimal number with an optional unit.
///
/// Units follow fio's default (`kb_base=1024`): `k`, `kb`, `kib` are 1024; `m`, `mb`, `mib`
/// are 1024²; `g`, `t`, `p` likewise; `b` or no unit is bytes. Case does not matter.
/// A fractional number is accepted when the result is a whole number of bytes (`1.5k`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(if s.is_empty() { "empty size".into() } else { format!("empty size {s:?}") });
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{s:?} does not start with a number"));
    }
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        "p" | "pb" | "pib" => 1 << 50,
        other => return Err(format!("unknown unit {other:?} in {s:?} (use b, k/KiB, m/MiB, g/GiB, t/TiB, p/PiB)")),
    };
    let too_large = || format!("{s:?} is too large");
    // A whole number is one whose fraction is `.0`.
    let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("bad number in {s:?}"));
    }
    // All digits here, so a parse can only fail by overflowing.
    let int: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| too_large())? };
    let scale = 10u128.pow(frac.len() as u32);
    let frac_v: u128 = frac.parse().map_err(|_| format!("bad number in {s:?}"))?;
    // Beyond u128 is beyond u64 too (2^64 * 10^9 * 2^50 does not fit in u128).
    let total = (int as u128 * scale + frac_v).checked_mul(mult as u128).ok_or_else(too_large)?;
    if total % scale != 0 {
        return Err(format!("{s:?} is not a whole number of bytes"));
    }
    u64::try_from(total / scale).map_err(|_| too_large())
}

/// Formats a byte count with a binary unit when it is an exact multiple (`4KiB`, `1GiB`),
/// otherwise as plain bytes.
pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [(&str, u32); 5] = [("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in UNITS {
        if bytes != 0 && bytes % (1u64 << shift) == 0 {
            return format!("{}{}", bytes >> shift, name);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
    }

    #[test]
    fn bad_sizes_are_rejected_with_the_input_named() {
        assert_eq!(parse_size(""), Err("empty size".into()));
        assert_eq!(parse_size("  \t"), Err("empty size \"  \\t\"".into()));
        assert!(parse_size("k").unwrap_err().contains("\"k\""));
        assert!(parse_size("12q").unwrap_err().contains("unknown unit"));
        assert!(parse_size("0.3b").unwrap_err().contains("whole number"));
        assert!(parse_size("99999999999p").unwrap_err().contains("too large"));
        assert!(parse_size("99999999999999999999999").unwrap_err().contains("too large"));
        assert!(parse_size("18446744073709551615.999999999p").unwrap_err().contains("too large"));
    }

    #[test]
    fn sizes_format_back() {
        assert_eq!(fmt_size(4096), "4KiB");
        assert_eq!(fmt_size(1 << 30), "1GiB");
        assert_eq!(fmt_size(1000), "1000B");
        assert_eq!(fmt_size(0), "0B");
    }
}
