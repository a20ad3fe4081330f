//! The fabric fid of `FI_RSCNTR_CORE=none`: opens domains and EQs, and arms fds in
//! `fi_trywait`.

use super::{domain, eq};
use crate::boundary::ffi::{self, Children, FidObject, Parent, err};
use crate::{cntr, fi_warn, ofi};
use std::ffi::{c_int, c_void};

#[repr(C)]
pub struct Fabric {
    fid: ofi::fid_fabric,
    children: Children,
}

static FABRIC_FI_OPS: ofi::fi_ops = ffi::fi_ops(fabric_close, ffi::no_control, ffi::no_ops_open);
static FABRIC_OPS: ofi::fi_ops_fabric = ofi::fi_ops_fabric {
    size: std::mem::size_of::<ofi::fi_ops_fabric>(),
    domain: Some(domain::domain_open::<Fabric>),
    passive_ep: Some(no_passive_ep),
    eq_open: Some(eq::eq_open::<Fabric>),
    wait_open: Some(no_wait_open),
    trywait: Some(trywait),
    domain2: Some(domain::domain_open2::<Fabric>),
};

// SAFETY: repr(C) with fid_fabric (starting with struct fid) first; every Fabric is built by
// `open` with FI_CLASS_FABRIC and FABRIC_FI_OPS.
unsafe impl FidObject for Fabric {
    const FCLASS: u32 = ofi::FI_CLASS_FABRIC;
    const NAME: &'static str = "fabric";
    fn fi_ops() -> *const ofi::fi_ops {
        &FABRIC_FI_OPS
    }
}

impl Parent for Fabric {
    fn children(&self) -> &Children {
        &self.children
    }
}

/// `fi_fabric` for rscntr's own fabric (the provider's `fabric_open` checked `attr` and
/// routed here by its name).
///
/// # Safety
/// `fabric` is NULL or the caller's out pointer.
pub unsafe fn open(
    attr: &ofi::fi_fabric_attr,
    fabric: *mut *mut ofi::fid_fabric,
    context: *mut c_void,
) -> c_int {
    let obj = Box::new(Fabric {
        fid: ofi::fid_fabric {
            fid: ffi::fid_header(ofi::FI_CLASS_FABRIC, context, &FABRIC_FI_OPS),
            ops: &FABRIC_OPS as *const _ as *mut _,
            api_version: attr.api_version,
        },
        children: Children::default(),
    });
    let fid = ffi::into_fid(obj);
    // SAFETY: `fabric` is NULL or the caller's out pointer.
    match unsafe { ffi::write_out(fabric, fid.cast(), "fabric") } {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: the object was just made by into_fid and never reached C.
            drop(unsafe { ffi::release(&*(fid as *const Fabric)) });
            e
        }
    }
}

unsafe extern "C" fn fabric_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let fabric = match unsafe { ffi::object::<Fabric>(fid) } {
            Ok(f) => f,
            Err(e) => return e,
        };
        let open = fabric.children.count();
        if open != 0 {
            fi_warn!(Fabric, "fabric still has {open} open domain(s)/EQ(s)");
            return err::EBUSY;
        }
        // SAFETY: checked above; the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(fabric) });
        0
    }
}

unsafe extern "C" fn no_passive_ep(
    _: *mut ofi::fid_fabric,
    _: *mut ofi::fi_info,
    _: *mut *mut ofi::fid_pep,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

unsafe extern "C" fn no_wait_open(
    _: *mut ofi::fid_fabric,
    _: *mut ofi::fi_wait_attr,
    _: *mut *mut ofi::fid_wait,
) -> c_int {
    err::ENOSYS
}

/// `fi_trywait`: arms the fd of each FD counter and FD EQ. Returns -FI_EAGAIN as soon as one of
/// them has a pending change (the caller must read before blocking), -FI_EINVAL for a fid that
/// has no fd to arm.
unsafe extern "C" fn trywait(
    fabric: *mut ofi::fid_fabric,
    fids: *mut *mut ofi::fid,
    count: c_int,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: fid_fabric begins with struct fid.
        if let Err(e) = unsafe { ffi::object::<Fabric>(fabric.cast()) } {
            return e;
        }
        // SAFETY: the caller passes `count` fid pointers.
        let fids = match unsafe { ffi::fid_array(fids, count) } {
            Ok(f) => f,
            Err(e) => return e,
        };
        for &fid in fids {
            // SAFETY: a non-NULL, readable fid (fid_array rejects NULL entries).
            let class = unsafe { (*fid).fclass } as u32;
            // SAFETY: `fid` is one of ours or rejected by ffi::object.
            let ret = unsafe {
                match class {
                    ofi::FI_CLASS_CNTR => cntr::trywait(fid),
                    ofi::FI_CLASS_EQ => eq::trywait(fid),
                    _ => {
                        fi_warn!(Fabric, "fi_trywait on fid class {class}, which has no fd");
                        err::EINVAL
                    }
                }
            };
            if ret != 0 {
                return ret;
            }
        }
        0
    }
}
