//! An in-memory port for benchmarks and tests: it replays frames held in memory and counts (or
//! captures) what it is given to send.

use std::collections::VecDeque;

use crate::{
    Batch, BufPool, Halves, PacketBuf, Port, PortCounters, PortError, Readiness, RxHalf, SplitPort,
    TxHalf,
};
use zl_core::Nanos;

/// Where a [`MemoryPort`]'s received frames come from.
#[derive(Debug)]
enum Source {
    /// Cycles through templates, `remaining` more frames (`u64::MAX`: without end); every
    /// frame is stamped with the `now` of the `recv` call, like a live port.
    Cycle {
        templates: Vec<Vec<u8>>,
        /// The templates padded to [`SHORT`] octets, when none is longer (else empty).
        short: Vec<ShortFrame>,
        /// The longest template's length.
        longest: usize,
        next: usize,
        remaining: u64,
    },
    /// Frames with their own timestamps, in order: a virtual-time port.
    Timed(VecDeque<(Nanos, Vec<u8>)>),
}

/// The longest template a [`ShortFrame`] holds: the minimum Ethernet frame.
const SHORT: usize = 64;

/// A template of at most [`SHORT`] octets, zero-padded to that: copied into a buffer as one
/// fixed-size copy, with no test of its length per frame (the tests would cost about 4
/// instructions a frame in the pipeline benchmark).
#[derive(Debug)]
struct ShortFrame {
    bytes: [u8; SHORT],
    len: u32,
}

impl ShortFrame {
    /// `frame` padded, if it is at most [`SHORT`] octets.
    fn new(frame: &[u8]) -> Option<ShortFrame> {
        let mut bytes = [0; SHORT];
        bytes.get_mut(..frame.len())?.copy_from_slice(frame);
        Some(ShortFrame {
            bytes,
            len: frame.len() as u32,
        })
    }
}

/// Fills `bufs` with `templates` from index `i` on, cycling, as many runs as it wraps around
/// them: one bounds check and one wrap per run, not per frame. `i` is below the
/// templates' count (at least one where `bufs` is not empty), so no run is empty. Returns the
/// index that comes next.
#[inline(always)]
fn fill_in_runs<T>(
    mut bufs: &mut [PacketBuf],
    templates: &[T],
    mut i: usize,
    mut fill: impl FnMut(&mut PacketBuf, &T),
) -> usize {
    while !bufs.is_empty() {
        let run = &templates[i..];
        let k = run.len().min(bufs.len());
        let (now, later) = std::mem::take(&mut bufs).split_at_mut(k);
        for (buf, frame) in now.iter_mut().zip(run) {
            fill(buf, frame);
        }
        bufs = later;
        i = if i + k >= templates.len() { 0 } else { i + k };
    }
    i
}

/// A port backed by memory. Receiving copies a stored frame into a pool buffer (the same work
/// a copy-mode NIC port does); sending counts the frame and, when capture is on, keeps a copy.
/// Its halves ([`SplitPort`]) are its source ([`MemoryRx`]) and its sink ([`MemoryTx`]).
#[derive(Debug)]
pub struct MemoryPort {
    rx: MemoryRx,
    tx: MemoryTx,
}

/// A memory port's receive half: its source.
#[derive(Debug)]
pub struct MemoryRx {
    name: String,
    index: u16,
    source: Source,
    counters: PortCounters,
}

/// A memory port's transmit half: its sink (and capture).
#[derive(Debug)]
pub struct MemoryTx {
    name: String,
    capture: Option<Vec<(Nanos, Vec<u8>)>>,
    counters: PortCounters,
}

impl MemoryPort {
    fn with_source(name: &str, index: u16, source: Source) -> Self {
        MemoryPort {
            rx: MemoryRx {
                name: name.to_owned(),
                index,
                source,
                counters: PortCounters::default(),
            },
            tx: MemoryTx {
                name: name.to_owned(),
                capture: None,
                counters: PortCounters::default(),
            },
        }
    }

    /// A live-like port that yields `count` frames cycling through `templates`
    /// (`u64::MAX` for an endless source). An empty template list yields nothing.
    pub fn cycling(name: &str, index: u16, templates: Vec<Vec<u8>>, count: u64) -> Self {
        let source = Source::Cycle {
            remaining: if templates.is_empty() { 0 } else { count },
            longest: templates.iter().map(Vec::len).max().unwrap_or(0),
            short: templates
                .iter()
                .map(|t| ShortFrame::new(t))
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default(),
            templates,
            next: 0,
        };
        MemoryPort::with_source(name, index, source)
    }

    /// A virtual-time port yielding `frames` at their timestamps (sorted here if needed).
    pub fn timed(name: &str, index: u16, mut frames: Vec<(Nanos, Vec<u8>)>) -> Self {
        frames.sort_by_key(|(t, _)| *t);
        MemoryPort::with_source(name, index, Source::Timed(frames.into()))
    }

    /// Keeps a copy of every transmitted frame with its send time (allocates per frame: for
    /// tests, not benchmarks).
    pub fn with_capture(mut self) -> Self {
        self.tx.capture = Some(Vec::new());
        self
    }

    /// The frames transmitted so far, when capture is on.
    pub fn captured(&self) -> &[(Nanos, Vec<u8>)] {
        self.tx.captured()
    }
}

impl Port for MemoryPort {
    fn name(&self) -> &str {
        &self.rx.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        self.rx.recv(now, pool, batch)
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        self.tx.send(now, batch, pool)
    }

    fn readiness(&self) -> Readiness {
        self.rx.readiness()
    }

    fn counters(&self) -> PortCounters {
        PortCounters::joined(&self.rx.counters, &self.tx.counters)
    }
}

impl SplitPort for MemoryPort {
    fn split(self: Box<Self>) -> Halves {
        Halves::one(Box::new(self.rx), Box::new(self.tx))
    }
}

impl MemoryTx {
    /// The frames sent (with their send times), when the port captures.
    pub fn captured(&self) -> &[(Nanos, Vec<u8>)] {
        self.capture.as_deref().unwrap_or(&[])
    }
}

/// What one receive burst of a [`MemoryRx`] came to, summed in registers and added to the
/// port's counters once.
#[derive(Default)]
struct RxCount {
    added: usize,
    bytes: u64,
    no_buffer: u64,
    too_long: u64,
}

impl RxCount {
    /// Copies `frame` into a buffer from `pool`, stamped `ts` and `index`, onto `batch`
    /// (whose room the caller keeps); a frame with no free buffer or too long for one is
    /// counted instead.
    #[inline(always)]
    fn take(&mut self, frame: &[u8], ts: Nanos, index: u16, pool: &mut BufPool, batch: &mut Batch) {
        let Some(mut buf) = pool.alloc() else {
            self.no_buffer += 1;
            return;
        };
        if buf.copy_from(frame).is_err() {
            pool.free(buf);
            self.too_long += 1;
            return;
        }
        buf.rx_time = ts;
        buf.in_port = index;
        // Cannot fail: the caller takes at most `room` frames.
        match batch.push(buf) {
            Ok(()) => {
                self.added += 1;
                self.bytes += frame.len() as u64;
            }
            Err(b) => pool.free(b),
        }
    }
}

impl MemoryRx {
    /// Adds a burst's counts to the port's counters, once per burst (a register sum, not a
    /// read-modify-write per frame); returns the frames taken.
    #[inline(always)]
    fn count(&mut self, rx: RxCount) -> usize {
        self.counters.rx_packets += rx.added as u64;
        self.counters.rx_bytes += rx.bytes;
        self.counters.rx_no_buffer += rx.no_buffer;
        self.counters.rx_too_long += rx.too_long;
        rx.added
    }
}

impl RxHalf for MemoryRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        // At most one burst of frames leaves the source per call, as a NIC ring hands over at
        // most its free descriptors: a frame that finds no buffer is a counted drop, and an
        // endless source with an empty pool cannot keep the call looping.
        let room = batch.room();
        let mut rx = RxCount::default();
        match &mut self.source {
            Source::Cycle {
                templates,
                short,
                longest,
                next,
                remaining,
            } => {
                // The burst's length is known up front: the source is counted down once, not
                // per frame (`remaining` is 0 when there are no templates).
                let take = usize::try_from(*remaining).map_or(room, |r| r.min(room));
                if *remaining != u64::MAX {
                    *remaining -= take as u64;
                }
                // The common case: the pool has a buffer for every frame and every template
                // fits one, so no frame is dropped and the buffers come in one go.
                let start = batch.len();
                if *longest <= pool.buf_size() && pool.alloc_batch_to_fill(take, batch) {
                    // The templates' slice and the port's index held in registers: read
                    // through `self` they would be loaded again for every frame, as the copies
                    // into the buffers might change them for all the compiler knows.
                    let templates: &[Vec<u8>] = templates;
                    let index = self.index;
                    // The burst's buffers zipped with the templates from `next` on (`take` is
                    // 0 without templates).
                    let bufs = &mut batch.iter_mut().into_slice()[start..];
                    let stamp = |buf: &mut PacketBuf| {
                        buf.rx_time = now;
                        buf.in_port = index;
                        // `alloc_batch_to_fill` left the tag of the buffer's last packet.
                        buf.tag = 0;
                    };
                    *next = if !short.is_empty() && pool.buf_size() >= SHORT {
                        fill_in_runs(bufs, short, *next, |buf, frame| {
                            buf.copy_from_padded(&frame.bytes, frame.len)
                                .expect("every buffer of this pool holds a short frame (checked)");
                            stamp(buf);
                            rx.bytes += u64::from(frame.len);
                        })
                    } else {
                        fill_in_runs(bufs, templates, *next, |buf, frame| {
                            buf.copy_from(frame)
                                .expect("every template fits a buffer of this pool (checked)");
                            stamp(buf);
                            rx.bytes += frame.len() as u64;
                        })
                    };
                    rx.added = take;
                    return Ok(self.count(rx));
                }
                for _ in 0..take {
                    let i = *next;
                    *next = if i + 1 == templates.len() { 0 } else { i + 1 };
                    rx.take(&templates[i], now, self.index, pool, batch);
                }
            }
            Source::Timed(q) => {
                for _ in 0..room {
                    if !matches!(q.front(), Some((t, _)) if *t <= now) {
                        break;
                    }
                    let Some((t, frame)) = q.pop_front() else {
                        break;
                    };
                    rx.take(&frame, t, self.index, pool, batch);
                }
            }
        }
        Ok(self.count(rx))
    }

    fn readiness(&self) -> Readiness {
        match &self.source {
            Source::Cycle { remaining: 0, .. } => Readiness::Exhausted,
            Source::Cycle { .. } => Readiness::Live,
            Source::Timed(q) => match q.front() {
                Some((t, _)) => Readiness::NextPacketAt(*t),
                None => Readiness::Exhausted,
            },
        }
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

impl TxHalf for MemoryTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        if let Some(cap) = &mut self.capture {
            cap.extend(batch.iter().map(|buf| (now, buf.as_slice().to_vec())));
        }
        Ok(self.counters.sink(batch, pool))
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst whose buffers come in one go (`BufPool::alloc_batch`) and one taken frame by
    /// frame (a pool short of buffers, a template too long) give the same frames, stamps and
    /// counts for what they take.
    #[test]
    fn whole_and_frame_by_frame_bursts_agree() {
        let templates = vec![vec![1; 60], vec![2; 70], vec![3; 64]];
        let burst = |pool: &mut BufPool, templates: Vec<Vec<u8>>| {
            let mut port = MemoryPort::cycling("m", 3, templates, 100);
            let mut batch = Batch::new();
            let n = port.recv(Nanos(5), pool, &mut batch).unwrap();
            let frames: Vec<(Vec<u8>, Nanos, u16, u32)> = (batch.iter())
                .map(|b| (b.as_slice().to_vec(), b.rx_time, b.in_port, b.tag))
                .collect();
            (n, frames, port.counters())
        };
        let (n, whole, c) = burst(&mut BufPool::new(64, 128), templates.clone());
        assert_eq!((n, c.rx_packets, c.rx_no_buffer), (32, 32, 0));
        assert_eq!(
            c.rx_bytes,
            whole.iter().map(|f| f.0.len() as u64).sum::<u64>()
        );
        for (i, f) in whole.iter().enumerate() {
            assert_eq!(f, &(templates[i % 3].clone(), Nanos(5), 3, 0), "frame {i}");
        }
        // Ten buffers: frame by frame, ten taken in the same order, 22 counted.
        let (n, short, c) = burst(&mut BufPool::new(10, 128), templates.clone());
        assert_eq!((n, c.rx_packets, c.rx_no_buffer), (10, 10, 22));
        assert_eq!(short[..], whole[..10]);
        // A template longer than a buffer: frame by frame, the others taken.
        let mut long = templates.clone();
        long[1] = vec![2; 200];
        let (n, rest, c) = burst(&mut BufPool::new(64, 128), long);
        assert_eq!((n, c.rx_too_long), (21, 11), "frames 1, 4, .., 31 too long");
        assert!(rest.iter().all(|f| f.0[0] != 2));
    }

    /// Templates of at most 64 octets (copied padded, `ShortFrame`) give the frames, stamps
    /// and byte count the general copy gives: in a pool of 64-octet or larger buffers, whose
    /// buffers held longer frames before, and in one of 62-octet buffers (the general copy).
    #[test]
    fn short_templates_are_copied_as_they_are() {
        let templates = vec![vec![1; 60], vec![2; 1], vec![3; 62], vec![], vec![5; 33]];
        for buf_size in [64, 128, 62] {
            let mut pool = BufPool::new(64, buf_size);
            let mut batch = Batch::new();
            let mut port = MemoryPort::cycling("m", 3, vec![vec![9; 62]], 32);
            port.recv(Nanos(1), &mut pool, &mut batch).unwrap();
            pool.free_batch(&mut batch);
            let mut port = MemoryPort::cycling("m", 3, templates.clone(), 100);
            assert_eq!(port.recv(Nanos(5), &mut pool, &mut batch).unwrap(), 32);
            for (i, b) in batch.iter().enumerate() {
                let want = (&templates[i % 5][..], Nanos(5), 3, 0);
                assert_eq!(
                    (b.as_slice(), b.rx_time, b.in_port, b.tag),
                    want,
                    "{buf_size}: frame {i}"
                );
            }
            let bytes: u64 = (0..32).map(|i| templates[i % 5].len() as u64).sum();
            assert_eq!(port.counters().rx_bytes, bytes, "{buf_size}");
            // The next burst goes on where this one stopped.
            pool.free_batch(&mut batch);
            port.recv(Nanos(6), &mut pool, &mut batch).unwrap();
            assert_eq!(batch.iter().next().unwrap().as_slice(), &templates[2][..]);
        }
    }

    #[test]
    fn cycling_port_yields_its_count_then_is_exhausted() {
        let mut pool = BufPool::new(64, 128);
        let mut port = MemoryPort::cycling("m", 3, vec![vec![1; 60], vec![2; 70]], 40);
        let mut batch = Batch::new();
        assert_eq!(port.recv(Nanos(5), &mut pool, &mut batch).unwrap(), 32);
        let lens: Vec<usize> = batch.iter().take(3).map(|b| b.len()).collect();
        assert_eq!(lens, vec![60, 70, 60]);
        assert!(batch
            .iter()
            .all(|b| b.in_port == 3 && b.rx_time == Nanos(5)));
        assert_eq!(port.send(Nanos(6), &mut batch, &mut pool).unwrap(), 32);
        assert_eq!(port.recv(Nanos(7), &mut pool, &mut batch).unwrap(), 8);
        assert_eq!(port.readiness(), Readiness::Exhausted);
        let c = port.counters();
        assert_eq!((c.rx_packets, c.tx_packets), (40, 32));
    }

    #[test]
    fn endless_source_with_an_empty_pool_drops_one_burst_and_returns() {
        let mut pool = BufPool::new(1, 128);
        let held = pool.alloc().unwrap();
        let mut port = MemoryPort::cycling("m", 0, vec![vec![1; 60]], u64::MAX);
        let mut batch = Batch::new();
        assert_eq!(port.recv(Nanos(1), &mut pool, &mut batch).unwrap(), 0);
        assert_eq!(port.counters().rx_no_buffer, batch.room() as u64);
        pool.free(held);
        assert_eq!(port.recv(Nanos(2), &mut pool, &mut batch).unwrap(), 1);
    }

    #[test]
    fn timed_port_releases_frames_at_their_time_and_counts_pool_exhaustion() {
        let mut pool = BufPool::new(1, 128);
        let frames = vec![(Nanos(10), vec![0; 60]), (Nanos(20), vec![0; 60])];
        let mut port = MemoryPort::timed("t", 0, frames).with_capture();
        let mut batch = Batch::new();
        assert_eq!(port.readiness(), Readiness::NextPacketAt(Nanos(10)));
        assert_eq!(port.recv(Nanos(9), &mut pool, &mut batch).unwrap(), 0);
        assert_eq!(port.recv(Nanos(25), &mut pool, &mut batch).unwrap(), 1);
        // The second frame found the pool empty: counted, not lost silently.
        assert_eq!(port.counters().rx_no_buffer, 1);
        assert_eq!(port.readiness(), Readiness::Exhausted);
        port.send(Nanos(30), &mut batch, &mut pool).unwrap();
        assert_eq!(port.captured().len(), 1);
        assert_eq!(pool.available(), 1);
    }
}
