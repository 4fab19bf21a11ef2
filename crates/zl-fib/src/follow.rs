//! The control thread that keeps a [`FibHandle`] equal to the kernel's main table and
//! neighbour table, and resolves the next hops the data plane asks for.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// The running control thread; stopped and joined on drop.
#[derive(Debug)]
pub struct FibFollower {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FibFollower {
    /// Subscribes, dumps the kernel's routes and neighbours into `state`, publishes the first
    /// table (before returning, so the data plane starts with it), and follows on a thread.
    /// Runs in the calling thread's network namespace.
    pub fn start(
        mut state: FibState,
        resolve: Arc<ResolveQueue>,
    ) -> io::Result<(FibHandle, FibFollower)> {
        let mut follower = Follower::subscribe(Groups {
            routes: true,
            neighbours: true,
            // The interfaces' addresses: the source of the ICMP errors each port sends.
            addresses: true,
        })?;
        let mut rtnl = Rtnl::open()?;
        state.load(rtnl.dump_routes()?, rtnl.dump_neighbours()?);
        state.load_addresses(rtnl.dump_addresses()?);
        let handle = FibHandle::new(state.snapshot());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (handle, stop) = (handle.clone(), stop.clone());
            std::thread::Builder::new()
                .name("zlr-fib".into())
                .spawn(move || {
                    run(
                        &mut state,
                        &mut follower,
                        &mut rtnl,
                        &handle,
                        &resolve,
                        &stop,
                    )
                })?
        };
        Ok((
            handle,
            FibFollower {
                stop,
                thread: Some(thread),
            },
        ))
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

fn run(
    state: &mut FibState,
    follower: &mut Follower,
    rtnl: &mut Rtnl,
    handle: &FibHandle,
    resolve: &ResolveQueue,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let events = match follower.next(WAKE_EVERY) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("netlink route / neighbour events failed ({e}); the forwarding table stops following the kernel");
                return;
            }
        };
        let mut changed = false;
        for e in events {
            if e == KernelEvent::Resync {
                match rtnl
                    .dump_routes()
                    .and_then(|r| Ok((r, rtnl.dump_neighbours()?)))
                {
                    Ok((r, n)) => {
                        state.load(r, n);
                        changed = true;
                    }
                    Err(e) => tracing::warn!("re-reading routes after an overrun: {e}"),
                }
                match rtnl.dump_addresses() {
                    Ok(a) => {
                        state.load_addresses(a);
                        changed = true;
                    }
                    Err(e) => tracing::warn!("re-reading addresses after an overrun: {e}"),
                }
            } else {
                changed |= state.apply(e);
            }
        }
        if changed {
            handle.publish(state.snapshot());
        }
        while let Some((port, hop)) = resolve.queue.pop() {
            let Some(ifindex) = state.ifindex_of(port) else {
                continue;
            };
            if let Err(e) = rtnl.resolve_neighbour(ifindex, hop) {
                tracing::debug!("asking the kernel to resolve {hop} on port {port}: {e}");
            }
        }
    }
}
