//! Where the threaded router's workers run (`run.cpus`).
//!
//! A thread starts with its creator's CPU affinity. A DPDK EAL pins the thread that
//! initialises it (the main lcore) to the first core of `-l`, so without a placement every
//! worker the threaded router starts from that thread would share that one core. The router
//! binary therefore reads the CPUs the process may use before anything else
//! ([`allowed_cpus`]) and gives them to the workers ([`WorkerCpus::Any`]), or pins one
//! worker per CPU of `run.cpus` ([`WorkerCpus::Pinned`]).

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

use crate::error::{invalid, ConfigError};

/// CPU numbers `run.cpus` may name are below this (the kernel's `CPU_SETSIZE`).
pub const MAX_CPU: u32 = 1024;

/// Where [`crate::mt::MtRouter::run`] puts its workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum WorkerCpus {
    /// Wherever the thread that calls `run` may run (the threads inherit it).
    #[default]
    Inherit,
    /// Every worker may run on any of these CPUs.
    Any(Vec<usize>),
    /// Worker `i` on CPU `cpus[i mod len]` alone, counting the receive workers first, then
    /// the transmit workers (transmit worker 0 is the thread that calls `run`).
    Pinned(Vec<usize>),
}

impl WorkerCpus {
    /// The placement `run.cpus` asks for: pinned to its CPUs, each of which must be among
    /// `allowed` (the error names `run.cpus` and the CPUs allowed), or, when absent, any of
    /// `allowed`.
    pub fn from_config(cpus: Option<&[u32]>, allowed: &[usize]) -> Result<Self, ConfigError> {
        let Some(cpus) = cpus else {
            return Ok(WorkerCpus::Any(allowed.to_vec()));
        };
        if let Some(c) = cpus.iter().find(|&&c| !allowed.contains(&(c as usize))) {
            return Err(invalid(
                "run.cpus",
                c,
                format!("CPUs this process may run on ({})", format_list(allowed)),
            ));
        }
        Ok(WorkerCpus::Pinned(
            cpus.iter().map(|&c| c as usize).collect(),
        ))
    }

    /// The CPUs worker `slot` (receive workers first, then transmit workers) may run on;
    /// `None` for [`WorkerCpus::Inherit`].
    pub fn for_worker(&self, slot: usize) -> Option<Vec<usize>> {
        match self {
            WorkerCpus::Inherit => None,
            WorkerCpus::Any(cpus) => Some(cpus.clone()),
            WorkerCpus::Pinned(cpus) if cpus.is_empty() => None,
            WorkerCpus::Pinned(cpus) => Some(vec![cpus[slot % cpus.len()]]),
        }
    }

    /// Moves the calling thread, worker `slot`, to its CPUs. A failure is logged and the
    /// thread stays where it was (it still forwards, on its inherited CPUs).
    pub(crate) fn place(&self, slot: usize, name: &str) {
        if let Some(cpus) = self.for_worker(slot) {
            if let Err(e) = set_allowed_cpus(&cpus) {
                tracing::warn!(
                    "zlrouter: {name} stays on its inherited CPUs: cannot move it to CPU(s) {}: {e}",
                    format_list(&cpus)
                );
            }
        }
    }
}

/// The CPUs the calling thread may run on, in ascending order.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU.min(MAX_CPU as usize))
        .filter(|&c| set.is_set(c))
        .collect())
}

/// Lets the calling thread run on `cpus` (and no other CPU).
pub fn set_allowed_cpus(cpus: &[usize]) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        if c >= CpuSet::MAX_CPU {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("CPU {c} is beyond the largest CPU set"),
            ));
        }
        set.set(c);
    }
    Ok(sched_setaffinity(None, &set)?)
}

/// `0-3,6` for `[0, 1, 2, 3, 6]`.
fn format_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end += 1;
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_workers_cycle_over_the_list_and_any_gives_every_cpu() {
        let p = WorkerCpus::Pinned(vec![2, 5]);
        let got: Vec<_> = (0..5).map(|s| p.for_worker(s)).collect();
        assert_eq!(
            got,
            [
                Some(vec![2]),
                Some(vec![5]),
                Some(vec![2]),
                Some(vec![5]),
                Some(vec![2])
            ]
        );
        assert_eq!(WorkerCpus::Any(vec![0, 1]).for_worker(7), Some(vec![0, 1]));
        assert_eq!(WorkerCpus::Inherit.for_worker(0), None);
    }

    #[test]
    fn a_cpu_the_process_may_not_use_is_refused_naming_run_cpus() {
        let e = WorkerCpus::from_config(Some(&[0, 9]), &[0, 1, 2, 3, 6])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("run.cpus") && e.contains('9') && e.contains("0-3,6"),
            "{e}"
        );
        assert_eq!(
            WorkerCpus::from_config(Some(&[1, 0]), &[0, 1]).unwrap(),
            WorkerCpus::Pinned(vec![1, 0])
        );
        assert_eq!(
            WorkerCpus::from_config(None, &[0, 1]).unwrap(),
            WorkerCpus::Any(vec![0, 1])
        );
    }

    #[test]
    fn a_thread_moved_to_one_cpu_runs_only_there_and_moves_back() {
        let all = allowed_cpus().unwrap();
        assert!(!all.is_empty());
        let last = *all.last().unwrap();
        std::thread::spawn(move || {
            WorkerCpus::Pinned(vec![last]).place(0, "test thread");
            assert_eq!(allowed_cpus().unwrap(), [last]);
            WorkerCpus::Any(all.clone()).place(0, "test thread");
            assert_eq!(allowed_cpus().unwrap(), all);
        })
        .join()
        .unwrap();
    }
}
