//! Per-packet memory-operation counts of the Zombie List, obtained by running the list on a
//! synthetic trace (spec 01 §2 and §4; seed §5.2.3).
//!
//! The ZL-RED programs repeat their slot and table references as many times as these counts
//! say, so the simulated SRAM traffic follows the data structure's actual behaviour (hits,
//! overwrites, closed-hashing probe chains) rather than a guessed average.
//!
//! decided: the `zl-zombie` crate's counting entry point (`ZombieList::observe_counted`) had
//! not landed when this was written, so this module runs its own single-threaded copy of the
//! same algorithm, instrumented, and counts what a microengine would touch:
//! - SRED (spec 01 §2): a list of M slots; while not full an arrival appends (one slot
//!   write); once full it reads one random slot; a hit rewrites it (count+1, timestamp); a miss
//!   overwrites it with probability `p_swap` (one slot write).
//! - Occurrence table (§4): 2M entries, closed hashing (double hashing: the probe step comes
//!   from a second hash). Each packet looks up its own flow (to read F): one probe per entry
//!   read. A hit or an append rewrites one entry; a miss with overwrite also looks up the
//!   evicted flow and rewrites two entries. An entry whose F reaches 0 becomes a tombstone;
//!   the table is rebuilt off the fast path when live entries plus tombstones pass 3/4 of it
//!   (not counted: the control plane can do it).
//! - Scan (the naive O(M) contrast): F and T come from reading every occupied slot after the
//!   update; no table.
//! - None (SRED): slot operations only.

use crate::workload::{Counter, PacketCounts, ZombieSpec};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Empty,
    Tombstone,
    Live { flow: u64, f: u64 },
}

struct OccurrenceTable {
    entries: Vec<Entry>,
    live: usize,
    tombstones: usize,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64 finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl OccurrenceTable {
    fn new(cap: usize) -> Self {
        Self {
            entries: vec![Entry::Empty; cap.max(2)],
            live: 0,
            tombstones: 0,
        }
    }

    fn probe_seq(&self, flow: u64) -> (usize, usize) {
        let cap = self.entries.len();
        let h1 = (mix(flow) % cap as u64) as usize;
        let mut h2 = 1 + (mix(flow ^ 0x9e37_79b9_7f4a_7c15) % (cap as u64 - 1)) as usize;
        while gcd(h2, cap) != 1 {
            h2 = h2 % (cap - 1) + 1;
        }
        (h1, h2)
    }

    /// Finds `flow`: (its slot if present, the first reusable slot on the way, probes).
    fn find(&self, flow: u64) -> (Option<usize>, Option<usize>, u32) {
        let cap = self.entries.len();
        let (mut i, step) = self.probe_seq(flow);
        let mut free = None;
        for probes in 1..=cap as u32 {
            match self.entries[i] {
                Entry::Empty => return (None, free.or(Some(i)), probes),
                Entry::Tombstone => {
                    free.get_or_insert(i);
                }
                Entry::Live { flow: g, .. } if g == flow => return (Some(i), free, probes),
                Entry::Live { .. } => {}
            }
            i = (i + step) % cap;
        }
        (None, free, cap as u32)
    }

    /// Adds `delta` to F(flow) (removing the entry at 0); returns the probes used.
    fn add(&mut self, flow: u64, delta: i64) -> u32 {
        let (found, free, probes) = self.find(flow);
        match found {
            Some(i) => {
                if let Entry::Live { f, .. } = &mut self.entries[i] {
                    let nf = (*f as i64 + delta).max(0) as u64;
                    if nf == 0 {
                        self.entries[i] = Entry::Tombstone;
                        self.live -= 1;
                        self.tombstones += 1;
                    } else {
                        *f = nf;
                    }
                }
            }
            None if delta > 0 => {
                if let Some(i) = free {
                    if self.entries[i] == Entry::Tombstone {
                        self.tombstones -= 1;
                    }
                    self.entries[i] = Entry::Live {
                        flow,
                        f: delta as u64,
                    };
                    self.live += 1;
                }
            }
            None => {}
        }
        if (self.live + self.tombstones) * 4 > self.entries.len() * 3 {
            self.rebuild();
        }
        probes
    }

    fn rebuild(&mut self) {
        let cap = self.entries.len();
        let old = std::mem::replace(&mut self.entries, vec![Entry::Empty; cap]);
        self.live = 0;
        self.tombstones = 0;
        for e in old {
            if let Entry::Live { flow, f } = e {
                self.add(flow, f as i64);
            }
        }
    }
}

/// Runs the Zombie List of `spec` on a trace of `spec.flows` equal-rate flows and returns each
/// packet's counts. The spec must have been validated (`WorkloadSpec::compile`).
pub fn trace_counts(spec: &ZombieSpec) -> Vec<PacketCounts> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let flows: Vec<u64> = (0..spec.flows).map(|_| rng.random()).collect();
    let table_mode = spec.occurrence == "table";
    let scan_mode = spec.occurrence == "scan";
    let m = spec.m;
    let mut slots: Vec<(u64, u64)> = Vec::with_capacity(m);
    let mut table = OccurrenceTable::new(2 * m);
    let mut out = Vec::with_capacity(spec.trace_packets as usize);
    // decided: the counts describe the steady state, so the list is first filled and mixed
    // (M arrivals fill it, about M / p_swap more renew it) and those arrivals are not kept.
    let warmup = m + (m as f64 / spec.p_swap.max(0.05)).ceil() as usize;
    for n in 0..warmup + spec.trace_packets as usize {
        let flow = flows[rng.random_range(0..flows.len())];
        let mut c = [0u32; Counter::COUNT];
        let mut set = |k: Counter, v: u32| c[k.index()] += v;
        if slots.len() < m {
            slots.push((flow, 0));
            set(Counter::SlotWrites, 1);
            if table_mode {
                set(Counter::TableProbes, table.add(flow, 1));
                set(Counter::TableWrites, 1);
            }
        } else {
            let i = rng.random_range(0..m);
            set(Counter::SlotReads, 1);
            let (zflow, count) = slots[i];
            if zflow == flow {
                slots[i].1 += 1;
                set(Counter::Hit, 1);
                set(Counter::SlotWrites, 1);
                if table_mode {
                    set(Counter::TableProbes, table.add(flow, 1));
                    set(Counter::TableWrites, 1);
                }
            } else if rng.random_bool(spec.p_swap) {
                slots[i] = (flow, 0);
                set(Counter::SlotWrites, 1);
                set(Counter::Overwrites, 1);
                if table_mode {
                    set(Counter::TableProbes, table.add(zflow, -(count as i64 + 1)));
                    set(Counter::TableProbes, table.add(flow, 1));
                    set(Counter::TableWrites, 2);
                }
            } else if table_mode {
                // F of this flow is still needed for equation (5).
                set(Counter::TableProbes, table.find(flow).2);
            }
        }
        if scan_mode {
            set(Counter::ScanReads, slots.len() as u32);
        }
        if n >= warmup {
            out.push(PacketCounts(c));
        }
    }
    out
}

/// Mean of each counter over `counts`.
pub fn mean_counts(counts: &[PacketCounts]) -> [f64; Counter::COUNT] {
    let mut m = [0.0; Counter::COUNT];
    for c in counts {
        for (a, v) in m.iter_mut().zip(c.0) {
            *a += v as f64;
        }
    }
    if !counts.is_empty() {
        for a in &mut m {
            *a /= counts.len() as f64;
        }
    }
    m
}
