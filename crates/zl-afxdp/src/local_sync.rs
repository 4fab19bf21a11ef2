//! Keeps the XDP program's `local4` / `local6` maps ([`LocalAddrs`]) equal to the kernel's
//! addresses: one RTM_GETADDR dump before the first port attaches (so no frame for the
//! router itself is ever taken for transit), then RTM_NEWADDR / RTM_DELADDR followed on a
//! control thread for the life of the process. Nothing here runs on the poll loop; each
//! change is one `bpf()` map update the program sees atomically.
//!
//! decided: one router per process. The maps and this thread are process-wide and follow the
//! network namespace of the thread that opened the first port with `redirect = "transit"`
//! (the router's namespace, for the `zlrouter` binary).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use zl_netlink::{Follower, Groups, KernelAddr, KernelEvent, Rtnl};

use crate::local_addrs::LocalAddrs;
use crate::AfXdpError;

static STARTED: OnceLock<Result<(), String>> = OnceLock::new();

/// How long the follower blocks per wait; it has nothing else to do, this only bounds how
/// stale a view of a dead socket can get before the error is logged.
const FOLLOW_WAIT: Duration = Duration::from_secs(1);

/// The addresses one kernel address entry makes local: the address and its subnet
/// broadcast.
fn addrs_of(a: &KernelAddr) -> impl Iterator<Item = IpAddr> {
    std::iter::once(a.addr).chain(a.broadcast.map(IpAddr::V4))
}

/// The maps' contents as this side wrote them, to apply a re-dump as a difference.
struct Synced {
    maps: Arc<LocalAddrs>,
    present: HashSet<IpAddr>,
}

impl Synced {
    fn add(&mut self, addr: IpAddr) {
        match self.maps.insert(addr) {
            Ok(()) => {
                self.present.insert(addr);
            }
            Err(e) => tracing::warn!("cannot add {addr} to the XDP program's local addresses: {e}"),
        }
    }

    fn remove(&mut self, addr: IpAddr) {
        if let Err(e) = self.maps.remove(addr) {
            tracing::warn!("cannot remove {addr} from the XDP program's local addresses: {e}");
        }
        self.present.remove(&addr);
    }

    /// Makes the maps hold exactly `dump`'s addresses.
    fn replace_with(&mut self, dump: &[KernelAddr]) {
        let want: HashSet<IpAddr> = dump.iter().flat_map(addrs_of).collect();
        let gone: Vec<IpAddr> = self.present.difference(&want).copied().collect();
        for a in gone {
            self.remove(a);
        }
        for a in want {
            self.add(a);
        }
    }
}

/// Fills the shared maps from the kernel and starts following it, once per process; later
/// calls return the first call's outcome.
pub fn ensure_started() -> Result<(), AfXdpError> {
    let outcome = STARTED.get_or_init(|| start().map_err(|e| e.to_string()));
    outcome.clone().map_err(|reason| AfXdpError::Config {
        ifname: "(all ports)".into(),
        reason: format!(
            "cannot read the router's own addresses through netlink ({reason}); the XDP \
             program needs them to pass frames for the router itself to the kernel"
        ),
    })
}

fn start() -> Result<(), Box<dyn std::error::Error>> {
    let maps = LocalAddrs::shared()?;
    // Subscribe before the dump: a change in between arrives as an event (zl-netlink's doc).
    let mut follower = Follower::subscribe(Groups {
        addresses: true,
        ..Groups::default()
    })?;
    let mut rtnl = Rtnl::open()?;
    let mut synced = Synced {
        maps,
        present: HashSet::new(),
    };
    synced.replace_with(&rtnl.dump_addresses()?);
    std::thread::Builder::new()
        .name("zlr-local-addrs".into())
        .spawn(move || follow(&mut follower, &mut rtnl, &mut synced))?;
    Ok(())
}

fn follow(follower: &mut Follower, rtnl: &mut Rtnl, synced: &mut Synced) {
    loop {
        let events = match follower.next(FOLLOW_WAIT) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(
                    "netlink address events failed ({e}); the XDP program's local addresses \
                     stop following the kernel"
                );
                return;
            }
        };
        for e in events {
            match e {
                KernelEvent::AddrAdded(a) => addrs_of(&a).for_each(|x| synced.add(x)),
                KernelEvent::AddrRemoved(a) => addrs_of(&a).for_each(|x| synced.remove(x)),
                KernelEvent::Resync => match rtnl.dump_addresses() {
                    Ok(dump) => synced.replace_with(&dump),
                    Err(e) => tracing::warn!("re-reading the addresses after an overrun: {e}"),
                },
                _ => {}
            }
        }
    }
}
