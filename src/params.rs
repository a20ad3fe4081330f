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
            ofi::fi_param_type_FI_PARAM_INT,
            c"Spin phases (0-16; each doubles the spin count, 6 is about 1 us) a thread in \
              fi_cntr_wait runs before it yields (FI_WAIT_YIELD) or sleeps (FI_WAIT_UNSPEC, \
              FI_WAIT_FD). Default 6."
                .as_ptr(),
        )
    };
    SPIN_LIMIT.store(
        read_int(SPIN, 0..=SPIN_MAX as c_int)
            .map_or(crate::engine::backoff::DEFAULT_SPIN_LIMIT, |v| v as u32),
        Ordering::Relaxed,
    );
}

pub fn spin_limit() -> u32 {
    SPIN_LIMIT.load(Ordering::Relaxed)
}

/// Reads an integer parameter; a value outside `range` is reported and ignored.
fn read_int(name: &CStr, range: std::ops::RangeInclusive<c_int>) -> Option<c_int> {
    let mut value: c_int = 0;
    // SAFETY: the parameter was defined as FI_PARAM_INT, so libfabric writes one int.
    let ret = unsafe {
        ofi::fi_param_get(
            prov::provider_ptr(),
            name.as_ptr(),
            (&mut value as *mut c_int).cast(),
        )
    };
    if ret != 0 {
        return None;
    }
    if !range.contains(&value) {
        crate::fi_warn!(
            Core,
            "FI_RSCNTR_{} = {value} is outside {range:?}; using the default",
            name.to_string_lossy().to_uppercase()
        );
        return None;
    }
    Some(value)
}
