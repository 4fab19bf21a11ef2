//! The `bpf(2)` system call: the command numbers this crate uses, the prefixes of `union
//! bpf_attr` it fills for them, and the call itself, for the address maps
//! ([`crate::local_addrs`]) and for the XSKMAP, the program and its link ([`crate::bpf`]).

use std::ffi::c_void;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

pub(crate) const BPF_MAP_CREATE: u32 = 0;
pub(crate) const BPF_MAP_UPDATE_ELEM: u32 = 2;
pub(crate) const BPF_MAP_DELETE_ELEM: u32 = 3;
pub(crate) const BPF_PROG_TEST_RUN: u32 = 10;
pub(crate) const BPF_PROG_LOAD: u32 = 5;
pub(crate) const BPF_LINK_CREATE: u32 = 28;

#[repr(C)]
#[derive(Default)]
pub(crate) struct MapCreateAttr {
    pub(crate) map_type: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
    pub(crate) inner_map_fd: u32,
    pub(crate) numa_node: u32,
    pub(crate) map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct MapElemAttr {
    pub(crate) map_fd: u32,
    pub(crate) _pad: u32,
    pub(crate) key: u64,
    pub(crate) value: u64,
    pub(crate) flags: u64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct ProgLoadAttr {
    pub(crate) prog_type: u32,
    pub(crate) insn_cnt: u32,
    pub(crate) insns: u64,
    pub(crate) license: u64,
    pub(crate) log_level: u32,
    pub(crate) log_size: u32,
    pub(crate) log_buf: u64,
    pub(crate) kern_version: u32,
    pub(crate) prog_flags: u32,
    pub(crate) prog_name: [u8; 16],
    pub(crate) prog_ifindex: u32,
    pub(crate) expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct LinkCreateAttr {
    pub(crate) prog_fd: u32,
    pub(crate) target_ifindex: u32,
    pub(crate) attach_type: u32,
    pub(crate) flags: u32,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct TestRunAttr {
    pub(crate) prog_fd: u32,
    pub(crate) retval: u32,
    pub(crate) data_size_in: u32,
    pub(crate) data_size_out: u32,
    pub(crate) data_in: u64,
    pub(crate) data_out: u64,
    pub(crate) repeat: u32,
    pub(crate) duration: u32,
}

/// Calls `bpf(cmd, attr, sizeof attr)` and returns the new fd.
pub(crate) fn sys_bpf_fd<A>(cmd: u32, attr: &mut A) -> io::Result<OwnedFd> {
    let ret = sys_bpf(cmd, attr)?;
    // SAFETY: on success these bpf commands return a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

pub(crate) fn sys_bpf<A>(cmd: u32, attr: &mut A) -> io::Result<i64> {
    // SAFETY: `attr` is a live, initialised `repr(C)` prefix of `union bpf_attr` of exactly
    // `size_of::<A>()` bytes; the kernel zero-extends it and reads nothing beyond. Pointers
    // stored inside it (instructions, license, log buffer) are kept alive by the caller for
    // the duration of the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut A as *mut c_void,
            std::mem::size_of::<A>() as libc::c_long,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub(crate) fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_union_bpf_attr() {
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(MapElemAttr, key), 8);
    }
}
