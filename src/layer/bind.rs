//! rscntr's bind for core endpoints and MRs: an rscntr counter is replaced by the core counter
//! that feeds it (opened with FI_PEER); every other fid goes to the core unchanged.

use crate::cntr::{self, Cntr, CntrHome};
use crate::ffi::err;
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::c_int;

/// Per core endpoint or MR: rscntr's copy of its `fi_ops` and the counters bound to it.
#[repr(C)]
struct Binder {
    fi_ops: ofi::fi_ops,
    orig_fi_ops: *const ofi::fi_ops,
    home: *const CntrHome,
    bound: Mutex<Vec<*const Cntr>>,
}

/// Gives a core endpoint or MR rscntr's bind and close.
///
/// # Safety
/// `fid` is an open core endpoint or MR of the domain whose counters live in `home`.
pub unsafe fn patch(fid: *mut ofi::fid, home: &CntrHome) {
    // SAFETY: a valid fid with a valid ops table.
    unsafe {
        let mut b = Box::new(Binder {
            fi_ops: *(*fid).ops,
            orig_fi_ops: (*fid).ops,
            home,
            bound: Mutex::new(Vec::new()),
        });
        b.fi_ops.bind = Some(bind);
        b.fi_ops.close = Some(close);
        (*fid).ops = &mut Box::into_raw(b).as_mut().unwrap().fi_ops;
    }
}

/// # Safety
/// `fid` was patched by [`patch`].
unsafe fn binder<'a>(fid: *mut ofi::fid) -> &'a Binder {
    // SAFETY: fi_ops is Binder's first field (caller's contract).
    unsafe { &*((*fid).ops as *const Binder) }
}

unsafe extern "C" fn bind(fid: *mut ofi::fid, bfid: *mut ofi::fid, flags: u64) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched fids reach this op.
        let b = unsafe { binder(fid) };
        // SAFETY: the core's own op table.
        let orig_bind = unsafe { (*b.orig_fi_ops).bind.unwrap() };
        // SAFETY: NULL or a readable fid.
        let Some(c) = (unsafe { cntr::as_cntr(bfid) }) else {
            // SAFETY: not ours: the core's business.
            return unsafe { orig_bind(fid, bfid, flags) };
        };
        if !std::ptr::eq(c.home_ptr(), b.home) {
            fi_warn!(EpCtrl, "counter belongs to another domain");
            return err::EINVAL;
        }
        let core_cntr = match c.core_cntr() {
            Ok(p) => p,
            Err(e) => return e,
        };
        // SAFETY: the core binds its own counter.
        let ret = unsafe { orig_bind(fid, core_cntr.cast(), flags) };
        if ret == 0 {
            c.bound();
            b.bound.lock().push(c);
        }
        ret
    }
}

unsafe extern "C" fn close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched fids reach this op.
        let b = unsafe { binder(fid) } as *const Binder as *mut Binder;
        // SAFETY: the core's own close on its own object.
        let ret = unsafe { ((*(*b).orig_fi_ops).close.unwrap())(fid) };
        if ret == 0 {
            // SAFETY: the object is gone; our Binder is no longer reachable.
            let b = unsafe { Box::from_raw(b) };
            for c in b.bound.lock().iter() {
                // SAFETY: a bound counter cannot close (EBUSY) before this unbind.
                unsafe { (**c).unbound() };
            }
        }
        ret
    }
}
