//! Controller registers (NVMe base spec, "Controller Registers"): offsets, the fields of
//! CAP, CC and CSTS the driver uses, and the doorbell arithmetic.

/// Controller Capabilities (64-bit).
pub(crate) const CAP: usize = 0x00;
/// Controller Configuration.
pub(crate) const CC: usize = 0x14;
/// Controller Status.
pub(crate) const CSTS: usize = 0x1c;
/// Admin Queue Attributes.
pub(crate) const AQA: usize = 0x24;
/// Admin Submission Queue base address (64-bit).
pub(crate) const ASQ: usize = 0x28;
/// Admin Completion Queue base address (64-bit).
pub(crate) const ACQ: usize = 0x30;
/// The first doorbell.
const DOORBELLS: usize = 0x1000;

/// The fields of CAP the driver uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cap {
    /// Maximum Queue Entries Supported, 1-based.
    pub mqes: u32,
    /// Worst-case time for CSTS.RDY to change after CC.EN changes, in milliseconds.
    pub timeout_ms: u64,
    /// Doorbell stride: doorbells are `4 << dstrd` bytes apart.
    pub dstrd: u32,
    /// Whether the controller supports more than the NVM command set (CSS bit 6): then
    /// CC.CSS = 110b enables every command set it has (ZNS included).
    pub all_iocs: bool,
    /// Minimum memory page size in bytes.
    pub mps_min: u64,
}

impl Cap {
    pub(crate) fn decode(v: u64) -> Cap {
        Cap {
            mqes: (v & 0xffff) as u32 + 1,
            timeout_ms: ((v >> 24) & 0xff) * 500,
            dstrd: ((v >> 32) & 0xf) as u32,
            all_iocs: (v >> 37) & (1 << 6) != 0,
            mps_min: 1 << (12 + ((v >> 48) & 0xf)),
        }
    }
}

/// CC with EN set: 4 KiB pages, 64-byte SQEs, 16-byte CQEs, round-robin arbitration,
/// and the command sets `all_iocs` says.
pub(crate) fn cc_enable(all_iocs: bool) -> u32 {
    let css = if all_iocs { 0b110 } else { 0 };
    1 | css << 4 | 6 << 16 | 4 << 20
}

/// CC.SHN = 01b: normal shutdown notification.
pub(crate) const CC_SHN_NORMAL: u32 = 1 << 14;
/// CSTS.RDY.
pub(crate) const CSTS_RDY: u32 = 1;
/// CSTS.CFS: controller fatal status.
pub(crate) const CSTS_CFS: u32 = 2;
/// CSTS.SHST, shutdown processing complete (10b).
pub(crate) fn shutdown_complete(csts: u32) -> bool {
    (csts >> 2) & 3 == 2
}

/// AQA for admin queues of `entries` entries each.
pub(crate) fn aqa(entries: u16) -> u32 {
    let n = entries as u32 - 1;
    n | n << 16
}

/// The submission queue tail doorbell of queue `qid`.
pub(crate) fn sq_tail_doorbell(qid: u16, dstrd: u32) -> usize {
    DOORBELLS + (2 * qid as usize) * (4 << dstrd)
}

/// The completion queue head doorbell of queue `qid`.
pub(crate) fn cq_head_doorbell(qid: u16, dstrd: u32) -> usize {
    DOORBELLS + (2 * qid as usize + 1) * (4 << dstrd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_fields_decode_as_the_spec_lays_them_out() {
        // QEMU 7.2's CAP: MQES 0x7ff, CQR, TO 0x0f (7.5 s), DSTRD 0, NSSRS, CSS 0xc1 (NVM,
        // I/O command sets, admin only), MPSMIN 0, MPSMAX 4, CMBS.
        let v: u64 = 0x07ff | 1 << 16 | 0x0f << 24 | 1 << 36 | 0xc1 << 37 | 4 << 52 | 1 << 57;
        let c = Cap::decode(v);
        assert_eq!(c, Cap { mqes: 2048, timeout_ms: 7500, dstrd: 0, all_iocs: true, mps_min: 4096 });
        let c = Cap::decode(3 << 32 | 1 << 37 | 1 << 48);
        assert_eq!((c.dstrd, c.all_iocs, c.mps_min, c.mqes), (3, false, 8192, 1));
    }

    #[test]
    fn doorbells_follow_the_stride() {
        assert_eq!(sq_tail_doorbell(0, 0), 0x1000);
        assert_eq!(cq_head_doorbell(0, 0), 0x1004);
        assert_eq!(sq_tail_doorbell(3, 0), 0x1018);
        assert_eq!(cq_head_doorbell(3, 0), 0x101c);
        // A stride of 2 puts doorbells 16 bytes apart.
        assert_eq!(sq_tail_doorbell(1, 2), 0x1020);
        assert_eq!(cq_head_doorbell(1, 2), 0x1030);
    }

    #[test]
    fn cc_and_aqa_encode_the_queue_setup() {
        assert_eq!(cc_enable(false), 0x0046_0001);
        assert_eq!(cc_enable(true), 0x0046_0061);
        assert_eq!(aqa(32), 0x001f_001f);
        assert!(shutdown_complete(0b1001) && !shutdown_complete(0b0101));
    }
}
