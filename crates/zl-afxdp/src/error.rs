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

    #[error(
        "{op} on `{ifname}`: the interface or queue is already in use ({source}); another XDP \
         program or AF_XDP socket holds it: detach it (`ip link set dev {ifname} xdp off`) or \
         stop the other process"
    )]
    Busy {
        op: Op,
        ifname: String,
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
    fn busy_interface_says_how_to_detach() {
        let err = classify(
            Op::AttachProgram,
            "eth1",
            ModeContext::GenericXdp,
            e(libc::EBUSY),
        );
        assert!(
            err.to_string().contains("ip link set dev eth1 xdp off"),
            "{err}"
        );
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
