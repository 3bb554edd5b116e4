//! The io_uring interfaces: `io_uring` on files and block devices ([`file`]) and
//! `io_uring_cmd`, NVMe passthrough on 128-byte SQEs ([`cmd`]).

pub(crate) mod cmd;
pub(crate) mod file;
