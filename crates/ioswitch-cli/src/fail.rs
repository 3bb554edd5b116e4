//! What the CLI reports when a command fails: one line of text, shown by `main` as
//! `ioswitch: error: <line>` with exit status 1.

use std::fmt;
use std::io;

/// A failed command, already worded for the user.
#[derive(Debug)]
pub struct Failure {
    msg: String,
    /// True when stdout was closed by its reader (`| head`): nothing more to say.
    pub broken_pipe: bool,
}

impl Failure {
    /// A failure described by `msg`.
    pub fn new(msg: impl Into<String>) -> Failure {
        Failure { msg: msg.into(), broken_pipe: false }
    }

    /// An I/O error of the CLI itself (reading `--data`, writing `--out`), saying what was
    /// being done.
    pub fn io(what: impl fmt::Display, e: io::Error) -> Failure {
        Failure { broken_pipe: e.kind() == io::ErrorKind::BrokenPipe, msg: format!("{what}: {e}") }
    }

    /// Appends advice to the message.
    pub fn hint(mut self, hint: &str) -> Failure {
        self.msg.push_str(" (");
        self.msg.push_str(hint);
        self.msg.push(')');
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl From<ioswitch::Error> for Failure {
    fn from(e: ioswitch::Error) -> Failure {
        Failure::new(e.to_string())
    }
}

impl From<ioswitch_bench::BenchError> for Failure {
    fn from(e: ioswitch_bench::BenchError) -> Failure {
        Failure::new(e.to_string())
    }
}

impl From<ioswitch::Rejected> for Failure {
    fn from(r: ioswitch::Rejected) -> Failure {
        Failure::from(r.error)
    }
}

/// Result of a CLI command.
pub type Outcome<T = ()> = Result<T, Failure>;
