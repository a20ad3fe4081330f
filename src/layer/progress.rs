//! Automatic progress where the core has only manual progress (shm, `udp;ofi_rxd`).
//!
//! An application that asks for `FI_PROGRESS_AUTO` data progress expects its operations to
//! complete while it makes no calls (MPICH's triggered collectives ask for it). A core that
//! refuses it in its infos (shm, rxd), or says AUTO without moving data by itself (below), gets
//! it from rscntr (`getinfo::needs_emulation`): the infos say AUTO, the core domain is opened
//! with manual progress and `FI_THREAD_SAFE`, and rscntr's progress thread
//! (`engine/progress.rs`) drives it through the domain's CQs, each read through rscntr's
//! filter (`deferred.rs`): one read of no entries per CQ and pass, while every endpoint bound
//! to the CQ is enabled. Those cores give rscntr nothing to sleep on (shm's own waits yield), so
//! the thread's passes follow a schedule: quick while a pass finds new entries, backing off to
//! 50 ms when none come (`engine/progress.rs`); with no such domain open it costs nothing.
//!
//! Where the core's own AUTO moves data (sockets; `ofi_rxm` for endpoints with `FI_ATOMIC`, which
//! sleeps on its inner CQ's fd) it serves, with the threading the application asked for in the
//! infos (rxm says `FI_THREAD_SAFE` whatever was asked, which MPICH refuses; rscntr opens the
//! core domain thread safe itself). tcp says AUTO but moves an endpoint's data only on the
//! application's calls, and rxm without `FI_ATOMIC` serves only connections: those are driven
//! by rscntr too ([`core_moves_data`]). Domains that did not ask for AUTO are untouched.

use super::deferred::Deferred;
use crate::engine::progress::{self, Driven};
use crate::{fi_warn, ofi};
use std::ffi::c_int;

/// libfabric's FI_PROGRESS_AUTO.
const AUTO: ofi::fi_progress = ofi::fi_progress_FI_PROGRESS_AUTO;

/// The domain attr's data progress (`data_progress`, named `progress` since API 2.0: one field).
pub fn data_progress(dom: &ofi::fi_domain_attr) -> ofi::fi_progress {
    // SAFETY: both names of the union are the same enum.
    unsafe { dom.__bindgen_anon_1.data_progress }
}

pub fn set_data_progress(dom: &mut ofi::fi_domain_attr, p: ofi::fi_progress) {
    dom.__bindgen_anon_1.data_progress = p;
}

/// Cores whose own automatic progress moves data without the application's calls: sockets
/// (a progress thread per domain, its only model) and `ofi_rxm` for endpoints with FI_ATOMIC
/// (its thread then sleeps on the inner CQ's fd and runs the endpoint's progress,
/// `rxm_cm_atomic_progress`; without FI_ATOMIC it serves connections only). The others are
/// driven by rscntr when asked for AUTO: shm and rxd refuse it; tcp says AUTO but starts its
/// progress thread only for some wait objects (`xnet_cq.c`, `xnet_eq.c`), so an endpoint's data
/// waits for the application's calls. `prov_test/auto_progress.c` shows each.
pub fn core_moves_data(core: &str, caps: u64) -> bool {
    core == "sockets" || (core.ends_with(";ofi_rxm") && caps & ofi::FI_ATOMIC as u64 != 0)
}

/// True when `dom` asks for automatic data progress that `core` does not deliver itself for
/// `caps`: rscntr's thread is then what provides it.
pub fn rscntr_provides_auto(dom: &ofi::fi_domain_attr, core: &str, caps: u64) -> bool {
    data_progress(dom) == AUTO && !core_moves_data(core, caps)
}

/// Takes automatic data progress out of the core's copy of an endpoint's info, in a domain
/// rscntr drives (shm refuses the endpoint otherwise, rxm would start its own thread).
///
/// # Safety
/// `core_info` is NULL or a valid info.
pub unsafe fn manual_for_core(core_info: *mut ofi::fi_info) {
    // SAFETY: caller's contract.
    if let Some(dom) = unsafe { core_info.as_mut().and_then(|i| i.domain_attr.as_mut()) }
        && data_progress(dom) == AUTO
    {
        set_data_progress(dom, ofi::fi_progress_FI_PROGRESS_MANUAL);
    }
}

impl Driven for Deferred {
    fn drive(&self) -> bool {
        let mut found = false;
        for f in self.filters() {
            // SAFETY: the domain's filters live until it closes, after stop().
            found |= unsafe { (*f).drive() };
        }
        found
    }
}

/// Starts driving a domain's CQs.
///
/// # Safety
/// `deferred` is the domain's, and [`stop`] is called before it is freed.
pub unsafe fn start(deferred: &Deferred) -> c_int {
    // SAFETY: caller's contract.
    match unsafe { progress::register(key(deferred), deferred as &dyn Driven as *const _) } {
        Ok(()) => 0,
        Err(e) => {
            fi_warn!(Domain, "cannot start rscntr's progress thread: {e}");
            crate::boundary::ffi::err::ENOMEM
        }
    }
}

/// Stops driving the domain; returns once the thread is out of it.
pub fn stop(deferred: &Deferred) {
    progress::unregister(key(deferred));
}

fn key(deferred: &Deferred) -> usize {
    deferred as *const Deferred as usize
}
