//! `ioswitch bench` against fio on what write buffers hold: the same write jobs run under
//! both, and the files they leave must be the same byte for byte (`buffer_pattern`, in
//! the written blocks and in the file's layout).
//!
//! Needs fio (skips with the reason when it is missing; `./scripts/test` installs it).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::fio_scratch;
use ioswitch_testkit::tools::{success, who, FIO};

/// Runs the job `--name=NAME --filename=FILE --size=64k --bs=4k OPTS --output-format=json`
/// under fio and under ours, which must succeed, each on a file of its own in `s`
/// (`fio-TAG`, `ours-TAG`; holding `before` first where given): the files they leave,
/// fio's first.
fn files_left(s: &Scratch, name: &str, tag: &str, before: Option<&[u8]>, opts: &[String]) -> [Vec<u8>; 2] {
    [FIO, env!("CARGO_BIN_EXE_ioswitch")].map(|program| {
        let data = s.path(&format!("{}-{tag}", who(program)));
        if let Some(b) = before {
            std::fs::write(&data, b).unwrap();
        }
        let job = [format!("--name={name}"), format!("--filename={data}"), "--size=64k".into(), "--bs=4k".into()];
        let args = [&job, opts, &["--output-format=json".into()]].concat();
        success(program, &args, None);
        std::fs::read(&data).expect("the job's file")
    })
}

#[test]
fn buffer_pattern_leaves_the_same_file_as_fio() {
    let t = "buffer_pattern_leaves_the_same_file_as_fio";
    let s = fio_scratch!(t, "fio-buffers");
    // A 7-byte pattern (hex, string and decimal together) that does not divide the
    // block: fio starts it over at every buffer's start, so every 4 KiB block is the same.
    // 'NAME' is a file's bytes (fio's parse_file).
    let pattern_file = s.path("pattern");
    std::fs::write(&pattern_file, b"\x07file\x00").unwrap();
    let from_file = format!("0x99'{pattern_file}'");
    for (pattern, rw) in [
        ("0xdead\"xyz\"258", "write"),
        ("0x01", "randwrite"),
        ("\"ab\"0x0a", "readwrite"),
        (from_file.as_str(), "write"),
    ] {
        let opts = [format!("--rw={rw}"), format!("--buffer_pattern={pattern}")];
        let [fio, ours] = &files_left(&s, "p", &format!("{rw}-{}", pattern.len()), None, &opts);
        assert_eq!(fio.len(), ours.len(), "{pattern} {rw}: file sizes");
        // A job that reads has its file laid out first: fio writes it with the
        // write buffers' contents, the pattern too.
        assert!(
            fio == ours,
            "{pattern} {rw}: the files differ (first at byte {:?})",
            fio.iter().zip(ours).position(|(a, b)| a != b)
        );
    }
}

/// Of a file's 4 KiB blocks: the share (%) that repeat an earlier block, the share of
/// zero bytes, and the distinct blocks.
fn dedupe_and_zeroes(data: &[u8]) -> (f64, f64, std::collections::HashSet<&[u8]>) {
    let blocks: Vec<&[u8]> = data.chunks(4096).collect();
    let distinct: std::collections::HashSet<&[u8]> = blocks.iter().copied().collect();
    let copies = (blocks.len() - distinct.len()) as f64 * 100.0 / blocks.len() as f64;
    let zeroes = data.iter().filter(|&&b| b == 0).count() as f64 * 100.0 / data.len() as f64;
    (copies, zeroes, distinct)
}

#[test]
fn dedupe_and_compression_shares_are_fios() {
    let t = "dedupe_and_compression_shares_are_fios";
    let s = fio_scratch!(t, "fio-dedupe");
    // 2 jobs of 1024 writes each: with dedupe_global their working sets (10% of 4 MiB:
    // 102 pages) are one, so the files share about that many blocks; without, none.
    for (mode, global) in [("repeat", "0"), ("working_set", "0"), ("working_set", "1")] {
        let mut got = Vec::new();
        for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
            let who = who(program);
            let (a, b) = (s.path(&format!("{who}-{mode}-{global}-a")), s.path(&format!("{who}-{mode}-{global}-b")));
            let args = [
                "--size=4m",
                "--bs=4k",
                "--rw=write",
                "--dedupe_percentage=50",
                &format!("--dedupe_mode={mode}"),
                "--dedupe_working_set_percentage=10",
                &format!("--dedupe_global={global}"),
                "--buffer_compress_percentage=25",
                "--name=a",
                &format!("--filename={a}"),
                "--name=b",
                &format!("--filename={b}"),
                "--output-format=json",
            ];
            success(program, &args, None);
            let (da, db) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            let (copies, zeroes, sa) = dedupe_and_zeroes(&da);
            let (_, _, sb) = dedupe_and_zeroes(&db);
            got.push((who, copies, zeroes, sa.intersection(&sb).count()));
        }
        let what =
            format!("dedupe_mode={mode} dedupe_global={global}: (who, % copies, % zero bytes, blocks shared) {got:?}");
        eprintln!("{what}");
        let (f, o) = (got[0], got[1]);
        // 1024 draws of a 50% coin: a spread of 1.6 points; both within 6 of each other.
        // With dedupe_global too: the working sets are made as fio makes them (each
        // thread's first pages in turn), so a copy repeats a block of its own file as often.
        assert!((f.1 - o.1).abs() < 6.0, "{what}");
        assert!((f.2 - 25.0).abs() < 2.0 && (o.2 - 25.0).abs() < 2.0, "{what}");
        if global == "1" {
            assert!(f.3 > 80 && o.3 > 80 && f.3 <= 103 && o.3 <= 103, "{what}");
        } else {
            assert!(f.3 == 0 && o.3 == 0, "{what}");
        }
    }
}

#[test]
fn zero_buffers_leaves_the_same_file_as_fio() {
    let t = "zero_buffers_leaves_the_same_file_as_fio";
    let s = fio_scratch!(t, "fio-zero");
    // zero_buffers turns fio's default scramble_buffers off: every block written is zeros,
    // filled once or (refill_buffers) before every write. (Not a job that also reads: fio
    // writes back what its reads left in the buffers, which ours does not.)
    for (rw, refill) in [("write", "0"), ("write", "1"), ("randwrite", "0"), ("randwrite", "1")] {
        // Not zeros beforehand, so that the jobs' writes must have put the zeros there.
        let before = vec![0xA5u8; 64 << 10];
        let opts = [format!("--rw={rw}"), "--zero_buffers".into(), format!("--refill_buffers={refill}")];
        let [fio, ours] = &files_left(&s, "z", &format!("{rw}-{refill}"), Some(&before), &opts);
        assert_eq!(fio.len(), ours.len(), "{rw} refill={refill}: file sizes");
        let zeros = |d: &[u8]| d.iter().filter(|&&b| b == 0).count();
        assert!(
            fio == ours,
            "{rw} refill={refill}: the files differ (first at byte {:?}; zeros: fio {}, ours {})",
            fio.iter().zip(ours).position(|(a, b)| a != b),
            zeros(fio),
            zeros(ours)
        );
    }
}
