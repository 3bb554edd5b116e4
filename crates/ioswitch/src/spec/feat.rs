//! Features (NVMe base spec, "Get Features" / "Set Features"): the value of a feature
//! travels in one dword (CDW11 of Set Features, DW0 of the Get Features completion);
//! this module decodes it into named fields and encodes it back.
//!
//! Decoded: Arbitration (FID 01h), Power Management (02h), Temperature Threshold (04h),
//! Volatile Write Cache (06h), Number of Queues (07h). Any other feature is kept as its
//! raw dword.

use serde::Serialize;

/// Feature identifiers.
pub mod fid {
    /// Arbitration.
    pub const ARBITRATION: u8 = 0x01;
    /// Power Management.
    pub const POWER_MGMT: u8 = 0x02;
    /// LBA Range Type.
    pub const LBA_RANGE: u8 = 0x03;
    /// Temperature Threshold.
    pub const TEMP_THRESH: u8 = 0x04;
    /// Error Recovery.
    pub const ERROR_RECOVERY: u8 = 0x05;
    /// Volatile Write Cache.
    pub const VOLATILE_WC: u8 = 0x06;
    /// Number of Queues.
    pub const NUM_QUEUES: u8 = 0x07;
    /// Interrupt Coalescing.
    pub const IRQ_COALESCE: u8 = 0x08;
    /// Interrupt Vector Configuration.
    pub const IRQ_CONFIG: u8 = 0x09;
    /// Write Atomicity Normal.
    pub const WRITE_ATOMIC: u8 = 0x0A;
    /// Asynchronous Event Configuration.
    pub const ASYNC_EVENT: u8 = 0x0B;
    /// Autonomous Power State Transition.
    pub const AUTO_PST: u8 = 0x0C;
    /// Timestamp.
    pub const TIMESTAMP: u8 = 0x0E;
}

/// The spec's name of a feature, when ioswitch knows it.
pub fn name(fid: u8) -> &'static str {
    match fid {
        fid::ARBITRATION => "Arbitration",
        fid::POWER_MGMT => "Power Management",
        fid::LBA_RANGE => "LBA Range Type",
        fid::TEMP_THRESH => "Temperature Threshold",
        fid::ERROR_RECOVERY => "Error Recovery",
        fid::VOLATILE_WC => "Volatile Write Cache",
        fid::NUM_QUEUES => "Number of Queues",
        fid::IRQ_COALESCE => "Interrupt Coalescing",
        fid::IRQ_CONFIG => "Interrupt Vector Configuration",
        fid::WRITE_ATOMIC => "Write Atomicity Normal",
        fid::ASYNC_EVENT => "Asynchronous Event Configuration",
        fid::AUTO_PST => "Autonomous Power State Transition",
        fid::TIMESTAMP => "Timestamp",
        _ => "Unknown Feature",
    }
}

/// Which value Get Features returns (CDW10 SEL, bits 10:8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    /// The value in use.
    Current = 0,
    /// The default value.
    Default = 1,
    /// The value saved across resets.
    Saved = 2,
    /// The feature's capabilities ([`Capabilities`]) instead of a value.
    Supported = 3,
}

impl Select {
    /// The SEL field's value.
    pub fn bits(self) -> u32 {
        self as u32
    }
}

/// What Get Features with [`Select::Supported`] returns: the feature's capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Bit 0: the value can be saved across resets.
    pub saveable: bool,
    /// Bit 1: the feature is set per namespace.
    pub namespace_specific: bool,
    /// Bit 2: the value can be changed.
    pub changeable: bool,
}

impl Capabilities {
    /// Decodes the completion's DW0.
    pub fn from_dword(dw: u32) -> Capabilities {
        Capabilities { saveable: dw & 1 != 0, namespace_specific: dw & 2 != 0, changeable: dw & 4 != 0 }
    }
}

/// Arbitration (FID 01h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Arbitration {
    /// Arbitration Burst (bits 2:0): at most 2^burst commands are taken from a queue at a
    /// time; 7 means no limit.
    pub burst: u8,
    /// Low Priority Weight (bits 15:8), 0-based.
    pub low_priority_weight: u8,
    /// Medium Priority Weight (bits 23:16), 0-based.
    pub medium_priority_weight: u8,
    /// High Priority Weight (bits 31:24), 0-based.
    pub high_priority_weight: u8,
}

impl Arbitration {
    /// Decodes the feature dword.
    pub fn from_dword(dw: u32) -> Arbitration {
        Arbitration {
            burst: (dw & 7) as u8,
            low_priority_weight: (dw >> 8) as u8,
            medium_priority_weight: (dw >> 16) as u8,
            high_priority_weight: (dw >> 24) as u8,
        }
    }
    /// Encodes the feature dword (the burst is cut to its 3 bits).
    pub fn to_dword(&self) -> u32 {
        (self.burst & 7) as u32
            | (self.low_priority_weight as u32) << 8
            | (self.medium_priority_weight as u32) << 16
            | (self.high_priority_weight as u32) << 24
    }
}

/// Power Management (FID 02h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PowerManagement {
    /// Power State (bits 4:0), an index into the controller's power state descriptors.
    pub power_state: u8,
    /// Workload Hint (bits 7:5).
    pub workload_hint: u8,
}

impl PowerManagement {
    /// Decodes the feature dword.
    pub fn from_dword(dw: u32) -> PowerManagement {
        PowerManagement { power_state: (dw & 0x1f) as u8, workload_hint: ((dw >> 5) & 7) as u8 }
    }
    /// Encodes the feature dword (fields cut to their widths).
    pub fn to_dword(&self) -> u32 {
        (self.power_state & 0x1f) as u32 | ((self.workload_hint & 7) as u32) << 5
    }
}

/// Which side of a temperature threshold raises the event (THSEL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThresholdType {
    /// 0: over-temperature threshold.
    Over,
    /// 1: under-temperature threshold.
    Under,
    /// 2-3: reserved values.
    Reserved(u8),
}

/// Temperature Threshold (FID 04h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TemperatureThreshold {
    /// Temperature Threshold (bits 15:0), in kelvin.
    pub kelvin: u16,
    /// Threshold Temperature Select (bits 19:16): 0 the composite temperature, 1-8 a
    /// temperature sensor, 15 all of them (set only).
    pub sensor: u8,
    /// Threshold Type Select (bits 21:20).
    pub threshold_type: ThresholdType,
}

impl TemperatureThreshold {
    /// Decodes the feature dword.
    pub fn from_dword(dw: u32) -> TemperatureThreshold {
        let threshold_type = match (dw >> 20) & 3 {
            0 => ThresholdType::Over,
            1 => ThresholdType::Under,
            x => ThresholdType::Reserved(x as u8),
        };
        TemperatureThreshold { kelvin: dw as u16, sensor: ((dw >> 16) & 0xf) as u8, threshold_type }
    }
    /// Encodes the feature dword (fields cut to their widths).
    pub fn to_dword(&self) -> u32 {
        let thsel = match self.threshold_type {
            ThresholdType::Over => 0,
            ThresholdType::Under => 1,
            ThresholdType::Reserved(x) => (x & 3) as u32,
        };
        self.kelvin as u32 | ((self.sensor & 0xf) as u32) << 16 | thsel << 20
    }
}

/// Volatile Write Cache (FID 06h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VolatileWriteCache {
    /// Volatile Write Cache Enable (bit 0).
    pub enabled: bool,
}

impl VolatileWriteCache {
    /// Decodes the feature dword.
    pub fn from_dword(dw: u32) -> VolatileWriteCache {
        VolatileWriteCache { enabled: dw & 1 != 0 }
    }
    /// Encodes the feature dword.
    pub fn to_dword(&self) -> u32 {
        self.enabled as u32
    }
}

/// Number of Queues (FID 07h): I/O queues requested (Set Features CDW11) or allocated
/// (the completion's DW0). Counts here are 1-based; the dword carries them 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NumberOfQueues {
    /// I/O submission queues (bits 15:0, 0-based on the wire), 1..=65536.
    pub submission_queues: u32,
    /// I/O completion queues (bits 31:16, 0-based on the wire), 1..=65536.
    pub completion_queues: u32,
}

impl NumberOfQueues {
    /// Decodes the feature dword.
    pub fn from_dword(dw: u32) -> NumberOfQueues {
        NumberOfQueues { submission_queues: (dw & 0xffff) + 1, completion_queues: (dw >> 16) + 1 }
    }
    /// Encodes the feature dword; counts outside 1..=65536 are clamped into it.
    pub fn to_dword(&self) -> u32 {
        let enc = |n: u32| n.clamp(1, 65536) - 1;
        enc(self.submission_queues) | enc(self.completion_queues) << 16
    }
}

/// A feature's value, decoded when ioswitch knows the feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// FID 01h.
    Arbitration(Arbitration),
    /// FID 02h.
    PowerManagement(PowerManagement),
    /// FID 04h.
    TemperatureThreshold(TemperatureThreshold),
    /// FID 06h.
    VolatileWriteCache(VolatileWriteCache),
    /// FID 07h.
    NumberOfQueues(NumberOfQueues),
    /// A feature not decoded here: its identifier and dword.
    Other {
        /// Feature identifier.
        fid: u8,
        /// The feature dword.
        dword: u32,
    },
}

impl Feature {
    /// Decodes the dword of feature `fid`.
    pub fn decode(fid: u8, dw: u32) -> Feature {
        match fid {
            fid::ARBITRATION => Feature::Arbitration(Arbitration::from_dword(dw)),
            fid::POWER_MGMT => Feature::PowerManagement(PowerManagement::from_dword(dw)),
            fid::TEMP_THRESH => Feature::TemperatureThreshold(TemperatureThreshold::from_dword(dw)),
            fid::VOLATILE_WC => Feature::VolatileWriteCache(VolatileWriteCache::from_dword(dw)),
            fid::NUM_QUEUES => Feature::NumberOfQueues(NumberOfQueues::from_dword(dw)),
            fid => Feature::Other { fid, dword: dw },
        }
    }
    /// The feature identifier.
    pub fn fid(&self) -> u8 {
        match self {
            Feature::Arbitration(_) => fid::ARBITRATION,
            Feature::PowerManagement(_) => fid::POWER_MGMT,
            Feature::TemperatureThreshold(_) => fid::TEMP_THRESH,
            Feature::VolatileWriteCache(_) => fid::VOLATILE_WC,
            Feature::NumberOfQueues(_) => fid::NUM_QUEUES,
            Feature::Other { fid, .. } => *fid,
        }
    }
    /// Encodes the dword (Set Features CDW11).
    pub fn to_dword(&self) -> u32 {
        match self {
            Feature::Arbitration(f) => f.to_dword(),
            Feature::PowerManagement(f) => f.to_dword(),
            Feature::TemperatureThreshold(f) => f.to_dword(),
            Feature::VolatileWriteCache(f) => f.to_dword(),
            Feature::NumberOfQueues(f) => f.to_dword(),
            Feature::Other { dword, .. } => *dword,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decoded_feature_round_trips_through_its_dword() {
        let features = [
            Feature::Arbitration(Arbitration {
                burst: 7,
                low_priority_weight: 1,
                medium_priority_weight: 2,
                high_priority_weight: 255,
            }),
            Feature::PowerManagement(PowerManagement { power_state: 31, workload_hint: 5 }),
            Feature::TemperatureThreshold(TemperatureThreshold {
                kelvin: 343,
                sensor: 15,
                threshold_type: ThresholdType::Under,
            }),
            Feature::VolatileWriteCache(VolatileWriteCache { enabled: true }),
            Feature::VolatileWriteCache(VolatileWriteCache { enabled: false }),
            Feature::NumberOfQueues(NumberOfQueues { submission_queues: 65536, completion_queues: 1 }),
            Feature::Other { fid: 0x0E, dword: 0xdead_beef },
        ];
        for f in features {
            assert_eq!(Feature::decode(f.fid(), f.to_dword()), f, "{f:?}");
        }
    }

    #[test]
    fn dwords_decode_to_the_spec_bit_fields() {
        // QEMU's defaults, as nvme-cli reads them.
        assert_eq!(
            Feature::decode(1, 0x0000_0007),
            Feature::Arbitration(Arbitration {
                burst: 7,
                low_priority_weight: 0,
                medium_priority_weight: 0,
                high_priority_weight: 0
            })
        );
        assert_eq!(
            Feature::decode(4, 0x0000_0157),
            Feature::TemperatureThreshold(TemperatureThreshold {
                kelvin: 343,
                sensor: 0,
                threshold_type: ThresholdType::Over
            })
        );
        assert_eq!(
            Feature::decode(7, 0x003f_003f),
            Feature::NumberOfQueues(NumberOfQueues { submission_queues: 64, completion_queues: 64 })
        );
        assert_eq!(Arbitration::from_dword(0x0403_0201).to_dword(), 0x0403_0201);
        assert_eq!(TemperatureThreshold::from_dword(0x0031_0100).threshold_type, ThresholdType::Reserved(3));
        assert_eq!(PowerManagement::from_dword(0xa3), PowerManagement { power_state: 3, workload_hint: 5 });
        let caps = Capabilities::from_dword(5);
        assert!(caps.saveable && !caps.namespace_specific && caps.changeable);
        assert_eq!(Select::Supported.bits(), 3);
    }

    #[test]
    fn out_of_range_fields_are_cut_to_their_width() {
        assert_eq!(NumberOfQueues { submission_queues: 0, completion_queues: 70000 }.to_dword(), 0xffff_0000);
        assert_eq!(PowerManagement { power_state: 0xff, workload_hint: 0xff }.to_dword(), 0xff);
        assert_eq!(name(6), "Volatile Write Cache");
    }
}
