//! ioswitch-bench: the measurement engine behind `ioswitch bench`.
#![deny(missing_docs)]
