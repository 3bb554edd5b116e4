//! ioswitch-bench: the measurement engine behind `ioswitch bench`.
//!
//! Results are meant to compare with fio's line for line, so the pieces here reproduce
//! fio's definitions rather than approximate them:
//!
//! - [`hist`]: fio's log-linear latency histogram (64 buckets per power of two, values
//!   below 128 ns exact, ≤ 1/128 relative error) and its percentile rule;
//! - [`stats`]: running min/max/mean/stddev with fio's Welford arithmetic and its merge
//!   for group reporting; [`stats::LatStats`] bundles them with a histogram;
//! - [`jobfile`]: fio job files and fio-style command lines read into validated
//!   [`jobfile::JobSpec`]s, with every option's file and line kept for error messages.
//!
//! Latencies are recorded in nanoseconds; `slat`, `clat` and `lat` mean what they mean in
//! fio (see the design notes, "Measurement semantics").
#![deny(missing_docs)]

pub mod cmdprio;
pub mod compare;
pub mod dedupe;
pub mod dist;
pub mod engine;
pub mod error;
pub mod files;
pub mod fiolog;
pub mod flow;
pub mod hist;
pub mod iolog;
pub mod jobfile;
pub mod load;
pub mod measure;
pub mod membw;
pub mod overhead;
pub mod placement;
pub mod plot;
pub mod report;
pub mod run;
pub mod scaling;
pub mod shapes;
pub mod stats;
pub mod steady;
mod strided;
pub mod sweep;
pub mod sweep_csv;
pub mod verify;
mod zbd;

pub use error::BenchError;
pub use hist::Histogram;
pub use jobfile::{JobError, JobReader, JobSet, JobSpec};
pub use stats::{LatStats, Stats};
