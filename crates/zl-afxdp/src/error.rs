//! Errors of the AF_XDP port, and the one place that turns an errno into advice.

use std::fmt;
use std::io;

/// The operation that failed, named in every error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    CreateSocket,
    MapUmem,
    RegisterUmem,
    SetupRings,
    MapRings,
    Bind,
    CreateXskMap,
    LoadProgram,
    AttachProgram,
    RegisterSocket,
    Receive,
    Transmit,
    ReadStatistics,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::CreateSocket => "socket(AF_XDP)",
            Op::MapUmem => "mmap of the UMEM area",
            Op::RegisterUmem => "setsockopt(XDP_UMEM_REG)",
            Op::SetupRings => "ring setup (setsockopt XDP_*_RING)",
            Op::MapRings => "mmap of the XSK rings",
            Op::Bind => "bind of the XSK socket",
            Op::CreateXskMap => "bpf(BPF_MAP_CREATE, XSKMAP)",
            Op::LoadProgram => "bpf(BPF_PROG_LOAD, XDP)",
            Op::AttachProgram => "bpf(BPF_LINK_CREATE, BPF_XDP)",
            Op::RegisterSocket => "bpf(BPF_MAP_UPDATE_ELEM) of the socket into the XSKMAP",
            Op::Receive => "receive",
            Op::Transmit => "transmit wakeup (sendto)",
            Op::ReadStatistics => "getsockopt(XDP_STATISTICS)",
        })
    }
}

/// Everything that can go wrong opening or running an AF_XDP port.
#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    #[error("invalid AF_XDP config for `{ifname}`: {reason}")]
    Config { ifname: String, reason: String },

    #[error(
        "no interface named `{ifname}` in this network namespace (if_nametoindex failed); \
         check `ip link show` and that the router runs in the namespace that owns it"
    )]
    InterfaceNotFound { ifname: String },

    #[error(
        "{op} on `{ifname}` was refused ({source}): AF_XDP needs CAP_NET_ADMIN, CAP_NET_RAW \
         and CAP_BPF (CAP_SYS_ADMIN before Linux 5.8); run as root or grant them with \
         `setcap cap_net_admin,cap_net_raw,cap_bpf+ep <binary>`"
    )]
    PermissionDenied {
        op: Op,
        ifname: String,
        #[source]
        source: io::Error,
    },

    #[error("{op} on `{ifname}`: {mode} is not supported here ({source}); {hint}")]
    ModeUnsupported {
        op: Op,
        ifname: String,
        mode: &'static str,
        hint: &'static str,
        #[source]
        source: io::Error,
    },

    /// EBUSY / EEXIST at attach or bind: the interface already has an XDP program, or the
    /// queue an AF_XDP socket. [`crate::AfXdpPort::open`] retries for [`crate::BUSY_RETRY_FOR`]
    /// first (`waited`), since the kernel releases a killed process's socket asynchronously.
    #[error("{}", busy_text(*.op, .ifname, *.queue, *.waited, .source))]
    Busy {
        op: Op,
        ifname: String,
        /// The queue of a refused bind.
        queue: Option<u32>,
        /// How long the open retried before giving up (`None`: not retried).
        waited: Option<std::time::Duration>,
        #[source]
        source: io::Error,
    },

    #[error("the kernel verifier rejected the XDP redirect program ({source}): {log}")]
    ProgramRejected {
        log: String,
        #[source]
        source: io::Error,
    },

    #[error(
        "{op} on `{ifname}`: the kernel would not pin the UMEM ({source}); it is locked memory, \
         charged to RLIMIT_MEMLOCK (`ulimit -l`) unless the process has CAP_IPC_LOCK: grant \
         CAP_IPC_LOCK or raise the limit (systemd: `LimitMEMLOCK=infinity`; see \
         packaging/zlrouter.service)"
    )]
    UmemNotPinned {
        op: Op,
        ifname: String,
        #[source]
        source: io::Error,
    },

    #[error("interface `{ifname}` is gone ({detail}); the port cannot be used any more")]
    InterfaceGone { ifname: String, detail: String },

    #[error("{op} on `{ifname}` failed: {source}")]
    Sys {
        op: Op,
        ifname: String,
        #[source]
        source: io::Error,
    },
}

/// The message of [`AfXdpError::Busy`]: what holds the interface or queue, how to see it and
/// what removes it.
///
/// decided: the advice follows how programs are attached. zlrouter attaches its own through a
/// BPF link (`bpf.rs`), which only its owner closing it removes (the process ending, or
/// `bpftool link detach`); `ip link set dev X xdp off` detaches only a program attached
/// through netlink, returns 0 without touching a link (it even targets the driver mode,
/// leaving a generic program alone), so it is named for that case only.
fn busy_text(
    op: Op,
    ifname: &str,
    queue: Option<u32>,
    waited: Option<std::time::Duration>,
    source: &io::Error,
) -> String {
    let after = match waited {
        Some(w) => format!(", still after retrying for {:.1} s", w.as_secs_f64()),
        None => String::new(),
    };
    let ifname = ifname.to_owned();
    if op == Op::Bind {
        let queue = queue.map_or_else(|| "the queue".to_owned(), |q| format!("queue {q}"));
        format!(
            "{op} on `{ifname}` was refused ({source}{after}): {queue} of `{ifname}` already \
             has an AF_XDP socket bound to it, held by another process (a socket of a process \
             that was just killed is released by the kernel within moments, which this start \
             waited for); stop the process that holds it, or use another queue (`queues` of \
             the port)"
        )
    } else {
        format!(
            "{op} on `{ifname}` was refused ({source}{after}): another XDP program is attached \
             to `{ifname}` (`ip link show dev {ifname}` shows `xdp`, `xdpgeneric` or `xdpdrv` \
             with its `prog/xdp id`; zlrouter's own is named `zlr_xdp`). If it was attached \
             through a BPF link, as zlrouter attaches its own (`bpftool link show` lists the \
             link and the pid that holds it), it goes only when that process ends or the \
             link is detached (`bpftool link detach id <link id>`); `ip link set dev \
             {ifname} xdpgeneric off` (or `xdpdrv off`, the mode `ip link` shows) removes only \
             a program attached through netlink (`ip link`, libbpf's `bpf_xdp_attach`) and \
             does nothing to a link"
        )
    }
}

/// What the failing call was asked to do, so an EINVAL / EOPNOTSUPP can name the mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeContext {
    /// Nothing mode-specific.
    None,
    /// Attaching in generic (SKB) XDP mode.
    GenericXdp,
    /// Attaching in native (driver) XDP mode.
    NativeXdp,
    /// Binding with XDP_COPY.
    CopyBind,
    /// Binding with XDP_ZEROCOPY.
    ZeroCopyBind,
}

/// Maps a failed system call to the error a user can act on.
///
/// Decided: EINVAL at attach or bind is read as "mode unsupported" (what it means for a driver
/// without native XDP or an XSK pool), with the queue id named in the hint since a queue
/// beyond the channel count gives the same errno.
pub fn classify(op: Op, ifname: &str, mode: ModeContext, err: io::Error) -> AfXdpError {
    let ifname = ifname.to_owned();
    let errno = err.raw_os_error().unwrap_or(0);
    match errno {
        libc::EPERM | libc::EACCES => AfXdpError::PermissionDenied {
            op,
            ifname,
            source: err,
        },
        libc::ENOBUFS | libc::ENOMEM if op == Op::RegisterUmem => AfXdpError::UmemNotPinned {
            op,
            ifname: ifname.to_owned(),
            source: err,
        },
        libc::ENODEV if matches!(op, Op::Bind | Op::AttachProgram) => {
            AfXdpError::InterfaceNotFound { ifname }
        }
        libc::ENXIO if matches!(op, Op::Receive | Op::Transmit) => AfXdpError::InterfaceGone {
            ifname,
            detail: format!("{op}: socket unbound by the kernel ({err})"),
        },
        libc::EBUSY | libc::EEXIST if matches!(op, Op::Bind | Op::AttachProgram) => {
            AfXdpError::Busy {
                op,
                ifname,
                queue: None,
                waited: None,
                source: err,
            }
        }
        libc::EOPNOTSUPP | libc::EINVAL if mode != ModeContext::None => {
            let (mode, hint) = match mode {
                ModeContext::NativeXdp => (
                    "native (driver) XDP",
                    "the driver has no native XDP support: set xdp_mode = \"generic\"",
                ),
                ModeContext::GenericXdp => (
                    "generic (SKB) XDP",
                    "the kernel lacks generic XDP or XDP links (needs Linux >= 5.9)",
                ),
                ModeContext::ZeroCopyBind => (
                    "zero-copy AF_XDP",
                    "the driver has no AF_XDP zero-copy support (veth never has): set \
                     bind_mode = \"copy\", or check the queue id against `ethtool -l`",
                ),
                ModeContext::CopyBind | ModeContext::None => (
                    "copy-mode AF_XDP",
                    "check that the queue id exists (`ethtool -l`) and the MTU fits the frame \
                     size",
                ),
            };
            AfXdpError::ModeUnsupported {
                op,
                ifname,
                mode,
                hint,
                source: err,
            }
        }
        _ => AfXdpError::Sys {
            op,
            ifname,
            source: err,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(errno: i32) -> io::Error {
        io::Error::from_raw_os_error(errno)
    }

    #[test]
    fn eperm_says_which_capabilities() {
        let err = classify(Op::CreateSocket, "eth0", ModeContext::None, e(libc::EPERM));
        assert!(matches!(err, AfXdpError::PermissionDenied { .. }));
        let text = err.to_string();
        assert!(
            text.contains("CAP_NET_ADMIN") && text.contains("setcap"),
            "{text}"
        );
        // A UMEM the kernel would not pin: the memlock limit, or CAP_IPC_LOCK.
        let err = classify(
            Op::RegisterUmem,
            "eth0",
            ModeContext::None,
            e(libc::ENOBUFS),
        );
        assert!(matches!(err, AfXdpError::UmemNotPinned { .. }));
        assert!(err.to_string().contains("CAP_IPC_LOCK"), "{err}");
    }

    #[test]
    fn unsupported_native_mode_says_use_generic() {
        let err = classify(
            Op::AttachProgram,
            "veth0",
            ModeContext::NativeXdp,
            e(libc::EOPNOTSUPP),
        );
        assert!(matches!(err, AfXdpError::ModeUnsupported { .. }));
        assert!(err.to_string().contains("xdp_mode = \"generic\""));
    }

    #[test]
    fn unsupported_zero_copy_says_use_copy() {
        let err = classify(
            Op::Bind,
            "veth0",
            ModeContext::ZeroCopyBind,
            e(libc::EINVAL),
        );
        assert!(err.to_string().contains("bind_mode = \"copy\""), "{err}");
    }

    #[test]
    fn unbound_socket_is_interface_gone() {
        let err = classify(Op::Receive, "veth0", ModeContext::None, e(libc::ENXIO));
        assert!(matches!(err, AfXdpError::InterfaceGone { .. }));
    }

    #[test]
    fn busy_interface_says_what_removes_a_link() {
        let err = classify(
            Op::AttachProgram,
            "eth1",
            ModeContext::GenericXdp,
            e(libc::EBUSY),
        );
        let text = err.to_string();
        for want in [
            "another XDP program is attached to `eth1`",
            "ip link show dev eth1",
            "bpftool link show",
            "bpftool link detach",
            "does nothing to a link",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        // Not the old advice, which returns 0 and leaves a BPF link attached.
        assert!(!text.contains("detach it (`ip link set"), "{text}");
        assert!(!text.contains("retrying"), "{text}");
    }

    #[test]
    fn busy_queue_names_the_queue_and_the_wait() {
        let err = match classify(Op::Bind, "eth1", ModeContext::CopyBind, e(libc::EBUSY)) {
            AfXdpError::Busy {
                op, ifname, source, ..
            } => AfXdpError::Busy {
                op,
                ifname,
                queue: Some(3),
                waited: Some(std::time::Duration::from_millis(2000)),
                source,
            },
            other => panic!("unexpected {other:?}"),
        };
        let text = err.to_string();
        assert!(text.contains("queue 3 of `eth1`"), "{text}");
        assert!(text.contains("after retrying for 2.0 s"), "{text}");
        assert!(text.contains("AF_XDP socket"), "{text}");
        assert!(!text.contains("xdp off"), "{text}");
    }

    #[test]
    fn other_errnos_keep_the_os_error() {
        let err = classify(Op::MapRings, "eth1", ModeContext::None, e(libc::ENOMEM));
        match err {
            AfXdpError::Sys { op, source, .. } => {
                assert_eq!(op, Op::MapRings);
                assert_eq!(source.raw_os_error(), Some(libc::ENOMEM));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
