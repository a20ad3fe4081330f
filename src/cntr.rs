//! The counter fid: libfabric's `fi_ops_cntr` over the engine's [`Counter`].
//!
//! Error contract (documented in the README):
//! - `fi_cntr_wait`: 0 once value >= threshold; -FI_EAVAIL when the error count changed after the
//!   call began; -FI_ETIMEDOUT after `timeout` ms (0 = check once, negative = forever);
//!   -FI_ENOSYS on a FI_WAIT_NONE counter (as libfabric's util counters do).
//! - `fi_control`: FI_GETWAIT (int *) gives the eventfd of an FI_WAIT_FD counter, -FI_ENODATA for
//!   other wait objects; FI_GETWAITOBJ (enum fi_wait_obj *); FI_GETOPSFLAG / FI_SETOPSFLAG
//!   (uint64_t *); anything else -FI_ENOSYS; NULL arg -FI_EINVAL.

use crate::domain::Domain;
use crate::engine::{Counter, Timeout, TryWaitError, WaitError, WaitStrategy};
use crate::ffi::{self, FidObject, err};
use crate::{fi_info, fi_warn, ofi, params};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// `FI_XPU` (bit 44) from libfabric 2.7's headers, where `fi_cntr_attr` also grows `xpu_ctx`.
pub const FI_XPU: u64 = 1 << 44;

/// Which implementation backs a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Software,
}

#[repr(C)]
pub struct Cntr {
    fid: ofi::fid_cntr,
    domain: *const Domain,
    wait_obj: ofi::fi_wait_obj,
    ops_flags: AtomicU64,
    backend: Backend,
    engine: Counter,
}

/// `fi_ops_cntr` in the newest layout: libfabric 2.7 appends `export_xpu`, which its inline
/// `fi_cntr_export_xpu` calls without checking `size`.
#[repr(C)]
pub struct CntrOps {
    base: ofi::fi_ops_cntr,
    export_xpu: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

static CNTR_FI_OPS: ofi::fi_ops = ffi::fi_ops(cntr_close, cntr_control, ffi::no_ops_open);
static CNTR_OPS: CntrOps = CntrOps {
    base: ofi::fi_ops_cntr {
        size: std::mem::size_of::<CntrOps>(),
        read: Some(cntr_read),
        readerr: Some(cntr_readerr),
        add: Some(cntr_add),
        set: Some(cntr_set),
        wait: Some(cntr_wait),
        adderr: Some(cntr_adderr),
        seterr: Some(cntr_seterr),
    },
    export_xpu: ffi::no_xpu,
};
const _: () = assert!(std::mem::size_of::<CntrOps>() == 72);

// SAFETY: repr(C) with fid_cntr first; every Cntr is built by `cntr_open` with FI_CLASS_CNTR and
// CNTR_FI_OPS.
unsafe impl FidObject for Cntr {
    const FCLASS: u32 = ofi::FI_CLASS_CNTR;
    const NAME: &'static str = "counter";
    fn fi_ops() -> *const ofi::fi_ops {
        &CNTR_FI_OPS
    }
}

/// The parts of `fi_cntr_attr` rscntr accepts, validated.
struct Config {
    events: ofi::fi_cntr_events,
    wait_obj: ofi::fi_wait_obj,
    strategy: WaitStrategy,
}

/// Validates an application's counter attributes. Reads only the 2.1 fields (24 bytes): older
/// applications pass the smaller struct, and `xpu_ctx` exists only with FI_XPU, refused here.
fn parse_attr(attr: Option<&ofi::fi_cntr_attr>) -> Result<Config, c_int> {
    let Some(attr) = attr else {
        // NULL attr: the defaults libfabric documents for an all-zero attr, but waitable.
        return Ok(Config {
            events: ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP,
            wait_obj: ofi::fi_wait_obj_FI_WAIT_UNSPEC,
            strategy: WaitStrategy::Block,
        });
    };
    if attr.flags & FI_XPU != 0 {
        fi_warn!(Cntr, "FI_XPU counters are not supported");
        return Err(err::ENOSYS);
    }
    if attr.flags & ofi::FI_PEER != 0 {
        fi_warn!(Cntr, "FI_PEER counters are not supported");
        return Err(err::ENOSYS);
    }
    if attr.flags != 0 {
        fi_warn!(Cntr, "unknown counter flags {:#x}", attr.flags);
        return Err(err::EINVAL);
    }
    match attr.events {
        ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP | ofi::fi_cntr_events_FI_CNTR_EVENTS_BYTES => {}
        other => {
            fi_warn!(Cntr, "unknown counter events {other}");
            return Err(err::EINVAL);
        }
    }
    let strategy = match attr.wait_obj {
        ofi::fi_wait_obj_FI_WAIT_NONE => WaitStrategy::None,
        ofi::fi_wait_obj_FI_WAIT_UNSPEC => WaitStrategy::Block,
        ofi::fi_wait_obj_FI_WAIT_YIELD => WaitStrategy::Yield,
        ofi::fi_wait_obj_FI_WAIT_FD => WaitStrategy::Fd,
        ofi::fi_wait_obj_FI_WAIT_SET if attr.wait_set.is_null() => {
            fi_warn!(Cntr, "FI_WAIT_SET without a wait set");
            return Err(err::EINVAL);
        }
        ofi::fi_wait_obj_FI_WAIT_SET | ofi::fi_wait_obj_FI_WAIT_MUTEX_COND => {
            fi_warn!(
                Cntr,
                "wait object {} is deprecated and not supported; use FI_WAIT_FD, \
                            FI_WAIT_YIELD or FI_WAIT_UNSPEC",
                attr.wait_obj
            );
            return Err(err::ENOSYS);
        }
        ofi::fi_wait_obj_FI_WAIT_POLLFD => {
            fi_warn!(Cntr, "FI_WAIT_POLLFD is not supported; use FI_WAIT_FD");
            return Err(err::ENOSYS);
        }
        other => {
            fi_warn!(Cntr, "unknown wait object {other}");
            return Err(err::EINVAL);
        }
    };
    Ok(Config {
        events: attr.events,
        wait_obj: attr.wait_obj,
        strategy,
    })
}

pub unsafe extern "C" fn cntr_open(
    domain: *mut ofi::fid_domain,
    attr: *mut ofi::fi_cntr_attr,
    cntr: *mut *mut ofi::fid_cntr,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: fid_domain begins with struct fid.
        let domain = match unsafe { ffi::object::<Domain>(domain.cast()) } {
            Ok(d) => d,
            Err(e) => return e,
        };
        if cntr.is_null() {
            fi_warn!(Cntr, "NULL counter out pointer");
            return err::EINVAL;
        }
        // SAFETY: NULL or the application's attr, of at least the 2.1 size (see parse_attr).
        let config = match parse_attr(unsafe { attr.as_ref() }) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let engine = match Counter::with_spin_limit(config.strategy, params::spin_limit()) {
            Ok(c) => c,
            Err(e) => {
                fi_warn!(Cntr, "cannot create the counter's eventfd: {e}");
                return -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as i32);
            }
        };
        if let Err(e) = domain.claim_cntr_slot() {
            return e;
        }
        let obj = Box::new(Cntr {
            fid: ofi::fid_cntr {
                fid: ffi::fid_header(ofi::FI_CLASS_CNTR, context, &CNTR_FI_OPS),
                ops: &CNTR_OPS.base as *const _ as *mut _,
            },
            domain,
            wait_obj: config.wait_obj,
            ops_flags: AtomicU64::new(0),
            backend: Backend::Software,
            engine,
        });
        fi_info!(Cntr, "opened a software counter (events {}, wait object {})",
            config.events, config.wait_obj);
        // SAFETY: non-NULL out pointer checked above.
        unsafe { *cntr = ffi::into_fid(obj).cast() };
        0
    }
}

/// # Safety
/// `cntr` is NULL or a readable fid.
unsafe fn get<'a>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr, c_int> {
    // SAFETY: fid_cntr begins with struct fid; the caller's contract covers the rest.
    unsafe { ffi::object::<Cntr>(cntr.cast()) }
}

impl Cntr {
    pub fn backend(&self) -> Backend {
        self.backend
    }
}

/// Looks up an rscntr counter for the extension ops.
///
/// # Safety
/// `cntr` is NULL or a readable fid.
pub unsafe fn lookup<'a>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr, c_int> {
    // SAFETY: caller's contract.
    unsafe { get(cntr) }
}

unsafe extern "C" fn cntr_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the domain outlives its counters (it counts them as children).
        unsafe { &*cntr.domain }.release_cntr_slot();
        // SAFETY: the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(cntr) });
        0
    }
}

unsafe extern "C" fn cntr_control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY (every arm): `arg` is NULL or the out/in pointer type fi_cntr(3) documents for
        // the command; write_out and the explicit check reject NULL.
        ffi::status(match command as u32 {
            ofi::FI_GETWAIT => match cntr.engine.fd() {
                Some(fd) => unsafe { ffi::write_out(arg.cast::<c_int>(), fd, "wait fd") },
                None => {
                    fi_warn!(Cntr, "FI_GETWAIT: the counter has no fd (open it with FI_WAIT_FD)");
                    Err(err::ENODATA)
                }
            },
            ofi::FI_GETWAITOBJ => unsafe { ffi::write_out(arg.cast(), cntr.wait_obj, "wait object") },
            ofi::FI_GETOPSFLAG => unsafe {
                ffi::write_out(arg.cast::<u64>(), cntr.ops_flags.load(Ordering::Relaxed), "flags")
            },
            ofi::FI_SETOPSFLAG => match unsafe { arg.cast::<u64>().as_ref() } {
                Some(flags) => {
                    cntr.ops_flags.store(*flags, Ordering::Relaxed);
                    Ok(())
                }
                None => Err(err::EINVAL),
            },
            other => {
                fi_warn!(Cntr, "unknown fi_control command {other}");
                Err(err::ENOSYS)
            }
        })
    }
}

unsafe extern "C" fn cntr_read(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us; a bad fid reads as 0.
        unsafe { get(cntr) }.map_or(0, |c| c.engine.read())
    }
}

unsafe extern "C" fn cntr_readerr(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: as in cntr_read.
        unsafe { get(cntr) }.map_or(0, |c| c.engine.read_err())
    }
}

macro_rules! mutator {
    ($name:ident, $method:ident) => {
        unsafe extern "C" fn $name(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
            crate::ffi_boundary! {
                // SAFETY: libfabric passes the fid it got from us.
                ffi::status(unsafe { get(cntr) }.map(|c| c.engine.$method(value)))
            }
        }
    };
}
mutator!(cntr_add, add);
mutator!(cntr_adderr, add_err);
mutator!(cntr_set, set);
mutator!(cntr_seterr, set_err);

unsafe extern "C" fn cntr_wait(cntr: *mut ofi::fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { get(cntr) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        match cntr.engine.wait(threshold, Timeout::from_ms(timeout)) {
            Ok(()) => 0,
            Err(WaitError::TimedOut) => err::ETIMEDOUT,
            Err(WaitError::ErrorChanged) => err::EAVAIL,
            Err(WaitError::NotWaitable) => {
                fi_warn!(Cntr, "fi_cntr_wait on a counter opened with FI_WAIT_NONE");
                err::ENOSYS
            }
        }
    }
}

/// `fi_trywait` for a counter: see [`Counter::trywait`].
///
/// # Safety
/// `fid` is a readable fid.
pub unsafe fn trywait(fid: *mut ofi::fid) -> c_int {
    // SAFETY: caller's contract.
    let cntr = match unsafe { ffi::object::<Cntr>(fid) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    match cntr.engine.trywait() {
        Ok(()) => 0,
        Err(TryWaitError::Pending) => err::EAGAIN,
        Err(TryWaitError::NoFd) => {
            fi_warn!(
                Cntr,
                "fi_trywait on a counter without FI_WAIT_FD (wait object {})",
                cntr.wait_obj
            );
            err::EINVAL
        }
    }
}
