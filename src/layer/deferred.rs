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

use super::op::{CoreOps, Op};
use crate::boundary::ffi::err;
use crate::cntr::AnyCntr;
use crate::engine::Wake;
use crate::engine::watcher::{self, Watched};
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// libfabric's FI_ADDR_NOTAVAIL ((uint64_t) -1), a macro bindgen leaves out.
const FI_ADDR_NOTAVAIL: ofi::fi_addr_t = u64::MAX;

/// The largest read of core entries done on the stack (16 tagged entries).
const SMALL_READ: usize = 16 * 64;

/// The bytes of a word buffer (aligned for any CQ entry's fields).
fn bytemuck_bytes(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements; same memory, same lifetime.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
}

/// How often the watcher reads a filtered CQ while deferred operations are outstanding.
const POLL_MAX: Duration = Duration::from_micros(200);

/// What else a filter takes out of a CQ: the notifications of remote accesses
/// (`rma_event.rs`). `take` sees an entry's flags and remote CQ data: None when the entry is
/// not one; else it has been counted, and Some(true) keeps the entry for the application with
/// the data rewritten.
pub trait Notifications: Send + Sync {
    fn take(&self, filter: usize, flags: u64, data: &mut u64) -> Option<bool>;
}

/// The domain's [`Notifications`], which live as long as the domain.
#[derive(Clone, Copy)]
struct Notes(*const dyn Notifications);
// SAFETY: the domain's record (Sync), alive until the domain closes, after its CQs.
unsafe impl Send for Notes {}
// SAFETY: as above.
unsafe impl Sync for Notes {}

/// A posted deferred operation, whose address is its context at the core. It begins with
/// room for the core: a core whose mode asks for FI_CONTEXT or FI_CONTEXT2 writes into the
/// `fi_context2` its operations' context points to until they complete, as applications
/// provide (none of the cores tested asks for it).
#[repr(C)]
pub struct Record {
    _core_context: [usize; 8],
    app_context: *mut c_void,
    completion: Option<*const dyn AnyCntr>,
    /// FI_COMPLETION: the application wants the CQ entry and the endpoint counters' count.
    report: bool,
    /// The endpoint counters the core counts this operation in, which owe it that count
    /// (`AnyCntr::owe`): the application did not ask for it.
    owed: Vec<*const dyn AnyCntr>,
    /// The endpoint's count of deferred operations naming it, which keeps it from closing.
    ep_refs: *const AtomicUsize,
}

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
    /// rscntr's own operation (a notification of a remote access, `rma_ep.rs`).
    pub own: bool,
}

/// The deferred operations of one domain, and its filtered CQs.
#[derive(Default)]
pub struct Deferred {
    outstanding: Mutex<HashMap<usize, Box<Record>>>,
    /// `outstanding.len()`, read without the lock on every filtered CQ read.
    live: AtomicUsize,
    /// Entry sizes of the domain's CQs, by CQ (recorded at fi_cq_open): the application's
    /// and the core's (larger when rscntr opened the core CQ in a format with remote CQ data).
    formats: Mutex<HashMap<usize, (usize, usize)>>,
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
    pub fn opened_cq(&self, cq: *mut ofi::fid_cq, app: ofi::fi_cq_format, core: ofi::fi_cq_format) {
        self.formats
            .lock()
            .insert(cq as usize, (entry_size(app), entry_size(core)));
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
        self.live.load(Ordering::Acquire)
    }

    /// A CQ bound to a trigger-able endpoint gets the filter (once); None for a CQ whose
    /// format rscntr did not see (not opened through this domain).
    ///
    /// # Safety
    /// `cq` is an open CQ of this domain.
    pub unsafe fn filter(&self, cq: *mut ofi::fid_cq) -> Option<*mut CqFilter> {
        let (entry, core_entry) = *self.formats.lock().get(&(cq as usize))?;
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
        // SAFETY: the CQ's current table is valid.
        let inner = unsafe { *current };
        let mut f = Box::new(CqFilter {
            ops: inner,
            inner: current,
            cq,
            entry,
            core_entry,
            notes: self.notes.get().copied(),
            deferred: self,
            stash: Mutex::new(Stash::default()),
            kept: AtomicBool::new(false),
            // SAFETY: an open CQ's fid ops.
            fi_ops: unsafe { *(*cq).fid.ops },
            orig_fi_ops: unsafe { (*cq).fid.ops },
            closed: AtomicBool::new(false),
            eps_pending: AtomicUsize::new(0),
            eps_live: AtomicUsize::new(0),
            held: AtomicBool::new(false),
        });
        f.fi_ops.close = Some(cq_close);
        f.ops.size = f.ops.size.min(std::mem::size_of::<ofi::fi_ops_cq>());
        f.ops.read = Some(cq_read);
        f.ops.readfrom = Some(cq_readfrom);
        f.ops.readerr = Some(cq_readerr);
        if inner.sread.is_some() {
            f.ops.sread = Some(cq_sread);
        }
        if inner.sreadfrom.is_some() {
            f.ops.sreadfrom = Some(cq_sreadfrom);
        }
        let f = Box::into_raw(f);
        // SAFETY: the tables are the filter's own fields, which live until the domain closes.
        unsafe {
            (*cq).ops = &mut (*f).ops;
            (*cq).fid.ops = &mut (*f).fi_ops;
        }
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
        let key = &*rec as *const Record as usize;
        let app_context = op.set_context(key as *mut c_void);
        self.outstanding.lock().insert(key, rec);
        self.live.fetch_add(1, Ordering::AcqRel);
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
        let rec = self.take(key);
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
            unsafe { self.finish(&rec, false, false) };
        }
        Ok(())
    }

    fn take(&self, key: usize) -> Option<Box<Record>> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        let rec = self.outstanding.lock().remove(&key)?;
        self.live.fetch_sub(1, Ordering::AcqRel);
        Some(rec)
    }

    /// A completion (`ok`) or error the core reported for `rec`; `counted`: the core moved
    /// the endpoint counters for it (it did, for a completion it reports).
    ///
    /// # Safety
    /// `rec` was outstanding: its counters are held or bound, its endpoint open.
    unsafe fn finish(&self, rec: &Record, ok: bool, counted: bool) {
        // SAFETY: held since post.
        if let Some(c) = rec.completion.map(|c| unsafe { &*c }) {
            // The hold becomes a use before the count moves: the application may close the
            // counter as soon as it sees the count (MPICH's triggered broadcasts do), and a
            // close waits out a use where it refuses a hold (-FI_EBUSY).
            c.begin_use();
            let _ = if ok { c.add(1) } else { c.add_err(1) };
            c.end_use();
        }
        if counted && !ok {
            for u in &rec.owed {
                // SAFETY: bound to the endpoint, which is open (it waits for this record).
                let u = unsafe { &**u };
                // The core counted an error instead of the count owed.
                u.forgive();
                let _ = u.add_err(u64::MAX);
            }
        }
        // SAFETY: the endpoint waits for its deferred operations before it closes.
        unsafe { &*rec.ep_refs }.fetch_sub(1, Ordering::AcqRel);
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

impl Stash {
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.errs.is_empty()
    }
}

#[derive(Default)]
struct Stash {
    /// The application's entries read by rscntr (the watcher, or a read that met one of
    /// rscntr's errors), with their source addresses, in order.
    entries: VecDeque<(Vec<u8>, ofi::fi_addr_t)>,
    /// The application's error entries read (or made, for fi_cancel) by rscntr, with their
    /// error data copied; a read returns -FI_EAVAIL while any wait.
    errs: VecDeque<(ofi::fi_cq_err_entry, Vec<u8>)>,
    /// The error data handed out last (valid until the next read, as a core's).
    err_data: Vec<u8>,
}

/// A CQ of a trigger-able endpoint, read through rscntr (see the module doc).
#[repr(C)]
pub struct CqFilter {
    ops: ofi::fi_ops_cq,
    inner: *const ofi::fi_ops_cq,
    cq: *mut ofi::fid_cq,
    /// The size of the application's entries, and of the core CQ's (larger when rscntr
    /// opened it with remote CQ data the application's format has no room for).
    entry: usize,
    core_entry: usize,
    /// The domain's notifications, when its remote accesses are counted (`rma_event.rs`).
    notes: Option<Notes>,
    deferred: *const Deferred,
    stash: Mutex<Stash>,
    /// Whether the stash holds anything (entries or errors), read without its lock: a read
    /// with nothing kept and nothing deferred outstanding goes straight to the core.
    kept: AtomicBool,
    /// The CQ's fid ops with rscntr's close, and the ones it had: the application may close
    /// the CQ before the domain, and rscntr's own reads (the watcher's, a remote-access
    /// counter's) must then stop.
    fi_ops: ofi::fi_ops,
    orig_fi_ops: *const ofi::fi_ops,
    /// Set (under the stash lock) once the core closed the CQ.
    closed: AtomicBool,
    /// In a domain rscntr drives (`progress.rs`): the endpoints bound to this CQ that are
    /// not enabled yet, and those that are. A util core's CQ progress walks every endpoint
    /// bound to the CQ, and shm's crashes in one not enabled yet: rscntr drives the CQ only
    /// while every endpoint bound to it is enabled.
    eps_pending: AtomicUsize,
    eps_live: AtomicUsize,
    /// The CQ held entries at rscntr's last drive (a new entry is something new).
    held: AtomicBool,
}

// SAFETY: the CQ and its table are the core's; the domain's Deferred outlives the filter.
unsafe impl Send for CqFilter {}
// SAFETY: as above; the stash is behind its lock.
unsafe impl Sync for CqFilter {}

/// The stash, locked; dropping it publishes whether anything is kept (before the unlock).
struct Stashed<'a> {
    guard: parking_lot::MutexGuard<'a, Stash>,
    kept: &'a AtomicBool,
}

impl std::ops::Deref for Stashed<'_> {
    type Target = Stash;
    fn deref(&self) -> &Stash {
        &self.guard
    }
}

impl std::ops::DerefMut for Stashed<'_> {
    fn deref_mut(&mut self) -> &mut Stash {
        &mut self.guard
    }
}

impl Drop for Stashed<'_> {
    fn drop(&mut self) {
        self.kept.store(!self.guard.is_empty(), Ordering::Release);
    }
}

std::thread_local! {
    /// The filter whose core op this thread is inside: util's reads call `fi_cq_readfrom`
    /// through the CQ's table, which is the filter's, and must get the core's own.
    static INSIDE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl CqFilter {
    /// # Safety
    /// `cq`'s table is a filter's.
    unsafe fn of<'a>(cq: *mut ofi::fid_cq) -> &'a CqFilter {
        // SAFETY: `ops` is the first field (caller's contract).
        unsafe { &*((*cq).ops as *const CqFilter) }
    }

    fn stash(&self) -> Stashed<'_> {
        Stashed {
            guard: self.stash.lock(),
            kept: &self.kept,
        }
    }

    /// The core's `read`, or `readfrom` when `from`.
    ///
    /// # Safety
    /// `buf` holds `count` entries (and `src` NULL or `count` addresses); `inner` is the table.
    unsafe fn core_read(
        &self,
        inner: &ofi::fi_ops_cq,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
        from: bool,
    ) -> isize {
        const ENOSYS: isize = err::ENOSYS as isize;
        // SAFETY: the core's own op on its CQ; the caller's contract for the buffers.
        unsafe {
            if from {
                inner
                    .readfrom
                    .map_or(ENOSYS, |f| f(self.cq, buf.cast(), count, src))
            } else {
                inner.read.map_or(ENOSYS, |f| f(self.cq, buf.cast(), count))
            }
        }
    }

    /// Runs a core op of this CQ, marking the thread as inside it.
    fn core<R>(&self, op: impl FnOnce(&ofi::fi_ops_cq) -> R) -> R {
        let prev = INSIDE.with(|i| i.replace(self as *const Self as usize));
        let r = op(self.inner());
        INSIDE.with(|i| i.set(prev));
        r
    }

    /// The core's own table when this thread is inside a core op of this CQ (the core calls
    /// itself through the CQ's table), else None.
    fn reentered(&self) -> Option<&ofi::fi_ops_cq> {
        (INSIDE.with(|i| i.get()) == self as *const Self as usize).then(|| self.inner())
    }

    fn inner(&self) -> &ofi::fi_ops_cq {
        // SAFETY: the table the CQ had, static in the core (or a record of rscntr's that
        // lives as long as the CQ).
        unsafe { &*self.inner }
    }

    fn deferred(&self) -> &Deferred {
        // SAFETY: the domain owns the filter.
        unsafe { &*self.deferred }
    }

    /// Whether an entry's context is one of rscntr's; if so, counts it and says whether the
    /// entry stays (FI_COMPLETION), rewriting its context to the application's.
    ///
    /// # Safety
    /// `ctx` points at the entry's op_context.
    unsafe fn take_ours(&self, ctx: *mut *mut c_void, ok: bool) -> Option<bool> {
        // SAFETY: caller's contract.
        let rec = self.deferred().take(unsafe { *ctx } as usize)?;
        let report = rec.report;
        // SAFETY: caller's contract.
        unsafe { *ctx = rec.app_context };
        // SAFETY: it was outstanding.
        unsafe { self.deferred().finish(&rec, ok, true) };
        Some(report)
    }

    /// Reads from the core into `buf`, taking rscntr's entries out; `src` for readfrom.
    /// Returns what the application gets.
    ///
    /// # Safety
    /// `buf` holds `count` entries (and `src` NULL or `count` addresses).
    unsafe fn read_core(
        &self,
        st: &mut Stash,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
    ) -> isize {
        // SAFETY: the caller's contract.
        unsafe { self.read_core_until(st, buf, count, src, true) }
    }

    /// [`CqFilter::read_core`]; `until_kept`: read again while the core's entries were all
    /// rscntr's (an application's read must not answer 0 for entries it never sees), else
    /// return 0 then (rscntr's own reads: one progress call each).
    ///
    /// # Safety
    /// As [`CqFilter::read_core`].
    unsafe fn read_core_until(
        &self,
        st: &mut Stash,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
        until_kept: bool,
    ) -> isize {
        // The core's entries are larger than the application's: read them apart (on the
        // stack for the few a poll reads, as a remote-access counter's does).
        let mut small = [0u64; SMALL_READ / 8];
        let mut wide = Vec::new();
        let cbuf = if self.core_entry == self.entry {
            buf
        } else if count * self.core_entry <= SMALL_READ {
            small.as_mut_ptr().cast::<u8>()
        } else {
            wide.resize(count * self.core_entry, 0u8);
            wide.as_mut_ptr()
        };
        loop {
            // SAFETY: the core's own read on its CQ (caller's contract for the buffers; the
            // wide buffer holds `count` core entries).
            let n = self
                .core(|inner| unsafe { self.core_read(inner, cbuf, count, src, !src.is_null()) });
            if n == err::EAVAIL as isize {
                // SAFETY: as above.
                if unsafe { self.take_core_error(st) } {
                    continue;
                }
                return n;
            }
            if n <= 0
                || self.notes.is_none()
                    && self.deferred().outstanding() == 0
                    && st.entries.is_empty()
            {
                return n;
            }
            // SAFETY: the core wrote n entries.
            let kept = unsafe { self.take_ours_from(cbuf, n as usize, src) };
            if cbuf != buf {
                for i in 0..kept {
                    // SAFETY: each application entry is the head of the core's (the formats
                    // extend one another); `buf` holds `count` >= kept entries.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            cbuf.add(i * self.core_entry),
                            buf.add(i * self.entry),
                            self.entry,
                        )
                    };
                }
            }
            if kept > 0 || !until_kept {
                return kept as isize;
            }
        }
    }

    /// Whether the core's entry at `e` is the application's: rscntr's own (a deferred
    /// operation's, a notification) are counted and taken out, unless they stay.
    ///
    /// # Safety
    /// `e` is one core entry the core wrote.
    unsafe fn keeps(&self, e: *mut u8) -> bool {
        // SAFETY: op_context is the first field of every entry.
        if let Some(keep) = unsafe { self.take_ours(e.cast(), true) } {
            return keep;
        }
        let Some(notes) = self.notes else {
            return true;
        };
        // Filters that take notifications read cores in a format with flags and data.
        debug_assert!(self.core_entry >= std::mem::size_of::<ofi::fi_cq_data_entry>());
        let entry = e.cast::<ofi::fi_cq_data_entry>();
        // SAFETY: a data entry (above); the buffer may be unaligned.
        let (flags, mut data) = unsafe {
            (
                std::ptr::addr_of!((*entry).flags).read_unaligned(),
                std::ptr::addr_of!((*entry).data).read_unaligned(),
            )
        };
        // SAFETY: the domain's, alive while its CQs are.
        match unsafe { (*notes.0).take(self as *const Self as usize, flags, &mut data) } {
            None => true,
            Some(keep) => {
                if keep {
                    // SAFETY: as above.
                    unsafe { std::ptr::addr_of_mut!((*entry).data).write_unaligned(data) };
                }
                keep
            }
        }
    }

    /// Takes rscntr's entries out of the `n` the core wrote into `buf` (and `src`), moving the
    /// application's up; how many are the application's.
    ///
    /// # Safety
    /// `buf` holds `n` core entries the core wrote (`src` NULL or `n` addresses).
    unsafe fn take_ours_from(&self, buf: *mut u8, n: usize, src: *mut ofi::fi_addr_t) -> usize {
        let size = self.core_entry;
        let mut kept = 0usize;
        for i in 0..n {
            // SAFETY: within the n entries.
            let e = unsafe { buf.add(i * size) };
            // SAFETY: an entry the core wrote.
            if unsafe { self.keeps(e) } {
                if kept != i {
                    // SAFETY: within the n entries written.
                    unsafe {
                        std::ptr::copy(e, buf.add(kept * size), size);
                        if !src.is_null() {
                            *src.add(kept) = *src.add(i);
                        }
                    }
                }
                kept += 1;
            }
        }
        kept
    }

    /// The core has an error entry: reads it; rscntr's is counted (true: read on), the
    /// application's is kept for its readerr (false).
    ///
    /// # Safety
    /// The CQ is open.
    unsafe fn take_core_error(&self, st: &mut Stash) -> bool {
        if !st.errs.is_empty() {
            return false;
        }
        // SAFETY: all-zero is a valid err entry (err_data_size 0: the core's own buffer).
        let mut e: ofi::fi_cq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: the core's own readerr.
        let n = self.core(|inner| unsafe { inner.readerr.map_or(0, |f| f(self.cq, &mut e, 0)) });
        if n != 1 {
            return false;
        }
        // SAFETY: a field of the entry just read.
        if unsafe { self.take_ours(&mut e.op_context, false) } == Some(false) {
            return true;
        }
        let data = if e.err_data.is_null() || e.err_data_size == 0 {
            Vec::new()
        } else {
            // SAFETY: the core's buffer of err_data_size bytes, valid until its next read.
            unsafe { std::slice::from_raw_parts(e.err_data.cast::<u8>(), e.err_data_size) }.to_vec()
        };
        st.errs.push_back((e, data));
        false
    }

    /// Drives the core's progress on this CQ without reading an entry.
    pub fn progress(&self) {
        // SAFETY: the core's own read of no entries (util CQs run their progress).
        let _ = self.core(|inner| unsafe {
            inner
                .read
                .map_or(0, |f| f(self.cq, std::ptr::null_mut(), 0))
        });
    }

    /// An endpoint was bound to this CQ (`enabled`: it already is).
    pub fn ep_bound(&self, enabled: bool) {
        let n = if enabled {
            &self.eps_live
        } else {
            &self.eps_pending
        };
        n.fetch_add(1, Ordering::AcqRel);
    }

    /// An endpoint bound to this CQ was enabled.
    pub fn ep_enabled(&self) {
        self.eps_live.fetch_add(1, Ordering::AcqRel);
        self.eps_pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// An endpoint bound to this CQ was closed (by the core, which unbound it).
    pub fn ep_closed(&self, enabled: bool) {
        let n = if enabled {
            &self.eps_live
        } else {
            &self.eps_pending
        };
        n.fetch_sub(1, Ordering::AcqRel);
    }

    /// rscntr's own progress for a domain promised automatic progress (`progress.rs`): one
    /// progress call on this CQ, reading no entry, while the CQ is open and every endpoint
    /// bound to it is enabled. True when the CQ came to hold entries since the last one.
    pub fn drive(&self) -> bool {
        if self.eps_pending.load(Ordering::Acquire) != 0
            || self.eps_live.load(Ordering::Acquire) == 0
        {
            return false;
        }
        // The core closes no endpoint meanwhile (Deferred::closing), and the CQ stays open
        // while the stash is held (cq_close).
        let _open = self.deferred().closing.read_recursive();
        let st = self.stash.lock();
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: the core's own read of no entries: util CQs run their progress, and
        // answer 0 or -FI_EAVAIL while they hold entries, -FI_EAGAIN while empty.
        let n = self.core(|inner| unsafe {
            inner.read.map_or(err::EAGAIN as isize, |f| {
                f(self.cq, std::ptr::null_mut(), 0)
            })
        });
        drop(st);
        let holds = n >= 0 || n == err::EAVAIL as isize;
        !self.held.swap(holds, Ordering::AcqRel) && holds
    }

    /// Queues an error entry of rscntr's own for the application (a cancelled operation).
    pub fn push_error(&self, context: *mut c_void, flags: u64, err: c_int) {
        // SAFETY: all-zero is a valid err entry.
        let mut e: ofi::fi_cq_err_entry = unsafe { std::mem::zeroed() };
        e.op_context = context;
        e.flags = flags;
        e.err = err;
        e.prov_errno = -err;
        e.src_addr = FI_ADDR_NOTAVAIL;
        self.stash().errs.push_back((e, Vec::new()));
    }

    /// What the application reads: kept entries first, then the core.
    ///
    /// # Safety
    /// As [`CqFilter::read_core`].
    unsafe fn read(&self, buf: *mut u8, count: usize, src: *mut ofi::fi_addr_t) -> isize {
        if count == 0 || buf.is_null() {
            // SAFETY: the core's own read, as asked (progress only).
            return self.core(|inner| unsafe {
                inner
                    .read
                    .map_or(err::ENOSYS as isize, |f| f(self.cq, buf.cast(), count))
            });
        }
        let mut st = self.stash();
        self.read_locked(&mut st, buf, count, src)
    }

    /// The read while nothing is kept and nothing of rscntr's is outstanding: the core's own,
    /// with no lock and no thread-local (a core that calls itself through the CQ's table comes
    /// back here and gets the same); None when the filter must look (then nothing was read).
    ///
    /// # Safety
    /// As [`CqFilter::read_core`].
    #[inline]
    unsafe fn fast_read(
        &self,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
        from: bool,
    ) -> Option<isize> {
        if self.notes.is_some()
            || self.kept.load(Ordering::Acquire)
            || self.deferred().outstanding() != 0
        {
            return None;
        }
        let inner = self.inner();
        // SAFETY: the application's buffers; readfrom stays readfrom (a core's read may call
        // readfrom through the table, with NULL src).
        let n = unsafe { self.core_read(inner, buf, count, src, from) };
        if n == err::EAVAIL as isize {
            // An error entry: rscntr's or the application's, the locked way.
            return None;
        }
        if n <= 0 || self.deferred().outstanding() == 0 {
            return Some(n);
        }
        // A deferred operation was posted meanwhile: its entry may be among these.
        // SAFETY: the core wrote n entries.
        let kept = unsafe { self.take_ours_from(buf, n as usize, src) };
        Some(if kept > 0 {
            kept as isize
        } else {
            err::EAGAIN as isize
        })
    }

    /// [`CqFilter::read`] with the stash locked.
    fn read_locked(
        &self,
        st: &mut Stash,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
    ) -> isize {
        if !st.entries.is_empty() {
            let mut n = 0;
            while n < count {
                let Some((e, a)) = st.entries.pop_front() else {
                    break;
                };
                // SAFETY: `buf` holds `count` entries of this size.
                unsafe {
                    std::ptr::copy_nonoverlapping(e.as_ptr(), buf.add(n * self.entry), self.entry);
                    if !src.is_null() {
                        *src.add(n) = a;
                    }
                }
                n += 1;
            }
            return n as isize;
        }
        if !st.errs.is_empty() {
            return err::EAVAIL as isize;
        }
        // SAFETY: the caller's contract (see read).
        unsafe { self.read_core(st, buf, count, src) }
    }

    /// The watcher's read (and a remote-access counter's, `rma_event.rs`): the application's
    /// entries go to the stash.
    pub fn fill(&self) {
        let _open = self.deferred().closing.read_recursive();
        let mut st = self.stash();
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // Marked kept before the core is read: a read that finds the mark clear reads the core
        // before this does, so the application's entries keep their order.
        self.kept.store(true, Ordering::Release);
        if !st.errs.is_empty() {
            return;
        }
        const N: usize = 16;
        // Aligned for the entries' fields; no entry format is larger than 64 bytes.
        let mut buf = [0u64; N * 64 / 8];
        let buf = &mut bytemuck_bytes(&mut buf)[..N * self.entry];
        let mut src = [0 as ofi::fi_addr_t; N];
        let use_src = self.inner().readfrom.is_some();
        let srcp = if use_src {
            src.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: room for N entries and addresses.
        let n = unsafe { self.read_core_until(&mut st, buf.as_mut_ptr(), N, srcp, false) };
        for i in 0..n.max(0) as usize {
            let e = buf[i * self.entry..(i + 1) * self.entry].to_vec();
            st.entries
                .push_back((e, if use_src { src[i] } else { FI_ADDR_NOTAVAIL }));
        }
    }

    /// The application's readerr.
    ///
    /// # Safety
    /// `out` is NULL or an err entry the application owns.
    unsafe fn readerr(&self, out: *mut ofi::fi_cq_err_entry) -> isize {
        // SAFETY: caller's contract.
        let Some(out) = (unsafe { out.as_mut() }) else {
            return err::EINVAL as isize;
        };
        let mut st = self.stash();
        if st.errs.is_empty() {
            // SAFETY: the CQ is open.
            while unsafe { self.take_core_error(&mut st) } {}
        }
        let Some((e, data)) = st.errs.pop_front() else {
            return err::EAGAIN as isize;
        };
        let (buf, size) = (out.err_data, out.err_data_size);
        *out = e;
        if size > 0 && !buf.is_null() {
            let n = size.min(data.len());
            // SAFETY: the application's buffer of `size` bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), n) };
            out.err_data = buf;
            out.err_data_size = n;
        } else {
            st.err_data = data;
            out.err_data = if st.err_data.is_empty() {
                std::ptr::null_mut()
            } else {
                st.err_data.as_mut_ptr().cast()
            };
            out.err_data_size = st.err_data.len();
        }
        1
    }
}

impl Watched for CqFilter {
    fn poll(&self) -> bool {
        if self.deferred().outstanding() == 0 || self.closed.load(Ordering::Acquire) {
            return false;
        }
        self.fill();
        true
    }
    fn wake(&self) -> Wake<'_> {
        Wake::After(POLL_MAX)
    }
}

/// The application closes a filtered CQ: the core's close, under the stash lock so that no
/// read of rscntr's is inside the core meanwhile; after it, rscntr's reads of it stop.
unsafe extern "C" fn cq_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only filtered CQs reach this op; their fid ops are the filter's `fi_ops`.
        let f = unsafe {
            &*((*fid).ops as *const u8)
                .sub(std::mem::offset_of!(CqFilter, fi_ops))
                .cast::<CqFilter>()
        };
        let st = f.stash();
        // SAFETY: the close the CQ had.
        let ret = unsafe { (*f.orig_fi_ops).close.map_or(err::ENOSYS, |c| c(fid)) };
        if ret == 0 {
            f.closed.store(true, Ordering::Release);
        }
        drop(st);
        if ret == 0 {
            // After the lock: the watcher may be waiting for it, and then sees the CQ closed.
            watcher::unwatch(f as *const CqFilter as usize);
        }
        ret
    }
}

unsafe extern "C" fn cq_read(cq: *mut ofi::fid_cq, buf: *mut c_void, count: usize) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only filtered CQs reach this op.
        let f = unsafe { CqFilter::of(cq) };
        // SAFETY: the application's buffer.
        if let Some(n) = unsafe { f.fast_read(buf.cast(), count, std::ptr::null_mut(), false) } {
            return n;
        }
        if let Some(inner) = f.reentered() {
            // SAFETY: the core calling its own op.
            return unsafe { inner.read.map_or(err::ENOSYS as isize, |r| r(cq, buf, count)) };
        }
        // SAFETY: the application's buffer.
        unsafe { f.read(buf.cast(), count, std::ptr::null_mut()) }
    }
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut ofi::fi_addr_t,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only filtered CQs reach this op.
        let f = unsafe { CqFilter::of(cq) };
        // SAFETY: the application's buffers.
        if let Some(n) = unsafe { f.fast_read(buf.cast(), count, src, true) } {
            return n;
        }
        if let Some(inner) = f.reentered() {
            // SAFETY: the core calling its own op.
            return unsafe { inner.readfrom.map_or(err::ENOSYS as isize, |r| r(cq, buf, count, src)) };
        }
        // SAFETY: the application's buffers.
        unsafe { f.read(buf.cast(), count, src) }
    }
}

unsafe extern "C" fn cq_readerr(
    cq: *mut ofi::fid_cq,
    buf: *mut ofi::fi_cq_err_entry,
    flags: u64,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only filtered CQs reach this op.
        let f = unsafe { CqFilter::of(cq) };
        if let Some(inner) = f.reentered() {
            // SAFETY: the core calling its own op.
            return unsafe { inner.readerr.map_or(err::ENOSYS as isize, |r| r(cq, buf, flags)) };
        }
        // SAFETY: the application's entry.
        unsafe { f.readerr(buf) }
    }
}

/// The blocking reads: the core's own wait, then the filter; rscntr's entries never reach
/// the application, so a wake-up that only brought those waits again.
unsafe fn sread_with(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut ofi::fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: only filtered CQs reach this op.
    let f = unsafe { CqFilter::of(cq) };
    if let Some(inner) = f.reentered() {
        // SAFETY: the core calling its own op.
        return unsafe {
            match (src.is_null(), inner.sread, inner.sreadfrom) {
                (true, Some(s), _) => s(cq, buf, count, cond, timeout),
                (false, _, Some(s)) => s(cq, buf, count, src, cond, timeout),
                _ => err::ENOSYS as isize,
            }
        };
    }
    let deadline =
        (timeout >= 0).then(|| std::time::Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        // SAFETY: the application's buffers.
        let n = unsafe { f.read(buf.cast(), count, src) };
        if n != err::EAGAIN as isize {
            return n;
        }
        let left = match deadline {
            None => -1,
            Some(d) => {
                let now = std::time::Instant::now();
                if now >= d {
                    return err::EAGAIN as isize;
                }
                (d - now).as_millis().clamp(1, i32::MAX as u128) as c_int
            }
        };
        // Sleep in the core's own wait for at most 1 ms, without reading anything (count 0
        // is not portable: read one entry into a scratch buffer, kept for the application).
        let short = if left < 0 { 1 } else { left.min(1) };
        let mut scratch = vec![0u8; f.core_entry];
        let mut a: ofi::fi_addr_t = FI_ADDR_NOTAVAIL;
        // SAFETY: the core's own sread into our scratch entry.
        let got = f.core(|inner| unsafe {
            match (inner.sreadfrom, inner.sread) {
                (Some(sf), _) => sf(cq, scratch.as_mut_ptr().cast(), 1, &mut a, cond, short),
                (None, Some(s)) => s(cq, scratch.as_mut_ptr().cast(), 1, cond, short),
                _ => err::ENOSYS as isize,
            }
        });
        if got == err::ENOSYS as isize {
            return got;
        }
        if got == 1 {
            let mut st = f.stash();
            // SAFETY: the entry the core wrote.
            if unsafe { f.keeps(scratch.as_mut_ptr()) } {
                scratch.truncate(f.entry);
                st.entries.push_back((scratch, a));
            }
        } else if got == err::EAVAIL as isize {
            let mut st = f.stash();
            // SAFETY: the CQ is open.
            while unsafe { f.take_core_error(&mut st) } {}
        } else if got < 0 && got != err::EAGAIN as isize && got != err::ETIMEDOUT as isize {
            return got;
        }
    }
}

unsafe extern "C" fn cq_sread(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: forwarded.
        unsafe { sread_with(cq, buf, count, std::ptr::null_mut(), cond, timeout) }
    }
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut ofi::fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: forwarded.
        unsafe { sread_with(cq, buf, count, src, cond, timeout) }
    }
}
