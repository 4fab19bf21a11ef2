//! The control thread that keeps a [`FibHandle`] equal to the kernel's main table and
//! neighbour table, and resolves the next hops the data plane asks for.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use zl_netlink::{Follower, Groups, KernelEvent, Rtnl};

use crate::state::FibState;
use crate::table::FibHandle;

/// The data plane's requests to resolve a next hop: (port, address). Pushing never blocks;
/// a full queue drops the request (the next packet for that hop asks again).
#[derive(Debug)]
pub struct ResolveQueue {
    queue: ArrayQueue<(u16, IpAddr)>,
    /// Requests refused because the queue was full.
    pub refused: AtomicU64,
}

impl ResolveQueue {
    /// A queue holding at most `capacity` pending requests (at least one).
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(ResolveQueue {
            queue: ArrayQueue::new(capacity.max(1)),
            refused: AtomicU64::new(0),
        })
    }

    /// Asks for `next_hop` on `port` to be resolved (wait-free).
    pub fn request(&self, port: u16, next_hop: IpAddr) {
        if self.queue.push((port, next_hop)).is_err() {
            // Relaxed: a statistic, read after the run.
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How long the thread waits for an event before looking at the resolve queue: the delay a
/// resolve request can see at worst.
const WAKE_EVERY: Duration = Duration::from_millis(10);

/// decided: a change is published as soon as the event socket holds nothing more (one `ip
/// route add` reaches the data plane within the poll that follows), and during a burst that
/// keeps the socket full (a daemon installing a table, `ip -batch`) at least this often, so
/// that the routes installed so far are forwarded while the rest arrive.
const MAX_HOLD: Duration = Duration::from_millis(20);

/// decided: between two publications the thread spends at least twice as long applying
/// events as the last snapshot took to build, so that while a burst lasts, building is at
/// most a third of the thread's time and following N routes stays O(N) (a snapshot of a
/// million routes is a copy of some 50 MB; one per datagram made the follow quadratic). The
/// lag after a burst ends is then at most about three builds.
const BUILD_SHARE: u32 = 2;

/// What the follower has done, for the metrics (`zlrouter_fib_*`). Read at any time.
#[derive(Debug, Default)]
pub struct FollowStats {
    routes: AtomicU64,
    events: AtomicU64,
    publishes: AtomicU64,
    resyncs: AtomicU64,
    /// Nanoseconds since `epoch` of the oldest change not yet published; 0 when none waits.
    pending_since_ns: AtomicU64,
    last_build_ns: AtomicU64,
    epoch: OnceInstant,
}

/// An `Instant` fixed at the stats' creation (`Default` for the struct above).
#[derive(Debug)]
struct OnceInstant(Instant);

impl Default for OnceInstant {
    fn default() -> Self {
        OnceInstant(Instant::now())
    }
}

impl FollowStats {
    /// Prefixes in the published table.
    pub fn routes(&self) -> u64 {
        self.routes.load(Ordering::Relaxed)
    }

    /// Kernel events applied (routes, neighbours, addresses, links).
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Tables published.
    pub fn publishes(&self) -> u64 {
        self.publishes.load(Ordering::Relaxed)
    }

    /// Times the event socket overran and the tables were dumped again.
    pub fn resyncs(&self) -> u64 {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// How long the oldest change the follower has read but not yet published has waited:
    /// how far the data plane's table lags the kernel's (zero when they agree).
    pub fn lag(&self) -> Duration {
        match self.pending_since_ns.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            since => {
                let now = self.epoch.0.elapsed().as_nanos() as u64;
                Duration::from_nanos(now.saturating_sub(since))
            }
        }
    }

    /// How long the last table took to build.
    pub fn last_build(&self) -> Duration {
        Duration::from_nanos(self.last_build_ns.load(Ordering::Relaxed))
    }

    fn since_epoch(&self, t: Instant) -> u64 {
        // At least 1: 0 means "nothing pending".
        (t.saturating_duration_since(self.epoch.0).as_nanos() as u64).max(1)
    }
}

/// The running control thread; stopped and joined on drop.
#[derive(Debug)]
pub struct FibFollower {
    stop: Arc<AtomicBool>,
    stats: Arc<FollowStats>,
    thread: Option<JoinHandle<()>>,
}

impl FibFollower {
    /// Subscribes, dumps the kernel's routes, neighbours, addresses and links into `state`,
    /// publishes the first table (before returning, so the data plane starts with it), and
    /// follows on a thread. Runs in the calling thread's network namespace.
    pub fn start(
        mut state: FibState,
        resolve: Arc<ResolveQueue>,
    ) -> io::Result<(FibHandle, FibFollower)> {
        let mut follower = Follower::subscribe(Groups {
            routes: true,
            neighbours: true,
            // The interfaces' addresses: the source of the ICMP errors each port sends.
            addresses: true,
            // The interfaces' MTUs: Fragmentation Needed follows `ip link set X mtu N`.
            links: true,
        })?;
        let mut rtnl = Rtnl::open()?;
        dump_all(&mut state, &mut rtnl)?;
        let stats = Arc::new(FollowStats::default());
        let handle = FibHandle::new(state.snapshot());
        stats
            .routes
            .store(state.route_count() as u64, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (handle, stop, stats) = (handle.clone(), stop.clone(), stats.clone());
            std::thread::Builder::new()
                .name("zlr-fib".into())
                .spawn(move || {
                    Run {
                        state: &mut state,
                        follower: &mut follower,
                        rtnl: &mut rtnl,
                        handle: &handle,
                        resolve: &resolve,
                        stats: &stats,
                    }
                    .run(&stop)
                })?
        };
        Ok((
            handle,
            FibFollower {
                stop,
                stats,
                thread: Some(thread),
            },
        ))
    }

    /// The follower's counters and lag.
    pub fn stats(&self) -> &FollowStats {
        &self.stats
    }
}

impl Drop for FibFollower {
    fn drop(&mut self) {
        // Relaxed: the flag carries no data; the join orders everything after.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every table the state follows, from one dump each.
fn dump_all(state: &mut FibState, rtnl: &mut Rtnl) -> io::Result<()> {
    state.load(rtnl.dump_routes()?, rtnl.dump_neighbours()?);
    state.load_addresses(rtnl.dump_addresses()?);
    state.load_links(rtnl.dump_links()?);
    Ok(())
}

struct Run<'a> {
    state: &'a mut FibState,
    follower: &'a mut Follower,
    rtnl: &'a mut Rtnl,
    handle: &'a FibHandle,
    resolve: &'a ResolveQueue,
    stats: &'a FollowStats,
}

impl Run<'_> {
    fn run(&mut self, stop: &AtomicBool) {
        // The oldest change not yet published, and when the next publication may start.
        let mut pending: Option<Instant> = None;
        let mut not_before = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            // With a change pending and allowed out: only what is queued already.
            let wait = match pending {
                None => WAKE_EVERY,
                Some(_) => not_before.saturating_duration_since(now).min(WAKE_EVERY),
            };
            let events = match self.follower.next(wait) {
                Ok(e) => e,
                Err(e) => {
                    tracing::error!("netlink route / neighbour events failed ({e}); the forwarding table stops following the kernel");
                    return;
                }
            };
            let drained = events.is_empty();
            if self.apply(events) && pending.is_none() {
                let now = Instant::now();
                pending = Some(now);
                self.stats
                    .pending_since_ns
                    .store(self.stats.since_epoch(now), Ordering::Relaxed);
            }
            if let Some(since) = pending {
                let now = Instant::now();
                if now >= not_before && (drained || now - since >= MAX_HOLD) {
                    let fib = self.state.snapshot();
                    self.handle.publish(fib);
                    let built = now.elapsed();
                    not_before = Instant::now() + built * BUILD_SHARE;
                    pending = None;
                    // Relaxed: statistics, each read on its own.
                    let s = self.stats;
                    s.pending_since_ns.store(0, Ordering::Relaxed);
                    s.last_build_ns
                        .store(built.as_nanos() as u64, Ordering::Relaxed);
                    s.routes
                        .store(self.state.route_count() as u64, Ordering::Relaxed);
                    s.publishes.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.resolve_requested();
        }
    }

    /// Applies one datagram's events; true when the table may have changed.
    fn apply(&mut self, events: Vec<KernelEvent>) -> bool {
        let mut changed = false;
        for e in events {
            self.stats.events.fetch_add(1, Ordering::Relaxed);
            if e == KernelEvent::Resync {
                self.stats.resyncs.fetch_add(1, Ordering::Relaxed);
                match dump_all(self.state, self.rtnl) {
                    Ok(()) => changed = true,
                    Err(e) => {
                        tracing::warn!("re-reading the kernel's tables after an overrun: {e}")
                    }
                }
            } else {
                changed |= self.state.apply(e);
            }
        }
        changed
    }

    fn resolve_requested(&mut self) {
        while let Some((port, hop)) = self.resolve.queue.pop() {
            let Some(ifindex) = self.state.ifindex_of(port) else {
                continue;
            };
            if let Err(e) = self.rtnl.resolve_neighbour(ifindex, hop) {
                tracing::debug!("asking the kernel to resolve {hop} on port {port}: {e}");
            }
        }
    }
}
