//! Identify data: the 4096-byte pages of Identify Controller (CNS 01h), Identify
//! Namespace (CNS 00h), the Namespace Identification Descriptor list (CNS 03h), and the
//! Zoned Namespace Command Set pages (CNS 05h / 06h with CSI 02h), parsed into structs
//! with one named field per spec field.
//!
//! Offsets follow the NVMe Base Specification 2.0 ("Identify Controller Data Structure",
//! "Identify Namespace Data Structure", NVM Command Set spec 1.0) and the Zoned
//! Namespace Command Set spec 1.1. All multi-byte fields are little-endian. ASCII string
//! fields (`sn`, `mn`, `fr`, `subnqn`) are returned with trailing spaces and NULs
//! removed; 128-bit capacity fields are `u128`; identifiers (`eui64`, `nguid`, `fguid`)
//! stay byte arrays in the order the device gives them.
//!
//! Parsers never panic: a page shorter than 4096 bytes is an error ([`ShortPage`]).

use serde::Serialize;

/// Size of every Identify data page.
pub const IDENTIFY_LEN: usize = 4096;

/// Controller or Namespace Structure (CNS) values of the Identify command.
pub mod cns {
    /// Identify Namespace (NVM command set) for `nsid`.
    pub const NS: u8 = 0x00;
    /// Identify Controller.
    pub const CTRL: u8 = 0x01;
    /// Active Namespace ID list (namespaces above `nsid`).
    pub const NS_ACTIVE_LIST: u8 = 0x02;
    /// Namespace Identification Descriptor list for `nsid`.
    pub const NS_DESC_LIST: u8 = 0x03;
    /// I/O Command Set specific Identify Namespace (with a CSI).
    pub const CSI_NS: u8 = 0x05;
    /// I/O Command Set specific Identify Controller (with a CSI).
    pub const CSI_CTRL: u8 = 0x06;
}

/// Command Set Identifiers.
pub mod csi {
    /// NVM Command Set.
    pub const NVM: u8 = 0x00;
    /// Key Value Command Set.
    pub const KV: u8 = 0x01;
    /// Zoned Namespace Command Set.
    pub const ZNS: u8 = 0x02;
}

use super::Page;
pub use super::ShortPage;

/// One power state descriptor (32 bytes) of Identify Controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PowerState {
    /// Maximum Power (MP), in the unit given by `mxps`.
    pub mp: u16,
    /// Max Power Scale (MXPS): 0 = 0.01 W, 1 = 0.0001 W.
    pub mxps: u8,
    /// Non-Operational State (NOPS).
    pub nops: u8,
    /// Entry Latency (ENLAT), microseconds.
    pub enlat: u32,
    /// Exit Latency (EXLAT), microseconds.
    pub exlat: u32,
    /// Relative Read Throughput (RRT).
    pub rrt: u8,
    /// Relative Read Latency (RRL).
    pub rrl: u8,
    /// Relative Write Throughput (RWT).
    pub rwt: u8,
    /// Relative Write Latency (RWL).
    pub rwl: u8,
    /// Idle Power (IDLP).
    pub idlp: u16,
    /// Idle Power Scale (IPS).
    pub ips: u8,
    /// Active Power (ACTP).
    pub actp: u16,
    /// Active Power Workload (APW).
    pub apw: u8,
    /// Active Power Scale (APS).
    pub aps: u8,
}

impl PowerState {
    fn parse(p: &Page<'_>, off: usize) -> PowerState {
        let f = p.u8(off + 3);
        let a = p.u8(off + 22);
        PowerState {
            mp: p.u16(off),
            mxps: f & 1,
            nops: (f >> 1) & 1,
            enlat: p.u32(off + 4),
            exlat: p.u32(off + 8),
            rrt: p.u8(off + 12) & 0x1f,
            rrl: p.u8(off + 13) & 0x1f,
            rwt: p.u8(off + 14) & 0x1f,
            rwl: p.u8(off + 15) & 0x1f,
            idlp: p.u16(off + 16),
            ips: p.u8(off + 18) >> 6,
            actp: p.u16(off + 20),
            apw: a & 0x7,
            aps: a >> 6,
        }
    }
}

/// Identify Controller data (CNS 01h).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IdCtrl {
    /// PCI Vendor ID.
    pub vid: u16,
    /// PCI Subsystem Vendor ID.
    pub ssvid: u16,
    /// Serial Number.
    pub sn: String,
    /// Model Number.
    pub mn: String,
    /// Firmware Revision.
    pub fr: String,
    /// Recommended Arbitration Burst.
    pub rab: u8,
    /// IEEE OUI Identifier (24 bits, as the little-endian number the page holds).
    pub ieee: u32,
    /// Controller Multi-Path I/O and Namespace Sharing Capabilities.
    pub cmic: u8,
    /// Maximum Data Transfer Size: 2^MDTS units of the minimum memory page size
    /// (CAP.MPSMIN); 0 = no limit.
    pub mdts: u8,
    /// Controller ID.
    pub cntlid: u16,
    /// Version.
    pub ver: u32,
    /// RTD3 Resume Latency (µs).
    pub rtd3r: u32,
    /// RTD3 Entry Latency (µs).
    pub rtd3e: u32,
    /// Optional Asynchronous Events Supported.
    pub oaes: u32,
    /// Controller Attributes.
    pub ctratt: u32,
    /// Read Recovery Levels Supported.
    pub rrls: u16,
    /// Controller Type.
    pub cntrltype: u8,
    /// FRU Globally Unique Identifier.
    pub fguid: [u8; 16],
    /// Command Retry Delay Time 1.
    pub crdt1: u16,
    /// Command Retry Delay Time 2.
    pub crdt2: u16,
    /// Command Retry Delay Time 3.
    pub crdt3: u16,
    /// NVM Subsystem Report.
    pub nvmsr: u8,
    /// VPD Write Cycle Information.
    pub vwci: u8,
    /// Management Endpoint Capabilities.
    pub mec: u8,
    /// Optional Admin Command Support.
    pub oacs: u16,
    /// Abort Command Limit.
    pub acl: u8,
    /// Asynchronous Event Request Limit.
    pub aerl: u8,
    /// Firmware Updates.
    pub frmw: u8,
    /// Log Page Attributes.
    pub lpa: u8,
    /// Error Log Page Entries.
    pub elpe: u8,
    /// Number of Power States Support (0-based).
    pub npss: u8,
    /// Admin Vendor Specific Command Configuration.
    pub avscc: u8,
    /// Autonomous Power State Transition Attributes.
    pub apsta: u8,
    /// Warning Composite Temperature Threshold (K).
    pub wctemp: u16,
    /// Critical Composite Temperature Threshold (K).
    pub cctemp: u16,
    /// Maximum Time for Firmware Activation.
    pub mtfa: u16,
    /// Host Memory Buffer Preferred Size.
    pub hmpre: u32,
    /// Host Memory Buffer Minimum Size.
    pub hmmin: u32,
    /// Total NVM Capacity (bytes).
    pub tnvmcap: u128,
    /// Unallocated NVM Capacity (bytes).
    pub unvmcap: u128,
    /// Replay Protected Memory Block Support.
    pub rpmbs: u32,
    /// Extended Device Self-test Time (minutes).
    pub edstt: u16,
    /// Device Self-test Options.
    pub dsto: u8,
    /// Firmware Update Granularity.
    pub fwug: u8,
    /// Keep Alive Support.
    pub kas: u16,
    /// Host Controlled Thermal Management Attributes.
    pub hctma: u16,
    /// Minimum Thermal Management Temperature.
    pub mntmt: u16,
    /// Maximum Thermal Management Temperature.
    pub mxtmt: u16,
    /// Sanitize Capabilities.
    pub sanicap: u32,
    /// Host Memory Buffer Minimum Descriptor Entry Size.
    pub hmminds: u32,
    /// Host Memory Maximum Descriptors Entries.
    pub hmmaxd: u16,
    /// NVM Set Identifier Maximum.
    pub nsetidmax: u16,
    /// Endurance Group Identifier Maximum.
    pub endgidmax: u16,
    /// ANA Transition Time.
    pub anatt: u8,
    /// Asymmetric Namespace Access Capabilities.
    pub anacap: u8,
    /// ANA Group Identifier Maximum.
    pub anagrpmax: u32,
    /// Number of ANA Group Identifiers.
    pub nanagrpid: u32,
    /// Persistent Event Log Size.
    pub pels: u32,
    /// Domain Identifier.
    pub domainid: u16,
    /// Max Endurance Group Capacity.
    pub megcap: u128,
    /// Submission Queue Entry Size (bits 3:0 required, 7:4 maximum, as powers of two).
    pub sqes: u8,
    /// Completion Queue Entry Size.
    pub cqes: u8,
    /// Maximum Outstanding Commands.
    pub maxcmd: u16,
    /// Number of Namespaces (the largest valid nsid).
    pub nn: u32,
    /// Optional NVM Command Support.
    pub oncs: u16,
    /// Fused Operation Support.
    pub fuses: u16,
    /// Format NVM Attributes.
    pub fna: u8,
    /// Volatile Write Cache.
    pub vwc: u8,
    /// Atomic Write Unit Normal.
    pub awun: u16,
    /// Atomic Write Unit Power Fail.
    pub awupf: u16,
    /// I/O Command Set Vendor Specific Command Configuration (NVSCC before 2.0).
    pub icsvscc: u8,
    /// Namespace Write Protection Capabilities.
    pub nwpc: u8,
    /// Atomic Compare & Write Unit.
    pub acwu: u16,
    /// Optional Copy Formats Supported.
    pub ocfs: u16,
    /// SGL Support.
    pub sgls: u32,
    /// Maximum Number of Allowed Namespaces.
    pub mnan: u32,
    /// Maximum Domain Namespace Attachments.
    pub maxdna: u128,
    /// Maximum I/O Controller Namespace Attachments.
    pub maxcna: u32,
    /// NVM Subsystem NVMe Qualified Name.
    pub subnqn: String,
    /// I/O Queue Command Capsule Supported Size (fabrics).
    pub ioccsz: u32,
    /// I/O Queue Response Capsule Supported Size (fabrics).
    pub iorcsz: u32,
    /// In Capsule Data Offset (fabrics).
    pub icdoff: u16,
    /// Fabrics Controller Attributes.
    pub fcatt: u8,
    /// Maximum SGL Data Block Descriptors.
    pub msdbd: u8,
    /// Optional Fabric Commands Support.
    pub ofcs: u16,
    /// Power state descriptors 0..=npss.
    pub psds: Vec<PowerState>,
}

impl IdCtrl {
    /// Parses an Identify Controller page (4096 bytes).
    pub fn from_bytes(b: &[u8]) -> Result<IdCtrl, ShortPage> {
        let p = Page::new(b, "Identify Controller", IDENTIFY_LEN)?;
        let ieee = p.bytes::<3>(73);
        let npss = p.u8(263);
        Ok(IdCtrl {
            vid: p.u16(0),
            ssvid: p.u16(2),
            sn: p.str(4, 20),
            mn: p.str(24, 40),
            fr: p.str(64, 8),
            rab: p.u8(72),
            ieee: u32::from_le_bytes([ieee[0], ieee[1], ieee[2], 0]),
            cmic: p.u8(76),
            mdts: p.u8(77),
            cntlid: p.u16(78),
            ver: p.u32(80),
            rtd3r: p.u32(84),
            rtd3e: p.u32(88),
            oaes: p.u32(92),
            ctratt: p.u32(96),
            rrls: p.u16(100),
            cntrltype: p.u8(111),
            fguid: p.bytes(112),
            crdt1: p.u16(128),
            crdt2: p.u16(130),
            crdt3: p.u16(132),
            nvmsr: p.u8(253),
            vwci: p.u8(254),
            mec: p.u8(255),
            oacs: p.u16(256),
            acl: p.u8(258),
            aerl: p.u8(259),
            frmw: p.u8(260),
            lpa: p.u8(261),
            elpe: p.u8(262),
            npss,
            avscc: p.u8(264),
            apsta: p.u8(265),
            wctemp: p.u16(266),
            cctemp: p.u16(268),
            mtfa: p.u16(270),
            hmpre: p.u32(272),
            hmmin: p.u32(276),
            tnvmcap: p.u128(280),
            unvmcap: p.u128(296),
            rpmbs: p.u32(312),
            edstt: p.u16(316),
            dsto: p.u8(318),
            fwug: p.u8(319),
            kas: p.u16(320),
            hctma: p.u16(322),
            mntmt: p.u16(324),
            mxtmt: p.u16(326),
            sanicap: p.u32(328),
            hmminds: p.u32(332),
            hmmaxd: p.u16(336),
            nsetidmax: p.u16(338),
            endgidmax: p.u16(340),
            anatt: p.u8(342),
            anacap: p.u8(343),
            anagrpmax: p.u32(344),
            nanagrpid: p.u32(348),
            pels: p.u32(352),
            domainid: p.u16(356),
            megcap: p.u128(368),
            sqes: p.u8(512),
            cqes: p.u8(513),
            maxcmd: p.u16(514),
            nn: p.u32(516),
            oncs: p.u16(520),
            fuses: p.u16(522),
            fna: p.u8(524),
            vwc: p.u8(525),
            awun: p.u16(526),
            awupf: p.u16(528),
            icsvscc: p.u8(530),
            nwpc: p.u8(531),
            acwu: p.u16(532),
            ocfs: p.u16(534),
            sgls: p.u32(536),
            mnan: p.u32(540),
            maxdna: p.u128(544),
            maxcna: p.u32(560),
            subnqn: p.str(768, 256),
            ioccsz: p.u32(1792),
            iorcsz: p.u32(1796),
            icdoff: p.u16(1800),
            fcatt: p.u8(1802),
            msdbd: p.u8(1803),
            ofcs: p.u16(1804),
            psds: (0..=npss.min(31) as usize).map(|i| PowerState::parse(&p, 2048 + 32 * i)).collect(),
        })
    }

    /// Largest transfer in bytes given the controller's minimum memory page size
    /// (CAP.MPSMIN, in bytes; 4096 on nearly every controller); `None` when MDTS is 0
    /// (no limit).
    pub fn max_transfer(&self, min_page: u64) -> Option<u64> {
        (self.mdts != 0).then(|| min_page.checked_shl(self.mdts as u32).unwrap_or(u64::MAX))
    }
}

/// One LBA Format (4 bytes) of Identify Namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lbaf {
    /// Metadata Size (bytes per LBA).
    pub ms: u16,
    /// LBA Data Size, as a power of two (9 = 512 bytes).
    pub ds: u8,
    /// Relative Performance (0 best .. 3 degraded).
    pub rp: u8,
}

impl Lbaf {
    /// The data size in bytes (0 when LBADS is below 9, i.e. the format is unused).
    pub fn data_size(&self) -> u32 {
        if (9..32).contains(&self.ds) {
            1 << self.ds
        } else {
            0
        }
    }
}

/// Identify Namespace data (CNS 00h, NVM command set).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IdNs {
    /// Namespace Size (LBAs).
    pub nsze: u64,
    /// Namespace Capacity (LBAs).
    pub ncap: u64,
    /// Namespace Utilization (LBAs).
    pub nuse: u64,
    /// Namespace Features.
    pub nsfeat: u8,
    /// Number of LBA Formats (0-based).
    pub nlbaf: u8,
    /// Formatted LBA Size: bits 3:0 and 6:5 the format index, bit 4 extended metadata.
    pub flbas: u8,
    /// Metadata Capabilities.
    pub mc: u8,
    /// End-to-end Data Protection Capabilities.
    pub dpc: u8,
    /// End-to-end Data Protection Type Settings.
    pub dps: u8,
    /// Namespace Multi-path I/O and Namespace Sharing Capabilities.
    pub nmic: u8,
    /// Reservation Capabilities.
    pub rescap: u8,
    /// Format Progress Indicator.
    pub fpi: u8,
    /// Deallocate Logical Block Features.
    pub dlfeat: u8,
    /// Namespace Atomic Write Unit Normal.
    pub nawun: u16,
    /// Namespace Atomic Write Unit Power Fail.
    pub nawupf: u16,
    /// Namespace Atomic Compare & Write Unit.
    pub nacwu: u16,
    /// Namespace Atomic Boundary Size Normal.
    pub nabsn: u16,
    /// Namespace Atomic Boundary Offset.
    pub nabo: u16,
    /// Namespace Atomic Boundary Size Power Fail.
    pub nabspf: u16,
    /// Namespace Optimal I/O Boundary.
    pub noiob: u16,
    /// NVM Capacity (bytes).
    pub nvmcap: u128,
    /// Namespace Preferred Write Granularity.
    pub npwg: u16,
    /// Namespace Preferred Write Alignment.
    pub npwa: u16,
    /// Namespace Preferred Deallocate Granularity.
    pub npdg: u16,
    /// Namespace Preferred Deallocate Alignment.
    pub npda: u16,
    /// Namespace Optimal Write Size.
    pub nows: u16,
    /// Maximum Single Source Range Length (Copy).
    pub mssrl: u16,
    /// Maximum Copy Length.
    pub mcl: u32,
    /// Maximum Source Range Count (0-based).
    pub msrc: u8,
    /// Number of Unique Capability LBA Formats.
    pub nulbaf: u8,
    /// ANA Group Identifier.
    pub anagrpid: u32,
    /// Namespace Attributes.
    pub nsattr: u8,
    /// NVM Set Identifier.
    pub nvmsetid: u16,
    /// Endurance Group Identifier.
    pub endgid: u16,
    /// Namespace Globally Unique Identifier.
    pub nguid: [u8; 16],
    /// IEEE Extended Unique Identifier.
    pub eui64: [u8; 8],
    /// LBA formats 0..=nlbaf.
    pub lbafs: Vec<Lbaf>,
}

impl IdNs {
    /// Parses an Identify Namespace page (4096 bytes).
    pub fn from_bytes(b: &[u8]) -> Result<IdNs, ShortPage> {
        let p = Page::new(b, "Identify Namespace", IDENTIFY_LEN)?;
        let nlbaf = p.u8(25);
        let lbafs = (0..=nlbaf.min(63) as usize)
            .map(|i| {
                let v = p.u32(128 + 4 * i);
                Lbaf { ms: v as u16, ds: (v >> 16) as u8, rp: ((v >> 24) & 3) as u8 }
            })
            .collect();
        Ok(IdNs {
            nsze: p.u64(0),
            ncap: p.u64(8),
            nuse: p.u64(16),
            nsfeat: p.u8(24),
            nlbaf,
            flbas: p.u8(26),
            mc: p.u8(27),
            dpc: p.u8(28),
            dps: p.u8(29),
            nmic: p.u8(30),
            rescap: p.u8(31),
            fpi: p.u8(32),
            dlfeat: p.u8(33),
            nawun: p.u16(34),
            nawupf: p.u16(36),
            nacwu: p.u16(38),
            nabsn: p.u16(40),
            nabo: p.u16(42),
            nabspf: p.u16(44),
            noiob: p.u16(46),
            nvmcap: p.u128(48),
            npwg: p.u16(64),
            npwa: p.u16(66),
            npdg: p.u16(68),
            npda: p.u16(70),
            nows: p.u16(72),
            mssrl: p.u16(74),
            mcl: p.u32(76),
            msrc: p.u8(80),
            nulbaf: p.u8(82),
            anagrpid: p.u32(92),
            nsattr: p.u8(99),
            nvmsetid: p.u16(100),
            endgid: p.u16(102),
            nguid: p.bytes(104),
            eui64: p.bytes(120),
            lbafs,
        })
    }

    /// Index of the LBA format in use (FLBAS bits 3:0, with bits 6:5 as the upper bits
    /// when more than 16 formats exist).
    pub fn lbaf_index(&self) -> usize {
        let low = (self.flbas & 0xf) as usize;
        if self.nlbaf >= 16 {
            low | (((self.flbas >> 5) & 3) as usize) << 4
        } else {
            low
        }
    }

    /// The LBA format in use, when the index is within `lbafs`.
    pub fn lbaf_in_use(&self) -> Option<&Lbaf> {
        self.lbafs.get(self.lbaf_index())
    }

    /// True when metadata is transferred at the end of each LBA's data (FLBAS bit 4).
    pub fn extended_metadata(&self) -> bool {
        self.flbas & 0x10 != 0
    }
}

/// One LBA Format Extension (16 bytes) of the ZNS Identify Namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lbafe {
    /// Zone Size (LBAs).
    pub zsze: u64,
    /// Zone Descriptor Extension Size (units of 64 bytes).
    pub zdes: u8,
}

/// Zoned Namespace Command Set specific Identify Namespace (CNS 05h, CSI 02h).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IdNsZns {
    /// Zone Operation Characteristics.
    pub zoc: u16,
    /// Optional Zoned Command Support.
    pub ozcs: u16,
    /// Maximum Active Resources (0-based; 0xFFFFFFFF = no limit).
    pub mar: u32,
    /// Maximum Open Resources (0-based; 0xFFFFFFFF = no limit).
    pub mor: u32,
    /// Reset Recommended Limit.
    pub rrl: u32,
    /// Finish Recommended Limit.
    pub frl: u32,
    /// Reset Recommended Limit 1.
    pub rrl1: u32,
    /// Reset Recommended Limit 2.
    pub rrl2: u32,
    /// Reset Recommended Limit 3.
    pub rrl3: u32,
    /// Finish Recommended Limit 1.
    pub frl1: u32,
    /// Finish Recommended Limit 2.
    pub frl2: u32,
    /// Finish Recommended Limit 3.
    pub frl3: u32,
    /// Number of ZRWA Resources.
    pub numzrwa: u32,
    /// ZRWA Flush Granularity.
    pub zrwafg: u16,
    /// ZRWA Size.
    pub zrwasz: u16,
    /// ZRWA Capability.
    pub zrwacap: u8,
    /// LBA format extensions 0..=nlbaf (nlbaf from Identify Namespace).
    pub lbafe: Vec<Lbafe>,
}

impl IdNsZns {
    /// Parses a ZNS Identify Namespace page (4096 bytes); `nlbaf` (from the namespace's
    /// [`IdNs`]) says how many LBA format extensions are meaningful.
    pub fn from_bytes(b: &[u8], nlbaf: u8) -> Result<IdNsZns, ShortPage> {
        let p = Page::new(b, "ZNS Identify Namespace", IDENTIFY_LEN)?;
        Ok(IdNsZns {
            zoc: p.u16(0),
            ozcs: p.u16(2),
            mar: p.u32(4),
            mor: p.u32(8),
            rrl: p.u32(12),
            frl: p.u32(16),
            rrl1: p.u32(20),
            rrl2: p.u32(24),
            rrl3: p.u32(28),
            frl1: p.u32(32),
            frl2: p.u32(36),
            frl3: p.u32(40),
            numzrwa: p.u32(44),
            zrwafg: p.u16(48),
            zrwasz: p.u16(50),
            zrwacap: p.u8(52),
            lbafe: (0..=nlbaf.min(63) as usize)
                .map(|i| Lbafe { zsze: p.u64(2816 + 16 * i), zdes: p.u8(2816 + 16 * i + 8) })
                .collect(),
        })
    }

    /// Most zones active at once, `None` for no limit.
    pub fn max_active(&self) -> Option<u32> {
        self.mar.checked_add(1)
    }

    /// Most zones open at once, `None` for no limit.
    pub fn max_open(&self) -> Option<u32> {
        self.mor.checked_add(1)
    }
}

/// Zoned Namespace Command Set specific Identify Controller (CNS 06h, CSI 02h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IdCtrlZns {
    /// Zone Append Size Limit: 2^ZASL units of CAP.MPSMIN; 0 = the MDTS limit applies.
    pub zasl: u8,
}

impl IdCtrlZns {
    /// Parses a ZNS Identify Controller page (4096 bytes).
    pub fn from_bytes(b: &[u8]) -> Result<IdCtrlZns, ShortPage> {
        let p = Page::new(b, "ZNS Identify Controller", IDENTIFY_LEN)?;
        Ok(IdCtrlZns { zasl: p.u8(0) })
    }
}

/// The Namespace Identification Descriptor list (CNS 03h), decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NsDescs {
    /// IEEE Extended Unique Identifier (NIDT 1).
    pub eui64: Option<[u8; 8]>,
    /// Namespace Globally Unique Identifier (NIDT 2).
    pub nguid: Option<[u8; 16]>,
    /// Namespace UUID (NIDT 3).
    pub uuid: Option<[u8; 16]>,
    /// Command Set Identifier (NIDT 4): see [`csi`].
    pub csi: Option<u8>,
}

impl NsDescs {
    /// Parses a descriptor list page (4096 bytes). Descriptors with an unexpected
    /// length are skipped; the list ends at a descriptor of type 0 or the page end.
    pub fn from_bytes(b: &[u8]) -> Result<NsDescs, ShortPage> {
        let p = Page::new(b, "Namespace Identification Descriptor list", IDENTIFY_LEN)?;
        let mut d = NsDescs::default();
        let mut off = 0usize;
        while off + 4 <= IDENTIFY_LEN {
            let (nidt, nidl) = (p.u8(off), p.u8(off + 1) as usize);
            if nidt == 0 || off + 4 + nidl > IDENTIFY_LEN {
                break;
            }
            let at = off + 4;
            match (nidt, nidl) {
                (1, 8) => d.eui64 = Some(p.bytes(at)),
                (2, 16) => d.nguid = Some(p.bytes(at)),
                (3, 16) => d.uuid = Some(p.bytes(at)),
                (4, 1) => d.csi = Some(p.u8(at)),
                _ => {}
            }
            off = at + nidl;
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Vec<u8> {
        vec![0u8; IDENTIFY_LEN]
    }

    #[test]
    fn controller_fields_come_from_their_offsets() {
        let mut b = page();
        b[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
        b[2..4].copy_from_slice(&0x1af4u16.to_le_bytes());
        b[4..24].copy_from_slice(b"ioswitch-vm-0       ");
        b[24..64].copy_from_slice(&[b' '; 40]);
        b[24..34].copy_from_slice(b"QEMU NVMe ");
        b[64..72].copy_from_slice(b"7.2.22  ");
        b[73..76].copy_from_slice(&[0x00, 0x54, 0x52]);
        b[77] = 7;
        b[80..84].copy_from_slice(&0x10400u32.to_le_bytes());
        b[263] = 1;
        b[280] = 0xff;
        b[295] = 0x01;
        b[512] = 0x66;
        b[513] = 0x44;
        b[516..520].copy_from_slice(&256u32.to_le_bytes());
        b[520..522].copy_from_slice(&0x15du16.to_le_bytes());
        b[525] = 7;
        b[768..768 + 22].copy_from_slice(b"nqn.2019-08.org.qemu:x");
        b[2048..2050].copy_from_slice(&0x9c4u16.to_le_bytes());
        b[2048 + 4..2048 + 8].copy_from_slice(&16u32.to_le_bytes());
        b[2080 + 3] = 0b11;
        let c = IdCtrl::from_bytes(&b).unwrap();
        assert_eq!((c.vid, c.ssvid), (0x1b36, 0x1af4));
        assert_eq!(c.sn, "ioswitch-vm-0");
        assert_eq!(c.mn, "QEMU NVMe");
        assert_eq!(c.fr, "7.2.22");
        assert_eq!(c.ieee, 0x525400);
        assert_eq!(c.mdts, 7);
        assert_eq!(c.ver, 0x10400);
        assert_eq!(c.tnvmcap, 0xff | 1u128 << 120);
        assert_eq!((c.sqes, c.cqes, c.nn, c.oncs, c.vwc), (0x66, 0x44, 256, 0x15d, 7));
        assert_eq!(c.subnqn, "nqn.2019-08.org.qemu:x");
        assert_eq!(c.psds.len(), 2);
        assert_eq!((c.psds[0].mp, c.psds[0].enlat), (0x9c4, 16));
        assert_eq!((c.psds[1].mxps, c.psds[1].nops), (1, 1));
        assert_eq!(c.max_transfer(4096), Some(512 * 1024));
        assert!(IdCtrl::from_bytes(&b[..100]).unwrap_err().to_string().contains("4096"));
    }

    #[test]
    fn namespace_fields_and_the_lba_format_in_use() {
        let mut b = page();
        b[0..8].copy_from_slice(&0x40000u64.to_le_bytes());
        b[8..16].copy_from_slice(&0x3f000u64.to_le_bytes());
        b[25] = 1;
        b[26] = 1;
        b[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
        b[132..136].copy_from_slice(&(12u32 << 16 | 8 | 2 << 24).to_le_bytes());
        b[120..128].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let n = IdNs::from_bytes(&b).unwrap();
        assert_eq!((n.nsze, n.ncap, n.nlbaf, n.flbas), (0x40000, 0x3f000, 1, 1));
        assert_eq!(n.lbafs.len(), 2);
        assert_eq!(n.lbafs[0], Lbaf { ms: 0, ds: 9, rp: 0 });
        assert_eq!(n.lbaf_in_use(), Some(&Lbaf { ms: 8, ds: 12, rp: 2 }));
        assert_eq!(n.lbaf_in_use().unwrap().data_size(), 4096);
        assert_eq!(n.eui64, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(!n.extended_metadata());
        // More than 16 formats: FLBAS bits 6:5 are the upper index bits.
        b[25] = 20;
        b[26] = 0x20 | 0x2;
        assert_eq!(IdNs::from_bytes(&b).unwrap().lbaf_index(), 18);
    }

    #[test]
    fn zns_pages_and_descriptor_lists() {
        let mut b = page();
        b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        b[8..12].copy_from_slice(&13u32.to_le_bytes());
        b[2816..2824].copy_from_slice(&0x2000u64.to_le_bytes());
        b[2832..2840].copy_from_slice(&0x4000u64.to_le_bytes());
        b[2840] = 2;
        let z = IdNsZns::from_bytes(&b, 1).unwrap();
        assert_eq!((z.max_active(), z.max_open()), (None, Some(14)));
        assert_eq!(z.lbafe, vec![Lbafe { zsze: 0x2000, zdes: 0 }, Lbafe { zsze: 0x4000, zdes: 2 }]);

        let mut d = page();
        d[0..4].copy_from_slice(&[3, 16, 0, 0]);
        d[4..20].copy_from_slice(&[0xaa; 16]);
        d[20..24].copy_from_slice(&[4, 1, 0, 0]);
        d[24] = csi::ZNS;
        d[25..29].copy_from_slice(&[9, 200, 0, 0]); // an unknown descriptor type is skipped
        let l = NsDescs::from_bytes(&d).unwrap();
        assert_eq!(l.uuid, Some([0xaa; 16]));
        assert_eq!(l.csi, Some(csi::ZNS));
        assert_eq!(l.eui64, None);
        // A descriptor whose length runs past the page ends the list without panicking.
        let mut e = page();
        e[4092..4096].copy_from_slice(&[2, 16, 0, 0]);
        e[0..4].copy_from_slice(&[5, 255, 0, 0]);
        assert_eq!(NsDescs::from_bytes(&e).unwrap(), NsDescs::default());
        assert_eq!(IdCtrlZns::from_bytes(&page()).unwrap().zasl, 0);
    }
}
