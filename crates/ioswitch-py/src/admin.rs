//! Admin commands: identify and log pages, raw and parsed into dicts.
//!
//! The parsed forms are the library's spec structs (`ioswitch::spec::idfy`,
//! `ioswitch::spec::log`) turned into dicts field by field (serde, via pythonize): the
//! keys are the struct's field names, which follow the spec's field mnemonics.

use crate::errors;
use ioswitch::spec::idfy::{cns, IdCtrl, IdNs, IDENTIFY_LEN};
use ioswitch::spec::log::{lid, SmartLog, SMART_LEN};
use ioswitch::{Buffer, Cmd, Device};
use pyo3::prelude::*;

fn run(py: Python<'_>, dev: &Device, cmd: Cmd, len: usize) -> PyResult<Buffer> {
    py.detach(|| {
        let mut b = dev.alloc(len)?;
        dev.pass_admin(&cmd, std::slice::from_mut(&mut b))?;
        Ok(b)
    })
    .map_err(|e| errors::to_py(py, e))
}

fn short(py: Python<'_>, dev: &Device, what: &str, e: impl std::fmt::Display) -> PyErr {
    errors::make::<errors::CommandError>(py, libc::EIO, format!("{}: {what}: {e}", dev.uri()), &[])
}

/// The raw page of an Identify.
pub fn identify(py: Python<'_>, dev: &Device, cns: u8, nsid: u32, cntid: u16, csi: u8) -> PyResult<Buffer> {
    run(py, dev, Cmd::identify(cns, nsid, cntid, csi), IDENTIFY_LEN)
}

/// The raw bytes of a Get Log Page.
pub fn get_log(py: Python<'_>, dev: &Device, lid: u8, nbytes: u32, nsid: u32, offset: u64) -> PyResult<Buffer> {
    if nbytes < 4 || nbytes % 4 != 0 || offset % 4 != 0 {
        return Err(errors::bad_request(
            py,
            dev.uri(),
            format!("get_log: nbytes={nbytes}, offset={offset}: a log page is read in whole dwords (multiples of 4, nbytes >= 4)"),
        ));
    }
    run(py, dev, Cmd::get_log(nsid, lid, 0, nbytes, offset), nbytes as usize)
}

/// Identify Controller as a dict.
pub fn identify_ctrl<'py>(py: Python<'py>, dev: &Device) -> PyResult<Bound<'py, PyAny>> {
    let b = identify(py, dev, cns::CTRL, 0, 0, 0)?;
    let id = IdCtrl::from_bytes(&b).map_err(|e| short(py, dev, "identify controller", e))?;
    Ok(pythonize::pythonize(py, &id)?)
}

/// Identify Namespace as a dict.
pub fn identify_ns<'py>(py: Python<'py>, dev: &Device, nsid: u32) -> PyResult<Bound<'py, PyAny>> {
    let b = identify(py, dev, cns::NS, nsid, 0, 0)?;
    let id = IdNs::from_bytes(&b).map_err(|e| short(py, dev, "identify namespace", e))?;
    Ok(pythonize::pythonize(py, &id)?)
}

/// The SMART / Health log as a dict.
pub fn smart_log<'py>(py: Python<'py>, dev: &Device) -> PyResult<Bound<'py, PyAny>> {
    let b = get_log(py, dev, lid::SMART, SMART_LEN as u32, 0xFFFF_FFFF, 0)?;
    let log = SmartLog::parse(&b).map_err(|e| short(py, dev, "SMART log", e))?;
    Ok(pythonize::pythonize(py, &log)?)
}
