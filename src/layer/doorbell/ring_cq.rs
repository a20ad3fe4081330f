//! CQ reads answer over shm: reading a CQ drives the core's progress, which may answer a peer's
//! operation (a read's data, an atomic's result, the acknowledgement that completes a long
//! send); a peer that asked for it and sleeps is rung right after (`answers.rs`), whether this
//! domain waits or not. An application whose rank only polls its CQs is the peer that a
//! sleeping initiator depends on.
//!
//! Every CQ of an rscntr(shm) domain gets a copy of its tables whose `read` and `readfrom` load
//! the count of what the domain was asked, call the core's `readfrom` (`read` calls it without
//! addresses: util's `read` would call back through the table), then ring the askers when that
//! count is new (`AnswerDesk::answered`): a registry lookup and two loads while nobody asks. Other
//! patches may go over these later (the deferred-work filter): the record is found by the CQ's
//! address in a registry, not through the CQ's table pointer.

use super::answers::{AnswerDesk, DomainAnswers};
use super::registry::Registry;
use crate::boundary::ffi::err;
use crate::{fi_info, ofi};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// A CQ's ringing tables, the tables they replaced, and the domain's peers.
pub struct RingCq {
    fi_ops: ofi::fi_ops,
    ops: ofi::fi_ops_cq,
    inner_fi_ops: *const ofi::fi_ops,
    inner: ofi::fi_ops_cq,
    answers: Arc<DomainAnswers>,
    /// The domain's answers page (made here if no endpoint published yet), owned by `answers`.
    desk: *const AnswerDesk,
}

impl RingCq {
    /// Calls `read` (the core's read or readfrom) between the two halves of answering: what
    /// was asked taken before, the askers rung after when it is new.
    #[inline]
    fn answering(&self, read: impl FnOnce() -> isize) -> isize {
        // SAFETY: owned by `answers`, which this record keeps (NULL: the domain has none).
        match unsafe { self.desk.as_ref() } {
            Some(desk) => desk.around(self.answers.peers(), read),
            None => read(),
        }
    }
}

static CQS: Registry<RingCq> = Registry::new();

/// Gives a CQ just opened over shm tables that ring the domain's askers after its reads; the
/// record is freed when the CQ closes.
///
/// # Safety
/// `cq` is an open CQ nobody else uses yet, with valid tables.
pub unsafe fn patch(cq: *mut ofi::fid_cq, answers: Arc<DomainAnswers>) {
    // SAFETY: caller's contract.
    let (fi_ops, ops, inner_fi_ops) = unsafe { (*(*cq).fid.ops, *(*cq).ops, (*cq).fid.ops) };
    let desk = answers
        .desk()
        .map_or(std::ptr::null(), |d| d as *const AnswerDesk);
    let mut rec = Box::new(RingCq {
        fi_ops,
        ops,
        inner_fi_ops,
        inner: ops,
        answers,
        desk,
    });
    rec.fi_ops.close = Some(cq_close);
    rec.ops.size = rec.ops.size.min(std::mem::size_of::<ofi::fi_ops_cq>());
    if rec.inner.read.is_some() {
        rec.ops.read = Some(cq_read);
    }
    if rec.inner.readfrom.is_some() {
        rec.ops.readfrom = Some(cq_readfrom);
    }
    let rec = Box::into_raw(rec);
    if !CQS.insert(cq as usize, rec) {
        fi_info!(
            Domain,
            "more than {} CQs over shm: this one's reads do not ring the peers they answer",
            Registry::<RingCq>::SIZE
        );
        // SAFETY: just made, never handed out.
        drop(unsafe { Box::from_raw(rec) });
        return;
    }
    // SAFETY: the record's own fields, which live until the CQ closes (cq_close).
    unsafe {
        (*cq).ops = &mut (*rec).ops;
        (*cq).fid.ops = &mut (*rec).fi_ops;
    }
}

/// The record of a patched CQ (its fid is the CQ's first field).
///
/// # Safety
/// `cq` was patched by [`patch`] and is not closed.
unsafe fn record<'a>(cq: *const c_void) -> Option<&'a RingCq> {
    // SAFETY: registered by patch until cq_close frees it (caller's contract).
    unsafe { CQS.get(cq as usize).as_ref() }
}

unsafe extern "C" fn cq_read(cq: *mut ofi::fid_cq, buf: *mut c_void, count: usize) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let Some(rec) = (unsafe { record(cq.cast()) }) else { return err::EINVAL as isize };
        // A read is a readfrom without source addresses (fi_cq(3)); util's read (shm's) calls
        // readfrom through the CQ's table, which would answer twice.
        if let Some(readfrom) = rec.inner.readfrom {
            // SAFETY: the core's readfrom, with the application's arguments and no addresses.
            return rec.answering(|| unsafe { readfrom(cq, buf, count, std::ptr::null_mut()) });
        }
        let Some(read) = rec.inner.read else { return err::ENOSYS as isize };
        // SAFETY: the op this one replaced, with the application's arguments.
        rec.answering(|| unsafe { read(cq, buf, count) })
    }
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut ofi::fi_addr_t,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let Some(rec) = (unsafe { record(cq.cast()) }) else { return err::EINVAL as isize };
        let Some(readfrom) = rec.inner.readfrom else { return err::ENOSYS as isize };
        // SAFETY: the op this one replaced, with the application's arguments.
        rec.answering(|| unsafe { readfrom(cq, buf, count, src) })
    }
}

/// The close it replaced; once the CQ is closed, the record goes.
unsafe extern "C" fn cq_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        let rec = CQS.get(fid as usize).cast_mut();
        // SAFETY: only patched CQs reach this op; the record lives until freed below.
        let Some(close) = (unsafe { rec.as_ref() }).and_then(|r| unsafe { (*r.inner_fi_ops).close }) else {
            return err::EINVAL;
        };
        // SAFETY: the close this one replaced, on its own fid.
        let ret = unsafe { close(fid) };
        if ret == 0 {
            CQS.remove(fid as usize, rec);
            // SAFETY: made by patch, unregistered just now; the CQ is gone, nothing calls its
            // tables any more.
            drop(unsafe { Box::from_raw(rec) });
        }
        ret
    }
}
