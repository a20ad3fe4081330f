//! Automatic progress where the core has only manual progress (shm, `udp;ofi_rxd`).
//!
//! An application that asks for `FI_PROGRESS_AUTO` data progress expects its operations to
//! complete while it makes no calls (MPICH's triggered collectives ask for it). A core that
//! refuses it in its infos (shm, rxd), or says AUTO without moving data by itself (below), gets
//! it from rscntr (`getinfo::needs_emulation`): the infos say AUTO, the core domain is opened
//! with manual progress and `FI_THREAD_SAFE`, and rscntr's progress thread
//! (`engine/progress.rs`) drives it through the domain's CQs, each read through rscntr's
//! filter (`trigger/cq_filter.rs`): one read of no entries per CQ and pass, while every endpoint bound
//! to the CQ is enabled. The thread's passes follow a schedule: quick while a pass finds new
//! entries, backing off to 50 ms when none come (`engine/progress.rs`). Once the domain is
//! idle, over tcp the thread sleeps on the domain's progress fd instead (the epoll set of its
//! sockets, as the wait fd of the core CQ that bound waits sleep on, [`Plan::ProgressFd`]),
//! so an idle tcp domain costs nothing but a re-check a second. shm, rxd and rxm give rscntr
//! nothing that shows all their work (shm's own waits yield; rxm's fds are per endpoint, and
//! its connection events on another), so there the schedule goes on. With no such domain open
//! the thread costs nothing.
//!
//! Where the core's own AUTO moves data (sockets; `ofi_rxm` for endpoints with `FI_ATOMIC`, which
//! sleeps on its inner CQ's fd) it serves, with the threading the application asked for in the
//! infos (rxm says `FI_THREAD_SAFE` whatever was asked, which MPICH refuses; rscntr opens the
//! core domain thread safe itself). tcp says AUTO but moves an endpoint's data only on the
//! application's calls, and rxm without `FI_ATOMIC` serves only connections: those are driven
//! by rscntr too ([`core_moves_data`]). Domains that did not ask for AUTO are untouched.

use super::trigger::Deferred;
use super::wait::{CoreWaits, Plan};
use crate::engine::Blocker;
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

/// A domain rscntr drives, as this capability sees it (the layer's home, which implements
/// [`Driven`] with [`drive`], [`idle_fd`] and [`arm_idle`]).
pub trait DrivenDomain: Driven + 'static {
    /// The domain's deferred operations, with its CQ filters.
    fn deferred(&self) -> &Deferred;
    /// What the domain knows of waiting on its core (over tcp, its progress fd).
    fn waits(&self) -> CoreWaits<'_>;
}

/// One pass over the domain's CQs, each read through its filter; true when a CQ brought
/// something new.
pub fn drive(home: &impl DrivenDomain) -> bool {
    let mut found = false;
    for f in home.deferred().filters() {
        // SAFETY: the domain's filters live until it closes, after stop().
        found |= unsafe { (*f).drive() };
    }
    found
}

/// One pass as [`drive`] from inside an application's call, which must not block on a CQ that
/// this thread may hold further up its stack: a CQ another thread is reading is tried again,
/// yielding, up to [`BUSY_TRIES`] times (that read may have begun before what this pass is for
/// was queued), then left.
pub fn drive_unless_busy(home: &impl DrivenDomain) {
    for f in home.deferred().filters() {
        for _ in 0..BUSY_TRIES {
            // SAFETY: as in `drive`.
            if unsafe { (*f).drive_unless_busy() }.is_some() {
                break;
            }
            std::thread::yield_now();
        }
    }
}

/// How often [`drive_unless_busy`] tries a CQ that is busy: another thread's read of it takes
/// microseconds; this thread's own, further up, would never end.
const BUSY_TRIES: usize = 1000;

/// The fd the thread sleeps on once the domain is idle: the progress fd, over tcp.
pub fn idle_fd(home: &impl DrivenDomain) -> Option<std::os::fd::RawFd> {
    let waits = home.waits();
    if let Some(b) = waits.bell.lock().as_ref() {
        return Some(b.socket_fd());
    }
    waits.progress.lock().as_ref().map(|b| b.fd())
}

/// Arms the idle fd (the core's `fi_trywait`): false when something is pending.
pub fn arm_idle(home: &impl DrivenDomain) -> bool {
    let waits = home.waits();
    let bell = waits.bell.lock().clone();
    if let Some(b) = bell {
        // The doorbell over shm (`doorbell/bell.rs`): armed for a sleep on its socket, then
        // (false) the thread drives once more before it sleeps.
        return b.arm_socket();
    }
    let blocker = waits.progress.lock().clone();
    blocker.is_none_or(|b| b.arm())
}

/// Starts driving a domain's CQs; over tcp, with the domain's progress fd to sleep on once idle.
///
/// # Safety
/// `home` is the domain's, and [`stop`] is called before it is freed or its progress fd closed.
pub unsafe fn start<D: DrivenDomain>(home: &D) -> c_int {
    let waits = home.waits();
    if waits.plan == Plan::Bell
        && let Err(e) = waits.bell_blocker()
    {
        crate::fi_info!(
            Domain,
            "no doorbell over shm ({e}): rscntr's progress thread naps on its schedule"
        );
    }
    if waits.plan == Plan::ProgressFd
        && let Err(e) = waits.progress_blocker()
    {
        // The schedule alone serves (as over shm).
        crate::fi_info!(
            Domain,
            "no progress fd from the core ({e}): rscntr's progress thread naps on its schedule"
        );
    }
    // SAFETY: caller's contract.
    match unsafe { progress::register(key(home), home as &dyn Driven as *const _) } {
        Ok(()) => 0,
        Err(e) => {
            fi_warn!(Domain, "cannot start rscntr's progress thread: {e}");
            crate::boundary::ffi::err::ENOMEM
        }
    }
}

/// Stops driving the domain; returns once the thread is out of it (and off its fd).
pub fn stop<D: DrivenDomain>(home: &D) {
    progress::unregister(key(home));
}

fn key<D>(home: &D) -> usize {
    home as *const D as usize
}
