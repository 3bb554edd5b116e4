//! `ioswitch bench` against fio on `scramble_buffers` (fio's default 1): a write job whose
//! buffers are filled once writes blocks that differ only where each 512-byte piece holds
//! its file offset (at the start of one of its 64-byte lines) and the submit time (bytes
//! 48..64); with `scramble_buffers=0` the blocks are alike. Needs fio.

use ioswitch_testkit::tools::{output, FIO};
use ioswitch_testkit::{fio_scratch, text};

/// Whether every 512-byte piece of `data` holds its offset at one line's start, and how
/// many bytes the two 4 KiB blocks differ in.
fn stamps(data: &[u8]) -> (bool, usize) {
    let stamped = data
        .chunks_exact(512)
        .enumerate()
        .all(|(i, p)| (0..8).any(|l| u64::from_le_bytes(p[l * 64..l * 64 + 8].try_into().unwrap()) == 512 * i as u64));
    (stamped, data[..4096].iter().zip(&data[4096..8192]).filter(|(a, b)| a != b).count())
}

#[test]
fn scramble_buffers_stamps_each_piece_as_fio_does() {
    let t = "scramble_buffers_stamps_each_piece_as_fio_does";
    let s = fio_scratch!(t, "scramble");
    let file = s.path("f");
    for opt in ["--scramble_buffers=1", "--scramble_buffers=0"] {
        let mut got = Vec::new();
        for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
            let _ = std::fs::remove_file(&file);
            let filename = format!("--filename={file}");
            let o = output(
                program,
                &["--name=j", &filename, "--rw=write", "--bs=4k", "--size=8k", "--ioengine=psync", opt],
                None,
            );
            assert!(o.status.success(), "{program} {opt}: {}", text(&o.stderr));
            got.push(stamps(&std::fs::read(&file).expect("the written file")));
        }
        println!("{opt}: fio {:?}, ours {:?} (offsets stamped, bytes differing)", got[0], got[1]);
        if opt.ends_with('1') {
            // 8 pieces: the offset (whose low bytes differ: 2 here) and the time (at most 16).
            for (who, g) in ["fio", "ours"].iter().zip(&got) {
                assert!(g.0 && (1..=8 * 24).contains(&g.1), "{opt}: {who} {g:?}");
            }
        } else {
            assert_eq!(got[0], (false, 0), "{opt}: fio's blocks alike");
            assert_eq!(got[1], got[0], "{opt}: ours against fio's");
        }
    }
}
