//! What rscntr's interposed ops share: opening an object through the core (the fabric's domain
//! and passive-endpoint opens, the domain's endpoint opens and MR registrations), and closing
//! one (fabrics, domains, passive endpoints, CQs, endpoints and MRs).
//!
//! The info rscntr hands the core to open an object lives as long as that object: libfabric
//! lets a provider keep pointers into the info it was opened with (applications keep theirs
//! until the object is closed), and cores do: sockets copies the `fi_info` struct of a passive
//! endpoint (`sock_msg_passive_ep`) and of a domain (`sock_domain`) and reads the attrs it
//! points to later, a passive endpoint's when a connection request arrives.

use super::getinfo::to_core;
use crate::boundary::ffi::err;
use crate::boundary::versions;
use crate::ofi;
use std::ffi::{CStr, c_int};

/// The core's copy of an application's info (see `to_core`), or a list the core returned
/// (`fi_fabric`'s attr), freed when dropped: the record of the object opened with it holds it,
/// and drops it once the core has closed the object.
pub struct CoreInfo(*mut ofi::fi_info);

impl CoreInfo {
    /// Takes over an info (list) allocated by libfabric, which nothing else frees.
    pub fn own(info: *mut ofi::fi_info) -> Self {
        CoreInfo(info)
    }

    pub fn as_ptr(&self) -> *mut ofi::fi_info {
        self.0
    }

    /// For an object that frees the info itself (an endpoint's Binder, when it closes).
    pub fn keep(self) -> *mut ofi::fi_info {
        let info = self.0;
        std::mem::forget(self);
        info
    }
}

impl Drop for CoreInfo {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: allocated by libfabric (to_core, fi_getinfo), and the object opened with
            // it (if any) is closed.
            unsafe { versions::freeinfo(self.0) };
        }
    }
}

/// Opens an object through the core:
/// - a NULL out pointer, or a NULL info when the op takes one (`info`: the application's and
///   the core's name), is refused with -FI_EINVAL before the core opens anything, `refuse`
///   logging it: an object opened for a NULL out pointer could never be closed, and a NULL
///   info crashes some cores and not others;
/// - `open` runs the core's own op (behind its test hook) with the core's copy of the info
///   (NULL for ops without one), writing the new object through its second argument;
/// - once the core opened it, `patch` gives it rscntr's ops and keeps the copy of the info in
///   its record (freed when the core has closed it), and the object goes to the application.
///
/// # Safety
/// `out` is NULL or the application's out pointer; `info`'s pointer is NULL or a valid info.
pub unsafe fn open_through_core<T>(
    out: *mut *mut T,
    info: Option<(*mut ofi::fi_info, &CStr)>,
    refuse: impl FnOnce(),
    open: impl FnOnce(*mut ofi::fi_info, *mut *mut T) -> c_int,
    patch: impl FnOnce(*mut T, CoreInfo),
) -> c_int {
    if out.is_null() || info.is_some_and(|(info, _)| info.is_null()) {
        refuse();
        return err::EINVAL;
    }
    let core_info = match info {
        // SAFETY: a valid info (checked non-NULL; the caller's contract).
        Some((info, core)) => match unsafe { to_core(info, core) } {
            Some(copy) => CoreInfo(copy),
            None => return err::ENOMEM,
        },
        None => CoreInfo(std::ptr::null_mut()),
    };
    let mut obj: *mut T = std::ptr::null_mut();
    let ret = open(core_info.as_ptr(), &mut obj);
    if ret != 0 {
        return ret;
    }
    patch(obj, core_info);
    // SAFETY: checked non-NULL above; the application's out pointer.
    unsafe { out.write(obj) };
    0
}

/// Closes a core object that rscntr patched, with the core's own close (`orig`: the core's
/// `fi_ops`). Only once the core has closed it is rscntr's record of it (the leaked `Box` its
/// fid's tables point into) freed: it is handed back, for what goes with it.
///
/// # Safety
/// `record` is the record of the object `fid`, made by `Box::into_raw`, and nothing uses it
/// once the core has closed the object; `orig` is the core's table.
pub unsafe fn close_through_core<R>(
    fid: *mut ofi::fid,
    record: *mut R,
    orig: *const ofi::fi_ops,
) -> Result<Box<R>, c_int> {
    // SAFETY: the core's own close on its own object.
    let ret = unsafe { ((*orig).close.unwrap())(fid) };
    if ret != 0 {
        return Err(ret);
    }
    // SAFETY: the object is gone; the caller's contract.
    Ok(unsafe { Box::from_raw(record) })
}
