//! zlrouter's forwarding table fed from the Linux kernel (`[routing] source = "kernel"`).
//!
//! Where it sits: between `zl-netlink` (the kernel's routes and neighbours as events) and the
//! data plane's poll loop. The flow:
//!
//! ```text
//!  kernel (ip route, BIRD/FRR, ARP/NDP, ip addr, ip link)
//!     | rtnetlink dump + RTM_NEWROUTE/DELROUTE/NEWNEIGH/DELNEIGH/NEWADDR/DELADDR/NEWLINK
//!     v
//!  control thread: FibState::apply per event (the prefix map updated in place)
//!     | what is queued coalesced; one Fib snapshot (a copy of the map) per batch
//!     | FibHandle::publish (an Arc swapped in, arc-swap: no lock for the reader)
//!     v
//!  poll loop: FibReader::refresh between polls, Fib::decide per packet
//!     | Decision::Resolve -> NeighbourWait::hold (bounded per next hop) + a resolve request
//!     v                       (lock-free ArrayQueue) back to the control thread
//! ```
//!
//! Contract:
//! - Following is linear in the number of changes: an event updates one prefix, and a
//!   snapshot is published once the event socket holds nothing more (or a change has waited
//!   20 ms in a burst), but no sooner than twice the last snapshot's build time after the
//!   last one (see `follow.rs`), so a million routes from a daemon are a few hundred
//!   snapshots, not a million. [`FollowStats`] says
//!   how many routes are held and how long the oldest unpublished change has waited.
//! - A [`Fib`] is immutable; the poll loop holds one for a whole poll and picks up the newest
//!   at one place ([`FibReader::refresh`]), so a packet is routed by one consistent table.
//! - [`Fib::decide`] is a longest-prefix match over kernel routes on zlrouter's ports and
//!   static routes (a static route wins over a kernel route for the same prefix), then a
//!   neighbour lookup of the next hop (the gateway, or the destination itself on a connected
//!   route); a static route's `next_hop_mac` overrides the neighbour table.
//! - A next hop without a MAC is [`Decision::Resolve`]: the caller holds at most
//!   `unres_qlen` packets for it in a [`NeighbourWait`], counts the rest as `no_neighbour`,
//!   and sends one resolve request; when a snapshot with the MAC arrives the held packets are
//!   released in order; those waiting longer than the wait's timeout are dropped as
//!   `no_neighbour`.
//!
//! decided: the prefix match is per-length hash maps probed from the longest length in use
//! (at most 33 / 129 probes, fewer in practice). It holds a full table and updates in O(1);
//! the full-table LPM of `zl-lpm` replaces it behind [`Fib::decide`] when it lands.
//!
//! # Layers
//!
//! Each module uses only those on the lines above it (`scripts/module-cycles` checks it):
//! `table` (the immutable table the forwarding threads read, and its publication); `state`
//! (the control thread's view of the kernel) and `wait` (packets waiting for a next hop's
//! MAC); `follow` (the thread that keeps the table equal to the kernel's).

#![warn(missing_docs)]

mod follow;
mod state;
mod table;
mod wait;

pub use follow::{FibFollower, FollowStats, ResolveQueue};
pub use state::{FibState, StaticRoute};
pub use table::{pick_source, Decision, Fib, FibHandle, FibReader};
pub use wait::{Hold, NeighbourWait};
