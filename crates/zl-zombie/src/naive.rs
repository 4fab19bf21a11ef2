//! The sequential Zombie List with O(M) scans for F and T: the paper's rejected baseline and
//! the oracle the lock-free [`crate::ZombieList`] is tested against (same seed, same
//! decisions, same F, T and P(t)).

use rand::RngCore;
use zl_core::{FlowId, Nanos};

use crate::draw;
use crate::list::Zombie;
use crate::{Observation, ZombieConfig};

/// Sequential Zombie List; `&mut self`, F and T by scanning all zombies.
#[derive(Clone, Debug)]
pub struct NaiveZombieList {
    cfg: ZombieConfig,
    zombies: Vec<Zombie>,
    p: f64,
}

impl NaiveZombieList {
    /// An empty list (`P(0) = 0`).
    pub fn new(cfg: ZombieConfig) -> Self {
        NaiveZombieList {
            cfg,
            zombies: Vec::with_capacity(cfg.m()),
            p: 0.0,
        }
    }

    /// SRED steps 1-3 for one arrival of `flow`, then F and T by scanning.
    pub fn observe<R: RngCore + ?Sized>(
        &mut self,
        flow: FlowId,
        now: Nanos,
        rng: &mut R,
    ) -> Observation {
        let hit = if self.zombies.len() < self.cfg.m() {
            self.zombies.push(Zombie {
                flow,
                count: 0,
                stamp: now,
            });
            false
        } else {
            let i = draw::zombie_index(rng, self.cfg.m());
            let z = &mut self.zombies[i];
            if z.flow == flow {
                z.count = (z.count + 1).min(self.cfg.count_cap());
                z.stamp = now;
                true
            } else {
                if draw::swap(rng, self.cfg.swap_below()) {
                    *z = Zombie {
                        flow,
                        count: 0,
                        stamp: now,
                    };
                }
                false
            }
        };
        self.p = draw::ewma(self.p, self.cfg.alpha(), hit);
        Observation {
            hit,
            p: self.p,
            occurrence: self.occurrence(flow),
            total: self.total_occurrence(),
        }
    }

    /// P(t).
    pub fn hit_frequency(&self) -> f64 {
        self.p
    }

    /// 1/P(t), the SRED estimate of the number of active flows; infinite while P = 0.
    pub fn estimated_flows(&self) -> f64 {
        if self.p > 0.0 {
            1.0 / self.p
        } else {
            f64::INFINITY
        }
    }

    /// T = sum over zombies of (count + 1), by scanning.
    pub fn total_occurrence(&self) -> u64 {
        self.zombies.iter().map(|z| z.count + 1).sum()
    }

    /// F(flow) = sum over zombies of `flow` of (count + 1), by scanning.
    pub fn occurrence(&self, flow: FlowId) -> u64 {
        self.zombies
            .iter()
            .filter(|z| z.flow == flow)
            .map(|z| z.count + 1)
            .sum()
    }

    /// The zombies in slot order.
    pub fn zombies(&self) -> &[Zombie] {
        &self.zombies
    }

    /// The configuration the list was built with.
    pub fn config(&self) -> &ZombieConfig {
        &self.cfg
    }
}
