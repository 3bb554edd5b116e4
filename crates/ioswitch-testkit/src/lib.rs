//! Helpers shared by the test suites of the ioswitch workspace (a dev-dependency only):
//!
//! - [`dirs`]: scratch directories removed at the end of a test, a directory on a disk
//!   file system (not tmpfs), the file system type of a path, whether O_DIRECT works;
//! - [`logwrites`]: a reader and replayer of device-mapper log-writes logs;
//! - [`loopdev`]: a loop device over a backing file, detached on drop, and the sweep for
//!   loop devices a killed run left behind;
//! - [`pattern`]: test data: seeded byte streams, and position-stamped words that tell
//!   misplaced, stale and missing data apart when a read-back differs;
//! - [`robust`]: the harness of the parser robustness tests (deterministic fuzzing);
//! - [`lock`]: a mutex lock that ignores poisoning, for tests that serialise themselves.
#![deny(missing_docs)]

pub mod dirs;
pub mod logwrites;
pub mod loopdev;
pub mod pattern;
pub mod robust;

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, also when a test that held it panicked (the state it guards is still usable:
/// tests serialise on it, or record what they saw).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
