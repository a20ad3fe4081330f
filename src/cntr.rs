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
use crate::engine::{
    Atomics, Counter, Store, StoreError, Timeout, TryWaitError, Tuning, WaitError, WaitStrategy,
};
use crate::ffi::{self, FidObject, err};
use crate::hw::{self, Choice};
use crate::verbs::HwCounter;
use crate::{fi_info, fi_warn, ofi, params};
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// `FI_XPU` (bit 44) from libfabric 2.7's headers, where `fi_cntr_attr` also grows `xpu_ctx`.
pub const FI_XPU: u64 = 1 << 44;

/// Which implementation backs a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Software,
    Hardware,
}

/// A counter fid over one kind of engine. Each kind has its own ops tables, so the software
/// path is exactly the engine's software counter, with no test of which backend it is.
#[repr(C)]
pub struct Cntr<B: Backing> {
    fid: ofi::fid_cntr,
    domain: *const Domain,
    wait_obj: ofi::fi_wait_obj,
    ops_flags: AtomicU64,
    engine: B,
}

/// The software engine lives inside the fid; the hardware one is shared with the fd watcher.
pub type SwEngine = Counter<Atomics>;
pub type HwEngine = Arc<Counter<HwCounter>>;

/// What a counter fid needs from its engine.
pub trait Backing: Sized + Send + Sync + 'static {
    type Store: Store;
    const BACKEND: Backend;
    fn counter(&self) -> &Counter<Self::Store>;
    fn fi_ops() -> &'static ofi::fi_ops;
    fn ops() -> &'static CntrOps;
    /// Releases device resources before close; an error makes fi_close fail, the counter
    /// staying open.
    fn teardown(&self) -> Result<(), c_int>;
}

impl Backing for SwEngine {
    type Store = Atomics;
    const BACKEND: Backend = Backend::Software;
    #[inline]
    fn counter(&self) -> &Counter<Atomics> {
        self
    }
    fn fi_ops() -> &'static ofi::fi_ops {
        &SW_FI_OPS
    }
    fn ops() -> &'static CntrOps {
        &SW_OPS
    }
    fn teardown(&self) -> Result<(), c_int> {
        Ok(())
    }
}

impl Backing for HwEngine {
    type Store = HwCounter;
    const BACKEND: Backend = Backend::Hardware;
    #[inline]
    fn counter(&self) -> &Counter<HwCounter> {
        self
    }
    fn fi_ops() -> &'static ofi::fi_ops {
        &HW_FI_OPS
    }
    fn ops() -> &'static CntrOps {
        &HW_OPS
    }
    fn teardown(&self) -> Result<(), c_int> {
        // Off the watcher first (waiting out a poll in progress), so nothing reads the device
        // counter while or after it is destroyed.
        let armed = self.unwatch();
        match self.store().destroy() {
            Ok(()) => Ok(()),
            Err(e) => {
                self.rewatch(armed);
                fi_warn!(Cntr, "cannot close the hardware counter: {e}");
                Err(hw::fi_errno(e.errno))
            }
        }
    }
}

/// `fi_ops_cntr` in the newest layout: libfabric 2.7 appends `export_xpu`, which its inline
/// `fi_cntr_export_xpu` calls without checking `size`.
#[repr(C)]
pub struct CntrOps {
    base: ofi::fi_ops_cntr,
    export_xpu: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

const fn cntr_ops<B: Backing>() -> CntrOps {
    CntrOps {
        base: ofi::fi_ops_cntr {
            size: std::mem::size_of::<CntrOps>(),
            read: Some(cntr_read::<B>),
            readerr: Some(cntr_readerr::<B>),
            add: Some(cntr_add::<B>),
            set: Some(cntr_set::<B>),
            wait: Some(cntr_wait::<B>),
            adderr: Some(cntr_adderr::<B>),
            seterr: Some(cntr_seterr::<B>),
        },
        export_xpu: ffi::no_xpu,
    }
}

static SW_FI_OPS: ofi::fi_ops = ffi::fi_ops(
    cntr_close::<SwEngine>,
    cntr_control::<SwEngine>,
    ffi::no_ops_open,
);
static SW_OPS: CntrOps = cntr_ops::<SwEngine>();
static HW_FI_OPS: ofi::fi_ops = ffi::fi_ops(
    cntr_close::<HwEngine>,
    cntr_control::<HwEngine>,
    ffi::no_ops_open,
);
static HW_OPS: CntrOps = cntr_ops::<HwEngine>();
const _: () = assert!(std::mem::size_of::<CntrOps>() == 72);

// SAFETY: repr(C) with fid_cntr first; every Cntr<B> is built by `cntr_open` with FI_CLASS_CNTR
// and B's fi_ops table, which differs between the two kinds.
unsafe impl<B: Backing> FidObject for Cntr<B> {
    const FCLASS: u32 = ofi::FI_CLASS_CNTR;
    const NAME: &'static str = "counter";
    fn fi_ops() -> *const ofi::fi_ops {
        B::fi_ops()
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
        let choice = match hw::choose(config.events) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if let Err(e) = domain.claim_cntr_slot() {
            return e;
        }
        let fid = match choice {
            Choice::Software => {
                Counter::with_spin_limit(config.strategy, params::spin_limit())
                    .map(|engine| new_fid(domain, &config, context, engine))
            }
            Choice::Hardware(store) => {
                let tuning = Tuning { spin_limit: params::spin_limit(), poll_max: params::hw().poll_max };
                let device = store.device().name().to_owned();
                Counter::with_store(store, config.strategy, tuning).map(|engine| {
                    fi_info!(Cntr, "hardware counter on {device}");
                    new_fid(domain, &config, context, engine)
                })
            }
        };
        match fid {
            Ok(fid) => {
                // SAFETY: non-NULL out pointer checked above.
                unsafe { *cntr = fid.cast() };
                0
            }
            Err(e) => {
                domain.release_cntr_slot();
                fi_warn!(Cntr, "cannot create the counter's eventfd or watcher: {e}");
                -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as i32)
            }
        }
    }
}

fn new_fid<B: Backing>(
    domain: &Domain,
    config: &Config,
    context: *mut c_void,
    engine: B,
) -> *mut ofi::fid {
    let obj = Box::new(Cntr {
        fid: ofi::fid_cntr {
            fid: ffi::fid_header(ofi::FI_CLASS_CNTR, context, B::fi_ops()),
            ops: &B::ops().base as *const _ as *mut _,
        },
        domain,
        wait_obj: config.wait_obj,
        ops_flags: AtomicU64::new(0),
        engine,
    });
    fi_info!(
        Cntr,
        "opened a {:?} counter (events {}, wait object {})",
        B::BACKEND,
        config.events,
        config.wait_obj
    );
    ffi::into_fid(obj)
}

/// What the extension ops and fi_trywait need from a counter of either kind.
pub trait AnyCntr {
    fn backend(&self) -> Backend;
    fn trywait(&self) -> c_int;
}

impl<B: Backing> AnyCntr for Cntr<B> {
    fn backend(&self) -> Backend {
        B::BACKEND
    }
    fn trywait(&self) -> c_int {
        match self.engine.counter().trywait() {
            Ok(()) => 0,
            Err(TryWaitError::Pending) => err::EAGAIN,
            Err(TryWaitError::NoFd) => {
                fi_warn!(
                    Cntr,
                    "fi_trywait on a counter without FI_WAIT_FD (wait object {})",
                    self.wait_obj
                );
                err::EINVAL
            }
        }
    }
}

/// Looks up an rscntr counter of either kind.
///
/// # Safety
/// `fid` is NULL or a readable fid.
unsafe fn any<'a>(fid: *mut ofi::fid) -> Result<&'a dyn AnyCntr, c_int> {
    // SAFETY: non-NULL and readable by the caller's contract.
    if !fid.is_null() && std::ptr::eq(unsafe { (*fid).ops }, &HW_FI_OPS) {
        // SAFETY: caller's contract.
        return unsafe { ffi::object::<Cntr<HwEngine>>(fid) }.map(|c| c as &dyn AnyCntr);
    }
    // SAFETY: caller's contract; object() rejects anything that is not a software counter.
    unsafe { ffi::object::<Cntr<SwEngine>>(fid) }.map(|c| c as &dyn AnyCntr)
}

/// Looks up an rscntr counter for the extension ops.
///
/// # Safety
/// `cntr` is NULL or a readable fid.
pub unsafe fn lookup<'a>(cntr: *mut ofi::fid_cntr) -> Result<&'a dyn AnyCntr, c_int> {
    // SAFETY: fid_cntr begins with struct fid; caller's contract.
    unsafe { any(cntr.cast()) }
}

/// # Safety
/// `cntr` is NULL or a readable fid.
unsafe fn get<'a, B: Backing>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr<B>, c_int> {
    // SAFETY: fid_cntr begins with struct fid; the caller's contract covers the rest.
    unsafe { ffi::object::<Cntr<B>>(cntr.cast()) }
}

unsafe extern "C" fn cntr_close<B: Backing>(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr<B>>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if let Err(e) = cntr.engine.teardown() {
            return e;
        }
        // SAFETY: the domain outlives its counters (it counts them as children).
        unsafe { &*cntr.domain }.release_cntr_slot();
        // SAFETY: the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(cntr) });
        0
    }
}

unsafe extern "C" fn cntr_control<B: Backing>(
    fid: *mut ofi::fid,
    command: c_int,
    arg: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr<B>>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY (every arm): `arg` is NULL or the out/in pointer type fi_cntr(3) documents for
        // the command; write_out and the explicit check reject NULL.
        ffi::status(match command as u32 {
            ofi::FI_GETWAIT => match cntr.engine.counter().fd() {
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

unsafe extern "C" fn cntr_read<B: Backing>(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us; a bad fid reads as 0.
        unsafe { get::<B>(cntr) }.map_or(0, |c| c.engine.counter().read())
    }
}

unsafe extern "C" fn cntr_readerr<B: Backing>(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: as in cntr_read.
        unsafe { get::<B>(cntr) }.map_or(0, |c| c.engine.counter().read_err())
    }
}

/// A failed device update: logged, as -FI_E*. Software stores never fail.
#[cold]
fn store_error(op: &str, e: StoreError) -> c_int {
    fi_warn!(
        Cntr,
        "{op} on a hardware counter failed: {}",
        std::io::Error::from_raw_os_error(e.0)
    );
    hw::fi_errno(e.0)
}

macro_rules! mutator {
    ($name:ident, $method:ident, $op:literal) => {
        unsafe extern "C" fn $name<B: Backing>(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
            crate::ffi_boundary! {
                // SAFETY: libfabric passes the fid it got from us.
                match unsafe { get::<B>(cntr) } {
                    Ok(c) => match c.engine.counter().$method(value) {
                        Ok(()) => 0,
                        Err(e) => store_error($op, e),
                    },
                    Err(e) => e,
                }
            }
        }
    };
}
mutator!(cntr_add, add, "fi_cntr_add");
mutator!(cntr_adderr, add_err, "fi_cntr_adderr");
mutator!(cntr_set, set, "fi_cntr_set");
mutator!(cntr_seterr, set_err, "fi_cntr_seterr");

unsafe extern "C" fn cntr_wait<B: Backing>(
    cntr: *mut ofi::fid_cntr,
    threshold: u64,
    timeout: c_int,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { get::<B>(cntr) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        match cntr.engine.counter().wait(threshold, Timeout::from_ms(timeout)) {
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
    match unsafe { any(fid) } {
        Ok(c) => c.trywait(),
        Err(e) => e,
    }
}
