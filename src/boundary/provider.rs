//! What the boundary knows of the provider: its name and version, and, once `fi_prov_ini` has
//! registered them, the provider record libfabric loaded (which `fi_log` and `fi_param_*`
//! take), the running library's API version and the extension ops table rscntr's domains hand
//! out. The record itself, with its `getinfo` and `fabric` entries, is the top floor's
//! (`prov.rs`): it is registered here so that nothing below it imports upwards.

use crate::ofi;
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

pub const NAME: &str = "rscntr";
pub const NAME_C: &CStr = c"rscntr";

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

/// An ops table `fi_open_ops` hands out under `name` (rscntr's extension API, `ext.rs`).
#[derive(Clone, Copy)]
pub struct OpenOps {
    pub name: &'static CStr,
    pub table: *mut c_void,
}

/// What `fi_prov_ini` registers.
pub struct Registration {
    /// The provider record, in writable memory (libfabric owns its `context`).
    pub provider: *mut ofi::fi_provider,
    /// The running libfabric's `fi_version()`.
    pub running: u32,
    /// The extension ops of every rscntr domain.
    pub ext: OpenOps,
}

static PROVIDER: AtomicPtr<ofi::fi_provider> = AtomicPtr::new(std::ptr::null_mut());
/// The running libfabric's `fi_version()`, or 0 before `fi_prov_ini`.
static RUNTIME_VERSION: AtomicU32 = AtomicU32::new(0);
static EXT_NAME: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());
static EXT_TABLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Called by `fi_prov_ini` before anything logs or reads a parameter.
pub fn register(r: Registration) {
    PROVIDER.store(r.provider, Ordering::Release);
    EXT_NAME.store(r.ext.name.as_ptr().cast_mut(), Ordering::Release);
    EXT_TABLE.store(r.ext.table, Ordering::Release);
    RUNTIME_VERSION.store(r.running, Ordering::Release);
}

/// The provider record, for `fi_param_define` and `fi_param_get` (NULL before `fi_prov_ini`,
/// i.e. in cargo's own tests, which read no parameter).
pub fn provider_ptr() -> *mut ofi::fi_provider {
    PROVIDER.load(Ordering::Acquire)
}

/// The provider record, once libfabric has loaded us (logging's only use: not in unit tests).
#[cfg_attr(test, allow(dead_code))]
pub fn registered() -> Option<*const ofi::fi_provider> {
    (RUNTIME_VERSION.load(Ordering::Acquire) != 0).then(|| provider_ptr() as *const _)
}

pub fn runtime_version() -> u32 {
    RUNTIME_VERSION.load(Ordering::Acquire)
}

/// The extension ops rscntr's domains hand out, once registered.
pub fn ext_ops() -> Option<OpenOps> {
    let name = EXT_NAME.load(Ordering::Acquire);
    // SAFETY: NULL or the pointer of the `&'static CStr` that `register` stored.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) })?;
    Some(OpenOps {
        name,
        table: EXT_TABLE.load(Ordering::Acquire),
    })
}

/// NULL, or our own name (libfabric compares names case-insensitively).
///
/// # Safety
/// `name` is NULL or a C string.
pub unsafe fn is_our_name(name: *const c_char) -> bool {
    // SAFETY: caller's contract.
    name.is_null()
        || unsafe { CStr::from_ptr(name) }
            .to_bytes()
            .eq_ignore_ascii_case(NAME.as_bytes())
}
