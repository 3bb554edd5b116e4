//! `thrpool` (being written).

use super::AsyncQueue;
use crate::dev::Inner;
use crate::error::Error;
use std::sync::Arc;

/// Checks at open that this interface will work for the device.
pub(crate) fn probe(_dev: &Inner) -> Result<(), Error> {
    Ok(())
}

/// Creates a queue of `depth` slots.
pub(crate) fn new_queue(dev: &Arc<Inner>, _depth: u32) -> Result<Box<dyn AsyncQueue>, Error> {
    Err(dev.unsupported("async=thrpool", "not part of this build yet"))
}
