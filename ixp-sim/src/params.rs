//! Machine parameters: `MachineParams` (human units, from TOML or the CLI) is validated into
//! `MachineConfig` (per-unit occupancies in core cycles, precomputed).
//!
//! Every default carries its source in its doc comment: "spec 06" is the public-facts table of
//! docs/ixp-sim.md, "seed" is section 5 of the ZL-RED paper, "assumed" marks a value no
//! public source fixed, chosen as stated and overridable from a config.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The shared units a microengine can send a command to. Each has its own command queue, bus
/// and latency (spec 06: "each with its own command queue, latency and bus bandwidth").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// 4 KB scratchpad in the FBI unit.
    Scratch,
    /// External SRAM (32-bit bus).
    Sram,
    /// External SDRAM (64-bit bus).
    Sdram,
    /// The FBI unit's hardware hash unit (48/64-bit keys).
    Hash,
    /// The IX bus between the MACs and the receive/transmit FIFOs.
    IxBus,
}

impl Unit {
    pub const ALL: [Unit; 5] = [
        Unit::Scratch,
        Unit::Sram,
        Unit::Sdram,
        Unit::Hash,
        Unit::IxBus,
    ];
    pub const COUNT: usize = 5;

    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            Unit::Scratch => "scratch",
            Unit::Sram => "sram",
            Unit::Sdram => "sdram",
            Unit::Hash => "hash",
            Unit::IxBus => "ix-bus",
        }
    }

    pub fn from_name(s: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.name() == s)
    }
}

/// A named set of unit latencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyProfile {
    /// The ZL-RED paper's figures: SRAM ~30 cycles, SDRAM 40-50 cycles (seed §5).
    Seed,
    /// Datasheet-era figures: scratch 12-14, SRAM 16-20, SDRAM 33-40 cycles (spec 06 table).
    #[default]
    Datasheet,
}

impl LatencyProfile {
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "seed" => Some(Self::Seed),
            "datasheet" => Some(Self::Datasheet),
            _ => None,
        }
    }

    /// The profile's parameters for one unit.
    pub fn unit(self, unit: Unit) -> UnitParams {
        let (lat, bw, word, depth, cmd) = match (self, unit) {
            // Scratch is not in the seed; both profiles use spec 06's 12-14 cycles. Bandwidth
            // assumed: one 32-bit word per core cycle (on-chip, in the FBI).
            (_, Unit::Scratch) => ([12, 14], Bandwidth::BytesPerCycle(4.0), 4, 8, 0.0),
            // Seed: "32-bit bus, 400 MB/s, about 30 cycles per command".
            (Self::Seed, Unit::Sram) => ([30, 30], Bandwidth::MbPerS(400.0), 4, 16, 0.0),
            // Spec 06: 16-20 cycles. Bus assumed 32 bits at half the core clock like SDRAM's
            // (464 MB/s at 232 MHz; the seed's 400 MB/s is the same bus at 200 MHz).
            (Self::Datasheet, Unit::Sram) => ([16, 20], Bandwidth::BytesPerCycle(2.0), 4, 16, 0.0),
            // Seed: "64-bit bus, 800 MB/s, 40-50 cycles per command". Both SDRAM profiles
            // assume 4 core cycles of bus time per command (two SDRAM clocks of row
            // activate/precharge that bank interleaving does not hide for scattered small
            // references); set `command_cycles = 0` for the peak-bandwidth reading.
            (Self::Seed, Unit::Sdram) => ([40, 50], Bandwidth::MbPerS(800.0), 8, 16, 4.0),
            // Spec 06: 33-40 cycles, 64 bits at half the core clock (4 bytes per core cycle).
            (Self::Datasheet, Unit::Sdram) => ([33, 40], Bandwidth::BytesPerCycle(4.0), 8, 16, 4.0),
            // Assumed: no public latency figure found; one 64-bit key per 4 cycles, result in
            // 20 cycles (about an SRAM reference), queue of 4.
            (_, Unit::Hash) => ([20, 20], Bandwidth::BytesPerCycle(2.0), 8, 4, 0.0),
            // Spec 06: 64-bit, 66 MHz = 528 MB/s. Latency (MAC handshake to FIFO) assumed 10.
            (_, Unit::IxBus) => ([10, 10], Bandwidth::MbPerS(528.0), 8, 8, 0.0),
        };
        UnitParams {
            latency: Some(lat),
            bandwidth_mb_s: match bw {
                Bandwidth::MbPerS(x) => Some(x),
                Bandwidth::BytesPerCycle(_) => None,
            },
            bytes_per_cycle: match bw {
                Bandwidth::BytesPerCycle(x) => Some(x),
                Bandwidth::MbPerS(_) => None,
            },
            word_bytes: Some(word),
            queue_depth: Some(depth),
            command_cycles: Some(cmd),
        }
    }
}

/// A unit's bus bandwidth, either fixed in MB/s (external buses with their own clock) or in
/// bytes per core cycle (buses clocked from the core clock).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bandwidth {
    MbPerS(f64),
    BytesPerCycle(f64),
}

/// One unit's parameters as written in a config; any field left out comes from the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitParams {
    /// Unloaded command-to-result latency in core cycles, `[min, max]` (uniform draw).
    pub latency: Option<[u32; 2]>,
    /// Bus bandwidth in MB/s (10^6 bytes/s); exclusive with `bytes_per_cycle`.
    pub bandwidth_mb_s: Option<f64>,
    /// Bus bandwidth in bytes per core cycle; exclusive with `bandwidth_mb_s`.
    pub bytes_per_cycle: Option<f64>,
    /// Bus width: every reference is rounded up to whole words.
    pub word_bytes: Option<u32>,
    /// Commands that may wait for the bus; a microengine issuing to a full queue stalls.
    pub queue_depth: Option<u32>,
    /// Bus cycles every command costs on top of its words' transfer (core cycles).
    pub command_cycles: Option<f64>,
}

/// Per-unit overrides, by unit name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UnitOverrides {
    pub scratch: Option<UnitParams>,
    pub sram: Option<UnitParams>,
    pub sdram: Option<UnitParams>,
    pub hash: Option<UnitParams>,
    pub ix_bus: Option<UnitParams>,
}

impl UnitOverrides {
    fn get(&self, unit: Unit) -> Option<&UnitParams> {
        match unit {
            Unit::Scratch => self.scratch.as_ref(),
            Unit::Sram => self.sram.as_ref(),
            Unit::Sdram => self.sdram.as_ref(),
            Unit::Hash => self.hash.as_ref(),
            Unit::IxBus => self.ix_bus.as_ref(),
        }
    }

    pub fn get_mut(&mut self, unit: Unit) -> &mut Option<UnitParams> {
        match unit {
            Unit::Scratch => &mut self.scratch,
            Unit::Sram => &mut self.sram,
            Unit::Sdram => &mut self.sdram,
            Unit::Hash => &mut self.hash,
            Unit::IxBus => &mut self.ix_bus,
        }
    }
}

/// The machine as a user describes it (TOML `[machine]` or CLI flags).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineParams {
    /// Core clock in MHz, 162..=232: the IXP1200 shipped at 162, 166, 200 and 232 MHz (spec 06);
    /// default 232.
    pub clock_mhz: f64,
    /// Microengines; 6 on the IXP1200 (spec 06).
    pub mes: u32,
    /// Hardware threads per microengine; 4 on the IXP1200 (spec 06).
    pub threads_per_me: u32,
    /// Receive threads; the rest transmit. Whole MEs only, since one ME's threads share one
    /// program store (seed §5). Default: two thirds of the MEs, the paper's 16 of 24.
    pub rx_threads: Option<u32>,
    /// Base latency profile for every unit.
    pub profile: LatencyProfile,
    /// Cycles to issue one memory/hash/FIFO command (one microword). Assumed 1.
    pub issue_cycles: u32,
    /// Cycles lost at a context swap; the IXP1200 swap is zero-overhead (spec 06).
    pub ctx_swap_cycles: u32,
    /// Packets the receive stage may have handed to transmit and not yet sent (descriptor
    /// ring); a receive thread finding it full waits (back-pressure). Assumed 256.
    pub tx_ring_packets: u32,
    /// Seed for latency draws.
    pub seed: u64,
    /// Per-unit overrides of the profile.
    pub units: UnitOverrides,
}

impl Default for MachineParams {
    fn default() -> Self {
        Self {
            clock_mhz: 232.0,
            mes: 6,
            threads_per_me: 4,
            rx_threads: None,
            profile: LatencyProfile::Datasheet,
            issue_cycles: 1,
            ctx_swap_cycles: 0,
            tx_ring_packets: 256,
            seed: 1,
            units: UnitOverrides::default(),
        }
    }
}

/// A rejected parameter: which field and why.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{field}: {reason}")]
pub struct ParamError {
    pub field: String,
    pub reason: String,
}

impl ParamError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// One unit, validated: integer latencies and the bus occupancy of one word in core cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnitConfig {
    pub unit: Unit,
    pub latency_min: u32,
    pub latency_max: u32,
    /// Core cycles the bus is held per word.
    pub cycles_per_word: f64,
    /// Core cycles the bus is held per command, on top of the words.
    pub command_cycles: f64,
    pub word_bytes: u32,
    pub queue_depth: u32,
}

impl UnitConfig {
    /// Words a reference of `bytes` moves (at least one).
    pub fn words(&self, bytes: u32) -> u32 {
        bytes.div_ceil(self.word_bytes).max(1)
    }
    /// Bus occupancy of a reference of `bytes`, in core cycles: `S_m` of the bounds.
    pub fn occupancy(&self, bytes: u32) -> f64 {
        self.command_cycles + self.words(bytes) as f64 * self.cycles_per_word
    }
    /// Mean unloaded latency of a reference of `bytes`: the configured latency (for one word)
    /// plus the transfer time of the extra words.
    pub fn mean_latency(&self, bytes: u32) -> f64 {
        (self.latency_min + self.latency_max) as f64 / 2.0
            + (self.words(bytes) - 1) as f64 * self.cycles_per_word
    }
}

/// The validated machine.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineConfig {
    pub clock_mhz: f64,
    pub mes: u32,
    pub threads_per_me: u32,
    /// MEs running the receive program (the first ones); the rest run transmit.
    pub rx_mes: u32,
    pub profile: LatencyProfile,
    pub issue_cycles: u32,
    pub ctx_swap_cycles: u32,
    pub tx_ring_packets: u32,
    pub seed: u64,
    pub units: [UnitConfig; Unit::COUNT],
}

impl MachineConfig {
    pub fn unit(&self, unit: Unit) -> &UnitConfig {
        &self.units[unit.index()]
    }
    pub fn tx_mes(&self) -> u32 {
        self.mes - self.rx_mes
    }
}

impl MachineParams {
    /// Validates; `has_tx` says whether the workload has a transmit program (without one every
    /// ME receives and the receive program finishes the packet).
    pub fn validate(&self, has_tx: bool) -> Result<MachineConfig, ParamError> {
        if !(self.clock_mhz.is_finite() && (162.0..=232.0).contains(&self.clock_mhz)) {
            return Err(ParamError::new(
                "clock_mhz",
                format!("{} is outside the IXP1200's 162..=232 MHz", self.clock_mhz),
            ));
        }
        if !(1..=64).contains(&self.mes) {
            return Err(ParamError::new("mes", "must be 1..=64"));
        }
        if !(1..=16).contains(&self.threads_per_me) {
            return Err(ParamError::new("threads_per_me", "must be 1..=16"));
        }
        let total = self.mes * self.threads_per_me;
        let rx_mes = if !has_tx {
            if let Some(rx) = self.rx_threads {
                if rx != total {
                    return Err(ParamError::new(
                        "rx_threads",
                        "the workload has no transmit program: every thread receives",
                    ));
                }
            }
            self.mes
        } else {
            match self.rx_threads {
                Some(rx) => {
                    if rx % self.threads_per_me != 0 {
                        return Err(ParamError::new(
                            "rx_threads",
                            format!(
                                "{rx} is not a whole number of MEs of {} threads (one ME runs one kind of work)",
                                self.threads_per_me
                            ),
                        ));
                    }
                    let rx_mes = rx / self.threads_per_me;
                    if rx_mes == 0 || rx_mes >= self.mes {
                        return Err(ParamError::new(
                            "rx_threads",
                            format!(
                                "{rx} leaves no receive or no transmit ME out of {total} threads"
                            ),
                        ));
                    }
                    rx_mes
                }
                None if self.mes < 2 => {
                    return Err(ParamError::new(
                        "mes",
                        "a workload with receive and transmit programs needs at least 2 MEs",
                    ))
                }
                None => ((self.mes as f64 * 2.0 / 3.0).round() as u32).clamp(1, self.mes - 1),
            }
        };
        if self.issue_cycles > 1000 {
            return Err(ParamError::new("issue_cycles", "must be <= 1000"));
        }
        if self.ctx_swap_cycles > 1000 {
            return Err(ParamError::new("ctx_swap_cycles", "must be <= 1000"));
        }
        if self.tx_ring_packets == 0 {
            return Err(ParamError::new("tx_ring_packets", "must be >= 1"));
        }
        let mut units = [UnitConfig {
            unit: Unit::Scratch,
            latency_min: 0,
            latency_max: 0,
            cycles_per_word: 0.0,
            command_cycles: 0.0,
            word_bytes: 1,
            queue_depth: 1,
        }; Unit::COUNT];
        for unit in Unit::ALL {
            units[unit.index()] = self.validate_unit(unit)?;
        }
        Ok(MachineConfig {
            clock_mhz: self.clock_mhz,
            mes: self.mes,
            threads_per_me: self.threads_per_me,
            rx_mes,
            profile: self.profile,
            issue_cycles: self.issue_cycles,
            ctx_swap_cycles: self.ctx_swap_cycles,
            tx_ring_packets: self.tx_ring_packets,
            seed: self.seed,
            units,
        })
    }

    fn validate_unit(&self, unit: Unit) -> Result<UnitConfig, ParamError> {
        let base = self.profile.unit(unit);
        let over = self.units.get(unit).copied().unwrap_or_default();
        let field = |f: &str| format!("units.{}.{f}", unit.name());
        let [lo, hi] = over.latency.or(base.latency).unwrap_or([1, 1]);
        if lo == 0 || lo > hi || hi > 100_000 {
            return Err(ParamError::new(
                field("latency"),
                format!("[{lo}, {hi}] must satisfy 1 <= min <= max <= 100000 cycles"),
            ));
        }
        let word_bytes = over.word_bytes.or(base.word_bytes).unwrap_or(4);
        if !(1..=64).contains(&word_bytes) {
            return Err(ParamError::new(field("word_bytes"), "must be 1..=64"));
        }
        let queue_depth = over.queue_depth.or(base.queue_depth).unwrap_or(16);
        if !(1..=4096).contains(&queue_depth) {
            return Err(ParamError::new(field("queue_depth"), "must be 1..=4096"));
        }
        let bytes_per_cycle = match (over.bandwidth_mb_s, over.bytes_per_cycle) {
            (Some(_), Some(_)) => {
                return Err(ParamError::new(
                    field("bandwidth_mb_s"),
                    "give either bandwidth_mb_s or bytes_per_cycle, not both",
                ))
            }
            (Some(mb), None) => {
                check_positive(mb, &field("bandwidth_mb_s"))?;
                mb / self.clock_mhz
            }
            (None, Some(bpc)) => {
                check_positive(bpc, &field("bytes_per_cycle"))?;
                bpc
            }
            (None, None) => match (base.bandwidth_mb_s, base.bytes_per_cycle) {
                (Some(mb), _) => mb / self.clock_mhz,
                (None, Some(bpc)) => bpc,
                (None, None) => 1.0,
            },
        };
        let command_cycles = over.command_cycles.or(base.command_cycles).unwrap_or(0.0);
        if !(command_cycles.is_finite() && (0.0..=10_000.0).contains(&command_cycles)) {
            return Err(ParamError::new(
                field("command_cycles"),
                "must be a number in 0..=10000",
            ));
        }
        Ok(UnitConfig {
            unit,
            latency_min: lo,
            latency_max: hi,
            command_cycles,
            cycles_per_word: word_bytes as f64 / bytes_per_cycle,
            word_bytes,
            queue_depth,
        })
    }
}

fn check_positive(x: f64, field: &str) -> Result<(), ParamError> {
    if x.is_finite() && x > 0.0 && x < 1e9 {
        Ok(())
    } else {
        Err(ParamError::new(
            field,
            format!("{x} must be a positive finite number"),
        ))
    }
}
