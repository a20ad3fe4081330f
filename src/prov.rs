//! The provider record libfabric loads: `fi_prov_ini`, which registers it with the boundary
//! (with the running API version and the extension ops), and the record's entries: `getinfo`
//! (`info.rs`), `fabric`, which opens rscntr's own fabric or a core's by the fabric's name,
//! and `cleanup`.

use crate::boundary::ffi::err;
use crate::boundary::params;
use crate::boundary::provider::{self, NAME_C, PROVIDER_VERSION, Registration};
use crate::{ext, fi_warn, layer, ofi, standalone};
use std::ffi::{c_int, c_void};

/// libfabric owns `context` and writes into it, so the record must be in writable memory.
static mut PROVIDER: ofi::fi_provider = ofi::fi_provider {
    version: PROVIDER_VERSION,
    fi_version: 0, // set by fi_prov_ini from the running library
    context: ofi::fi_context {
        internal: [std::ptr::null_mut(); 4],
    },
    name: NAME_C.as_ptr(),
    getinfo: Some(crate::info::getinfo),
    fabric: Some(fabric_open),
    cleanup: Some(cleanup),
};

fn provider_ptr() -> *mut ofi::fi_provider {
    &raw mut PROVIDER
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
        provider::register(Registration {
            provider: provider_ptr(),
            running,
            ext: ext::open_ops(),
        });
        params::define();
        crate::fi_info!(Core, "rscntr {} loaded into libfabric API {}.{}",
            env!("CARGO_PKG_VERSION"), running >> 16, running & 0xffff);
        provider_ptr()
    }
}

/// `fi_fabric`: rscntr's own fabric (`FI_RSCNTR_CORE=none`) or a mirrored core fabric.
unsafe extern "C" fn fabric_open(
    attr: *mut ofi::fi_fabric_attr,
    fabric: *mut *mut ofi::fid_fabric,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes NULL or the attr of an info it returned.
        let Some(attr) = (unsafe { attr.as_ref() }) else {
            fi_warn!(Fabric, "NULL fabric attr");
            return err::EINVAL;
        };
        if attr.name.is_null() {
            fi_warn!(Fabric, "fabric attr without a name");
            return err::EINVAL;
        }
        // SAFETY: attr.name is a C string.
        if !unsafe { provider::is_our_name(attr.name) } {
            // A mirrored core fabric.
            // SAFETY: attr valid with a name; `fabric` an out pointer.
            return unsafe { layer::fabric_open(attr, fabric, context) };
        }
        // SAFETY: `fabric` is NULL or the caller's out pointer.
        unsafe { standalone::fabric_open(attr, fabric, context) }
    }
}

/// Called by libfabric before it unloads the DSO: the fd watcher, progress and trigger threads
/// must not outlive the code they run, and the process-wide state is given back (see
/// `boundary/statics.rs`).
unsafe extern "C" fn cleanup() {
    crate::ffi_boundary! {
        crate::engine::watcher::shutdown();
        crate::engine::progress::shutdown();
        crate::engine::trigger::shutdown();
        layer::release();
        crate::cntr::hw::release();
        params::release();
    }
}
