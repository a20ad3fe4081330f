//! The deferred work queue of a layered domain (`fi_control(domain, FI_QUEUE_WORK |
//! FI_CANCEL_WORK | FI_FLUSH_WORK, …)`, fi_trigger(3)): each request waits on its triggering
//! counter's queue like a triggered operation (`engine::trigger`) and runs on rscntr's trigger
//! thread.
//!
//! Counter requests (`FI_OP_CNTR_SET`, `FI_OP_CNTR_ADD`) are rscntr's own and run here. Data
//! requests (`FI_OP_SEND` … `FI_OP_COMPARE_ATOMIC`) are copied at submission and posted on
//! their endpoint (which must be trigger-able, or an alias of one) when due; `deferred.rs`
//! keeps their completions off the endpoint's CQ and counters and counts them in the
//! completion counter.

use super::deferred::Deferred;
use super::endpoint::{TriggerEp, cntr_of};
use super::op::{Fetch, Op};
use crate::boundary::ffi::err;
use crate::cntr::AnyCntr;
use crate::engine::{Started, Tag, Work};
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};

/// What the deferred work queue needs of its domain (the layer's home implements it).
pub trait WorkHome {
    /// The domain's deferred data operations.
    fn deferred(&self) -> &Deferred;
    /// The trigger-able endpoint `ep` is (or aliases), for the deferred operations naming it.
    ///
    /// # Safety
    /// `ep` is NULL or a readable endpoint fid.
    unsafe fn trigger_of<'a>(&self, ep: *mut ofi::fid_ep) -> Option<&'a TriggerEp>;
}

impl dyn WorkHome + '_ {
    /// The domain's home as its counters name it (`AnyCntr::home_ptr`).
    fn id(&self) -> *const () {
        (self as *const Self).cast()
    }
}

/// The requests a domain has queued and not run, with their triggering counters (to cancel
/// them there).
#[derive(Default)]
pub struct WorkQueue {
    queued: Mutex<Vec<(usize, *const dyn AnyCntr)>>,
}

// SAFETY: the counters are held by the queued requests that name them (see CntrWork).
unsafe impl Send for WorkQueue {}
// SAFETY: as above; behind the lock.
unsafe impl Sync for WorkQueue {}

impl WorkQueue {
    fn tag(&self, work: *const ofi::fi_deferred_work) -> Tag {
        Tag {
            owner: self as *const Self as usize,
            key: work as usize,
        }
    }

    /// Requests queued and not run yet.
    pub fn len(&self) -> usize {
        self.queued.lock().len()
    }

    /// FI_QUEUE_WORK.
    ///
    /// # Safety
    /// `work` is NULL or the application's request, valid until it runs or is cancelled.
    pub unsafe fn queue(&self, home: &dyn WorkHome, work: *mut ofi::fi_deferred_work) -> c_int {
        // SAFETY: caller's contract.
        let Some(w) = (unsafe { work.as_ref() }) else {
            fi_warn!(Domain, "FI_QUEUE_WORK without a struct fi_deferred_work");
            return err::EINVAL;
        };
        // SAFETY: NULL or the application's counter fid.
        let trigger = match unsafe { cntr_of(w.triggering_cntr, home.id()) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let (target, value, set) = match w.op_type {
            ofi::fi_op_type_FI_OP_CNTR_SET | ofi::fi_op_type_FI_OP_CNTR_ADD => {
                if !w.completion_cntr.is_null() {
                    fi_warn!(
                        Domain,
                        "a deferred counter operation takes no completion counter"
                    );
                    return err::EINVAL;
                }
                // SAFETY: the counter arm, for the counter operations.
                let Some(op) = (unsafe { w.op.cntr.as_ref() }) else {
                    fi_warn!(
                        Domain,
                        "a deferred counter operation without its struct fi_op_cntr"
                    );
                    return err::EINVAL;
                };
                // SAFETY: NULL or the application's counter fid.
                let target = match unsafe { cntr_of(op.cntr, home.id()) } {
                    Ok(c) => c,
                    Err(e) => return e,
                };
                (
                    target,
                    op.value,
                    w.op_type == ofi::fi_op_type_FI_OP_CNTR_SET,
                )
            }
            ofi::fi_op_type_FI_OP_RECV..=ofi::fi_op_type_FI_OP_COMPARE_ATOMIC => {
                // SAFETY: the caller's contract: the op arm of this op_type.
                return unsafe { self.queue_data(home, work, trigger) };
            }
            other => {
                fi_warn!(Domain, "unknown deferred work op_type {other}");
                return err::EINVAL;
            }
        };
        trigger.hold();
        target.hold();
        let run = CntrWork {
            queue: self,
            key: work as usize,
            trigger,
            target,
            value,
            set,
            listed: true,
        };
        self.enqueue(work, trigger, w.threshold, Box::new(run));
        0
    }

    /// FI_QUEUE_WORK of a data operation.
    ///
    /// # Safety
    /// `work` is the application's request, its op arm of its op_type NULL or valid.
    unsafe fn queue_data(
        &self,
        home: &dyn WorkHome,
        work: *mut ofi::fi_deferred_work,
        trigger: &'static dyn AnyCntr,
    ) -> c_int {
        // SAFETY: caller's contract.
        let w = unsafe { &*work };
        let completion = if w.completion_cntr.is_null() {
            None
        } else {
            // SAFETY: the application's counter fid.
            match unsafe { cntr_of(w.completion_cntr, home.id()) } {
                Ok(c) => Some(c),
                Err(e) => return e,
            }
        };
        macro_rules! arm {
            ($field:ident) => {
                // The arm of this op_type (caller's contract); used inside the unsafe below.
                match w.op.$field.as_ref() {
                    Some(op) => op,
                    None => {
                        fi_warn!(
                            Domain,
                            "deferred work op_type {} without its operation",
                            w.op_type
                        );
                        return err::EINVAL;
                    }
                }
            };
        }
        // SAFETY (every arm): the application's operation, copied.
        let (ep, op, flags) = unsafe {
            match w.op_type {
                ofi::fi_op_type_FI_OP_RECV | ofi::fi_op_type_FI_OP_SEND => {
                    let o = arm!(msg);
                    (
                        o.ep,
                        Op::msg(&o.msg, w.op_type == ofi::fi_op_type_FI_OP_SEND),
                        o.flags,
                    )
                }
                ofi::fi_op_type_FI_OP_TRECV | ofi::fi_op_type_FI_OP_TSEND => {
                    let o = arm!(tagged);
                    (
                        o.ep,
                        Op::tagged(&o.msg, w.op_type == ofi::fi_op_type_FI_OP_TSEND),
                        o.flags,
                    )
                }
                ofi::fi_op_type_FI_OP_READ | ofi::fi_op_type_FI_OP_WRITE => {
                    let o = arm!(rma);
                    (
                        o.ep,
                        Op::rma(&o.msg, w.op_type == ofi::fi_op_type_FI_OP_WRITE),
                        o.flags,
                    )
                }
                ofi::fi_op_type_FI_OP_ATOMIC => {
                    let o = arm!(atomic);
                    (o.ep, Op::Atomic(Op::atomic(&o.msg)), o.flags)
                }
                ofi::fi_op_type_FI_OP_FETCH_ATOMIC => {
                    let o = arm!(fetch_atomic);
                    let f = Fetch::in_place(o.fetch.msg_iov, o.fetch.desc, o.fetch.iov_count);
                    (o.ep, Op::Fetch(Op::atomic(&o.msg), f), o.flags)
                }
                _ => {
                    let o = arm!(compare_atomic);
                    let c = Fetch::in_place(o.compare.msg_iov, o.compare.desc, o.compare.iov_count);
                    let f = Fetch::in_place(o.fetch.msg_iov, o.fetch.desc, o.fetch.iov_count);
                    (o.ep, Op::Compare(Op::atomic(&o.msg), c, f), o.flags)
                }
            }
        };
        if flags & (ofi::FI_INJECT | ofi::FI_TRIGGER) as u64 != 0 {
            fi_warn!(
                Domain,
                "deferred operations take neither FI_INJECT nor FI_TRIGGER"
            );
            return err::EINVAL;
        }
        // SAFETY: NULL or the application's endpoint fid.
        let Some(t) = (unsafe { home.trigger_of(ep) }) else {
            fi_warn!(
                Domain,
                "a deferred operation's endpoint must be an rscntr endpoint opened with \
                FI_TRIGGER (or an alias of one)"
            );
            return err::EINVAL;
        };
        trigger.hold();
        if let Some(c) = completion {
            c.hold();
        }
        t.hold_deferred();
        let run = DataWork {
            queue: self,
            key: work as usize,
            trigger,
            completion,
            ep: t,
            deferred: home.deferred(),
            op,
            flags,
            listed: true,
            posted: false,
        };
        self.enqueue(work, trigger, w.threshold, Box::new(run));
        0
    }

    /// Lists a request (held already) and queues it on its triggering counter.
    fn enqueue(
        &self,
        work: *const ofi::fi_deferred_work,
        trigger: &'static dyn AnyCntr,
        threshold: u64,
        run: Box<dyn Work>,
    ) {
        self.queued
            .lock()
            .push((work as usize, trigger as *const dyn AnyCntr));
        trigger.queue_work(threshold, self.tag(work), run);
    }

    /// FI_CANCEL_WORK: 0 if the request was queued and is no more, -FI_ENOENT if it is not
    /// queued (it ran, or never was).
    pub fn cancel(&self, work: *const ofi::fi_deferred_work) -> c_int {
        let Some(cntr) = self
            .queued
            .lock()
            .iter()
            .find(|(k, _)| *k == work as usize)
            .map(|(_, c)| *c)
        else {
            return err::ENOENT;
        };
        let tag = self.tag(work);
        // SAFETY: held by the queued request until it is dropped.
        match unsafe { &*cntr }.cancel_work(&mut |t| t == tag) {
            0 => err::ENOENT,
            _ => 0,
        }
    }

    /// FI_FLUSH_WORK: cancels every request queued (`work` NULL), or those waiting on the
    /// triggering counter `work` names.
    ///
    /// # Safety
    /// `work` is NULL or a readable request.
    pub unsafe fn flush(&self, home: &dyn WorkHome, work: *const ofi::fi_deferred_work) -> c_int {
        // SAFETY: caller's contract.
        let only = match unsafe { work.as_ref() } {
            None => None,
            // SAFETY: NULL or the application's counter fid.
            Some(w) => match unsafe { cntr_of(w.triggering_cntr, home.id()) } {
                Ok(c) => Some(c as *const dyn AnyCntr as *const ()),
                Err(e) => return e,
            },
        };
        let mut cntrs: Vec<*const dyn AnyCntr> = self
            .queued
            .lock()
            .iter()
            .map(|(_, c)| *c)
            .filter(|c| only.is_none_or(|o| std::ptr::eq(c.cast::<()>(), o)))
            .collect();
        cntrs.sort_by_key(|c| c.cast::<()>() as usize);
        cntrs.dedup_by_key(|c| c.cast::<()>() as usize);
        let owner = self as *const Self as usize;
        for c in cntrs {
            // SAFETY: held by a queued request (cancelling drops the holds last).
            unsafe { &*c }.cancel_work(&mut |t| t.owner == owner);
        }
        0
    }
}

/// A deferred counter request: sets or adds to `target`. It holds both counters and is
/// listed in the domain's queue until dropped.
struct CntrWork {
    queue: *const WorkQueue,
    key: usize,
    trigger: *const dyn AnyCntr,
    target: *const dyn AnyCntr,
    value: u64,
    set: bool,
    /// Still listed and holding both counters (not started).
    listed: bool,
}

// SAFETY: the counters are held (they cannot close) and the domain cannot close while its
// queue lists this request.
unsafe impl Send for CntrWork {}

impl CntrWork {
    fn unlist(&self) {
        unlist(self.queue, self.key);
    }
}

impl Work for CntrWork {
    fn start(&mut self) -> Started {
        // Off the lists first: the application may close the domain and counters once it
        // sees the effect; closing the target waits out its use.
        // SAFETY: held since queue.
        let (trigger, target) = unsafe { (&*self.trigger, &*self.target) };
        target.begin_use();
        self.unlist();
        trigger.release();
        self.listed = false;
        // An error is logged by the counter (a hardware counter's failure).
        let _ = if self.set {
            target.set(self.value)
        } else {
            target.add(self.value)
        };
        target.end_use();
        Started::Done
    }
}

impl Drop for CntrWork {
    fn drop(&mut self) {
        if !self.listed {
            return;
        }
        self.unlist();
        // SAFETY: held since queue.
        unsafe {
            (*self.trigger).release();
            (*self.target).release();
        }
    }
}

/// A deferred data request: posted on its endpoint when due (`deferred.rs` then owns its
/// completion counter's hold and the endpoint's); until then it holds both counters and the
/// endpoint and is listed in the domain's queue.
struct DataWork {
    queue: *const WorkQueue,
    key: usize,
    trigger: &'static dyn AnyCntr,
    completion: Option<&'static dyn AnyCntr>,
    ep: *const TriggerEp,
    deferred: *const super::deferred::Deferred,
    op: Op,
    flags: u64,
    listed: bool,
    posted: bool,
}

// SAFETY: as CntrWork; the op's pointers are the application's buffers.
unsafe impl Send for DataWork {}

impl Work for DataWork {
    fn start(&mut self) -> Started {
        if self.listed {
            unlist(self.queue, self.key);
            self.trigger.release();
            self.listed = false;
        }
        // SAFETY: the endpoint cannot close while it holds this (hold_deferred), the domain
        // while its deferred operations are outstanding or queued.
        let (ep, deferred) = unsafe { (&*self.ep, &*self.deferred) };
        ep.begin_post();
        // SAFETY: the application's buffers, live until completion.
        let posted =
            unsafe { deferred.post(&ep.target(), &mut self.op, self.flags, self.completion) };
        ep.end_post();
        match posted {
            Ok(()) => {
                self.posted = true;
                Started::Done
            }
            Err(()) => Started::Again,
        }
    }
}

impl Drop for DataWork {
    fn drop(&mut self) {
        if self.posted {
            return;
        }
        if self.listed {
            unlist(self.queue, self.key);
            self.trigger.release();
        }
        if let Some(c) = self.completion {
            c.release();
        }
        // SAFETY: held since queue.
        unsafe { &*self.ep }.deferred_done();
    }
}

fn unlist(queue: *const WorkQueue, key: usize) {
    // SAFETY: the domain outlives its listed requests (its close refuses while any are).
    let queue = unsafe { &*queue };
    let mut queued = queue.queued.lock();
    if let Some(i) = queued.iter().position(|(k, _)| *k == key) {
        queued.swap_remove(i);
    }
}

/// The domain's fi_control for the three work commands; None for any other command.
///
/// # Safety
/// `arg` is what the command takes (NULL or a request).
pub unsafe fn control(
    queue: &WorkQueue,
    home: &dyn WorkHome,
    command: c_int,
    arg: *mut c_void,
) -> Option<c_int> {
    let work = arg.cast::<ofi::fi_deferred_work>();
    // SAFETY: caller's contract.
    Some(unsafe {
        match command as u32 {
            ofi::FI_QUEUE_WORK => queue.queue(home, work),
            ofi::FI_CANCEL_WORK => queue.cancel(work),
            ofi::FI_FLUSH_WORK => queue.flush(home, work),
            _ => return None,
        }
    })
}
