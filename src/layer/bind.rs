//! rscntr's bind for core endpoints and MRs: an rscntr counter is replaced by the core counter
//! that feeds it (opened with FI_PEER); every other fid goes to the core unchanged.

use super::doorbell::ring::{EpBell, Posting};
use super::home::CoreHome;
use super::hooks::{BindHook, CntrBind, Step};
use super::interpose::close_through_core;
use super::rma_event::RmaEp;
use super::shm_endpoints::is_shm;
use super::trigger::CqFilter;
use super::trigger::alias;
use super::trigger::{TriggerEp, WorkHome};
use crate::boundary::ffi::err;
use crate::boundary::testhook::{self, Op};
use crate::boundary::versions;
use crate::cntr::{self, AnyCntr};
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};

/// Per core endpoint or MR: rscntr's copy of its `fi_ops` and the counters bound to it.
#[repr(C)]
struct Binder {
    fi_ops: ofi::fi_ops,
    orig_fi_ops: *const ofi::fi_ops,
    /// Endpoints only: rscntr's copy of the endpoint ops, so that the transmit and receive
    /// contexts of a scalable endpoint get rscntr's bind too.
    ep_ops: Option<Box<ofi::fi_ops_ep>>,
    orig_ep_ops: *const ofi::fi_ops_ep,
    home: *const CoreHome,
    /// The core provider's name, for log lines.
    core: Box<str>,
    /// Endpoints of cores that need FI_ENABLE again once a shared context is bound to an
    /// enabled endpoint (see [`reenables_after_shared_ctx`]).
    reenable_after_shared_ctx: bool,
    /// Endpoints and transmit contexts whose core drops the sends it has not written out yet
    /// when they close (see [`flush_passes`]): how many progress passes the close drives
    /// first through the CQs bound here; 0 for the rest.
    flush_passes: usize,
    /// Endpoints: the info rscntr opened the core endpoint with (NULL for MRs and contexts),
    /// freed with the endpoint. Cores may keep pointers into it, as into the application's own
    /// info, which applications keep while the endpoint lives: sockets copies the `fi_info`
    /// struct (`sock_alloc_endpoint`, memcpy) and reads its `tx_attr`/`rx_attr` when a scalable
    /// endpoint opens contexts, so a freed copy made `fi_tx_context` fail (MPICH over sockets).
    core_info: *mut ofi::fi_info,
    /// Endpoints opened with FI_TRIGGER: their data tables and queued triggered operations
    /// (`trigger.rs`); NULL otherwise.
    trigger: *mut TriggerEp,
    /// Endpoints of a domain whose remote accesses rscntr counts: their rma and atomic tables
    /// (`rma_ep.rs`); NULL otherwise.
    rma_ep: *mut RmaEp,
    /// The counters bound here, and (endpoints) whether the endpoint is enabled yet; one lock
    /// so that a bind and an enable racing each other count the binding exactly once.
    bound: Mutex<Bound>,
    /// Endpoints: the core AV bound here (where a ringing endpoint looks its peers up).
    av: std::sync::atomic::AtomicPtr<ofi::fid_av>,
    /// Endpoints over shm: the AV is bound to the core endpoint at FI_ENABLE, and its region
    /// kept mapped after the core closed it (`shm_endpoints.rs`).
    shm: bool,
    /// Endpoints of a domain that waits over shm: the doorbell's part (`doorbell/ring.rs`), made
    /// at FI_ENABLE, dropped after the core closed the endpoint.
    bell: Mutex<Option<EpBell>>,
}

struct Bound {
    cntrs: Vec<*const dyn AnyCntr>,
    /// MRs count as enabled from the start: a core's counter progress walks endpoints only.
    enabled: bool,
    /// The CQs bound here, for the flush at close (only where `flush_passes` is not 0).
    flush_cqs: Vec<*mut ofi::fid_cq>,
    /// In a domain rscntr drives (`progress.rs`): the filters of the CQs bound here, told
    /// when the endpoint is enabled and closed.
    cqs: Vec<*mut CqFilter>,
    /// Over shm, until FI_ENABLE: the AV the application bound (`shm_endpoints.rs`).
    av_at_enable: *mut ofi::fid,
}

/// Does `core` need the application's FI_ENABLE repeated after a shared transmit or receive
/// context is bound to an already enabled endpoint? The sockets core does: its bind only records
/// the shared context (`sock_ep_bind`, FI_CLASS_STX_CTX/SRX_CTX), and only `sock_ep_enable`
/// enables it and hands it to the progress engine, so operations on the endpoint fail with
/// -FI_EOPBADSTATE until the endpoint is enabled again. Applications that know this key it on
/// the provider name (Sandia OpenSHMEM enables again only when `prov_name` starts with
/// "sockets"); over rscntr the name is "rscntr", so rscntr repeats the enable itself, for this
/// core only (others, such as tcp, fail a second FI_ENABLE).
pub fn reenables_after_shared_ctx(core: &str) -> bool {
    core.eq_ignore_ascii_case("sockets")
}

/// How many progress passes a close of an endpoint (or transmit context) over `core` drives
/// first, for one opened with `info` (the core's; `tx_size`: the context's own transmit size,
/// 0 for the info's). The sockets core queues each send in its transmit context's ring and
/// writes it to the wire from its progress, one new ring entry per pass under manual
/// progress; an inject (MPICH's small sends) completes when queued, and closing the context
/// frees the ring with whatever is still in it. MPICH knows: at MPI_Finalize over a provider
/// named "sockets", and only then, it sends itself a message and progresses until it arrives
/// (`flush_send_queue`). Over rscntr the name is "rscntr", so MPICH skipped it, and a spawned
/// child's last message before MPI_Finalize never left (its parent waited for it forever). So
/// rscntr drives the passes itself: as many as the ring holds operations, plus the progress
/// engine's own entries (each pass takes one new one and moves the others on). Under automatic
/// progress sockets' own thread does this, and reading a CQ drives nothing: 0.
///
/// # Safety
/// `info` is NULL or a valid info.
unsafe fn flush_passes(core: &str, info: *const ofi::fi_info, tx_size: usize) -> usize {
    /// sockets' default transmit size and its progress engine's entries (`sock.h`).
    const SOCKETS_TX_SIZE: usize = 256;
    const SOCKETS_PE_ENTRIES: usize = 128;
    if !core.eq_ignore_ascii_case("sockets") {
        return 0;
    }
    // SAFETY: caller's contract; a valid info's attrs are NULL or valid.
    let (dom, tx) = unsafe {
        let Some(i) = info.as_ref() else { return 0 };
        (i.domain_attr.as_ref(), i.tx_attr.as_ref())
    };
    // sockets takes an unspecified data progress as automatic.
    if dom.is_none_or(|d| super::progress::data_progress(d) != ofi::fi_progress_FI_PROGRESS_MANUAL)
    {
        return 0;
    }
    let size = match (tx_size, tx.map_or(0, |t| t.size)) {
        (0, 0) => SOCKETS_TX_SIZE,
        (0, s) | (s, _) => s,
    };
    size + SOCKETS_PE_ENTRIES + 2
}

/// Gives a core MR rscntr's bind and close.
///
/// # Safety
/// `fid` is an open core MR of the domain whose counters live in `home`.
pub unsafe fn patch(fid: *mut ofi::fid, home: &CoreHome, core: &str) {
    // SAFETY: caller's contract.
    unsafe { patch_fid(fid, home, core, None, std::ptr::null_mut()) };
}

/// How an endpoint posts, for its ringing tables (`doorbell/ring.rs`): its default transmit
/// flags (those of the info it was opened with, 0 without one), and its domain's progress, run
/// once after an inject toward the domain itself.
///
/// # Safety
/// `core_info` is NULL or a valid info; `home` outlives the endpoint.
unsafe fn posting(home: &CoreHome, core_info: *const ofi::fi_info) -> Posting {
    // SAFETY: caller's contract.
    let tx = unsafe { core_info.as_ref().and_then(|i| i.tx_attr.as_ref()) };
    let home = home as *const CoreHome as usize;
    Posting {
        tx_op_flags: tx.map_or(0, |t| t.op_flags),
        // SAFETY: the home outlives its endpoints, whose ringing tables are freed after them.
        land: std::sync::Arc::new(move || {
            super::progress::drive_unless_busy(unsafe { &*(home as *const CoreHome) })
        }),
    }
}

/// Gives a core endpoint (or transmit/receive context) rscntr's bind and close, and its
/// contexts the same.
///
/// `core_info` (NULL or the info the core opened `ep` with) is freed when the endpoint closes.
/// A `trigger`-able endpoint (opened with FI_TRIGGER) also gets rscntr's data tables and
/// fi_cancel (`trigger.rs`) and aliases (`alias.rs`).
///
/// # Safety
/// `ep` is an open core endpoint of the domain whose counters live in `home`; `core_info` is
/// NULL or an info rscntr allocated, which nothing else frees.
pub unsafe fn patch_ep(
    ep: *mut ofi::fid_ep,
    home: &CoreHome,
    core: &str,
    core_info: *mut ofi::fi_info,
    trigger: bool,
) {
    // Endpoints of a domain whose remote accesses rscntr counts notify their targets
    // (`rma_ep.rs`) and keep the bookkeeping of trigger-able ones, which notifications use.
    let rma = home.rma.is_some();
    // SAFETY: a valid endpoint with valid ops tables.
    unsafe {
        let orig = (*ep).ops;
        let mut ops = Box::new(*orig);
        ops.size = ops.size.min(std::mem::size_of::<ofi::fi_ops_ep>());
        ops.tx_ctx = Some(tx_ctx);
        ops.rx_ctx = Some(rx_ctx);
        if trigger || rma {
            ops.cancel = Some(cancel);
        }
        let b = patch_fid(ep.cast(), home, core, Some((ops, orig)), core_info);
        (*ep).ops = &mut **(*b).ep_ops.as_mut().unwrap();
        (*b).flush_passes = flush_passes(core, core_info, 0);
        if (trigger || rma) && home.plan == super::wait::Plan::Bell {
            // Over shm: ringing tables under the ones installed next, which call them as the
            // core's (`doorbell/ring.rs`); in a domain that waits, with its bell, published at
            // FI_ENABLE.
            let bell = home
                .waits_seen
                .load(std::sync::atomic::Ordering::Acquire)
                .then(|| home.waits().bell_blocker().ok())
                .flatten();
            *(*b).bell.lock() =
                EpBell::below(ep, bell, home.peers.clone(), posting(home, core_info));
        }
        if let Some(events) = &home.rma {
            let tx = core_info.as_ref().and_then(|i| i.tx_attr.as_ref());
            let op_flags = tx.map_or(0, |t| t.op_flags);
            let msg_order = tx.map_or(0, |t| t.msg_order);
            let mr_mode = core_info
                .as_ref()
                .and_then(|i| i.domain_attr.as_ref())
                .map_or(0, |d| d.mr_mode as u64);
            (*b).rma_ep = RmaEp::patch(
                ep,
                &home.deferred,
                events,
                op_flags,
                core,
                mr_mode,
                msg_order,
            );
        }
        if trigger || rma {
            (*b).trigger = TriggerEp::patch(ep, home);
        }
        if let Some(r) = (*b).rma_ep.as_ref() {
            // Before the application has the endpoint: no op runs yet.
            r.set_trigger((*b).trigger);
        }
    }
}

/// fi_cancel on a trigger-able endpoint: a triggered operation not started yet is rscntr's
/// to cancel; anything else is the core's.
unsafe extern "C" fn cancel(fid: *mut ofi::fid, context: *mut c_void) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only patched trigger-able endpoints reach this op.
        let b = unsafe { binder(fid) };
        // SAFETY: set at patch, freed only after the core closed the endpoint.
        if let Some(ret) = unsafe { (*b.trigger).cancel(context) } {
            return ret;
        }
        // SAFETY: the core's own op.
        match unsafe { (*b.orig_ep_ops).cancel } {
            Some(f) => unsafe { f(fid, context) },
            None => err::ENOSYS as isize,
        }
    }
}

/// # Safety
/// `fid` is an open core endpoint or MR of the domain whose counters live in `home`.
unsafe fn patch_fid(
    fid: *mut ofi::fid,
    home: &CoreHome,
    core: &str,
    ep_ops: Option<(Box<ofi::fi_ops_ep>, *const ofi::fi_ops_ep)>,
    core_info: *mut ofi::fi_info,
) -> *mut Binder {
    // SAFETY: a valid fid with a valid ops table.
    unsafe {
        let (ep_ops, orig_ep_ops) = match ep_ops {
            Some((ops, orig)) => (Some(ops), orig),
            None => (None, std::ptr::null()),
        };
        let is_ep = ep_ops.is_some();
        let mut b = Box::new(Binder {
            fi_ops: *(*fid).ops,
            orig_fi_ops: (*fid).ops,
            ep_ops,
            orig_ep_ops,
            home,
            core: core.into(),
            reenable_after_shared_ctx: is_ep && reenables_after_shared_ctx(core),
            shm: is_ep && is_shm(core),
            flush_passes: 0,
            core_info,
            trigger: std::ptr::null_mut(),
            rma_ep: std::ptr::null_mut(),
            bound: Mutex::new(Bound {
                cntrs: Vec::new(),
                enabled: !is_ep,
                flush_cqs: Vec::new(),
                cqs: Vec::new(),
                av_at_enable: std::ptr::null_mut(),
            }),
            av: Default::default(),
            bell: Mutex::new(None),
        });
        b.fi_ops.bind = Some(bind);
        b.fi_ops.close = Some(close);
        if is_ep || home.rma.is_some() {
            b.fi_ops.control = Some(control);
        }
        let b = Box::into_raw(b);
        (*fid).ops = &mut (*b).fi_ops;
        b
    }
}

/// A context of a scalable endpoint: the core's, with rscntr's bind, and trigger-able when the
/// scalable endpoint is (MPICH over sockets posts its triggered collectives' deferred work on
/// the contexts of its scalable endpoint).
///
/// A transmit context (`tx_size`: the size its attr asked, 0 for the endpoint's; None for a
/// receive context) is flushed at close as its endpoint would be (see [`flush_passes`]).
///
/// # Safety
/// `sep` was patched by [`patch_ep`]; `out` is the core's out pointer, filled when `ret` is 0.
unsafe fn patched_ctx(
    sep: *mut ofi::fid_ep,
    ret: c_int,
    out: *mut *mut ofi::fid_ep,
    tx_size: Option<usize>,
) -> c_int {
    if ret == 0 {
        // SAFETY: the core created a context and stored it through `out`.
        unsafe {
            let b = binder(sep.cast());
            patch_ep(
                *out,
                &*b.home,
                &b.core,
                std::ptr::null_mut(),
                !b.trigger.is_null(),
            );
            if let Some(size) = tx_size {
                let ctx = binder((*out).cast()) as *const Binder as *mut Binder;
                // Before the application has the context: nothing reads it yet.
                (*ctx).flush_passes = flush_passes(&b.core, b.core_info, size);
            }
        };
    }
    ret
}

unsafe extern "C" fn tx_ctx(
    sep: *mut ofi::fid_ep,
    index: c_int,
    attr: *mut ofi::fi_tx_attr,
    out: *mut *mut ofi::fid_ep,
    context: *mut std::ffi::c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched endpoints reach this op; the core's own op.
        unsafe {
            let orig = (*binder(sep.cast()).orig_ep_ops).tx_ctx;
            let ret = orig.map_or(err::ENOSYS, |f| f(sep, index, attr, out, context));
            patched_ctx(sep, ret, out, Some(attr.as_ref().map_or(0, |a| a.size)))
        }
    }
}

unsafe extern "C" fn rx_ctx(
    sep: *mut ofi::fid_ep,
    index: c_int,
    attr: *mut ofi::fi_rx_attr,
    out: *mut *mut ofi::fid_ep,
    context: *mut std::ffi::c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched endpoints reach this op; the core's own op.
        unsafe {
            let orig = (*binder(sep.cast()).orig_ep_ops).rx_ctx;
            let ret = orig.map_or(err::ENOSYS, |f| f(sep, index, attr, out, context));
            patched_ctx(sep, ret, out, None)
        }
    }
}

/// The trigger-able endpoint `ep` is (or aliases), for deferred operations naming it.
///
/// # Safety
/// `ep` is NULL or a readable endpoint fid.
pub unsafe fn trigger_of<'a>(ep: *mut ofi::fid_ep) -> Option<&'a TriggerEp> {
    // SAFETY: caller's contract.
    let fid = unsafe { ep.as_ref() }?;
    // SAFETY: a readable fid has a readable ops table.
    let close = unsafe { (*fid.fid.ops).close }.map(|f| f as *const ());
    if close == Some(self::close as *const ()) {
        // SAFETY: patched by patch_fid; its trigger record lives until the core closed it.
        return unsafe { binder(ep.cast()).trigger.as_ref() };
    }
    // SAFETY: as above.
    unsafe { alias::parent_of(ep) }
}

/// The deferred work queue finds its endpoints through the fids rscntr patched here.
impl WorkHome for CoreHome {
    fn deferred(&self) -> &super::trigger::Deferred {
        &self.deferred
    }
    unsafe fn trigger_of<'a>(&self, ep: *mut ofi::fid_ep) -> Option<&'a TriggerEp> {
        // SAFETY: caller's contract.
        unsafe { trigger_of(ep) }
    }
}

/// # Safety
/// `fid` was patched by [`patch`].
unsafe fn binder<'a>(fid: *mut ofi::fid) -> &'a Binder {
    // SAFETY: fi_ops is Binder's first field (caller's contract).
    unsafe { &*((*fid).ops as *const Binder) }
}

impl Binder {
    /// Before the core closes an endpoint or transmit context that drops the sends it has not
    /// written out yet (see [`flush_passes`]): drives its progress that many passes, through
    /// the CQs bound to it (reading none of their entries).
    fn flush(&self) {
        if self.flush_passes == 0 {
            return;
        }
        let cqs = {
            let bound = self.bound.lock();
            if !bound.enabled {
                return;
            }
            bound.flush_cqs.clone()
        };
        for _ in 0..self.flush_passes {
            for &cq in &cqs {
                // SAFETY: a CQ bound here, which the core keeps open while it is bound; a read
                // of no entries only runs its progress (through rscntr's filter, if any).
                unsafe {
                    if let Some(read) = (*(*cq).ops).read {
                        read(cq, std::ptr::null_mut(), 0);
                    }
                }
            }
        }
        crate::fi_dbg!(
            EpCtrl,
            "drove {} progress passes over {} CQ(s) before the {} core closes a transmitting \
            endpoint (it drops the sends not written out yet)",
            self.flush_passes,
            cqs.len(),
            self.core
        );
    }

    /// The core's own `fi_control` on `fid`, the object this Binder patched.
    ///
    /// # Safety
    /// `arg` is what the core's control expects for `command`.
    unsafe fn core_control(&self, fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
        // SAFETY: the core's own op table (endpoints always get rscntr's control, so the one
        // saved is the core's) and op; the caller's contract for `arg`.
        match unsafe { (*self.orig_fi_ops).control } {
            Some(orig) => unsafe { orig(fid, command, arg) },
            None => err::ENOSYS,
        }
    }
}

unsafe extern "C" fn bind(fid: *mut ofi::fid, bfid: *mut ofi::fid, flags: u64) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched fids reach this op.
        let b = unsafe { binder(fid) };
        // SAFETY: the core's own op table.
        let orig_bind = unsafe { (*b.orig_fi_ops).bind.unwrap() };
        if bfid.is_null() {
            // Cores read the bound fid's class without checking.
            fi_warn!(EpCtrl, "NULL fid to bind");
            return err::EINVAL;
        }
        // SAFETY: a readable fid.
        let Some(c) = (unsafe { cntr::as_cntr::<'static>(bfid) }) else {
            // SAFETY: not ours: the core's business (a readable fid, as above).
            return unsafe { bind_core_fid(b, fid, bfid, flags, orig_bind) };
        };
        if !std::ptr::eq(c.home_ptr(), b.home.cast()) {
            fi_warn!(EpCtrl, "counter belongs to another domain");
            return err::EINVAL;
        }
        if c.counts_bytes() {
            // The peer API (and a core's own counters) count completions: a byte counter fed
            // by them would silently count the wrong thing.
            fi_warn!(EpCtrl, "FI_CNTR_EVENTS_BYTES counters cannot count a core's completions");
            return err::EOPNOTSUPP;
        }
        testhook::panic(Op::Bind);
        // SAFETY: the home outlives the fids bound in it.
        let home = unsafe { &*b.home };
        let waits = home.waits();
        // SAFETY: set at patch, freed only after the core closed the endpoint.
        let trigger = unsafe { b.trigger.as_ref() };
        // The capabilities that care, asked once each, in this order (`hooks.rs`): the
        // domain's remote-access counters (when rscntr counts them) take a bind to an MR and
        // refuse a mixed one; the bound wait opens the counter's core counter and the core
        // binds it; a trigger-able endpoint notes its counter.
        let hooks: [Option<&dyn BindHook>; 3] = [
            home.rma.as_ref().map(|r| r as &dyn BindHook),
            Some(&waits),
            trigger.map(|t| t as &dyn BindHook),
        ];
        let bind = CntrBind {
            fid,
            // SAFETY: a readable core fid.
            class: unsafe { (*fid).fclass },
            cntr: c,
            cntr_fid: bfid,
            flags,
            core: &b.core,
            core_bind: orig_bind,
        };
        let mut taken = false;
        for hook in hooks.into_iter().flatten() {
            match hook.bind_cntr(&bind) {
                Step::Next => {}
                Step::Fail(e) => return e,
                Step::Taken => {
                    taken = true;
                    break;
                }
            }
        }
        let mut bound = b.bound.lock();
        if taken {
            c.bound(true, false);
        } else {
            // An endpoint enabled before this bind (MRs count as enabled from the start).
            let late = bound.enabled && b.ep_ops.is_some();
            c.bound(bound.enabled, late);
        }
        bound.cntrs.push(c as *const dyn AnyCntr);
        drop(bound);
        // The core may have added fds to the counter's wait set (rxd does at a bind).
        home.room.wait_sets_changed();
        0
    }
}

/// Binds a fid that is not an rscntr counter: the core's own bind, then, on a core that needs it,
/// the FI_ENABLE the core expects after a shared context is bound to an enabled endpoint.
///
/// # Safety
/// `fid` was patched by [`patch_ep`] or [`patch`] (`b` its Binder); `bfid` is a readable fid.
unsafe fn bind_core_fid(
    b: &Binder,
    fid: *mut ofi::fid,
    bfid: *mut ofi::fid,
    flags: u64,
    orig_bind: unsafe extern "C" fn(*mut ofi::fid, *mut ofi::fid, u64) -> c_int,
) -> c_int {
    // SAFETY: caller's contract.
    let class = unsafe { (*bfid).fclass };
    let shared = class == ofi::FI_CLASS_STX_CTX as usize || class == ofi::FI_CLASS_SRX_CTX as usize;
    if b.shm && class == ofi::FI_CLASS_AV as usize {
        // Bound to the core at FI_ENABLE (`shm_endpoints.rs`).
        let mut bound = b.bound.lock();
        if !bound.enabled {
            if !bound.av_at_enable.is_null() {
                fi_warn!(EpCtrl, "an AV is already bound to this {} endpoint", b.core);
                return err::EINVAL;
            }
            bound.av_at_enable = bfid;
            b.av.store(bfid.cast(), std::sync::atomic::Ordering::Release);
            if let Some(bell) = &*b.bell.lock() {
                bell.record().set_av(bfid.cast());
            }
            return 0;
        }
    }
    if !(b.reenable_after_shared_ctx && shared) {
        // SAFETY: the home outlives the fids bound in it.
        let home = unsafe { &*b.home };
        let driven = home.auto_progress && b.ep_ops.is_some();
        // In a domain rscntr drives, its drives wait from the core's bind of a CQ until the
        // CQ's filter counts the endpoint as not enabled yet: a drive in between would have the
        // core progress an endpoint without its resources (shm's region, made at FI_ENABLE).
        let exclusive =
            (driven && class == ofi::FI_CLASS_CQ as usize).then(|| home.deferred.closing.write());
        // SAFETY: the core's own bind of a fid rscntr does not own.
        let ret = unsafe { orig_bind(fid, bfid, flags) };
        if ret == 0 && class == ofi::FI_CLASS_AV as usize {
            b.av.store(bfid.cast(), std::sync::atomic::Ordering::Release);
            if let Some(bell) = &*b.bell.lock() {
                bell.record().set_av(bfid.cast());
            }
        }
        if ret != 0 || class != ofi::FI_CLASS_CQ as usize {
            return ret;
        }
        if b.flush_passes != 0 {
            // The core refuses to close a CQ bound to a context: it outlives this one.
            let mut bound = b.bound.lock();
            if !bound.flush_cqs.contains(&bfid.cast()) {
                bound.flush_cqs.push(bfid.cast());
            }
        }
        // SAFETY: set at patch, freed only after the core closed the endpoint.
        let trigger = unsafe { b.trigger.as_ref() };
        if trigger.is_none() && !driven {
            return 0;
        }
        // SAFETY: a CQ of this domain, just bound; the home outlives it.
        let Some(f) = (unsafe { home.deferred.filter(bfid.cast()) }) else {
            return 0;
        };
        if driven {
            // rscntr's progress thread drives the CQ once the endpoint is enabled
            // (`progress.rs`).
            let mut bound = b.bound.lock();
            // SAFETY: the domain's filter, live until the domain closes.
            unsafe { (*f).ep_bound(bound.enabled) };
            bound.cqs.push(f);
        }
        drop(exclusive);
        if let Some(t) = trigger {
            // Deferred operations' completions are taken out of it (`deferred.rs`), and
            // notifications of remote accesses (`rma_event.rs`).
            t.bound_cq(f, flags);
            if let Some(rma) = &home.rma {
                let r = rma.add_filter(fid.cast(), f, flags);
                if r != 0 {
                    return r;
                }
            }
        }
        return 0;
    }
    // Under the lock, which an enable holds across the core's call: either the enable has
    // finished (and is repeated here) or it runs after this bind and enables the context itself.
    let bound = b.bound.lock();
    // SAFETY: as above.
    let ret = unsafe { orig_bind(fid, bfid, flags) };
    if ret != 0 || !bound.enabled {
        return ret;
    }
    // SAFETY: FI_ENABLE takes no argument.
    let ret = unsafe { b.core_control(fid, ofi::FI_ENABLE as c_int, std::ptr::null_mut()) };
    if ret == 0 {
        crate::fi_info!(
            EpCtrl,
            "enabled the {} endpoint again after a shared {} context was bound to it (the core needs it)",
            b.core,
            if class == ofi::FI_CLASS_STX_CTX as usize {
                "transmit"
            } else {
                "receive"
            }
        );
    } else {
        fi_warn!(
            EpCtrl,
            "the {} core failed to enable its endpoint again after a shared context was bound: {ret}",
            b.core
        );
    }
    ret
}

unsafe extern "C" fn close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched fids reach this op.
        let b = unsafe { binder(fid) } as *const Binder as *mut Binder;
        // SAFETY: the Binder is live until the core closed the object; its trigger record too.
        if let Some(t) = unsafe { (*b).trigger.as_ref() } {
            // SAFETY: as above.
            if unsafe { !(*b).rma_ep.is_null() } && t.deferred() != 0 {
                // rscntr's own notifications of remote accesses (`rma_ep.rs`) complete once
                // the endpoint's CQs are read: the application cannot know of them. Only
                // then: reading a CQ drives the progress of every endpoint bound to it, and
                // rxm's crashes on an endpoint that was never enabled.
                t.settle_deferred(std::time::Duration::from_secs(1));
            }
            let (queued, aliases) = (t.queued(), t.aliases.load(std::sync::atomic::Ordering::Acquire));
            let deferred = t.deferred();
            if queued != 0 || aliases != 0 || deferred != 0 {
                fi_warn!(EpCtrl, "endpoint still has {queued} triggered operation(s) not started (fi_cancel \
                    them first), {deferred} deferred operation(s) queued or in progress and {aliases} \
                    open alias(es)");
                return err::EBUSY;
            }
        }
        // SAFETY: as above.
        unsafe { (*b).flush() };
        // An MR whose remote accesses rscntr counts: its key, to forget it once closed.
        // SAFETY: a readable fid; an MR's fid begins its fid_mr.
        let mr_key = unsafe { ((*fid).fclass == ofi::FI_CLASS_MR as usize).then(|| (*fid.cast::<ofi::fid_mr>()).key) };
        // rscntr's own progress-driving reads wait while the core closes an endpoint (see
        // Deferred::closing).
        // SAFETY: the home outlives its objects.
        let home = unsafe { &*(*b).home };
        let closing = unsafe { (*b).ep_ops.is_some() }.then(|| home.deferred.closing.write());
        let mut enabled = false;
        if closing.is_some() {
            // SAFETY: as above; the bound counters cannot close before this endpoint.
            let bound = unsafe { (*b).bound.lock() };
            enabled = bound.enabled;
            for c in bound.cntrs.iter() {
                // SAFETY: a bound counter cannot close (EBUSY) before its unbind.
                unsafe { (**c).binding_closing(bound.enabled) };
            }
        }
        // Over shm, the region of an enabled endpoint stays mapped (`shm_endpoints.rs`).
        // SAFETY: as above; an open, enabled endpoint of this domain.
        let region = (enabled && unsafe { (*b).shm }).then(|| unsafe { home.closed_regions.before_close(fid.cast()) }).flatten();
        // SAFETY: the Binder of `fid`; nothing reaches it once the core closed the object.
        let closed = unsafe { close_through_core(fid, b, (*b).orig_fi_ops) };
        if let (Ok(_), Some(region)) = (&closed, region) {
            home.closed_regions.after_close(region);
        }
        drop(closing);
        let b = match closed {
            Ok(b) => b,
            Err(e) => return e,
        };
        // Fds the core had added to counters' wait sets are closed (their numbers free again).
        home.room.wait_sets_changed();
        // SAFETY: the home outlives its objects.
        if let Some(rma) = unsafe { &(*b.home).rma } {
            match mr_key {
                Some(key) => rma.unregistered(fid.cast(), key),
                None => rma.ep_closed(fid),
            }
        }
        let bound = b.bound.lock();
        for c in bound.cntrs.iter() {
            // SAFETY: a bound counter cannot close (EBUSY) before this unbind.
            unsafe { (**c).unbound(bound.enabled) };
        }
        for f in bound.cqs.iter() {
            // SAFETY: the domain's filters live until it closes, after its endpoints.
            unsafe { (**f).ep_closed(bound.enabled) };
        }
        if !b.core_info.is_null() {
            // SAFETY: rscntr's own copy (see patch_ep); the core no longer uses it.
            unsafe { versions::freeinfo(b.core_info) };
        }
        if !b.trigger.is_null() {
            // SAFETY: nothing is queued on it and the core endpoint is gone.
            unsafe { TriggerEp::free(b.trigger) };
        }
        if !b.rma_ep.is_null() {
            // SAFETY: the core endpoint is gone; nothing calls its tables.
            unsafe { RmaEp::free(b.rma_ep) };
        }
        // The core endpoint is gone: its name file and ringing tables go.
        drop(b.bell.lock().take());
        0
    }
}

/// The doorbell of an endpoint about to be enabled over shm: the domain's bell, published under
/// the endpoint's address, when the domain waits; otherwise none (the domain's waits learn that
/// an endpoint of theirs is not rung), and a name file saying that the endpoint rings its
/// peers' bells (`doorbell/ring.rs`).
///
/// # Safety
/// `ep` is an open core endpoint of the domain of `home`.
unsafe fn publish_bell(
    home: &CoreHome,
    ep: *mut ofi::fid_ep,
    hints: u128,
) -> (
    Option<std::sync::Arc<super::doorbell::bell::BellBlocker>>,
    Option<super::doorbell::bell::NameFile>,
) {
    let waits = home.waits();
    if !home.waits_seen.load(std::sync::atomic::Ordering::Acquire) {
        waits.without_bell();
        // SAFETY: caller's contract.
        return (None, unsafe { EpBell::publish_ringer(ep, &home.answers) });
    }
    let Ok(blocker) = waits.bell_blocker() else {
        return (None, None);
    };
    // SAFETY: caller's contract.
    let name = unsafe { EpBell::publish(ep, &blocker, hints) };
    if name.is_none() {
        blocker.fall_back("an endpoint of this domain without a published doorbell");
    }
    (Some(blocker), name)
}

/// An endpoint's fi_control: the core's, noting FI_ENABLE. Until its endpoints are enabled, a
/// counter does not drive the core's progress: util-based cores (shm, rxm) crash progressing
/// an endpoint that is bound but not enabled, even through their own counters (libfabric 2.1),
/// and before enable nothing can complete anyway.
unsafe extern "C" fn control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched endpoints (and MRs of domains whose remote accesses rscntr
        // counts) reach this op.
        let b = unsafe { binder(fid) };
        if b.ep_ops.is_none() {
            // An MR: under FI_MR_RMA_EVENT the application enables it after binding its
            // counters, which are rscntr's here; the core was asked for no such mode.
            // SAFETY: the application's command and argument, for the core.
            let ret = unsafe { b.core_control(fid, command, arg) };
            if command as u32 == ofi::FI_ENABLE && (ret == err::ENOSYS || ret == err::EINVAL || ret == err::EOPNOTSUPP) {
                return 0;
            }
            return ret;
        }
        if command as u32 == ofi::FI_ALIAS
            // SAFETY: set at patch, freed only after the core closed the endpoint.
            && let Some(t) = unsafe { b.trigger.as_ref() }
        {
            // SAFETY: the application's struct fi_alias (or NULL).
            return unsafe { alias::open(t, arg) };
        }
        // SAFETY: the home outlives its endpoints.
        let home = unsafe { &*b.home };
        // Over shm, rscntr's drives wait while the core binds the AV and enables
        // (`shm_endpoints.rs`).
        let exclusive = (command as u32 == ofi::FI_ENABLE && b.shm).then(|| home.deferred.closing.write());
        // An enable holds the lock across the core's call, so that a bind racing it (see
        // bind_core_fid) sees whether the core has enabled the endpoint.
        let mut enabling = (command as u32 == ofi::FI_ENABLE).then(|| b.bound.lock());
        if let Some(bound) = enabling.as_mut()
            && !bound.av_at_enable.is_null()
        {
            // SAFETY: the core's own bind of the application's AV, open (bound by it).
            let ret = unsafe { b.orig_fi_ops.as_ref().and_then(|o| o.bind).map_or(err::ENOSYS, |f| f(fid, bound.av_at_enable, 0)) };
            if ret != 0 {
                fi_warn!(EpCtrl, "the {} core refused the AV bound to its endpoint, bound at FI_ENABLE: {ret}", b.core);
                return ret;
            }
            bound.av_at_enable = std::ptr::null_mut();
        }
        // Over shm: the doorbell published before the core enables, in a domain that waits;
        // ringing tables after, in every domain (`doorbell/ring.rs`).
        let bell = match &enabling {
            Some(bound) if !bound.enabled && home.plan == super::wait::Plan::Bell => {
                // SAFETY: a bound counter cannot close (EBUSY) while bound here.
                let hints = bound.cntrs.iter().fold(0, |h, c| h | unsafe { (**c).bell_hint() });
                if b.trigger.is_null() && b.rma_ep.is_null() {
                    // SAFETY: an open endpoint of this domain (only endpoints reach this far).
                    let (blocker, name) = unsafe { publish_bell(home, fid.cast(), hints) };
                    Some((blocker, name, hints))
                } else {
                    // Its tables are rscntr's own (triggered operations, remote-access events):
                    // ringing tables went under them at its open, with the domain's bell if it
                    // waited then.
                    let mut below = b.bell.lock();
                    // SAFETY: as above.
                    let published = below.as_mut().is_some_and(|e| unsafe { e.published(fid.cast(), hints, &home.answers) });
                    if !published {
                        let why = if below.as_ref().is_some_and(EpBell::has_bell) { "without a published doorbell" } else { "opened before the domain waited" };
                        match home.bell.lock().as_ref() {
                            Some(bell) => bell.fall_back(&format!("an endpoint of triggered operations {why}")),
                            None => home.waits().without_bell(),
                        }
                    }
                    None
                }
            }
            _ => None,
        };
        // SAFETY: the application's command and argument, for the core.
        let ret = unsafe { b.core_control(fid, command, arg) };
        drop(exclusive);
        if ret == 0
            && let Some((blocker, name, hints)) = bell
        {
            let av = b.av.load(std::sync::atomic::Ordering::Acquire);
            // SAFETY: enabled just now; the application has not had the enable's return yet.
            *b.bell.lock() =
                Some(unsafe { EpBell::ring(fid.cast(), av, blocker, home.peers.clone(), name, hints, posting(home, b.core_info)) });
        }
        if ret == 0
            && let Some(bound) = enabling.as_mut()
            && !bound.enabled
        {
            bound.enabled = true;
            for c in bound.cntrs.iter() {
                // SAFETY: a bound counter cannot close (EBUSY) while bound here.
                unsafe { (**c).binding_enabled() };
            }
            for f in bound.cqs.iter() {
                // SAFETY: the domain's filters live until it closes, after its endpoints.
                unsafe { (**f).ep_enabled() };
            }
        }
        if ret == 0 && enabling.is_some() {
            drop(enabling);
            // rxm adds its inner CQ's and EQ's fds to the bound counters' wait sets here.
            home.room.wait_sets_changed();
        }
        ret
    }
}
