//! Workloads: per-packet microprograms for the receive and transmit threads, written in TOML
//! (`WorkloadSpec`) and compiled into a flat instruction list (`Program`).
//!
//! A program is a list of ops: `compute` (ALU microwords), `read`/`write` (a memory reference
//! of `bytes` to a unit or to a named region placed on a unit), `hash` (the FBI hash unit),
//! `ix_rx`/`ix_tx` (FIFO moves over the IX bus), `wait` (wait for this thread's outstanding
//! asynchronous references: the completion signals), `ctx_arb` (yield), and `repeat` (a body
//! run a fixed number of times or as many times as a per-packet counter says). Per-packet
//! counters come from running the real Zombie List (`zl-zombie`) on a trace (see
//! `zombie_trace`).

use crate::params::{ParamError, Unit};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Per-packet quantities a `repeat` may take its count from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// Zombie slot words loaded (the drawn zombie, or every zombie in scan mode).
    SlotReads,
    /// Zombie slot writes (CAS of the slot word, store of its timestamp).
    SlotWrites,
    /// Occurrence-table words examined (closed-hashing probes, keys).
    TableProbes,
    /// Occurrence-table writes (count reservations and releases, entry claims).
    TableWrites,
    /// Writes of the global words T and P(t).
    TotalWrites,
    /// 1 on a miss with overwrite (the evicted flow's entry changes too), else 0.
    Overwrites,
    /// 1 when the packet hit its zombie, else 0.
    Hit,
}

impl Counter {
    pub const ALL: [Counter; 7] = [
        Counter::SlotReads,
        Counter::SlotWrites,
        Counter::TableProbes,
        Counter::TableWrites,
        Counter::TotalWrites,
        Counter::Overwrites,
        Counter::Hit,
    ];
    pub const COUNT: usize = 7;
    pub const fn index(self) -> usize {
        self as usize
    }
    pub const fn name(self) -> &'static str {
        match self {
            Counter::SlotReads => "slot_reads",
            Counter::SlotWrites => "slot_writes",
            Counter::TableProbes => "table_probes",
            Counter::TableWrites => "table_writes",
            Counter::TotalWrites => "total_writes",
            Counter::Overwrites => "overwrites",
            Counter::Hit => "hit",
        }
    }
    fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// The counter values of one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketCounts(pub [u32; Counter::COUNT]);

impl PacketCounts {
    pub fn get(&self, c: Counter) -> u32 {
        self.0[c.index()]
    }
}

/// A byte count: a number or `"packet"` (the workload's packet size).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Bytes {
    Fixed(u32),
    Named(String),
}

/// A repeat count: a number or a counter name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Times {
    Fixed(u32),
    Named(String),
}

/// One op as written in TOML.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum OpSpec {
    Compute {
        cycles: u32,
    },
    Read {
        unit: String,
        bytes: Bytes,
        #[serde(default = "yes")]
        sync: bool,
    },
    Write {
        unit: String,
        bytes: Bytes,
        #[serde(default = "yes")]
        sync: bool,
    },
    Hash {
        /// 48 or 64 (spec 06: the FBI hash unit takes 48- or 64-bit keys).
        bits: u32,
    },
    IxRx {
        bytes: Bytes,
    },
    IxTx {
        bytes: Bytes,
    },
    Wait,
    CtxArb,
    Repeat {
        times: Times,
        body: Vec<OpSpec>,
    },
}

fn yes() -> bool {
    true
}

/// Where the per-packet counters come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZombieSpec {
    /// Zombie List size M.
    pub m: usize,
    /// `table` (the occurrence lookup table), `scan` (the naive O(M) scan) or `none` (SRED).
    pub occurrence: String,
    /// SRED's swap probability (paper 0.25).
    #[serde(default = "default_p_swap")]
    pub p_swap: f64,
    /// Active flows in the synthetic trace (equal rates).
    #[serde(default = "default_flows")]
    pub flows: u32,
    /// Trace length; the counters cycle over it.
    #[serde(default = "default_trace_packets")]
    pub trace_packets: u32,
    /// Seed of the trace and of the list's random choices.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_p_swap() -> f64 {
    0.25
}
fn default_flows() -> u32 {
    100
}
fn default_trace_packets() -> u32 {
    20_000
}
fn default_seed() -> u64 {
    7
}

/// A workload file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Packet size in bytes for `bytes = "packet"`.
    #[serde(default = "default_packet_bytes")]
    pub packet_bytes: u32,
    /// Named data regions and the unit each lives on (`zombie_list = "sram"`).
    #[serde(default)]
    pub regions: BTreeMap<String, String>,
    /// Source of the per-packet counters, if any op uses them.
    pub zombie: Option<ZombieSpec>,
    /// The receive program (per packet).
    pub rx: Vec<OpSpec>,
    /// The transmit program (per packet); absent: the receive threads finish the packet.
    #[serde(default)]
    pub tx: Vec<OpSpec>,
}

fn default_packet_bytes() -> u32 {
    64
}

/// A compiled instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    Compute(u32),
    Ref {
        unit: Unit,
        bytes: u32,
        sync: bool,
    },
    Wait,
    CtxArb,
    /// Start of a loop whose matching `LoopEnd` is at `end`.
    LoopStart {
        times: Count,
        end: u32,
    },
    LoopEnd {
        start: u32,
    },
}

/// A compiled repeat count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Count {
    Fixed(u32),
    Counter(Counter),
}

/// A compiled per-packet program. Only [`WorkloadSpec::compile`] builds one, so loops are
/// balanced and nest at most [`MAX_LOOP_DEPTH`] deep (the engine relies on both).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub(crate) instrs: Vec<Instr>,
}

impl Program {
    pub fn instrs(&self) -> &[Instr] {
        &self.instrs
    }
}

/// Loops may nest this deep.
pub const MAX_LOOP_DEPTH: usize = 4;

/// The largest fixed repeat count (counters from the Zombie List are bounded by M).
pub const MAX_REPEAT: u32 = 1_000_000;

/// Whether running `ops` once takes at least one cycle, so no loop spins without time passing.
fn spends_cycles(ops: &[OpSpec]) -> bool {
    ops.iter().any(|op| match op {
        OpSpec::Compute { cycles } => *cycles > 0,
        OpSpec::Read { .. }
        | OpSpec::Write { .. }
        | OpSpec::Hash { .. }
        | OpSpec::IxRx { .. }
        | OpSpec::IxTx { .. } => true,
        OpSpec::Repeat { times, body } => *times != Times::Fixed(0) && spends_cycles(body),
        OpSpec::Wait | OpSpec::CtxArb => false,
    })
}

/// A compiled workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub name: String,
    pub description: String,
    pub packet_bytes: u32,
    pub rx: Program,
    /// `None`: no transmit stage.
    pub tx: Option<Program>,
    pub zombie: Option<ZombieSpec>,
    pub uses_counters: bool,
}

impl WorkloadSpec {
    pub fn from_toml(text: &str) -> Result<Self, ParamError> {
        toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .map(|s| {
                    let line = text[..s.start].lines().count().max(1);
                    format!("line {line}")
                })
                .unwrap_or_else(|| "workload".into());
            ParamError::new(field, e.message().to_string())
        })
    }

    /// Moves every region named `region` onto `unit` (the CLI's `--place`).
    pub fn place(&mut self, region: &str, unit: Unit) -> Result<(), ParamError> {
        match self.regions.get_mut(region) {
            Some(u) => {
                *u = unit.name().to_string();
                Ok(())
            }
            None => Err(ParamError::new(
                format!("regions.{region}"),
                "no such region in this workload",
            )),
        }
    }

    pub fn compile(&self) -> Result<Workload, ParamError> {
        if self.packet_bytes < 40 || self.packet_bytes > 9216 {
            return Err(ParamError::new("packet_bytes", "must be 40..=9216"));
        }
        let mut regions = BTreeMap::new();
        for (name, unit) in &self.regions {
            let u = Unit::from_name(unit).ok_or_else(|| {
                ParamError::new(
                    format!("regions.{name}"),
                    format!("unknown unit {unit:?} (scratch, sram, sdram)"),
                )
            })?;
            if !matches!(u, Unit::Scratch | Unit::Sram | Unit::Sdram) {
                return Err(ParamError::new(
                    format!("regions.{name}"),
                    "a region lives in scratch, sram or sdram",
                ));
            }
            regions.insert(name.as_str(), u);
        }
        if let Some(z) = &self.zombie {
            if z.m == 0 || z.m > 1_000_000 {
                return Err(ParamError::new("zombie.m", "must be 1..=1000000"));
            }
            if z.flows > 10_000_000 {
                return Err(ParamError::new("zombie.flows", "must be <= 10000000"));
            }
            if !matches!(z.occurrence.as_str(), "table" | "scan" | "none") {
                return Err(ParamError::new(
                    "zombie.occurrence",
                    format!(
                        "{:?}: must be \"table\", \"scan\" or \"none\"",
                        z.occurrence
                    ),
                ));
            }
            if !(0.0..=1.0).contains(&z.p_swap) {
                return Err(ParamError::new("zombie.p_swap", "must be in [0, 1]"));
            }
            if z.flows == 0 {
                return Err(ParamError::new("zombie.flows", "must be >= 1"));
            }
            if z.trace_packets == 0 || z.trace_packets > 1_000_000 {
                return Err(ParamError::new(
                    "zombie.trace_packets",
                    "must be 1..=1000000",
                ));
            }
        }
        let mut c = Compiler {
            regions: &regions,
            packet_bytes: self.packet_bytes,
            uses_counters: false,
        };
        if self.rx.is_empty() {
            return Err(ParamError::new("rx", "the receive program is empty"));
        }
        let mut rx = Program::default();
        c.ops(&self.rx, "rx", 0, &mut rx)?;
        let tx = if self.tx.is_empty() {
            None
        } else {
            let mut tx = Program::default();
            c.ops(&self.tx, "tx", 0, &mut tx)?;
            Some(tx)
        };
        let uses_counters = c.uses_counters;
        if uses_counters && self.zombie.is_none() {
            return Err(ParamError::new(
                "zombie",
                "the program repeats by a per-packet counter but the workload has no [zombie] section",
            ));
        }
        for (name, ops) in [("rx", &self.rx), ("tx", &self.tx)] {
            if !ops.is_empty() && !spends_cycles(ops) {
                return Err(ParamError::new(
                    name,
                    "a program must spend at least one cycle per packet",
                ));
            }
        }
        Ok(Workload {
            name: self.name.clone(),
            description: self.description.clone(),
            packet_bytes: self.packet_bytes,
            rx,
            tx,
            zombie: self.zombie.clone(),
            uses_counters,
        })
    }
}

struct Compiler<'a> {
    regions: &'a BTreeMap<&'a str, Unit>,
    packet_bytes: u32,
    uses_counters: bool,
}

impl Compiler<'_> {
    fn ops(
        &mut self,
        ops: &[OpSpec],
        path: &str,
        depth: usize,
        out: &mut Program,
    ) -> Result<(), ParamError> {
        for (i, op) in ops.iter().enumerate() {
            let here = format!("{path}[{i}]");
            let field = |f: &str| format!("{here}.{f}");
            match op {
                OpSpec::Compute { cycles } => {
                    if *cycles > 1_000_000 {
                        return Err(ParamError::new(field("cycles"), "must be <= 1000000"));
                    }
                    out.instrs.push(Instr::Compute(*cycles));
                }
                OpSpec::Read { unit, bytes, sync } | OpSpec::Write { unit, bytes, sync } => {
                    let u = self.unit(unit, &field("unit"))?;
                    let b = self.bytes(bytes, &field("bytes"))?;
                    out.instrs.push(Instr::Ref {
                        unit: u,
                        bytes: b,
                        sync: *sync,
                    });
                }
                OpSpec::Hash { bits } => {
                    if *bits != 48 && *bits != 64 {
                        return Err(ParamError::new(field("bits"), "must be 48 or 64"));
                    }
                    out.instrs.push(Instr::Ref {
                        unit: Unit::Hash,
                        bytes: bits / 8,
                        sync: true,
                    });
                }
                OpSpec::IxRx { bytes } | OpSpec::IxTx { bytes } => {
                    let b = self.bytes(bytes, &field("bytes"))?;
                    out.instrs.push(Instr::Ref {
                        unit: Unit::IxBus,
                        bytes: b,
                        sync: true,
                    });
                }
                OpSpec::Wait => out.instrs.push(Instr::Wait),
                OpSpec::CtxArb => out.instrs.push(Instr::CtxArb),
                OpSpec::Repeat { times, body } => {
                    if depth + 1 > MAX_LOOP_DEPTH {
                        return Err(ParamError::new(
                            here,
                            format!("repeats nest at most {MAX_LOOP_DEPTH} deep"),
                        ));
                    }
                    let count = match times {
                        Times::Fixed(n) if *n > MAX_REPEAT => {
                            return Err(ParamError::new(
                                field("times"),
                                format!("{n} is more than {MAX_REPEAT}"),
                            ))
                        }
                        Times::Fixed(n) => Count::Fixed(*n),
                        Times::Named(s) => {
                            self.uses_counters = true;
                            Count::Counter(Counter::from_name(s).ok_or_else(|| {
                                ParamError::new(
                                    field("times"),
                                    format!(
                                        "unknown counter {s:?} (one of {})",
                                        Counter::ALL.map(|c| c.name()).join(", ")
                                    ),
                                )
                            })?)
                        }
                    };
                    if !spends_cycles(body) {
                        return Err(ParamError::new(
                            field("body"),
                            "must spend cycles (a compute or a memory, hash or FIFO reference)",
                        ));
                    }
                    let start = out.instrs.len();
                    out.instrs.push(Instr::LoopStart {
                        times: count,
                        end: 0,
                    });
                    self.ops(body, &field("body"), depth + 1, out)?;
                    let end = out.instrs.len() as u32;
                    out.instrs.push(Instr::LoopEnd {
                        start: start as u32,
                    });
                    out.instrs[start] = Instr::LoopStart { times: count, end };
                }
            }
        }
        Ok(())
    }

    fn unit(&self, name: &str, field: &str) -> Result<Unit, ParamError> {
        if let Some(u) = self.regions.get(name) {
            return Ok(*u);
        }
        match Unit::from_name(name) {
            Some(u @ (Unit::Scratch | Unit::Sram | Unit::Sdram)) => Ok(u),
            _ => Err(ParamError::new(
                field,
                format!("{name:?} is neither scratch, sram, sdram nor a region of [regions]"),
            )),
        }
    }

    fn bytes(&self, b: &Bytes, field: &str) -> Result<u32, ParamError> {
        let n = match b {
            Bytes::Fixed(n) => *n,
            Bytes::Named(s) if s == "packet" => self.packet_bytes,
            Bytes::Named(s) => {
                return Err(ParamError::new(
                    field,
                    format!("{s:?}: give a number or \"packet\""),
                ))
            }
        };
        if n == 0 || n > 65_536 {
            return Err(ParamError::new(field, "must be 1..=65536"));
        }
        Ok(n)
    }
}
