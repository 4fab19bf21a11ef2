//! The reject step of both engines: a packet forwarding dropped is counted by its cause and,
//! when an ICMP error about it is due (`crate::icmp`), rewritten into that error in place.
//! Each engine then delivers the error its own way (the single-thread loop through the
//! ingress port's `Egress::originate`, a receive worker through that port's ring) or
//! recycles the buffer.

use zl_core::Nanos;
use zl_port::PacketBuf;
use zl_wire::PacketInfo;

use crate::fates::Fates;
use crate::forward::Forwarder;
use crate::icmp::{IcmpKind, IcmpSender};
use crate::stats::DropCause;

/// Counts `buf` dropped for `cause` (`info`: its headers, when they parsed) and returns the
/// kind of ICMP error now written over it, bound for `buf.out_port`; `None`: nothing is
/// due, `buf` is unchanged (free it).
#[cold]
pub(crate) fn reject(
    forwarder: &Forwarder,
    icmp: &mut IcmpSender,
    fates: &mut Fates,
    now: Nanos,
    buf: &mut PacketBuf,
    info: Option<&PacketInfo>,
    cause: DropCause,
) -> Option<IcmpKind> {
    fates.dropped(buf, cause);
    forwarder.icmp_error(icmp, &mut fates.icmp, now, buf, info, cause)
}
