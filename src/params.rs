//! `FI_RSCNTR_*` run-time parameters, declared to libfabric so `fi_info -e` lists them.

use crate::{ofi, prov};
use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicU32, Ordering};

/// FI_RSCNTR_SPIN: how many doubling spin phases a waiter runs before it yields (YIELD) or
/// sleeps (UNSPEC, FD).
const SPIN: &CStr = c"spin";
pub const SPIN_MAX: u32 = 16;
static SPIN_LIMIT: AtomicU32 = AtomicU32::new(crate::engine::backoff::DEFAULT_SPIN_LIMIT);

pub fn define() {
    let provider = prov::provider_ptr();
    // SAFETY: the provider record is registered-to-be; name and help are NUL-terminated and the
    // help text has no conversion specifiers.
    unsafe {
        ofi::fi_param_define(
            provider,
            SPIN.as_ptr(),
            ofi::fi_param_type_FI_PARAM_STRING,
            c"Spin phases (0-16; each doubles the spin count, 6 is about 1 us) a thread in \
              fi_cntr_wait runs before it yields (FI_WAIT_YIELD) or sleeps (FI_WAIT_UNSPEC, \
              FI_WAIT_FD). Default 6."
                .as_ptr(),
        )
    };
    define_core();
    SPIN_LIMIT.store(
        read_int(SPIN, 0..=SPIN_MAX as c_int)
            .map_or(crate::engine::backoff::DEFAULT_SPIN_LIMIT, |v| v as u32),
        Ordering::Relaxed,
    );
}

pub fn spin_limit() -> u32 {
    SPIN_LIMIT.load(Ordering::Relaxed)
}

/// Reads an integer parameter. It is declared as a string so that garbage ("abc", which
/// libfabric's own integer parsing would turn into 0) is reported and ignored, like a value
/// outside `range`.
fn read_int(name: &CStr, range: std::ops::RangeInclusive<c_int>) -> Option<c_int> {
    let mut value: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: the parameter was defined as FI_PARAM_STRING, so libfabric writes one char *
    // (which it owns) or leaves it untouched when the variable is unset.
    let ret = unsafe {
        ofi::fi_param_get(
            prov::provider_ptr(),
            name.as_ptr(),
            (&mut value as *mut *mut std::ffi::c_char).cast(),
        )
    };
    if ret != 0 || value.is_null() {
        return None;
    }
    // SAFETY: non-NULL C string from libfabric's parameter table.
    let text = unsafe { CStr::from_ptr(value) }
        .to_string_lossy()
        .into_owned();
    let var = format!("FI_RSCNTR_{}", name.to_string_lossy().to_uppercase());
    match text.trim().parse::<c_int>() {
        Ok(v) if range.contains(&v) => Some(v),
        Ok(v) => {
            crate::fi_warn!(Core, "{var} = {v} is outside {range:?}; using the default");
            None
        }
        Err(_) => {
            crate::fi_warn!(
                Core,
                "{var} = {text:?} is not an integer; using the default"
            );
            None
        }
    }
}

/// FI_RSCNTR_CORE: the core provider rscntr layers over.
const CORE: &CStr = c"core";

fn define_core() {
    // SAFETY: as in `define`.
    unsafe {
        ofi::fi_param_define(
            prov::provider_ptr(),
            CORE.as_ptr(),
            ofi::fi_param_type_FI_PARAM_STRING,
            c"Core provider rscntr layers over: a provider name or a layering such as \
              'tcp;ofi_rxm'; 'none' serves counters only, without endpoints; unset or 'auto' \
              picks the first of efa, verbs;ofi_rxm, tcp;ofi_rxm, tcp, shm, udp;ofi_rxd, sockets \
              that answers the application's hints."
                .as_ptr(),
        )
    };
}

/// The FI_RSCNTR_CORE setting, read at each use (fi_getinfo) so tests can change it.
pub fn core() -> Option<String> {
    let mut value: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: defined as FI_PARAM_STRING: libfabric writes one char * it owns, or nothing.
    let ret = unsafe {
        ofi::fi_param_get(
            prov::provider_ptr(),
            CORE.as_ptr(),
            (&mut value as *mut *mut std::ffi::c_char).cast(),
        )
    };
    if ret != 0 || value.is_null() {
        return None;
    }
    // SAFETY: non-NULL C string from libfabric's parameter table.
    let text = unsafe { CStr::from_ptr(value) }
        .to_string_lossy()
        .trim()
        .to_owned();
    (!text.is_empty()).then_some(text)
}
