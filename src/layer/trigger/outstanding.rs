//! The deferred operations posted to the core and not completed yet (`deferred.rs`): each
//! one's record, whose address is its context at the core, and what its completion moves (its
//! completion counter; the endpoint counters that owe the core's count of it).

use crate::cntr::AnyCntr;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A posted deferred operation, whose address is its context at the core. It begins with
/// room for the core: a core whose mode asks for FI_CONTEXT or FI_CONTEXT2 writes into the
/// `fi_context2` its operations' context points to until they complete, as applications
/// provide (none of the cores tested asks for it).
#[repr(C)]
pub struct Record {
    pub _core_context: [usize; 8],
    pub app_context: *mut c_void,
    pub completion: Option<*const dyn AnyCntr>,
    /// FI_COMPLETION: the application wants the CQ entry and the endpoint counters' count.
    pub report: bool,
    /// The endpoint counters the core counts this operation in, which owe it that count
    /// (`AnyCntr::owe`): the application did not ask for it.
    pub owed: Vec<*const dyn AnyCntr>,
    /// The endpoint's count of deferred operations naming it, which keeps it from closing.
    pub ep_refs: *const AtomicUsize,
}

/// The records of one domain's outstanding deferred operations.
#[derive(Default)]
pub struct Outstanding {
    records: Mutex<HashMap<usize, Box<Record>>>,
    /// `records.len()`, read without the lock on every filtered CQ read.
    live: AtomicUsize,
}

impl Outstanding {
    /// Deferred operations posted and not completed.
    pub fn count(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Lists `rec`; returns its key, its address (the context the core reports it with).
    pub fn insert(&self, rec: Box<Record>) -> usize {
        let key = &*rec as *const Record as usize;
        self.records.lock().insert(key, rec);
        self.live.fetch_add(1, Ordering::AcqRel);
        key
    }

    /// The record of `key`, no longer outstanding; None if it is not one of them.
    pub fn take(&self, key: usize) -> Option<Box<Record>> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        let rec = self.records.lock().remove(&key)?;
        self.live.fetch_sub(1, Ordering::AcqRel);
        Some(rec)
    }
}

impl Record {
    /// A completion (`ok`) or error the core reported for this record; `counted`: the core moved
    /// the endpoint counters for it (it did, for a completion it reports).
    ///
    /// # Safety
    /// The record was outstanding: its counters are held or bound, its endpoint open.
    pub unsafe fn finish(&self, ok: bool, counted: bool) {
        // SAFETY: held since post.
        if let Some(c) = self.completion.map(|c| unsafe { &*c }) {
            // The hold becomes a use before the count moves: the application may close the
            // counter as soon as it sees the count (MPICH's triggered broadcasts do), and a
            // close waits out a use where it refuses a hold (-FI_EBUSY).
            c.begin_use();
            let _ = if ok { c.add(1) } else { c.add_err(1) };
            c.end_use();
        }
        if counted && !ok {
            for u in &self.owed {
                // SAFETY: bound to the endpoint, which is open (it waits for this record).
                let u = unsafe { &**u };
                // The core counted an error instead of the count owed.
                u.forgive();
                let _ = u.add_err(u64::MAX);
            }
        }
        // SAFETY: the endpoint waits for its deferred operations before it closes.
        unsafe { &*self.ep_refs }.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Each of `bound`'s counters bound for `counted_as` (once per counter) owes the core's count
/// of an operation the application did not ask to be counted (`AnyCntr::owe`); returns them,
/// for [`forgive_counts`] if the count will not come. `bound`: an open endpoint's counters.
pub fn owe_counts<'a>(
    bound: &[(*const (dyn AnyCntr + 'a), u64)],
    counted_as: u64,
) -> Vec<*const (dyn AnyCntr + 'a)> {
    let mut owed: Vec<*const (dyn AnyCntr + 'a)> = Vec::new();
    for (c, f) in bound {
        if f & counted_as != 0 && !owed.iter().any(|u| std::ptr::addr_eq(*u, *c)) {
            owed.push(*c);
            // SAFETY: a bound counter cannot close before its endpoint.
            unsafe { &**c }.owe();
        }
    }
    owed
}

/// The counts `owed` ([`owe_counts`]) owe will not come: the core refused the operation.
pub fn forgive_counts(owed: &[*const (dyn AnyCntr + '_)]) {
    for c in owed {
        // SAFETY: as in owe_counts.
        unsafe { &**c }.forgive();
    }
}
