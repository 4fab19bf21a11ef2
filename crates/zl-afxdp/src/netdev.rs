//! The interface as the kernel names it: its index, MTU and MAC, looked up by name in this
//! thread's network namespace. The port opens by them and its halves look again when the
//! interface goes and comes back.

use std::ffi::CString;

use crate::AfXdpError;

/// `if_nametoindex`, as an error that says what to check.
pub fn interface_index(ifname: &str) -> Result<u32, AfXdpError> {
    let c = CString::new(ifname).map_err(|_| AfXdpError::Config {
        ifname: ifname.to_owned(),
        reason: "interface name contains a NUL byte".into(),
    })?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(AfXdpError::InterfaceNotFound {
            ifname: ifname.to_owned(),
        })
    } else {
        Ok(idx)
    }
}

/// One `SIOCGIF*` ioctl about `ifname` on a datagram socket (so about the interface of this
/// thread's network namespace, where the port opened it); the filled `ifreq`.
fn ifreq_ioctl(ifname: &str, request: libc::c_ulong) -> std::io::Result<libc::ifreq> {
    let name = ifname.as_bytes();
    // SAFETY: an all-zero `ifreq` is valid (a C struct of arrays and a union of integers).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= ifr.ifr_name.len() || name.contains(&0) {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    for (d, &b) in ifr.ifr_name.iter_mut().zip(name) {
        *d = b as libc::c_char;
    }
    // SAFETY: plain socket(2); the descriptor is owned (and closed) by `OwnedFd` below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor this function owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: the SIOCGIF* requests read the NUL-terminated name in `ifr` and write one
    // member of its union; `ifr` lives for the call.
    let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&fd), request as _, &mut ifr) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The interface's MTU (`SIOCGIFMTU`): the largest IP packet it sends.
pub fn interface_mtu(ifname: &str) -> std::io::Result<u32> {
    let ifr = ifreq_ioctl(ifname, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))
}

/// The interface's own MAC (`SIOCGIFHWADDR`); an error for an interface that is not
/// Ethernet.
pub fn interface_mac(ifname: &str) -> std::io::Result<zl_wire::MacAddr> {
    let ifr = ifreq_ioctl(ifname, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let hw = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    if hw.sa_family != libc::ARPHRD_ETHER {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("hardware type {} is not Ethernet", hw.sa_family),
        ));
    }
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(&hw.sa_data) {
        *m = b as u8;
    }
    Ok(zl_wire::MacAddr(mac))
}
