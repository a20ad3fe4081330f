//! The counter fid's ops: `fi_ops` (close, control) and `fi_ops_cntr` (read, add, set, wait and
//! the error counts), one set of tables per kind of engine, and how a fid is recognised as an
//! rscntr counter.
//!
//! Error contract (documented in fi_rscntr(7), shown by prov_test/bad_input.c):
//! - `fi_cntr_wait`: 0 once value >= threshold; -FI_EAVAIL when the error count changed after the
//!   call began; -FI_ETIMEDOUT after `timeout` ms (0 = check once, negative = forever). On a
//!   FI_WAIT_NONE counter it polls like FI_WAIT_YIELD (`WaitStrategy::None`), as sockets'
//!   counters do, rather than fail with -FI_ENOSYS as libfabric's util counters do.
//! - `fi_control`: FI_GETWAIT (int *) gives the eventfd of an FI_WAIT_FD counter, -FI_ENODATA for
//!   other wait objects; FI_GETWAITOBJ (enum fi_wait_obj *); FI_GETOPSFLAG / FI_SETOPSFLAG
//!   (uint64_t *); anything else -FI_ENOSYS; NULL arg -FI_EINVAL.

use super::backing::{Backing, HwEngine, SwEngine, store_error};
use super::fid::{AnyCntr, Cntr};
use super::peer::owner_ops;
use crate::boundary::ffi::{self, FidObject, err};
use crate::boundary::peer_sys;
use crate::boundary::testhook::{self, Op};
use crate::engine::watcher;
use crate::engine::{Timeout, WaitError};
use crate::{fi_warn, ofi};
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

/// `fi_ops_cntr` in the newest layout: libfabric 2.7 appends `export_xpu`, which its inline
/// `fi_cntr_export_xpu` calls without checking `size`.
#[repr(C)]
pub struct CntrOps {
    base: ofi::fi_ops_cntr,
    export_xpu: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

const fn cntr_ops<B: Tables>() -> CntrOps {
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

/// The ops tables of a counter fid over an engine of this kind (statics: the fid check compares
/// table addresses).
pub trait Tables: Backing {
    fn fi_ops() -> &'static ofi::fi_ops;
    fn ops() -> &'static ofi::fi_ops_cntr;
    /// The peer-counter ops a core calls to count into a counter of this kind.
    fn owner_ops() -> &'static peer_sys::fi_ops_cntr_owner;
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
static SW_OWNER_OPS: peer_sys::fi_ops_cntr_owner = owner_ops::<SwEngine>();
static HW_OWNER_OPS: peer_sys::fi_ops_cntr_owner = owner_ops::<HwEngine>();
const _: () = assert!(std::mem::size_of::<CntrOps>() == 72);

impl Tables for SwEngine {
    fn fi_ops() -> &'static ofi::fi_ops {
        &SW_FI_OPS
    }
    fn ops() -> &'static ofi::fi_ops_cntr {
        &SW_OPS.base
    }
    fn owner_ops() -> &'static peer_sys::fi_ops_cntr_owner {
        &SW_OWNER_OPS
    }
}

impl Tables for HwEngine {
    fn fi_ops() -> &'static ofi::fi_ops {
        &HW_FI_OPS
    }
    fn ops() -> &'static ofi::fi_ops_cntr {
        &HW_OPS.base
    }
    fn owner_ops() -> &'static peer_sys::fi_ops_cntr_owner {
        &HW_OWNER_OPS
    }
}

// SAFETY: repr(C) with fid_cntr first; every Cntr<B> is built by `open::new_fid` with
// FI_CLASS_CNTR and B's fi_ops table, which differs between the two kinds.
unsafe impl<B: Tables> FidObject for Cntr<B> {
    const FCLASS: u32 = ofi::FI_CLASS_CNTR;
    const NAME: &'static str = "counter";
    fn fi_ops() -> *const ofi::fi_ops {
        B::fi_ops()
    }
}

unsafe extern "C" fn cntr_close<B: Tables>(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr<B>>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let bound = cntr.bindings();
        if bound != 0 {
            fi_warn!(Cntr, "counter is still bound to {bound} endpoint(s)/MR(s)");
            return err::EBUSY;
        }
        let work = cntr.work_refs();
        if work != 0 {
            fi_warn!(Cntr, "{work} triggered or deferred operation(s) not started yet name this counter \
                (cancel them first: fi_cancel, FI_CANCEL_WORK or FI_FLUSH_WORK)");
            return err::EBUSY;
        }
        // Off the watcher first: once this returns it neither polls the counter nor sleeps in
        // its blocker.
        watcher::unwatch(cntr.key());
        super::fid::unwatch_triggering(cntr);
        if let Err(ret) = cntr.close_feed() {
            fi_warn!(Cntr, "closing the core's counter failed: {ret}");
            return ret;
        }
        if let Err(e) = cntr.engine.teardown() {
            return e;
        }
        cntr.home().slots().release_slot();
        // SAFETY: the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(cntr) });
        0
    }
}

unsafe extern "C" fn cntr_control<B: Tables>(
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
            ofi::FI_GETWAIT => match cntr.wait_fd() {
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
                if command == testhook::PANIC_CMD {
                    testhook::panic(Op::Control);
                }
                fi_warn!(Cntr, "unknown fi_control command {other}");
                Err(err::ENOSYS)
            }
        })
    }
}

unsafe extern "C" fn cntr_read<B: Tables>(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us; a bad fid reads as 0.
        unsafe { get::<B>(cntr) }.map_or(0, |c| {
            c.sync_read(false);
            c.engine.counter().read()
        })
    }
}

unsafe extern "C" fn cntr_readerr<B: Tables>(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: as in cntr_read.
        unsafe { get::<B>(cntr) }.map_or(0, |c| {
            c.sync_read(true);
            c.engine.counter().read_err()
        })
    }
}

macro_rules! mutator {
    ($name:ident, $method:ident, $op:literal) => {
        unsafe extern "C" fn $name<B: Tables>(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
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

unsafe extern "C" fn cntr_wait<B: Tables>(
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
        let timeout = Timeout::from_ms(timeout);
        let counter = cntr.engine.counter();
        let result = counter.wait_with(threshold, timeout, cntr);
        match result {
            Ok(()) => 0,
            Err(WaitError::TimedOut) => err::ETIMEDOUT,
            Err(WaitError::ErrorChanged) => err::EAVAIL,
        }
    }
}

/// `fi_trywait` for a counter: see [`crate::engine::Counter::trywait`].
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

/// Recognises an rscntr counter of either kind without logging (for fids that may be anything).
///
/// # Safety
/// `fid` is NULL or a readable fid.
pub unsafe fn as_cntr<'a>(fid: *mut ofi::fid) -> Option<&'a dyn AnyCntr> {
    // SAFETY: caller's contract.
    unsafe {
        ffi::try_object::<Cntr<SwEngine>>(fid)
            .map(|c| c as &dyn AnyCntr)
            .or_else(|| ffi::try_object::<Cntr<HwEngine>>(fid).map(|c| c as &dyn AnyCntr))
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
unsafe fn get<'a, B: Tables>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr<B>, c_int> {
    // SAFETY: fid_cntr begins with struct fid; the caller's contract covers the rest.
    unsafe { ffi::object::<Cntr<B>>(cntr.cast()) }
}
