//! One class as the engine keeps it: its ring, meter, re-marking, counters, and its admission
//! ([`ClassAqm`]): FIFO policies deciding on the ring, or a discipline holding the class's
//! packets in queues of its own ([`Held`], whose path through the engine is `crate::held`'s).

use zl_aqm::{
    Admission, AqmPolicy, AqmStats, Discipline, PacketMeta, QueueDiscipline, Queued, Verdict,
};
use zl_core::{Color, Nanos};

use crate::meter::Meter;
use crate::queue::ClassQueue;
use crate::sizing::LiveSqrtN;
use crate::stats::ClassStats;

/// A discarded packet, handed back with the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Dropped<T> {
    /// Why: an early, forced or tail drop.
    pub verdict: Verdict,
    /// The caller's item, back to free or reuse.
    pub item: T,
}

/// A class's admission: one policy for every color, or one per color, each behind the common
/// bounds check and counters ([`Admission`]), deciding on the class's FIFO; or a discipline
/// holding the class's packets in queues of its own (`crate::held`).
// `Shared`, the common case, is read in place on every arrival (boxing it would add a pointer
// load per packet); the three per-color policies and the discipline are boxed.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ClassAqm<T> {
    Shared(Admission<AqmPolicy>),
    ByColor(Box<[Admission<AqmPolicy>; 3]>),
    Queues(Box<Held<T>>),
}

impl<T> ClassAqm<T> {
    pub(crate) fn stats_for(&self, c: Color) -> AqmStats {
        match self {
            ClassAqm::Shared(p) => *p.stats(),
            ClassAqm::ByColor(ps) => *ps[c.index()].stats(),
            ClassAqm::Queues(h) => h.stats,
        }
    }

    /// The FIFO policy deciding for color `c`. Only for a FIFO class: the engine sends a held
    /// class's arrivals down `crate::held` before it asks.
    #[inline]
    pub(crate) fn for_color(&mut self, c: Color) -> &mut Admission<AqmPolicy> {
        match self {
            ClassAqm::Shared(p) => p,
            ClassAqm::ByColor(ps) => &mut ps[c.index()],
            ClassAqm::Queues(_) => unreachable!("a held class has no FIFO policy"),
        }
    }

    /// A packet of color `c` left the class's FIFO (`queue` as it is after): the FIFO policy's
    /// dequeue hook. A held class's discipline saw its departure when it chose the packet.
    #[inline]
    pub(crate) fn on_dequeue(
        &mut self,
        c: Color,
        now: Nanos,
        queue: &zl_aqm::QueueView,
        meta: &PacketMeta,
    ) {
        match self {
            ClassAqm::Shared(p) => p.on_dequeue(now, queue, meta),
            ClassAqm::ByColor(ps) => ps[c.index()].on_dequeue(now, queue, meta),
            ClassAqm::Queues(_) => {}
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        matches!(self, ClassAqm::Queues(_))
    }

    /// What the FIFO policies read beyond the arrival, kept in the class so that the packet
    /// path tests one flag instead of matching every policy.
    pub(crate) fn needs(&self) -> FifoNeeds {
        let policies: &[Admission<AqmPolicy>] = match self {
            ClassAqm::Shared(p) => std::slice::from_ref(p),
            ClassAqm::ByColor(ps) => &ps[..],
            ClassAqm::Queues(_) => &[],
        };
        FifoNeeds {
            head_time: policies.iter().any(|p| p.policy().reads_head_time()),
            departures: policies.iter().any(|p| p.policy().reads_departures()),
        }
    }
}

impl<T> Class<T> {
    /// The next `go` packets of the class's FIFO are about to leave at `now`: its policy's
    /// departure hook for each, on the queue as it will be after that one left.
    ///
    /// decided: called before the run's pops, from the ring as it lies, rather than in the
    /// pop loop: any use of a popped entry beside the loop's own has the entry copied out of
    /// the ring for every class, a cost of about ten instructions per packet on the FIFO path
    /// for a hook only PIE has.
    #[cold]
    #[inline(never)]
    pub(crate) fn departures(&mut self, now: Nanos, go: u64) {
        let Class { queue, aqm, .. } = self;
        let mut view = queue.view();
        for i in 0..go as usize {
            let Some(meta) = queue.meta_at(i) else {
                break;
            };
            view.len_packets -= 1;
            view.len_bytes -= u64::from(meta.len);
            view.head_enqueued_at = queue.enqueued_at(i + 1);
            if view.len_packets == 0 {
                view.idle_since = Some(now);
            }
            aqm.on_dequeue(meta.color, now, &view, meta);
        }
    }
}

/// What a class's FIFO policies need of the engine ([`ClassAqm::needs`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FifoNeeds {
    /// The arrival's view carries the head's enqueue time (the sojourn manager, PIE's
    /// timestamp estimator).
    pub(crate) head_time: bool,
    /// Departures go to the policy's dequeue hook (PIE's rate estimator).
    pub(crate) departures: bool,
}

pub(crate) struct Class<T> {
    pub(crate) queue: ClassQueue<T>,
    pub(crate) meter: Option<Meter>,
    pub(crate) drop_red: bool,
    pub(crate) remark: Option<[u8; 3]>,
    pub(crate) aqm: ClassAqm<T>,
    pub(crate) needs: FifoNeeds,
    pub(crate) live: Option<LiveSqrtN>,
    pub(crate) stats: ClassStats,
}

/// Reads an item's source and destination host hashes (`QosEngine::set_host_reader`).
pub(crate) type HostReader<T> = fn(&T) -> (u16, u16);

/// The discipline of a class that holds its own queues.
pub(crate) struct Held<T> {
    pub(crate) disc: QueueDiscipline<T>,
    /// Packets are held but none may leave before this time (a rate-limited sub-queue).
    pub(crate) hold: Option<Nanos>,
    /// The arrivals' verdicts, as an `Admission` counts them for a FIFO policy.
    pub(crate) stats: AqmStats,
    /// The discipline reads the packets' hosts ([`QueueDiscipline::reads_hosts`]).
    reads_hosts: bool,
}

impl<T> Held<T> {
    pub(crate) fn new(disc: QueueDiscipline<T>) -> Self {
        Held {
            reads_hosts: disc.reads_hosts(),
            disc,
            hold: None,
            stats: AqmStats::default(),
        }
    }

    /// `meta` with its hosts read from `item` by `reader`, when the discipline reads them and
    /// the caller left them to the engine (0, as the data plane does; a caller that fills
    /// them sets no reader).
    pub(crate) fn with_hosts(
        &self,
        mut meta: PacketMeta,
        item: &T,
        reader: Option<HostReader<T>>,
    ) -> PacketMeta {
        if let (true, Some(read)) = (self.reads_hosts, reader) {
            (meta.src_host, meta.dst_host) = read(item);
        }
        meta
    }

    /// Moves a packet queued elsewhere (a reconfiguration's) into the discipline, its hosts
    /// read as for an arrival; hands it back when the discipline has no room.
    pub(crate) fn adopt(
        &mut self,
        q: Queued<T>,
        reader: Option<HostReader<T>>,
    ) -> Result<(), Queued<T>> {
        let meta = self.with_hosts(q.meta, &q.item, reader);
        self.disc.adopt(Queued { meta, ..q })
    }
}
