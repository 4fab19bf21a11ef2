//! Passive observers of the bottleneck's arrivals, traced over time.

use std::sync::Arc;

use zl_core::{FlowId, Nanos};
use zl_zombie::ZombieList;

use crate::bottleneck::SimRng;
use crate::sim::Probe;

/// A Zombie List (zl-zombie, the same one SRED and ZL-RED use) fed every arrival; its value is
/// the flow-count estimate 1/P(t) (figure 2 of the ZL-RED paper, docs/algorithms/zombie-list.md).
///
/// When the bottleneck's own SRED / ZL-RED policy shares the list, the probe only reads it
/// ([`ZombieProbe::passive`]): the policy already shows it every arrival.
pub struct ZombieProbe {
    list: Arc<ZombieList>,
    observe: bool,
}

impl ZombieProbe {
    /// A probe that feeds `list` every arrival.
    pub fn new(list: Arc<ZombieList>) -> Self {
        ZombieProbe {
            list,
            observe: true,
        }
    }

    /// A probe that only reads `list`, which something else feeds.
    pub fn passive(list: Arc<ZombieList>) -> Self {
        ZombieProbe {
            list,
            observe: false,
        }
    }
}

impl Probe for ZombieProbe {
    fn on_arrival(&mut self, now: Nanos, _queue_len: u32, flow: FlowId, rng: &mut SimRng) {
        if self.observe {
            self.list.observe(flow, now, rng);
        }
    }

    fn value(&self) -> f64 {
        self.list.estimated_flows()
    }
}

/// RED's average queue, eq. (1) of docs/algorithms/nonlinear-red.md (`avg <- (1 - w_q) avg + w_q q`
/// at each arrival), without the idle-time decay: the quantity the nonlinear-RED paper plots
/// against its model.
pub struct EwmaProbe {
    w_q: f64,
    avg: f64,
}

impl EwmaProbe {
    pub fn new(w_q: f64) -> Self {
        EwmaProbe { w_q, avg: 0.0 }
    }
}

impl Probe for EwmaProbe {
    fn on_arrival(&mut self, _now: Nanos, queue_len: u32, _flow: FlowId, _rng: &mut SimRng) {
        self.avg = (1.0 - self.w_q) * self.avg + self.w_q * queue_len as f64;
    }

    fn value(&self) -> f64 {
        self.avg
    }
}
