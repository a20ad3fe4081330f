//! The provider record libfabric loads: `fi_prov_ini`, versions and run-time parameters.

use crate::ofi;
use std::sync::atomic::{AtomicU32, Ordering};

pub const NAME: &str = "rscntr";
pub const NAME_C: &std::ffi::CStr = c"rscntr";

/// `FI_VERSION(major, minor)`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The crate version in libfabric's provider convention (`OFI_VERSION_DEF_PROV`):
/// FI_VERSION(major * 100 + minor, patch * 10), so 0.1.0 shows as "1.0" in `fi_info`.
pub const PROVIDER_VERSION: u32 = {
    const fn num(s: &str) -> u32 {
        let b = s.as_bytes();
        let mut i = 0;
        let mut n = 0;
        while i < b.len() {
            n = n * 10 + (b[i] - b'0') as u32;
            i += 1;
        }
        n
    }
    let major = num(env!("CARGO_PKG_VERSION_MAJOR"));
    let minor = num(env!("CARGO_PKG_VERSION_MINOR"));
    let patch = num(env!("CARGO_PKG_VERSION_PATCH"));
    fi_version(major * 100 + minor, patch * 10)
};

/// API 2.5 added `fi_domain_attr.max_cntr_value` and `max_err_cntr_value`.
pub const API_2_5: u32 = fi_version(2, 5);

/// libfabric owns `context` and writes into it, so the record must be in writable memory.
static mut PROVIDER: ofi::fi_provider = ofi::fi_provider {
    version: PROVIDER_VERSION,
    fi_version: 0, // set by fi_prov_ini from the running library
    context: ofi::fi_context {
        internal: [std::ptr::null_mut(); 4],
    },
    name: NAME_C.as_ptr(),
    getinfo: Some(crate::info::getinfo),
    fabric: Some(crate::fabric::fabric_open),
    cleanup: Some(cleanup),
};

/// The running libfabric's `fi_version()`, or 0 before `fi_prov_ini`.
static RUNTIME_VERSION: AtomicU32 = AtomicU32::new(0);

pub fn provider_ptr() -> *mut ofi::fi_provider {
    &raw mut PROVIDER
}

/// The provider record, once libfabric has loaded us.
pub fn registered() -> Option<*const ofi::fi_provider> {
    (RUNTIME_VERSION.load(Ordering::Acquire) != 0).then(|| provider_ptr() as *const _)
}

pub fn runtime_version() -> u32 {
    RUNTIME_VERSION.load(Ordering::Acquire)
}

/// libfabric's DSO entry point. It runs under libfabric's init lock, so it must not call
/// fi_getinfo/fi_fabric; fi_version, fi_param_define and fi_log are safe.
#[unsafe(no_mangle)]
pub extern "C" fn fi_prov_ini() -> *mut ofi::fi_provider {
    crate::ffi_boundary! {
        // SAFETY: fi_version has no arguments.
        let running = unsafe { ofi::fi_version() };
        // Declare the running library's API version: libfabric hides a provider from any
        // application that requests a newer API than the provider declares (MPICH 5 asks for
        // 2.5), and rscntr reads and writes only the fields that version has (see info.rs).
        // SAFETY: single-threaded under libfabric's init lock; nothing else touches the record.
        unsafe { (*provider_ptr()).fi_version = running };
        RUNTIME_VERSION.store(running, Ordering::Release);
        crate::params::define();
        crate::fi_info!(Core, "rscntr {} loaded into libfabric API {}.{}",
            env!("CARGO_PKG_VERSION"), running >> 16, running & 0xffff);
        provider_ptr()
    }
}

/// Called by libfabric before it unloads the DSO: the fd watcher thread must not outlive the
/// code it runs, and the process-wide state is given back (see `statics.rs`).
unsafe extern "C" fn cleanup() {
    crate::ffi_boundary! {
        crate::engine::watcher::shutdown();
        crate::layer::release();
        crate::hw::release();
        crate::params::release();
    }
}
