//! The deferred work queue of a layered domain (`fi_control(domain, FI_QUEUE_WORK |
//! FI_CANCEL_WORK | FI_FLUSH_WORK, …)`, fi_trigger(3)): each request waits on its triggering
//! counter's queue like a triggered operation (`engine::trigger`) and runs on rscntr's trigger
//! thread.
//!
//! Counter requests (`FI_OP_CNTR_SET`, `FI_OP_CNTR_ADD`) are rscntr's own and run here. Data
//! requests (`FI_OP_SEND` … `FI_OP_COMPARE_ATOMIC`) are refused with -FI_ENOSYS (fi_trigger(3):
//! "If a specific request is not supported by the provider, it will fail the operation with
//! -FI_ENOSYS"): their completions must not reach the endpoint's CQ and counters, which are
//! the core's to write, and that needs rscntr between the core and the application's CQ.

use super::home::CoreHome;
use super::trigger::cntr_of;
use crate::boundary::ffi::err;
use crate::cntr::AnyCntr;
use crate::engine::{Started, Tag, Work};
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};

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
    pub unsafe fn queue(&self, home: &CoreHome, work: *mut ofi::fi_deferred_work) -> c_int {
        // SAFETY: caller's contract.
        let Some(w) = (unsafe { work.as_ref() }) else {
            fi_warn!(Domain, "FI_QUEUE_WORK without a struct fi_deferred_work");
            return err::EINVAL;
        };
        // SAFETY: NULL or the application's counter fid.
        let trigger = match unsafe { cntr_of(w.triggering_cntr, home) } {
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
                let target = match unsafe { cntr_of(op.cntr, home) } {
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
                fi_warn!(
                    Domain,
                    "deferred data operations (op_type {}) are not supported yet; counter \\
                    operations are, and FI_TRIGGER operations on the endpoint",
                    w.op_type
                );
                return err::ENOSYS;
            }
            other => {
                fi_warn!(Domain, "unknown deferred work op_type {other}");
                return err::EINVAL;
            }
        };
        trigger.hold();
        target.hold();
        self.queued
            .lock()
            .push((work as usize, trigger as *const dyn AnyCntr));
        let run = CntrWork {
            queue: self,
            key: work as usize,
            trigger,
            target,
            value,
            set,
            listed: true,
        };
        trigger.queue_work(w.threshold, self.tag(work), Box::new(run));
        0
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
    pub unsafe fn flush(&self, home: &CoreHome, work: *const ofi::fi_deferred_work) -> c_int {
        // SAFETY: caller's contract.
        let only = match unsafe { work.as_ref() } {
            None => None,
            // SAFETY: NULL or the application's counter fid.
            Some(w) => match unsafe { cntr_of(w.triggering_cntr, home) } {
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
        // SAFETY: the domain outlives its listed requests (its close refuses while any are).
        let queue = unsafe { &*self.queue };
        let mut queued = queue.queued.lock();
        if let Some(i) = queued.iter().position(|(k, _)| *k == self.key) {
            queued.swap_remove(i);
        }
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

/// The domain's fi_control for the three work commands; None for any other command.
///
/// # Safety
/// `arg` is what the command takes (NULL or a request).
pub unsafe fn control(
    queue: &WorkQueue,
    home: &CoreHome,
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
