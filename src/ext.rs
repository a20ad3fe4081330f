//! rscntr's extension API, opened with `fi_open_ops` on a domain. The C header
//! `include/rdma/fi_ext_rscntr.h` is generated from this file by cbindgen (see tests/header.rs).

use crate::boundary::ffi;
use crate::boundary::provider::OpenOps;
use crate::cntr::hw::{self, HwState};
use crate::cntr::{self, Backend};
use crate::{layer, standalone};
use std::ffi::{CStr, c_int, c_void};

/// The name to pass to `fi_open_ops` on an rscntr domain.
pub const FI_RSCNTR_DOMAIN_OPS_V1: &CStr = c"rscntr_domain_ops_v1";

/// What backs a counter.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum fi_rscntr_backend {
    /// Lock-free atomics in host memory.
    FI_RSCNTR_BACKEND_SOFTWARE = 1,
    /// An rdma-core completion counter on the device.
    FI_RSCNTR_BACKEND_HARDWARE = 2,
}

/// Whether hardware counters can be had in this process (detected once, at the first domain).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum fi_rscntr_hw_state {
    /// FI_RSCNTR_HW=off: libibverbs was not loaded.
    FI_RSCNTR_HW_OFF = 1,
    /// No libibverbs could be loaded.
    FI_RSCNTR_HW_NO_LIBRARY = 2,
    /// libibverbs has no completion counters (rdma-core < 65).
    FI_RSCNTR_HW_NO_COUNTER_API = 3,
    /// Completion counters are in libibverbs, but no device reports them.
    FI_RSCNTR_HW_NO_DEVICE = 4,
    /// A device with completion counters is in use.
    FI_RSCNTR_HW_AVAILABLE = 5,
}

/// The ops table `fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, &ops, NULL)` returns.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct fi_rscntr_domain_ops {
    /// sizeof(struct fi_rscntr_domain_ops) as rscntr built it; check before using newer ops.
    pub size: usize,
    /// Stores which backend `cntr` uses. Returns 0, or -FI_EINVAL if `cntr` is not an rscntr
    /// counter or `backend` is NULL.
    pub cntr_backend:
        Option<unsafe extern "C" fn(cntr: *mut fid_cntr, backend: *mut fi_rscntr_backend) -> c_int>,
    /// Stores what hardware detection found (FI_LOG_LEVEL=info logs the details). Returns 0,
    /// or -FI_EINVAL if `domain` is not an rscntr domain or `state` is NULL. Check `size`
    /// before calling: added after `cntr_backend`.
    pub hw_state: Option<
        unsafe extern "C" fn(domain: *mut fid_domain, state: *mut fi_rscntr_hw_state) -> c_int,
    >,
}

use crate::ofi::{fid_cntr, fid_domain};

static DOMAIN_OPS: fi_rscntr_domain_ops = fi_rscntr_domain_ops {
    size: std::mem::size_of::<fi_rscntr_domain_ops>(),
    cntr_backend: Some(cntr_backend),
    hw_state: Some(hw_state),
};

/// What every rscntr domain hands out for `fi_open_ops(FI_RSCNTR_DOMAIN_OPS_V1)` (registered by
/// `fi_prov_ini`).
pub(crate) fn open_ops() -> OpenOps {
    OpenOps {
        name: FI_RSCNTR_DOMAIN_OPS_V1,
        table: &DOMAIN_OPS as *const _ as *mut c_void,
    }
}

unsafe extern "C" fn cntr_backend(cntr: *mut fid_cntr, backend: *mut fi_rscntr_backend) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: the caller passes a counter fid (checked to be ours) and an out pointer.
        let cntr = match unsafe { cntr::lookup(cntr) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let value = match cntr.backend() {
            Backend::Software => fi_rscntr_backend::FI_RSCNTR_BACKEND_SOFTWARE,
            Backend::Hardware => fi_rscntr_backend::FI_RSCNTR_BACKEND_HARDWARE,
        };
        // SAFETY: NULL or the caller's out pointer.
        ffi::status(unsafe { ffi::write_out(backend, value, "backend") })
    }
}

unsafe extern "C" fn hw_state(domain: *mut fid_domain, state: *mut fi_rscntr_hw_state) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: the caller passes a domain fid (checked to be ours).
        // SAFETY: NULL or a readable fid.
        if !domain.is_null() && unsafe { layer::is_layered_domain(domain) } {
            // a core domain rscntr layers over
        } else if let Err(e) = unsafe { ffi::object::<standalone::Domain>(domain.cast()) } {
            return e;
        }
        use fi_rscntr_hw_state::*;
        let value = match &*hw::state() {
            HwState::Off => FI_RSCNTR_HW_OFF,
            HwState::NoLibrary(_) => FI_RSCNTR_HW_NO_LIBRARY,
            HwState::NoCounterApi(_) => FI_RSCNTR_HW_NO_COUNTER_API,
            HwState::NoDevice(_) => FI_RSCNTR_HW_NO_DEVICE,
            HwState::Available(_) => FI_RSCNTR_HW_AVAILABLE,
        };
        // SAFETY: NULL or the caller's out pointer.
        ffi::status(unsafe { ffi::write_out(state, value, "hw state") })
    }
}
