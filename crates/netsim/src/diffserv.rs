//! The Diffserv bottleneck of spec/05, assembled from `zl-qos` and `zl-aqm` as the router
//! assembles it: per class, a trTCM/srTCM meter (colors green/yellow/red), the class's AQM
//! policy (the sojourn manager or RED) in front of a bounded class queue, then a WRR (or DRR)
//! scheduler over the classes onto the one link.

use serde::{Deserialize, Serialize};
use zl_aqm::{Aqm, AqmParams, AqmPolicy, AqmStats, BuildContext, PacketMeta, Verdict};
use zl_core::Nanos;
use zl_qos::{Capacity, ClassQueue, Meter, MeterParams, SchedClass, SchedMode, Scheduler};

use crate::bottleneck::{Bottleneck, Dequeued, SimRng};
use crate::sim::SimError;

/// One class of the pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    pub name: String,
    /// WRR quantum (packets per round) or DRR quantum (bytes).
    pub quantum: u32,
    /// Class buffer, packets (default: the bottleneck's buffer).
    #[serde(default)]
    pub buffer_packets: Option<u32>,
    /// Three-color meter; none = every packet green.
    #[serde(default)]
    pub meter: Option<MeterParams>,
    #[serde(default)]
    pub aqm: AqmParams,
}

/// The classes and the scheduler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffservConfig {
    #[serde(default)]
    pub sched: SchedMode,
    pub classes: Vec<ClassConfig>,
}

struct Class {
    meter: Option<Meter>,
    aqm: AqmPolicy,
    queue: ClassQueue<u32>,
    overflow: u64,
}

/// Meter -> AQM -> class queue, per class; scheduler over classes.
pub struct DiffservBottleneck {
    classes: Vec<Class>,
    sched: Scheduler,
    len: u32,
    bytes: u64,
}

impl DiffservBottleneck {
    pub fn build(
        cfg: &DiffservConfig,
        rate_bps: f64,
        default_buffer: u32,
    ) -> Result<Self, SimError> {
        if cfg.classes.is_empty() {
            return Err(SimError::Invalid {
                key: "bottleneck.diffserv.classes".into(),
                reason: "at least one class is needed".into(),
            });
        }
        let mut classes = Vec::with_capacity(cfg.classes.len());
        let mut places = Vec::with_capacity(cfg.classes.len());
        for (i, c) in cfg.classes.iter().enumerate() {
            let key = |k: &str| format!("bottleneck.diffserv.classes[{i}].{k}");
            if c.quantum == 0 {
                return Err(SimError::Invalid {
                    key: key("quantum"),
                    reason: "must be >= 1".into(),
                });
            }
            let buf = c.buffer_packets.unwrap_or(default_buffer);
            if buf == 0 {
                return Err(SimError::Invalid {
                    key: key("buffer_packets"),
                    reason: "must be >= 1".into(),
                });
            }
            let meter = match &c.meter {
                None => None,
                Some(m) => Some(m.build().map_err(|e| SimError::Invalid {
                    key: key("meter"),
                    reason: e.to_string(),
                })?),
            };
            let aqm = c
                .aqm
                .build(&BuildContext::new(rate_bps as u64, buf))
                .map_err(|e| SimError::Invalid {
                    key: key(&format!("aqm.{}", e.param)),
                    reason: e.to_string(),
                })?;
            classes.push(Class {
                meter,
                aqm,
                queue: ClassQueue::new(
                    buf,
                    Capacity {
                        packets: buf,
                        bytes: u64::MAX,
                    },
                ),
                overflow: 0,
            });
            places.push(SchedClass::Weighted { quantum: c.quantum });
        }
        Ok(DiffservBottleneck {
            classes,
            sched: Scheduler::new(cfg.sched, &places),
            len: 0,
            bytes: 0,
        })
    }
}

impl Bottleneck for DiffservBottleneck {
    fn enqueue(
        &mut self,
        now: Nanos,
        rng: &mut SimRng,
        meta: &mut PacketMeta,
        class: u8,
        handle: u32,
    ) -> Verdict {
        let idx = (class as usize).min(self.classes.len() - 1);
        let c = &mut self.classes[idx];
        if let Some(m) = c.meter.as_mut() {
            meta.color = m.color(now, meta.len, meta.color);
        }
        let v = c.aqm.on_arrival(now, rng, &c.queue.view(), meta);
        if !v.admits() {
            return v;
        }
        match c.queue.push(now, *meta, handle) {
            Ok(()) => {
                self.len += 1;
                self.bytes += meta.len as u64;
                v
            }
            Err(_) => {
                c.overflow += 1;
                Verdict::TailDrop
            }
        }
    }

    fn dequeue(&mut self, now: Nanos) -> Option<Dequeued> {
        let classes = &self.classes;
        let idx = self.sched.peek(|i| classes[i].queue.head_len())?;
        let c = &mut self.classes[idx];
        let q = c.queue.pop(now)?;
        self.sched.commit(idx, q.meta.len, c.queue.is_empty());
        c.aqm.on_dequeue(now, &c.queue.view(), &q.meta);
        self.len -= 1;
        self.bytes -= q.meta.len as u64;
        Some(Dequeued {
            handle: q.item,
            enqueued_at: q.enqueued_at,
        })
    }

    fn len_packets(&self) -> u32 {
        self.len
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn class_len(&self, class: u8) -> u32 {
        self.classes
            .get(class as usize)
            .map_or(0, |c| c.queue.len())
    }

    fn stats(&self) -> AqmStats {
        let mut s = AqmStats::default();
        for c in &self.classes {
            let a = c.aqm.stats();
            s.enqueued += a.enqueued - c.overflow.min(a.enqueued);
            s.marked += a.marked;
            s.early_drops += a.early_drops;
            s.forced_drops += a.forced_drops;
            s.tail_drops += a.tail_drops + c.overflow;
        }
        s
    }

    fn capacity_packets(&self) -> u32 {
        self.classes
            .iter()
            .map(|c| c.queue.capacity().packets)
            .sum()
    }
}
