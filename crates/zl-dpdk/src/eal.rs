//! The EAL: initialised once per process with the config's arguments, then the handle ports
//! are opened against.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr;
use std::sync::{Mutex, OnceLock};

use zl_dpdk_sys as sys;

use crate::{DpdkError, EalConfig};

pub(crate) fn rte_error_text(errnum: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
    // string for any errnum.
    let s = unsafe { CStr::from_ptr(sys::rte_strerror(errnum)) };
    format!("{} (errno {errnum})", s.to_string_lossy())
}

pub(crate) fn last_rte_error() -> String {
    // SAFETY: reads the calling thread's rte_errno.
    rte_error_text(unsafe { sys::zl_rte_errno() })
}

/// Proof that the EAL is initialised; ports are opened against it.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
    /// Serialises hot-plug probing and port setup, which DPDK does not make thread-safe.
    pub(crate) setup: Mutex<()>,
}

static EAL: OnceLock<Result<Eal, String>> = OnceLock::new();

impl Eal {
    /// Initialises the EAL with `config.args` (once per process; see the crate docs). The
    /// calling thread becomes the EAL main lcore: DPDK pins it to the first core of `-l`, and
    /// threads it starts afterwards inherit that pin (the threaded router places its workers
    /// itself: `zl_dataplane::cpus`, `run.cpus`).
    pub fn init(config: &EalConfig) -> Result<&'static Eal, DpdkError> {
        config.validate()?;
        let result = EAL.get_or_init(|| Self::init_once(&config.args));
        match result {
            Ok(eal) if eal.args == config.args => Ok(eal),
            Ok(eal) => Err(DpdkError::EalArgsDiffer {
                existing: eal.args.clone(),
                requested: config.args.clone(),
            }),
            Err(reason) => Err(DpdkError::EalInit {
                args: config.args.clone(),
                reason: reason.clone(),
            }),
        }
    }

    fn init_once(args: &[String]) -> Result<Eal, String> {
        let mut owned = Vec::with_capacity(args.len() + 1);
        owned.push(CString::new("zlrouter").map_err(|e| e.to_string())?);
        for a in args {
            owned.push(CString::new(a.as_str()).map_err(|_| format!("argument {a:?} has a NUL"))?);
        }
        // The EAL may keep pointers into argv for the life of the process: leak it on purpose
        // (once per process).
        let argv: &'static mut [*mut c_char] = Vec::leak(
            owned
                .into_iter()
                .map(|c| c.into_raw())
                .chain(std::iter::once(ptr::null_mut()))
                .collect(),
        );
        let argc = (argv.len() - 1) as i32;
        // SAFETY: argv holds argc valid NUL-terminated strings plus a NULL terminator, all
        // leaked so they outlive the EAL; this runs once (OnceLock).
        let r = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if r < 0 {
            return Err(last_rte_error());
        }
        Ok(Eal {
            args: args.to_vec(),
            setup: Mutex::new(()),
        })
    }

    pub fn args(&self) -> &[String] {
        &self.args
    }
}
