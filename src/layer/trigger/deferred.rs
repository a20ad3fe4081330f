//! Deferred data operations (`FI_OP_SEND` … `FI_OP_COMPARE_ATOMIC` in the domain's deferred
//! work queue). fi_trigger(3): their completion increments the request's completion counter
//! by one and, unless the operation carries FI_COMPLETION, writes nothing to the endpoint's
//! CQ and does not move the endpoint's counters. But the core reports every completion it
//! makes there. So:
//!
//! - rscntr posts a deferred operation on the core endpoint with FI_COMPLETION and a context
//!   of its own (a [`Record`]), so the core reports it even under FI_SELECTIVE_COMPLETION;
//! - the CQs bound to trigger-able endpoints are read through a [`CqFilter`], which takes
//!   rscntr's entries out before the application sees them: the completion counter gets +1
//!   (an error: +1 error), and with FI_COMPLETION the entry stays, with the application's
//!   context;
//! - without FI_COMPLETION, the endpoint counters the core will count it in owe that count
//!   from before it is posted (`Counter::owe`: the next count the core makes there is taken
//!   out), so they may read one low until the core counts it, never one high, which an
//!   application waiting for its own operations, or a trigger, would take for a completion;
//! - while deferred operations are outstanding, rscntr's watcher thread reads those CQs too
//!   (driving the core's progress), keeping the application's entries for it in order, so
//!   that completion counters move while the application only waits on counters.
//!
//! CQs of other endpoints, and all CQs while nothing deferred is outstanding, pay one atomic
//! load per read.

use super::cq_filter::{CqFilter, Formats, Notes, Notifications};
use super::cq_ops;
use super::op::{CoreOps, Op};
use super::outstanding::{Outstanding, Record, forgive_counts, owe_counts};
use crate::boundary::ffi::err;
use crate::boundary::versions::Api;
use crate::cntr::AnyCntr;
use crate::engine::watcher;
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::AtomicUsize;

/// The endpoint a deferred operation is posted on, as `deferred.rs` needs it (made by the
/// trigger-able endpoint).
pub struct Target<'a> {
    pub ep: *mut ofi::fid_ep,
    pub core: &'a CoreOps,
    /// The rscntr counters bound to the endpoint, with their bind flags.
    pub bound: Vec<(*const dyn AnyCntr, u64)>,
    /// The filters of the endpoint's CQs.
    pub filters: Vec<*mut CqFilter>,
    /// Its count of deferred operations, held by the caller for this one.
    pub refs: &'a AtomicUsize,
    /// rscntr's own operation (a notification of a remote access, `rma_event/initiator.rs`).
    pub own: bool,
}

/// The deferred operations of one domain, and its filtered CQs.
#[derive(Default)]
pub struct Deferred {
    outstanding: Outstanding,
    /// Entry sizes of the domain's CQs, by CQ (recorded at fi_cq_open): the application's
    /// and the core's (larger when rscntr opened the core CQ in a format with remote CQ data).
    formats: Mutex<HashMap<usize, Formats>>,
    filters: Mutex<Vec<*mut CqFilter>>,
    /// Set when the domain's remote accesses are counted by rscntr: every CQ bound to one of
    /// its endpoints is read through a filter, which takes them out.
    notes: std::sync::OnceLock<Notes>,
    /// Held for writing while the core closes one of the domain's endpoints; rscntr's reads
    /// that drive the core's progress (its filters', its counters' pulls) hold it for reading:
    /// a core's progress walks the endpoints bound to a CQ or counter, and rxm's crashed in an
    /// endpoint being closed while rscntr's watcher drove it (fi_rdm_rma_trigger over
    /// rscntr(tcp;ofi_rxm), SOS's shmem_ctx).
    pub closing: parking_lot::RwLock<()>,
}

// SAFETY: the raw pointers are counters held by the records, the records' endpoints (which
// cannot close meanwhile) and the filters this struct owns.
unsafe impl Send for Deferred {}
// SAFETY: as above; all behind locks or atomics.
unsafe impl Sync for Deferred {}

/// The size of one CQ entry of `format` (UNSPEC is CONTEXT in every core here).
pub fn entry_size(format: ofi::fi_cq_format) -> usize {
    match format {
        ofi::fi_cq_format_FI_CQ_FORMAT_MSG => std::mem::size_of::<ofi::fi_cq_msg_entry>(),
        ofi::fi_cq_format_FI_CQ_FORMAT_DATA => std::mem::size_of::<ofi::fi_cq_data_entry>(),
        ofi::fi_cq_format_FI_CQ_FORMAT_TAGGED => std::mem::size_of::<ofi::fi_cq_tagged_entry>(),
        _ => std::mem::size_of::<ofi::fi_cq_entry>(),
    }
}

impl Deferred {
    /// Notes a CQ's format when it opens: the application's, and the one the core CQ has.
    pub fn opened_cq(
        &self,
        cq: *mut ofi::fid_cq,
        app: ofi::fi_cq_format,
        core: ofi::fi_cq_format,
        api: Api,
    ) {
        let formats = Formats {
            entry: entry_size(app),
            core_entry: entry_size(core),
            err_entry: api.cq_err_entry_size(),
        };
        self.formats.lock().insert(cq as usize, formats);
    }

    /// Every filter of this domain from now on also takes out `notes`' entries.
    ///
    /// # Safety
    /// `notes` lives as long as the domain.
    pub unsafe fn take_notifications(&self, notes: *const dyn Notifications) {
        let _ = self.notes.set(Notes(notes));
    }

    /// Reads every filtered CQ of the domain once, as the watcher does (a counter's reader
    /// drives the deferred completions it waits for).
    pub fn fill_all(&self) {
        let filters = self.filters.lock().clone();
        for f in filters {
            // SAFETY: the filters live until the domain closes, which cannot happen while a
            // counter of it is being read; fill skips a closed CQ.
            unsafe { (*f).fill() };
        }
    }

    /// Deferred operations posted and not completed.
    pub fn outstanding(&self) -> usize {
        self.outstanding.count()
    }

    /// A CQ bound to a trigger-able endpoint gets the filter (once); None for a CQ whose
    /// format rscntr did not see (not opened through this domain).
    ///
    /// # Safety
    /// `cq` is an open CQ of this domain.
    pub unsafe fn filter(&self, cq: *mut ofi::fid_cq) -> Option<*mut CqFilter> {
        let formats = *self.formats.lock().get(&(cq as usize))?;
        let mut filters = self.filters.lock();
        // SAFETY: an open CQ.
        let current = unsafe { (*cq).ops };
        // SAFETY: the filters are live.
        if let Some(f) = filters
            .iter()
            .find(|f| std::ptr::eq(current, unsafe { &(***f).ops }))
        {
            return Some(*f);
        }
        // SAFETY: an open CQ of this domain, whose records outlive its filters.
        let f = unsafe {
            cq_ops::install(
                cq,
                formats,
                self.notes.get().copied(),
                &self.outstanding,
                &self.closing,
            )
        };
        filters.push(f);
        Some(f)
    }

    /// The domain's filters, which live until [`Deferred::release`].
    pub fn filters(&self) -> Vec<*mut CqFilter> {
        self.filters.lock().clone()
    }

    /// Frees the filters (the domain is closing: its CQs are closed).
    pub fn release(&self) {
        for f in self.filters.lock().drain(..) {
            watcher::unwatch(f as usize);
            // SAFETY: made by `filter`; its CQ is closed and the watcher let go of it.
            drop(unsafe { Box::from_raw(f) });
        }
    }

    /// Posts a deferred data operation on `ep`, taking over the caller's hold of `completion`
    /// and of the endpoint (`ep.refs`) unless the core answers -FI_EAGAIN (Err: try again, the holds stay the caller's). A post the core
    /// refuses otherwise completes with an error at once.
    ///
    /// # Safety
    /// `ep` is live; `op`'s buffers are the application's, live until completion.
    pub unsafe fn post(
        &self,
        ep: &Target<'_>,
        op: &mut Op,
        flags: u64,
        completion: Option<&'static dyn AnyCntr>,
    ) -> Result<(), ()> {
        let report = flags & ofi::FI_COMPLETION as u64 != 0;
        let counted_as = op.counted_as();
        // The counters the core will count it in owe that count from now: they may read
        // one low until it comes, never one high (which an application waiting for its own
        // operations, or a trigger, would take for a completion).
        let owed = if report {
            Vec::new()
        } else {
            owe_counts(&ep.bound, counted_as)
        };
        let rec = Box::new(Record {
            _core_context: [0; 8],
            app_context: op.context(),
            completion: completion.map(|c| c as *const dyn AnyCntr),
            report,
            owed,
            ep_refs: ep.refs,
        });
        let key = self.outstanding.insert(rec);
        let app_context = op.set_context(key as *mut c_void);
        for &f in &ep.filters {
            // SAFETY: the filters live until the domain closes, which cannot happen while
            // this is outstanding; the watcher reads them through their CQs.
            unsafe { watcher::watch(f as usize, watcher::target_of(&*f)) };
        }
        // SAFETY: caller's contract.
        let ret = unsafe { super::op::post(op, ep.ep, ep.core, flags | ofi::FI_COMPLETION as u64) };
        if ret == 0 {
            return Ok(());
        }
        let rec = self.outstanding.take(key);
        op.set_context(app_context);
        if let Some(r) = &rec {
            // The core takes nothing: it counts nothing.
            forgive_counts(&r.owed);
        }
        if ret == err::EAGAIN as isize {
            return Err(());
        }
        fi_warn!(
            EpData,
            "the core refused a deferred operation whose threshold was met: {ret} \
            (counted as an error of its completion counter)"
        );
        if let Some(rec) = rec {
            // SAFETY: the holds were taken over.
            unsafe { rec.finish(false, false) };
        }
        Ok(())
    }
}
