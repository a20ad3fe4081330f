//! Triggered operations (FI_TRIGGER) on core endpoints: rscntr owns the counters, so it holds
//! a triggered operation until its counter's count reaches the threshold, then posts it to the
//! core as an ordinary operation (from rscntr's trigger thread, see `engine::trigger`).
//!
//! Only endpoints opened with FI_TRIGGER get any of this: their msg, tagged, rma and atomic
//! tables are copies of the core's in which the `*msg` entries test FI_TRIGGER and otherwise
//! call the core's own (one flag test); every other entry is the core's own function. Other
//! endpoints keep the core's tables untouched.
//!
//! - [`TriggerEp`]: a trigger-able endpoint's tables and queued work;
//! - the operations themselves, copied, and their posting: `op.rs`;
//! - aliases (`fi_ep_alias`): in `alias.rs`.

use super::cq_filter::CqFilter;
use super::deferred::Target;
use super::op::{CoreOps, Fetch, Op, post};
use crate::boundary::ffi::{
    DataTables, copy_table, err, ours_where_the_core_has, point_data_tables,
};
use crate::cntr::{self, AnyCntr};
use crate::engine::{Holds, Started, Tag, Work};
use crate::layer::hooks::{BindHook, CntrBind, Step};
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

const FI_TRIGGER: u64 = ofi::FI_TRIGGER as u64;

/// A trigger-able endpoint: rscntr's copies of the core's data tables (the endpoint's table
/// pointers point into this record, so an op finds it from its `ep` argument), the core's,
/// and the work it has queued.
#[repr(C)]
pub struct TriggerEp {
    msg: ofi::fi_ops_msg,
    tagged: ofi::fi_ops_tagged,
    rma: ofi::fi_ops_rma,
    atomic: ofi::fi_ops_atomic,
    pub core: CoreOps,
    /// The core endpoint.
    pub ep: *mut ofi::fid_ep,
    /// The domain's home, as its counters name it (`AnyCntr::home_ptr`).
    home: *const (),
    /// Contexts of the triggered operations queued here and not started, with the counter
    /// each waits on, for fi_cancel (the close counts them in `work`).
    queued: Mutex<Vec<(usize, *const dyn AnyCntr, u64)>>,
    /// Open aliases of the endpoint (`alias.rs`): it cannot close under them.
    pub aliases: AtomicUsize,
    /// The triggered operations queued here (as listed in `queued`) and those being posted
    /// (taken off it): the endpoint cannot close under the first, a close waits out the
    /// second. One word, read at one instant (see [`Holds`]).
    work: Holds,
    /// Deferred data operations on this endpoint, queued or posted and not completed: it
    /// cannot close meanwhile (`deferred.rs`).
    deferred: AtomicUsize,
    /// The rscntr counters bound to the endpoint, with their bind flags.
    bound: Mutex<Vec<(*const dyn AnyCntr, u64)>>,
    /// The filters of the CQs bound to the endpoint (`deferred.rs`), with the bind's
    /// FI_TRANSMIT / FI_RECV.
    cqs: Mutex<Vec<(*mut CqFilter, u64)>>,
    /// The record of the tables under these (`rma_event/initiator.rs`), whose entries the endpoint's table
    /// pointers, which point here, lead to; NULL when the core's are under these.
    pub below: std::sync::atomic::AtomicPtr<c_void>,
}

// SAFETY: the raw pointers are the core's endpoint and static tables, the domain's home (only
// compared) and counters held by the work that names them; all set once.
unsafe impl Send for TriggerEp {}
// SAFETY: as above; `queued` is behind its lock.
unsafe impl Sync for TriggerEp {}

impl TriggerEp {
    /// Gives a core endpoint opened with FI_TRIGGER rscntr's data tables. The record lives
    /// until [`TriggerEp::free`], after the core closed the endpoint.
    ///
    /// # Safety
    /// `ep` is an open core endpoint of the domain whose home is `home`.
    pub unsafe fn patch<H>(ep: *mut ofi::fid_ep, home: &H) -> *mut TriggerEp {
        // SAFETY: a valid endpoint whose table pointers are NULL or valid.
        unsafe {
            let e = &mut *ep;
            let core = CoreOps {
                msg: e.msg,
                tagged: e.tagged,
                rma: e.rma,
                atomic: e.atomic,
            };
            let mut t = Box::new(TriggerEp {
                msg: copy_table(core.msg),
                tagged: copy_table(core.tagged),
                rma: copy_table(core.rma),
                atomic: copy_table(core.atomic),
                core,
                ep,
                home: (home as *const H).cast(),
                queued: Mutex::new(Vec::new()),
                aliases: AtomicUsize::new(0),
                work: Holds::new(),
                deferred: AtomicUsize::new(0),
                bound: Mutex::new(Vec::new()),
                cqs: Mutex::new(Vec::new()),
                below: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            });
            ours_where_the_core_has!(
                t.msg.sendmsg => sendmsg,
                t.msg.recvmsg => recvmsg,
                t.tagged.sendmsg => tsendmsg,
                t.tagged.recvmsg => trecvmsg,
                t.rma.readmsg => readmsg,
                t.rma.writemsg => writemsg,
                t.atomic.writemsg => atomicmsg,
                t.atomic.readwritemsg => fetch_atomicmsg,
                t.atomic.compwritemsg => compare_atomicmsg,
            );
            let t = Box::into_raw(t);
            point_data_tables(
                ep,
                DataTables {
                    msg: &mut (*t).msg,
                    tagged: &mut (*t).tagged,
                    rma: &mut (*t).rma,
                    atomic: &mut (*t).atomic,
                },
            );
            t
        }
    }

    /// Frees the record once the core closed its endpoint.
    ///
    /// # Safety
    /// `t` came from [`TriggerEp::patch`]; nothing uses it any more.
    pub unsafe fn free(t: *mut TriggerEp) {
        // SAFETY: caller's contract.
        drop(unsafe { Box::from_raw(t) });
    }

    /// Triggered operations queued here and not started yet, after waiting (at most a
    /// second) for those being posted: the application may have seen one complete already.
    pub fn queued(&self) -> u64 {
        self.work.outstanding()
    }

    /// Deferred data operations queued or outstanding on the endpoint.
    pub fn deferred(&self) -> usize {
        self.deferred.load(Ordering::Acquire)
    }

    /// Reads the endpoint's CQs (taking out rscntr's completions) until no deferred
    /// operation of the endpoint is outstanding, once at least and for at most `limit`.
    pub fn settle_deferred(&self, limit: std::time::Duration) {
        let t0 = std::time::Instant::now();
        loop {
            let filters: Vec<*mut CqFilter> = self.cqs.lock().iter().map(|(f, _)| *f).collect();
            for f in filters {
                // SAFETY: the filters live until the domain closes, after this endpoint.
                unsafe { (*f).fill() };
            }
            if self.deferred() == 0 || t0.elapsed() >= limit {
                return;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// A deferred data operation is being posted on the endpoint: its close waits until
    /// [`TriggerEp::end_post`]. The operation's completion, which ends its hold
    /// ([`TriggerEp::deferred_done`]), can come before the post returns, and what the
    /// endpoint's tables do after the core's post (rscntr's notification of a remote access,
    /// `rma_event/initiator.rs`) still uses the endpoint: rxm crashed in a close that ran
    /// meanwhile (fabtests' fi_rdm_deferred_wq -T f_atomic over rscntr(tcp;ofi_rxm), about
    /// one run in 150).
    pub fn begin_post(&self) {
        self.work.begin_unheld_use();
    }

    pub fn end_post(&self) {
        self.work.end_use();
    }

    /// A deferred data operation names the endpoint (until [`TriggerEp::deferred_done`]).
    pub fn hold_deferred(&self) {
        self.deferred.fetch_add(1, Ordering::AcqRel);
    }

    pub fn deferred_done(&self) {
        self.deferred.fetch_sub(1, Ordering::AcqRel);
    }

    /// A counter was bound to the endpoint with `flags`.
    pub fn bound_cntr(&self, c: *const dyn AnyCntr, flags: u64) {
        self.bound.lock().push((c, flags));
    }

    /// A CQ was bound to the endpoint with `flags`; its filter.
    pub fn bound_cq(&self, f: *mut CqFilter, flags: u64) {
        let dirs = (ofi::FI_TRANSMIT | ofi::FI_RECV) as u64;
        let flags = if flags & dirs == 0 {
            dirs
        } else {
            flags & dirs
        };
        self.cqs.lock().push((f, flags));
    }

    /// The endpoint as a deferred operation posted on it needs it (`deferred.rs`).
    pub fn target(&self) -> Target<'_> {
        Target {
            ep: self.ep,
            core: &self.core,
            bound: self.bound.lock().clone(),
            filters: self.cqs.lock().iter().map(|(f, _)| *f).collect(),
            refs: &self.deferred,
            own: false,
        }
    }

    /// The filter of the CQ bound for transmits, if any.
    pub fn transmit_filter(&self) -> Option<*mut CqFilter> {
        self.filter_for(ofi::FI_TRANSMIT)
    }

    /// The filter of the CQ bound for `dir` (FI_TRANSMIT or FI_RECV).
    fn filter_for(&self, dir: u32) -> Option<*mut CqFilter> {
        self.cqs
            .lock()
            .iter()
            .find(|(_, d)| d & dir as u64 != 0)
            .map(|(f, _)| *f)
    }

    fn unlist(&self, key: usize) {
        let mut queued = self.queued.lock();
        if let Some(i) = queued.iter().position(|(k, ..)| *k == key) {
            queued.swap_remove(i);
        }
    }

    fn tag(&self, context: *mut c_void) -> Tag {
        Tag {
            owner: self as *const Self as usize,
            key: context as usize,
        }
    }

    /// fi_cancel of a triggered operation not started yet: it is taken out, and an
    /// FI_ECANCELED error entry goes to the CQ bound for its direction (fi_endpoint(3)).
    /// `None` if `context` is not queued here.
    pub fn cancel(&self, context: *mut c_void) -> Option<isize> {
        let (cntr, flags) = {
            let queued = self.queued.lock();
            let q = queued.iter().find(|(k, ..)| *k == context as usize)?;
            (q.1, q.2)
        };
        let tag = self.tag(context);
        // SAFETY: held by the queued work (see Triggered), which only cancel or start drops.
        let n = unsafe { &*cntr }.cancel_work(&mut |t| t == tag);
        if n == 0 {
            // It started meanwhile; the core has it now.
            return Some(err::ENOENT as isize);
        }
        let dir = if flags & ofi::FI_RECV as u64 != 0 {
            ofi::FI_RECV
        } else {
            ofi::FI_TRANSMIT
        };
        if let Some(f) = self.filter_for(dir) {
            // SAFETY: the filters live until the domain closes, after this endpoint.
            unsafe { &*f }.push_error(context, flags, ofi::FI_ECANCELED as i32);
        }
        Some(0)
    }

    /// Submits an operation flagged FI_TRIGGER: checks its triggered context and queues a
    /// copy of it on the threshold's counter.
    ///
    /// # Safety
    /// `op` was copied from a valid call on this endpoint; its context is the application's
    /// (NULL or a triggered context).
    unsafe fn submit(&self, op: Op, flags: u64) -> isize {
        if flags & ofi::FI_INJECT as u64 != 0 {
            fi_warn!(EpData, "FI_INJECT cannot be combined with FI_TRIGGER");
            return err::EINVAL as isize;
        }
        let context = op.context();
        // SAFETY: caller's contract.
        let (cntr, threshold) = match unsafe { threshold_of(context, self.home) } {
            Ok(t) => t,
            Err(e) => return e as isize,
        };
        cntr.hold();
        self.work.hold();
        let completion = op.completion_flags();
        self.queued
            .lock()
            .push((context as usize, cntr as *const dyn AnyCntr, completion));
        let work = Triggered {
            op,
            flags: flags & !FI_TRIGGER,
            ep: self,
            core_ep: self.ep,
            core: self.core,
            cntr,
            listed: true,
        };
        cntr.queue_work(threshold, self.tag(context), Box::new(work));
        0
    }
}

/// A trigger-able endpoint notes the counters bound to it, with their bind flags, for the
/// counts its deferred operations owe (`deferred.rs`).
impl BindHook for TriggerEp {
    fn bind_cntr(&self, bind: &CntrBind<'_>) -> Step {
        self.bound_cntr(bind.cntr as *const dyn AnyCntr, bind.flags);
        Step::Next
    }
}

/// The counter and threshold of a triggered context, checked: FI_TRIGGER_THRESHOLD on an
/// rscntr counter of this domain.
///
/// # Safety
/// `context` is NULL or points to a `fi_triggered_context` (or `…2`, which begins alike).
unsafe fn threshold_of(
    context: *mut c_void,
    home: *const (),
) -> Result<(&'static dyn AnyCntr, u64), i32> {
    // SAFETY: caller's contract.
    let Some(tc) = (unsafe { context.cast::<ofi::fi_triggered_context>().as_ref() }) else {
        fi_warn!(
            EpData,
            "an FI_TRIGGER operation needs a struct fi_triggered_context as its context"
        );
        return Err(err::EINVAL);
    };
    match tc.event_type {
        ofi::fi_trigger_event_FI_TRIGGER_THRESHOLD => {}
        ofi::fi_trigger_event_FI_TRIGGER_XPU => {
            fi_warn!(EpData, "FI_TRIGGER_XPU triggers are not supported");
            return Err(err::ENOSYS);
        }
        other => {
            fi_warn!(EpData, "unknown trigger event_type {other}");
            return Err(err::EINVAL);
        }
    }
    // SAFETY: the threshold arm, for FI_TRIGGER_THRESHOLD.
    let th = unsafe { tc.trigger.threshold };
    // SAFETY: NULL or a readable fid (the application's counter).
    let cntr = unsafe { cntr_of(th.cntr, home) }?;
    Ok((cntr, th.threshold as u64))
}

/// An rscntr counter of this domain (whose home is `home`, as its counters name it), for
/// triggered and deferred work.
///
/// # Safety
/// `fid` is NULL or a readable counter fid.
pub unsafe fn cntr_of(
    fid: *mut ofi::fid_cntr,
    home: *const (),
) -> Result<&'static dyn AnyCntr, i32> {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { cntr::as_cntr::<'static>(fid.cast()) }) else {
        fi_warn!(
            EpData,
            "the triggering counter is NULL or not an rscntr counter"
        );
        return Err(err::EINVAL);
    };
    if !std::ptr::eq(c.home_ptr(), home) {
        fi_warn!(EpData, "the triggering counter belongs to another domain");
        return Err(err::EINVAL);
    }
    Ok(c)
}

/// A triggered operation waiting for its threshold. It holds its counter (which cannot close
/// meanwhile) and is listed in its endpoint's queue (which cannot close either); both are let
/// go when it is dropped, started or cancelled.
struct Triggered {
    op: Op,
    flags: u64,
    ep: *const TriggerEp,
    /// The core endpoint and tables, copied: the post reads nothing of the record.
    core_ep: *mut ofi::fid_ep,
    core: CoreOps,
    cntr: *const dyn AnyCntr,
    /// Still listed in the endpoint and holding the counter (not being posted or posted).
    listed: bool,
}

// SAFETY: the pointers are held as described above; Op's are the application's buffers.
unsafe impl Send for Triggered {}

impl Work for Triggered {
    fn start(&mut self) -> Started {
        // SAFETY: the endpoint cannot close while this holds it (listed, or being posted).
        let ep = unsafe { &*self.ep };
        let key = self.op.context() as usize;
        // Off the lists before the post: its completion may be what the application waits
        // for before it closes the endpoint and the counter. The closes wait out the uses.
        ep.work.begin_use();
        ep.unlist(key);
        // SAFETY: held since submit; a close of the counter waits out the use.
        let cntr = unsafe { &*self.cntr };
        cntr.begin_use();
        self.listed = false;
        // SAFETY: the core endpoint is open; the op's copies are live.
        let ret = unsafe { post(&self.op, self.core_ep, &self.core, self.flags) };
        if ret == err::EAGAIN as isize {
            // Back on the lists (the uses become holds again), to be tried again.
            cntr.hold_again();
            ep.queued
                .lock()
                .push((key, self.cntr, self.op.completion_flags()));
            self.listed = true;
            ep.work.hold_again();
            return Started::Again;
        }
        cntr.end_use();
        ep.work.end_use();
        if ret != 0 {
            // The core refused it outright: no completion will come. Said, since nothing
            // else can say it (the application's CQ is the core's).
            fi_warn!(
                EpData,
                "the core refused a triggered operation whose threshold was met: {ret}"
            );
        }
        Started::Done
    }
}

impl Drop for Triggered {
    fn drop(&mut self) {
        if !self.listed {
            return;
        }
        // SAFETY: listed: the endpoint cannot close meanwhile.
        let ep = unsafe { &*self.ep };
        ep.unlist(self.op.context() as usize);
        ep.work.release();
        // SAFETY: held since submit.
        unsafe { &*self.cntr }.release();
    }
}

/// The record of a trigger-able endpoint from one of its table pointers.
macro_rules! record_of {
    ($ep:expr, $field:ident) => {
        // SAFETY: only endpoints patched by TriggerEp::patch reach these ops, and their
        // `$field` pointer points at the record's field of that name.
        unsafe {
            &*((*$ep).$field as *const u8)
                .sub(std::mem::offset_of!(TriggerEp, $field))
                .cast::<TriggerEp>()
        }
    };
}

impl TriggerEp {
    /// The record whose rma table `ep` has.
    ///
    /// # Safety
    /// `ep` was patched by [`TriggerEp::patch`] and has an rma table.
    pub unsafe fn of_rma<'a>(ep: *mut ofi::fid_ep) -> &'a TriggerEp {
        record_of!(ep, rma)
    }

    /// The record whose atomic table `ep` has.
    ///
    /// # Safety
    /// As [`TriggerEp::of_rma`], for the atomic table.
    pub unsafe fn of_atomic<'a>(ep: *mut ofi::fid_ep) -> &'a TriggerEp {
        record_of!(ep, atomic)
    }
}

/// The endpoint's own op when FI_TRIGGER is clear; else a copy of the operation, queued.
macro_rules! triggerable {
    ($name:ident, $table:ident, $slot:ident, $msg:ty, $capture:expr) => {
        unsafe extern "C" fn $name(ep: *mut ofi::fid_ep, msg: *const $msg, flags: u64) -> isize {
            let t = record_of!(ep, $table);
            if flags & FI_TRIGGER == 0 {
                // SAFETY: the core's own op (present: only then is this installed).
                return unsafe { (*t.core.$table).$slot.unwrap()(ep, msg, flags) };
            }
            crate::ffi_boundary! {
                // SAFETY: the application's message.
                match unsafe { msg.as_ref() } {
                    Some(m) => unsafe { t.submit($capture(m), flags) },
                    None => err::EINVAL as isize,
                }
            }
        }
    };
}

triggerable!(sendmsg, msg, sendmsg, ofi::fi_msg, |m| Op::msg(m, true));
triggerable!(recvmsg, msg, recvmsg, ofi::fi_msg, |m| Op::msg(m, false));
triggerable!(tsendmsg, tagged, sendmsg, ofi::fi_msg_tagged, |m| {
    Op::tagged(m, true)
});
triggerable!(trecvmsg, tagged, recvmsg, ofi::fi_msg_tagged, |m| {
    Op::tagged(m, false)
});
triggerable!(readmsg, rma, readmsg, ofi::fi_msg_rma, |m| Op::rma(
    m, false
));
triggerable!(writemsg, rma, writemsg, ofi::fi_msg_rma, |m| Op::rma(
    m, true
));
triggerable!(atomicmsg, atomic, writemsg, ofi::fi_msg_atomic, |m| {
    Op::Atomic(Op::atomic(m))
});

unsafe extern "C" fn fetch_atomicmsg(
    ep: *mut ofi::fid_ep,
    msg: *const ofi::fi_msg_atomic,
    resultv: *mut ofi::fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    let t = record_of!(ep, atomic);
    if flags & FI_TRIGGER == 0 {
        // SAFETY: the core's own op (present: only then is this installed).
        return unsafe {
            (*t.core.atomic).readwritemsg.unwrap()(
                ep,
                msg,
                resultv,
                result_desc,
                result_count,
                flags,
            )
        };
    }
    crate::ffi_boundary! {
        // SAFETY: the application's message and result arrays.
        unsafe {
            match msg.as_ref() {
                Some(m) => t.submit(Op::Fetch(Op::atomic(m), Fetch::copy(resultv, result_desc, result_count)), flags),
                None => err::EINVAL as isize,
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn compare_atomicmsg(
    ep: *mut ofi::fid_ep,
    msg: *const ofi::fi_msg_atomic,
    comparev: *const ofi::fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut ofi::fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    let t = record_of!(ep, atomic);
    if flags & FI_TRIGGER == 0 {
        // SAFETY: the core's own op (present: only then is this installed).
        return unsafe {
            (*t.core.atomic).compwritemsg.unwrap()(
                ep,
                msg,
                comparev,
                compare_desc,
                compare_count,
                resultv,
                result_desc,
                result_count,
                flags,
            )
        };
    }
    crate::ffi_boundary! {
        // SAFETY: the application's message, compare and result arrays.
        unsafe {
            match msg.as_ref() {
                Some(m) => t.submit(
                    Op::Compare(
                        Op::atomic(m),
                        Fetch::copy(comparev, compare_desc, compare_count),
                        Fetch::copy(resultv, result_desc, result_count),
                    ),
                    flags,
                ),
                None => err::EINVAL as isize,
            }
        }
    }
}
