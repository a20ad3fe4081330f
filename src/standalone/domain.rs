//! The domain fid of `FI_RSCNTR_CORE=none`: the home of its counters, and where rscntr's
//! extension ops are opened. It knows its fabric only as a [`Parent`] (the fabric's ops table
//! instantiates the opens below with its own type).

use crate::boundary::ffi::{self, Children, FidObject, Parent, err};
use crate::boundary::provider;
use crate::boundary::testhook::{self, Op};
use crate::cntr::{self, Slots};
use crate::{fi_warn, ofi};
use std::ffi::{CStr, c_char, c_int, c_void};

#[repr(C)]
pub struct Domain {
    fid: ofi::fid_domain,
    /// The fabric's children, which count this domain (the fabric outlives it).
    fabric: *const Children,
    /// The home of its counters: no core counts for them.
    counters: Slots,
}

/// The domain ops in the newest layout: 2.7 appends `xpu_ctx`, called without FI_CHECK_OP.
#[repr(C)]
struct DomainOps {
    base: ofi::fi_ops_domain,
    xpu_ctx: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

static DOMAIN_FI_OPS: ofi::fi_ops = ffi::fi_ops(domain_close, ffi::no_control, domain_ops_open);
static DOMAIN_OPS: DomainOps = DomainOps {
    base: ofi::fi_ops_domain {
        size: std::mem::size_of::<DomainOps>(),
        av_open: Some(no_av_open),
        cq_open: Some(no_cq_open),
        endpoint: Some(no_endpoint),
        scalable_ep: Some(no_endpoint),
        cntr_open: Some(cntr_open),
        poll_open: Some(no_poll_open),
        stx_ctx: Some(no_stx_ctx),
        srx_ctx: Some(no_srx_ctx),
        query_atomic: Some(no_query_atomic),
        query_collective: Some(no_query_collective),
        endpoint2: Some(no_endpoint2),
    },
    xpu_ctx: ffi::no_xpu,
};
static DOMAIN_MR_OPS: ofi::fi_ops_mr = ofi::fi_ops_mr {
    size: std::mem::size_of::<ofi::fi_ops_mr>(),
    reg: Some(no_mr_reg),
    regv: Some(no_mr_regv),
    regattr: Some(no_mr_regattr),
};

// SAFETY: repr(C) with fid_domain first; every Domain is built by `open` with FI_CLASS_DOMAIN
// and DOMAIN_FI_OPS.
unsafe impl FidObject for Domain {
    const FCLASS: u32 = ofi::FI_CLASS_DOMAIN;
    const NAME: &'static str = "domain";
    fn fi_ops() -> *const ofi::fi_ops {
        &DOMAIN_FI_OPS
    }
}

/// `fi_domain` on a fabric of type `P`.
pub unsafe extern "C" fn domain_open<P: Parent>(
    fabric: *mut ofi::fid_fabric,
    info: *mut ofi::fi_info,
    domain: *mut *mut ofi::fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded unchanged.
    unsafe { domain_open2::<P>(fabric, info, domain, 0, context) }
}

pub unsafe extern "C" fn domain_open2<P: Parent>(
    fabric: *mut ofi::fid_fabric,
    info: *mut ofi::fi_info,
    domain: *mut *mut ofi::fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: fid_fabric begins with struct fid.
        let fabric = match unsafe { ffi::object::<P>(fabric.cast()) } {
            Ok(f) => f,
            Err(e) => return e,
        };
        // SAFETY: NULL or an info from getinfo (all attr pointers valid or NULL).
        let Some(info) = (unsafe { info.as_ref() }) else {
            fi_warn!(Domain, "NULL info");
            return err::EINVAL;
        };
        // SAFETY: as above.
        if let Some(attr) = unsafe { info.domain_attr.as_ref() } {
            // SAFETY: name is NULL or a C string.
            if !unsafe { provider::is_our_name(attr.name) } {
                fi_warn!(Domain, "info names a domain rscntr does not serve");
                return err::ENODATA;
            }
        }
        if flags != 0 {
            fi_warn!(Domain, "unsupported fi_domain2 flags {flags:#x}");
            return err::EBADFLAGS;
        }
        testhook::panic(Op::Domain);
        // Hardware detection happens once per process, here at the first domain (or in
        // getinfo with FI_RSCNTR_HW=on), never in fi_prov_ini.
        cntr::hw::state();
        let obj = Box::new(Domain {
            fid: ofi::fid_domain {
                fid: ffi::fid_header(ofi::FI_CLASS_DOMAIN, context, &DOMAIN_FI_OPS),
                ops: &DOMAIN_OPS.base as *const _ as *mut _,
                mr: &DOMAIN_MR_OPS as *const _ as *mut _,
            },
            fabric: fabric.children(),
            counters: Slots::default(),
        });
        let fid = ffi::into_fid(obj);
        // SAFETY: `domain` is NULL or the caller's out pointer.
        match unsafe { ffi::write_out(domain, fid.cast(), "domain") } {
            Ok(()) => {
                fabric.children().add();
                0
            }
            Err(e) => {
                // SAFETY: just made by into_fid, never reached C.
                drop(unsafe { ffi::release(&*(fid as *const Domain)) });
                e
            }
        }
    }
}

impl Domain {
    fn fabric_children(&self) -> &Children {
        // SAFETY: the fabric cannot close while this domain is open (it counts as a child).
        unsafe { &*self.fabric }
    }
}

unsafe extern "C" fn domain_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let domain = match unsafe { ffi::object::<Domain>(fid) } {
            Ok(d) => d,
            Err(e) => return e,
        };
        let open = domain.counters.children.count();
        if open != 0 {
            fi_warn!(Domain, "domain still has {open} open counter(s)");
            return err::EBUSY;
        }
        domain.fabric_children().remove();
        // SAFETY: checked above; the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(domain) });
        0
    }
}

/// `fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, &ops, NULL)`.
unsafe extern "C" fn domain_ops_open(
    fid: *mut ofi::fid,
    name: *const c_char,
    flags: u64,
    ops: *mut *mut c_void,
    _context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        if let Err(e) = unsafe { ffi::object::<Domain>(fid) } {
            return e;
        }
        if name.is_null() {
            fi_warn!(Domain, "NULL ops name");
            return err::EINVAL;
        }
        // SAFETY: non-NULL C string from the caller.
        let name = unsafe { CStr::from_ptr(name) };
        let Some(ext) = provider::ext_ops().filter(|ext| name == ext.name) else {
            fi_warn!(Domain, "unknown ops name {:?}", name);
            return err::ENOSYS;
        };
        if flags != 0 {
            fi_warn!(Domain, "unsupported flags {flags:#x}");
            return err::EBADFLAGS;
        }
        // SAFETY: NULL or the caller's out pointer.
        ffi::status(unsafe { ffi::write_out(ops, ext.table, "ops") })
    }
}

unsafe extern "C" fn cntr_open(
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
        // SAFETY: forwarded from the caller; the domain outlives its counters.
        unsafe { cntr::open_in(&domain.counters, attr, cntr, context) }
    }
}

// What the data-path issue will bring. Until then each open says plainly it is not supported.
macro_rules! not_yet {
    ($name:ident ( $($arg:ty),* $(,)? ), $what:literal $(,)?) => {
        unsafe extern "C" fn $name($(_: $arg),*) -> c_int {
            fi_warn!(Domain, concat!($what, " is not supported by rscntr yet"));
            err::ENOSYS
        }
    };
}
not_yet!(
    no_av_open(*mut ofi::fid_domain, *mut ofi::fi_av_attr, *mut *mut ofi::fid_av, *mut c_void),
    "fi_av_open"
);
not_yet!(
    no_cq_open(*mut ofi::fid_domain, *mut ofi::fi_cq_attr, *mut *mut ofi::fid_cq, *mut c_void),
    "fi_cq_open"
);
not_yet!(
    no_endpoint(*mut ofi::fid_domain, *mut ofi::fi_info, *mut *mut ofi::fid_ep, *mut c_void),
    "fi_endpoint"
);
not_yet!(
    no_endpoint2(*mut ofi::fid_domain, *mut ofi::fi_info, *mut *mut ofi::fid_ep, u64, *mut c_void),
    "fi_endpoint2"
);
not_yet!(
    no_poll_open(*mut ofi::fid_domain, *mut ofi::fi_poll_attr, *mut *mut ofi::fid_poll),
    "fi_poll_open"
);
not_yet!(
    no_stx_ctx(*mut ofi::fid_domain, *mut ofi::fi_tx_attr, *mut *mut ofi::fid_stx, *mut c_void),
    "fi_stx_context"
);
not_yet!(
    no_srx_ctx(*mut ofi::fid_domain, *mut ofi::fi_rx_attr, *mut *mut ofi::fid_ep, *mut c_void),
    "fi_srx_context"
);
not_yet!(
    no_query_atomic(
        *mut ofi::fid_domain,
        ofi::fi_datatype,
        ofi::fi_op,
        *mut ofi::fi_atomic_attr,
        u64,
    ),
    "fi_query_atomic"
);
not_yet!(
    no_query_collective(
        *mut ofi::fid_domain,
        ofi::fi_collective_op,
        *mut ofi::fi_collective_attr,
        u64,
    ),
    "fi_query_collective"
);
not_yet!(
    no_mr_reg(
        *mut ofi::fid,
        *const c_void,
        usize,
        u64,
        u64,
        u64,
        u64,
        *mut *mut ofi::fid_mr,
        *mut c_void,
    ),
    "fi_mr_reg"
);
not_yet!(
    no_mr_regv(
        *mut ofi::fid,
        *const libc::iovec,
        usize,
        u64,
        u64,
        u64,
        u64,
        *mut *mut ofi::fid_mr,
        *mut c_void,
    ),
    "fi_mr_regv"
);
not_yet!(
    no_mr_regattr(*mut ofi::fid, *const ofi::fi_mr_attr, u64, *mut *mut ofi::fid_mr),
    "fi_mr_regattr"
);
