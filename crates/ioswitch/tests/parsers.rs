//! Robustness tests (deterministic fuzzing) for the parsers of outside input in the core
//! crate: device URIs (`uri::parse`), option strings (`Opts`, the interface enums) and
//! sizes (`units::parse_size`).
//!
//! Inputs come from a small xorshift generator with fixed seeds, so every failure replays:
//! the failure message shows the seed, the case number and the input. Three kinds of input
//! per parser: valid by construction (generated from the grammar, with the expected value
//! computed independently; they must parse to exactly that), mutations of valid inputs
//! (tokens deleted, duplicated, swapped, replaced by extremes, characters flipped), and
//! random strings over an alphabet weighted toward the grammar's own characters.
//!
//! Every call must return (no panic, under 100 ms); every error must say what is wrong with
//! which input; what parses must survive the round trips the API offers.

use std::panic::catch_unwind;

use ioswitch::units::{fmt_size, parse_size};
use ioswitch::uri::{self, Target};
use ioswitch::{AdminIface, AsyncIface, MemIface, Opts, SyncIface};

use ioswitch_testkit::robust::*;

// ---------------------------------------------------------------------------------------
// Sizes.

/// Every spelling of each unit `parse_size` documents, with its shift.
const SIZE_UNITS: &[(&[&str], u32)] = &[
    (&["", "b", "B"], 0),
    (&["k", "K", "kb", "KB", "kib", "KiB", "KIB"], 10),
    (&["m", "M", "mb", "MB", "mib", "MiB"], 20),
    (&["g", "G", "gb", "GB", "gib", "GiB"], 30),
    (&["t", "T", "tb", "tib", "TiB"], 40),
    (&["p", "P", "pb", "pib", "PiB"], 50),
];

/// What `parse_size` must answer for a well-formed `int[.frac]unit`, computed independently.
#[derive(Debug, PartialEq)]
enum SizeExpect {
    Bytes(u64),
    TooLarge,
    NotWhole,
}

/// A well-formed size string with the answer it must give.
fn gen_size(rng: &mut Rng) -> (String, SizeExpect) {
    let (spellings, shift) = *rng.pick(SIZE_UNITS);
    let unit = *rng.pick(spellings);
    let int: String = match rng.below(6) {
        0 => "0".repeat(1 + rng.below(3)) + &rng.number().to_string(),
        1 => (1..=1 + rng.below(30)).map(|_| char::from(b'0' + rng.below(10) as u8)).collect(),
        _ => (rng.number() >> rng.below(64)).to_string(),
    };
    let frac: Option<String> = rng
        .chance(30)
        .then(|| (0..1 + rng.below(9)).map(|_| char::from(b'0' + [0, 5, rng.below(10)][rng.below(3)] as u8)).collect());
    let mut s = int.clone();
    if let Some(f) = &frac {
        s.push('.');
        s.push_str(f);
    }
    s.push_str(unit);
    if rng.chance(10) {
        s = format!(" \t{s} ");
    }
    // The oracle: decimal arithmetic in u128, checked; beyond u128 is beyond u64 anyway.
    // A whole part beyond u64 is too large, whatever the fraction.
    let int_v: Option<u128> = int.parse().ok().filter(|i| *i <= u64::MAX as u128);
    let expect = match &frac {
        None => match int_v.and_then(|i| i.checked_mul(1u128 << shift)) {
            Some(v) if v <= u64::MAX as u128 => SizeExpect::Bytes(v as u64),
            _ => SizeExpect::TooLarge,
        },
        Some(f) => {
            let scale = 10u128.pow(f.len() as u32);
            let f_v: u128 = f.parse().unwrap();
            let total = int_v.and_then(|i| i.checked_mul(scale)?.checked_add(f_v)?.checked_mul(1u128 << shift));
            match total {
                // Too large for u128 before dividing: too large for u64 after.
                None => SizeExpect::TooLarge,
                Some(t) if t % scale != 0 => SizeExpect::NotWhole,
                Some(t) if t / scale > u64::MAX as u128 => SizeExpect::TooLarge,
                Some(t) => SizeExpect::Bytes((t / scale) as u64),
            }
        }
    };
    (s, expect)
}

/// What every answer of `parse_size` must satisfy, whatever the input.
fn check_size_answer(place: &str, s: &str, r: &Result<u64, String>) {
    match r {
        Ok(n) => {
            let t = s.trim();
            assert!(t.starts_with(|c: char| c.is_ascii_digit() || c == '.'), "{place}: accepted {s:?} as {n}");
            // fmt_size writes the unit that parses back to the same number.
            let back = fmt_size(*n);
            assert_eq!(parse_size(&back), Ok(*n), "{place}: {s:?} gave {n}, written back as {back:?}");
        }
        Err(e) => {
            if s.trim().is_empty() {
                assert!(e.contains("empty"), "{place}: {s:?}: {e:?}");
            } else {
                assert!(e.contains(&format!("{s:?}")), "{place}: the error does not name the input {s:?}: {e}");
            }
        }
    }
}

#[test]
fn sizes_parse_or_say_what_is_wrong() {
    let mut fz = Fuzz::new("parse_size");
    let seed = 0x5153_u64;
    let mut rng = Rng::new(seed);
    for case in 0..30_000 {
        let place = format!("parse_size seed {seed:#x} case {case}");
        let kind = case % 3;
        let (s, expect) = match kind {
            0 => {
                let (s, e) = gen_size(&mut rng);
                (s, Some(e))
            }
            1 => {
                let (valid, _) = gen_size(&mut rng);
                (mutate(&mut rng, &valid, &['.', ' '], ALPHABET), None)
            }
            _ => (random_string(&mut rng, ALPHABET, 6), None),
        };
        let r = fz.call(seed, case, &s, || parse_size(&s));
        fz.count(&r);
        check_size_answer(&format!("{place} input {s:?}"), &s, &r);
        match expect {
            Some(SizeExpect::Bytes(n)) => assert_eq!(r, Ok(n), "{place}: {s:?}"),
            Some(SizeExpect::TooLarge) => {
                let e = r.expect_err(&s);
                assert!(e.contains("too large"), "{place}: {s:?} is too large, but the error says {e}")
            }
            Some(SizeExpect::NotWhole) => {
                let e = r.expect_err(&s);
                assert!(e.contains("whole number"), "{place}: {s:?} is not whole, but the error says {e}")
            }
            None => {}
        }
    }
    fz.assert_balanced();
}

#[test]
fn size_units_are_spelled_many_ways_and_mean_one_thing() {
    let mut rng = Rng::new(0x0417);
    for _ in 0..2_000 {
        let n = rng.number() >> rng.below(64);
        for (spellings, shift) in SIZE_UNITS {
            let answers: Vec<Result<u64, String>> = spellings.iter().map(|u| parse_size(&format!("{n}{u}"))).collect();
            match n.checked_mul(1 << shift) {
                Some(v) => assert!(answers.iter().all(|a| *a == Ok(v)), "{n} {spellings:?}: {answers:?}"),
                None => assert!(answers.iter().all(|a| a.is_err()), "{n} {spellings:?}: {answers:?}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Device URIs.

#[test]
fn device_uris_parse_or_say_what_is_wrong() {
    const URI_VALID: &[&str] = &[
        "1GiB",
        "512MiB",
        "ramdisk:64m",
        "ramdisk:4096",
        "/dev/nvme0n1",
        "/dev/ng0n1",
        "/dev/nvme0",
        "./1GiB",
        "/tmp/ioswitch-test.img",
        "disk.img",
        "0000:00:05.0",
        "pci:0000:00:1f.7",
        "pci:10000:e1:00.0",
    ];
    let mut fz = Fuzz::new("uri::parse");
    let seed = 0x0051_u64;
    let mut rng = Rng::new(seed);
    for case in 0..30_000 {
        let (s, must_be_ok) = match case % 3 {
            0 => {
                // Valid by construction: a multiple of 512 written with a unit, or a path.
                let shift = *rng.pick(&[9u32, 10, 20, 30, 40]);
                let n = 1 + rng.next() % 1000;
                let unit = match shift {
                    9 => "",
                    10 => *rng.pick(&["k", "K", "KiB"]),
                    20 => *rng.pick(&["m", "M", "MiB"]),
                    30 => *rng.pick(&["g", "G", "GiB"]),
                    _ => *rng.pick(&["t", "TiB"]),
                };
                let size = if shift == 9 { (n * 512).to_string() } else { format!("{n}{unit}") };
                match rng.below(3) {
                    0 => (format!("ramdisk:{size}"), true),
                    1 => (size, true),
                    _ => (format!("/{}", random_string(&mut rng, &["dev", "/", "nvme0n1", "x", "é", " "], 5)), true),
                }
            }
            1 => {
                let v = rng_pick_str(&mut rng, URI_VALID);
                (mutate(&mut rng, v, &[':', '/', '.'], ALPHABET), false)
            }
            _ => (random_string(&mut rng, ALPHABET, 6), false),
        };
        let place = format!("uri::parse seed {seed:#x} case {case} input {s:?}");
        let r = fz.call(seed, case, &s, || uri::parse(&s));
        fz.count(&r);
        if must_be_ok {
            assert!(r.is_ok(), "{place}: valid by construction, but {}", r.as_ref().unwrap_err());
        }
        // Exactly one of the documented readings applies.
        let digit_start = s.starts_with(|c: char| c.is_ascii_digit());
        let reading_as_size =
            |size: &str| parse_size(size).ok().filter(|n| *n != 0 && n % 512 == 0).map(Target::Ramdisk).ok_or(());
        match &r {
            Ok(Target::Path(p)) => {
                assert_eq!(p.as_os_str(), s.as_str(), "{place}");
                assert!(!s.starts_with("ramdisk:") && !s.contains("://"), "{place}: taken as a path");
                assert!(!digit_start || std::path::Path::new(&s).exists(), "{place}: a size taken as a path");
            }
            Ok(Target::Ramdisk(n)) => {
                let size = s.strip_prefix("ramdisk:").unwrap_or(&s);
                assert_eq!(reading_as_size(size), Ok(Target::Ramdisk(*n)), "{place}");
                // Round trips: the ramdisk written back, in bytes and with a unit.
                assert_eq!(uri::parse(&format!("ramdisk:{n}")).ok(), Some(Target::Ramdisk(*n)), "{place}");
                assert_eq!(uri::parse(&fmt_size(*n)).ok(), Some(Target::Ramdisk(*n)), "{place}");
            }
            Ok(Target::Pci(a)) => {
                // The address as sysfs writes it parses back, with and without the prefix;
                // it differs from the input only in case and a domain's leading zeros.
                let bare = s.strip_prefix("pci:").unwrap_or(&s).to_ascii_lowercase();
                let shown = a.to_string();
                assert_eq!(shown[shown.len() - 7..], bare[bare.len() - 7..], "{place}");
                assert_eq!(uri::parse(&format!("pci:{a}")).ok(), Some(Target::Pci(*a)), "{place}");
                assert_eq!(uri::parse(&format!("pci:{bare}")).ok(), Some(Target::Pci(*a)), "{place}");
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(&format!("{s:?}")), "{place}: the error does not name the URI: {msg}");
                assert!(matches!(e, ioswitch::Error::BadUri { .. }), "{place}: {e:?}");
                if let Some(size) = s.strip_prefix("ramdisk:") {
                    assert!(reading_as_size(size).is_err(), "{place}: a good ramdisk size refused: {msg}");
                } else if s.starts_with("pci:") || msg.contains("PCI") {
                    assert!(msg.contains("PCI"), "{place}: a bad PCI address without the word: {msg}");
                    assert!(!std::path::Path::new(&s).exists(), "{place}: an existing path refused: {msg}");
                } else if !s.is_empty() && !s.contains("://") {
                    assert!(digit_start && reading_as_size(&s).is_err(), "{place}: refused: {msg}");
                }
            }
        }
    }
    fz.assert_balanced();
}

// ---------------------------------------------------------------------------------------
// Option strings.

const BOOL_TRUE: &[&str] = &["", "1", "true", "yes", "on"];
const BOOL_FALSE: &[&str] = &["0", "false", "no", "off"];
const OPT_BOOLS: &[&str] = &[
    "direct",
    "rdonly",
    "wronly",
    "create",
    "truncate",
    "sqpoll",
    "iopoll",
    "register_files",
    "register_buffers",
    "single_issuer",
];

fn bool_field<'a>(o: &'a mut Opts, key: &str) -> &'a mut bool {
    match key {
        "direct" => &mut o.direct,
        "rdonly" => &mut o.rdonly,
        "wronly" => &mut o.wronly,
        "create" => &mut o.create,
        "truncate" => &mut o.truncate,
        "sqpoll" => &mut o.sqpoll,
        "iopoll" => &mut o.iopoll,
        "register_files" => &mut o.register_files,
        "register_buffers" => &mut o.register_buffers,
        "single_issuer" => &mut o.single_issuer,
        _ => unreachable!("{key}"),
    }
}

/// Random valid options (the combination rules of `Opts::validate` kept) and one of the
/// many option strings that spell them: any order, any boolean spelling, blanks, empty
/// items, defaults sometimes written out.
fn gen_opts(rng: &mut Rng) -> (Opts, String) {
    let mut o = Opts::default();
    let mut items: Vec<String> = Vec::new();
    let mut pick_iface = |rng: &mut Rng, key: &str, names: &[&str]| -> Option<String> {
        rng.chance(40).then(|| {
            let v = rng_pick_str(rng, names);
            items.push(format!("{key}={v}"));
            v.to_string()
        })
    };
    o.sync = pick_iface(rng, "sync", &SyncIface::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>())
        .map(|v| v.parse().unwrap());
    o.r#async = pick_iface(rng, "async", &AsyncIface::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>())
        .map(|v| v.parse().unwrap());
    o.admin = pick_iface(rng, "admin", &AdminIface::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>())
        .map(|v| v.parse().unwrap());
    o.mem = pick_iface(rng, "mem", &MemIface::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>())
        .map(|v| v.parse().unwrap());
    if rng.chance(30) {
        let n = match rng.below(3) {
            0 => 1,
            1 => u32::MAX - 1,
            _ => 1 + (rng.next() % (u32::MAX as u64 - 1)) as u32,
        };
        o.nsid = Some(n);
        items.push(format!("nsid={n}"));
    }
    let rdonly = rng.chance(15);
    for &key in OPT_BOOLS {
        let forbidden = match key {
            "wronly" | "create" | "truncate" => rdonly,
            _ => false,
        };
        let on = if key == "rdonly" { rdonly } else { !forbidden && rng.chance(35) };
        *bool_field(&mut o, key) = on;
        if on {
            let v = rng_pick_str(rng, BOOL_TRUE);
            items.push(if v.is_empty() && rng.chance(50) { key.to_string() } else { format!("{key}={v}") });
        } else if rng.chance(20) {
            items.push(format!("{key}={}", rng_pick_str(rng, BOOL_FALSE)));
        }
    }
    if !rdonly && rng.chance(30) {
        let (s, expect) = loop {
            let (s, e) = gen_size(rng);
            if let SizeExpect::Bytes(n) = e {
                break (s, n);
            }
        };
        o.size = Some(expect);
        items.push(format!("size={}", s.trim()));
    }
    if o.sqpoll && rng.chance(50) {
        let cpu = rng.number() as u32;
        o.sqpoll_cpu = Some(cpu);
        items.push(format!("sqpoll_cpu={cpu}"));
    }
    if rng.chance(30) {
        let n = 1 + rng.below(1024) as u32;
        o.threads = Some(n);
        items.push(format!("threads={n}"));
    }
    // Shuffle, pad with blanks and empty items.
    for i in (1..items.len()).rev() {
        let j = rng.below(i + 1);
        items.swap(i, j);
    }
    let mut s = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 || rng.chance(5) {
            s.push_str(rng_pick_str(rng, &[",", ",", ",", " , ", ",,", ",\t"]));
        }
        let item = match item.split_once('=') {
            Some((k, v)) if rng.chance(10) => format!(" {k} = {v} "),
            _ => item.clone(),
        };
        s.push_str(&item);
    }
    if rng.chance(5) {
        s.push(',');
    }
    (o, s)
}

/// The items of an option string as the documentation describes them: comma-separated,
/// trimmed, empty ones skipped, `key[=value]`.
fn opt_items(s: &str) -> Vec<(&str, &str)> {
    s.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|i| i.split_once('=').map(|(k, v)| (k.trim(), v.trim())).unwrap_or((i, "")))
        .collect()
}

/// What every answer of `Opts::from_str` must satisfy, whatever the input.
fn check_opts_answer(place: &str, s: &str, r: &Result<Opts, ioswitch::Error>) {
    match r {
        Ok(o) => {
            // Display writes an option string that parses back to the same options.
            let back = o.to_string();
            match back.parse::<Opts>() {
                Ok(again) => assert_eq!(&again, o, "{place}: written back as {back:?}"),
                Err(e) => panic!("{place}: written back as {back:?}, which does not parse: {e}"),
            }
            assert!(o.validate().is_ok(), "{place}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(matches!(e, ioswitch::Error::BadOpt { .. }), "{place}: {e:?}");
            // The error names the key of one of the input's items…
            let items = opt_items(s);
            let Some(&(key, value)) = items.iter().find(|(k, _)| msg.starts_with(&format!("bad option {k:?}: ")))
            else {
                panic!("{place}: the error names no key of the input: {msg}")
            };
            // …and, when the value is what is wrong, the value as written (or the number
            // it stands for, for range errors).
            let known = ioswitch::opts::KEYS.iter().any(|(k, _)| *k == key);
            let about_key = ["unknown option", "given twice", "needs a value", "exclude", "read-only", "only means"];
            if known && !about_key.iter().any(|w| msg.contains(w)) {
                let number = value.parse::<u64>().map(|n| format!(" {n} ")).unwrap_or_else(|_| "\u{0}".into());
                assert!(
                    msg.contains(&format!("{value:?}")) || msg.contains(&number),
                    "{place}: the error does not show the bad value {value:?} of {key:?}: {msg}"
                );
            }
        }
    }
}

#[test]
fn option_strings_parse_or_name_the_bad_key_and_value() {
    let mut fz = Fuzz::new("Opts::from_str");
    let seed = 0x0975_u64;
    let mut rng = Rng::new(seed);
    let mut valid: Vec<String> = vec![
        "async=io_uring,direct=1,sqpoll,sqpoll_cpu=1,threads=8,size=1MiB".into(),
        "sync=block,async=libaio,admin=emulated,nsid=2,direct=1,create=1,register_files=1,single_issuer=1".into(),
        "async=io_uring_cmd,sqpoll=1".into(),
    ];
    let opt_alphabet: Vec<&str> = ALPHABET
        .iter()
        .copied()
        .chain(ioswitch::opts::KEYS.iter().map(|(k, _)| *k))
        .chain(SyncIface::ALL.iter().map(|i| i.as_str()))
        .chain(AsyncIface::ALL.iter().map(|i| i.as_str()))
        .chain(BOOL_TRUE.iter().chain(BOOL_FALSE).copied())
        .collect();
    for case in 0..30_000 {
        let place = |s: &str| format!("Opts seed {seed:#x} case {case} input {s:?}");
        match case % 3 {
            0 => {
                let (expect, s) = gen_opts(&mut rng);
                let r = fz.call(seed, case, &s, || s.parse::<Opts>());
                fz.count(&r);
                check_opts_answer(&place(&s), &s, &r);
                match r {
                    Ok(o) => assert_eq!(o, expect, "{}", place(&s)),
                    Err(e) => panic!("{}: valid by construction, but: {e}", place(&s)),
                }
                if valid.len() < 200 {
                    valid.push(s);
                }
            }
            kind => {
                let s = if kind == 1 {
                    let v = rng.pick(&valid).clone();
                    mutate(&mut rng, &v, &[',', '='], &opt_alphabet)
                } else {
                    random_string(&mut rng, &opt_alphabet, 8)
                };
                let r = fz.call(seed, case, &s, || s.parse::<Opts>());
                fz.count(&r);
                check_opts_answer(&place(&s), &s, &r);
            }
        }
    }
    fz.assert_balanced();
}

#[test]
fn interface_names_parse_exactly_and_errors_list_the_known_ones() {
    fn check<T>(rng: &mut Rng, role: &str, all: &[T], name: fn(&T) -> &'static str)
    where
        T: std::str::FromStr<Err = ioswitch::Error> + std::fmt::Display + PartialEq + std::fmt::Debug,
    {
        let names: Vec<&str> = all.iter().map(name).collect();
        for v in all {
            assert_eq!(v.to_string().parse::<T>().ok().as_ref(), Some(v), "{role}: {v}");
        }
        let alphabet: Vec<&str> = ALPHABET.iter().copied().chain(names.iter().copied()).collect();
        for case in 0..3_000 {
            let s = match case % 2 {
                0 => {
                    let v = rng_pick_str(rng, &names);
                    mutate(rng, v, &['_'], &alphabet)
                }
                _ => random_string(rng, &alphabet, 3),
            };
            let r = catch_unwind(|| s.parse::<T>()).unwrap_or_else(|_| panic!("{role}: panicked on {s:?}"));
            match r {
                Ok(v) => assert_eq!(v.to_string(), s, "{role}: only the exact names are accepted"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!names.contains(&s.as_str()), "{role}: {s:?} refused: {msg}");
                    assert!(msg.contains(&format!("{s:?}")), "{role}: the error does not name {s:?}: {msg}");
                    assert!(names.iter().all(|n| msg.contains(n)), "{role}: the error does not list all: {msg}");
                    assert!(msg.starts_with(&format!("bad option {role:?}")), "{role}: {msg}");
                }
            }
        }
    }
    let mut rng = Rng::new(0x1face);
    check(&mut rng, "sync", SyncIface::ALL, |v| v.as_str());
    check(&mut rng, "async", AsyncIface::ALL, |v| v.as_str());
    check(&mut rng, "admin", AdminIface::ALL, |v| v.as_str());
    check(&mut rng, "mem", MemIface::ALL, |v| v.as_str());
}
