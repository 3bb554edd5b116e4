//! `cargo bench -p ioswitch --bench overhead -- ARGS`: the library-overhead targets of
//! docs/BENCHMARKS.md. The tool is `ioswitch_bench::overhead::targets` (also run as
//! `ioswitch bench overhead targets ARGS`); this binary hands it the arguments, a way to
//! run itself again under callgrind (`--once …`, with `--cpu`'s pinning inherited) and
//! the folder for the profiles, `target/overhead-callgrind/`.

use ioswitch_bench::overhead::targets::{self, Invocation};

fn main() {
    // `cargo bench` adds `--bench`; the tool's arguments are the others.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let exe = std::env::current_exe().expect("the path of this executable");
    // target/<profile>/deps/overhead-… → target/overhead-callgrind
    let profiles =
        exe.ancestors().nth(3).map(|t| t.join("overhead-callgrind")).unwrap_or_else(|| "overhead-callgrind".into());
    let inv = Invocation {
        reenter: vec![exe.into_os_string()],
        profiles,
        name: "cargo bench -p ioswitch --bench overhead --".into(),
    };
    if let Err(e) = targets::run(&inv, &args) {
        eprintln!("{e}");
        std::process::exit(2);
    }
}
