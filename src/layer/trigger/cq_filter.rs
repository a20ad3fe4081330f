//! A CQ of a trigger-able endpoint (or of a domain whose remote accesses or progress rscntr
//! takes care of), read through rscntr: the filter that takes rscntr's own entries out before
//! the application sees them (`deferred.rs` says why), and keeps the application's in order.
//! Its C ops (the CQ's table while it is filtered) are in `cq_ops.rs`. Over 600 lines: one
//! struct whose reads (the application's, the watcher's, the progress thread's) share the
//! stash and its order; they read best side by side.

use super::outstanding::Outstanding;
use crate::boundary::ffi::err;
use crate::engine::Wake;
use crate::engine::watcher::Watched;
use crate::ofi;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// libfabric's FI_ADDR_NOTAVAIL ((uint64_t) -1), a macro bindgen leaves out.
pub(super) const FI_ADDR_NOTAVAIL: ofi::fi_addr_t = u64::MAX;

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
/// (`rma_event/`). `take` sees an entry's flags and remote CQ data: None when the entry is
/// not one; else it has been counted, and Some(true) keeps the entry for the application with
/// the data rewritten.
pub trait Notifications: Send + Sync {
    fn take(&self, filter: usize, flags: u64, data: &mut u64) -> Option<bool>;
}

/// The domain's [`Notifications`], which live as long as the domain.
#[derive(Clone, Copy)]
pub(super) struct Notes(pub(super) *const dyn Notifications);
// SAFETY: the domain's record (Sync), alive until the domain closes, after its CQs.
unsafe impl Send for Notes {}
// SAFETY: as above.
unsafe impl Sync for Notes {}

impl Stash {
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.errs.is_empty()
    }
}

#[derive(Default)]
pub(super) struct Stash {
    /// The application's entries read by rscntr (the watcher, or a read that met one of
    /// rscntr's errors), with their source addresses, in order.
    pub(super) entries: VecDeque<(Vec<u8>, ofi::fi_addr_t)>,
    /// The application's error entries read (or made, for fi_cancel) by rscntr, with their
    /// error data copied; a read returns -FI_EAVAIL while any wait.
    errs: VecDeque<(ofi::fi_cq_err_entry, Vec<u8>)>,
    /// The error data handed out last (valid until the next read, as a core's).
    err_data: Vec<u8>,
}

/// The entry sizes of a CQ: the application's, the core CQ's, and of the application's error
/// entries (which depend on the API version it asked for).
#[derive(Clone, Copy)]
pub(super) struct Formats {
    pub entry: usize,
    pub core_entry: usize,
    pub err_entry: usize,
}

/// A CQ of a trigger-able endpoint, read through rscntr (see the module doc).
#[repr(C)]
pub struct CqFilter {
    pub(super) ops: ofi::fi_ops_cq,
    pub(super) inner: *const ofi::fi_ops_cq,
    pub(super) cq: *mut ofi::fid_cq,
    /// The size of the application's entries, and of the core CQ's (larger when rscntr
    /// opened it with remote CQ data the application's format has no room for).
    pub(super) entry: usize,
    pub(super) core_entry: usize,
    /// The size of the application's error entries (`fi_cq_err_entry` grew in 1.20).
    pub(super) err_entry: usize,
    /// The domain's notifications, when its remote accesses are counted (`rma_event/`).
    pub(super) notes: Option<Notes>,
    /// The domain's outstanding deferred operations, and its lock against driving an endpoint
    /// the core is closing (`Deferred::closing`): the domain's, which outlive the filter.
    pub(super) outstanding: *const Outstanding,
    pub(super) closing: *const parking_lot::RwLock<()>,
    pub(super) stash: Mutex<Stash>,
    /// Whether the stash holds anything (entries or errors), read without its lock: a read
    /// with nothing kept and nothing deferred outstanding goes straight to the core.
    pub(super) kept: AtomicBool,
    /// The CQ's fid ops with rscntr's close, and the ones it had: the application may close
    /// the CQ before the domain, and rscntr's own reads (the watcher's, a remote-access
    /// counter's) must then stop.
    pub(super) fi_ops: ofi::fi_ops,
    pub(super) orig_fi_ops: *const ofi::fi_ops,
    /// Set (under the stash lock) once the core closed the CQ.
    pub(super) closed: AtomicBool,
    /// In a domain rscntr drives (`progress/`): the endpoints bound to this CQ that are
    /// not enabled yet, and those that are. A util core's CQ progress walks every endpoint
    /// bound to the CQ, and shm's crashes in one not enabled yet: rscntr drives the CQ only
    /// while every endpoint bound to it is enabled.
    pub(super) eps_pending: AtomicUsize,
    pub(super) eps_live: AtomicUsize,
    /// The CQ held entries at rscntr's last drive (a new entry is something new).
    pub(super) held: AtomicBool,
}

// SAFETY: the CQ and its table are the core's; the domain's Deferred outlives the filter.
unsafe impl Send for CqFilter {}
// SAFETY: as above; the stash is behind its lock.
unsafe impl Sync for CqFilter {}

/// The stash, locked; dropping it publishes whether anything is kept (before the unlock).
pub(super) struct Stashed<'a> {
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
    pub(super) unsafe fn of<'a>(cq: *mut ofi::fid_cq) -> &'a CqFilter {
        // SAFETY: `ops` is the first field (caller's contract).
        unsafe { &*((*cq).ops as *const CqFilter) }
    }

    pub(super) fn stash(&self) -> Stashed<'_> {
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
    pub(super) fn core<R>(&self, op: impl FnOnce(&ofi::fi_ops_cq) -> R) -> R {
        let prev = INSIDE.with(|i| i.replace(self as *const Self as usize));
        let r = op(self.inner());
        INSIDE.with(|i| i.set(prev));
        r
    }

    /// The core's own table when this thread is inside a core op of this CQ (the core calls
    /// itself through the CQ's table), else None.
    pub(super) fn reentered(&self) -> Option<&ofi::fi_ops_cq> {
        (INSIDE.with(|i| i.get()) == self as *const Self as usize).then(|| self.inner())
    }

    fn inner(&self) -> &ofi::fi_ops_cq {
        // SAFETY: the table the CQ had, static in the core (or a record of rscntr's that
        // lives as long as the CQ).
        unsafe { &*self.inner }
    }

    fn outstanding(&self) -> &Outstanding {
        // SAFETY: the domain owns the filter.
        unsafe { &*self.outstanding }
    }

    fn closing(&self) -> &parking_lot::RwLock<()> {
        // SAFETY: as above.
        unsafe { &*self.closing }
    }

    /// Whether an entry's context is one of rscntr's; if so, counts it and says whether the
    /// entry stays (FI_COMPLETION), rewriting its context to the application's.
    ///
    /// # Safety
    /// `ctx` points at the entry's op_context.
    unsafe fn take_ours(&self, ctx: *mut *mut c_void, ok: bool) -> Option<bool> {
        // SAFETY: caller's contract.
        let rec = self.outstanding().take(unsafe { *ctx } as usize)?;
        let report = rec.report;
        // SAFETY: caller's contract.
        unsafe { *ctx = rec.app_context };
        // SAFETY: it was outstanding.
        unsafe { rec.finish(ok, true) };
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
        unsafe { self.read_core_until(st, buf, count, src, true, &mut 0) }
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
        read: &mut usize,
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
            *read = n.max(0) as usize;
            if n <= 0
                || self.notes.is_none() && self.outstanding().count() == 0 && st.entries.is_empty()
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
    pub(super) unsafe fn keeps(&self, e: *mut u8) -> bool {
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
    pub(super) unsafe fn take_core_error(&self, st: &mut Stash) -> bool {
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

    /// rscntr's own progress for a domain promised automatic progress (`progress/`): one
    /// progress call on this CQ, reading no entry, while the CQ is open and every endpoint
    /// bound to it is enabled. True when the CQ came to hold entries since the last one.
    pub fn drive(&self) -> bool {
        self.drive_with(true) == Some(true)
    }

    /// As [`CqFilter::drive`], unless another thread holds the CQ (or this one does, further
    /// up its stack): then nothing, and None.
    pub fn drive_unless_busy(&self) -> Option<bool> {
        self.drive_with(false)
    }

    fn drive_with(&self, wait: bool) -> Option<bool> {
        let idle = || {
            self.eps_pending.load(Ordering::Acquire) != 0
                || self.eps_live.load(Ordering::Acquire) == 0
        };
        if idle() {
            return Some(false);
        }
        // The core closes no endpoint meanwhile (Deferred::closing), and the CQ stays open
        // while the stash is held (cq_close).
        let (_open, st) = if wait {
            (self.closing().read_recursive(), self.stash.lock())
        } else {
            let open = self.closing().try_read_recursive()?;
            let st = self.stash.try_lock()?;
            (open, st)
        };
        // Again under the lock: an endpoint bound meanwhile is counted by now (its bind holds
        // the lock for writing until it is: `bind.rs`).
        if idle() {
            return Some(false);
        }
        if self.closed.load(Ordering::Acquire) {
            return Some(false);
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
        Some(!self.held.swap(holds, Ordering::AcqRel) && holds)
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
    pub(super) unsafe fn read(
        &self,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
    ) -> isize {
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
    pub(super) unsafe fn fast_read(
        &self,
        buf: *mut u8,
        count: usize,
        src: *mut ofi::fi_addr_t,
        from: bool,
    ) -> Option<isize> {
        if self.notes.is_some()
            || self.kept.load(Ordering::Acquire)
            || self.outstanding().count() != 0
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
        if n <= 0 || self.outstanding().count() == 0 {
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

    /// The watcher's read: one read of the core's CQ, whose application entries go to the
    /// stash. True when the core filled the read (it may hold more).
    pub fn fill(&self) -> bool {
        let _open = self.closing().read_recursive();
        let mut st = self.stash();
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        // Marked kept before the core is read: a read that finds the mark clear reads the core
        // before this does, so the application's entries keep their order.
        self.kept.store(true, Ordering::Release);
        if !st.errs.is_empty() {
            return false;
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
        let mut read = 0;
        // SAFETY: room for N entries and addresses.
        let n =
            unsafe { self.read_core_until(&mut st, buf.as_mut_ptr(), N, srcp, false, &mut read) };
        for i in 0..n.max(0) as usize {
            let e = buf[i * self.entry..(i + 1) * self.entry].to_vec();
            st.entries
                .push_back((e, if use_src { src[i] } else { FI_ADDR_NOTAVAIL }));
        }
        read == N
    }

    /// A remote-access counter's read: reads the core's CQ until it holds nothing more
    /// (application entries to the stash). One read of a few entries is not enough: a
    /// waiter sleeps until the core reports a new arrival, so a notification left behind a
    /// backlog in the CQ (the notifications of a peer's many reads, which count nothing here)
    /// would be counted only after the next arrival, which may never come (Sandia
    /// OpenSHMEM's barrier after a loop of gets over tcp;ofi_rxm waited for ever).
    pub fn drain(&self) {
        while self.fill() {}
    }

    /// The application's readerr.
    ///
    /// # Safety
    /// `out` is NULL or an err entry the application owns.
    pub(super) unsafe fn readerr(&self, out: *mut ofi::fi_cq_err_entry) -> isize {
        if out.is_null() {
            return err::EINVAL as isize;
        }
        let mut st = self.stash();
        if st.errs.is_empty() {
            // SAFETY: the CQ is open.
            while unsafe { self.take_core_error(&mut st) } {}
        }
        let Some((e, data)) = st.errs.pop_front() else {
            return err::EAGAIN as isize;
        };
        // Only through raw pointers, and only what the application's version of the struct
        // has: an application of API 1.19 or older owns 80 bytes, not the bindings' 88.
        // SAFETY: caller's contract; err_data and err_data_size lie in every version's part.
        let (buf, size) = unsafe { ((*out).err_data, (*out).err_data_size) };
        // SAFETY: `out` has `err_entry` bytes (at most the bindings' size), `e` all of them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&raw const e).cast::<u8>(),
                out.cast::<u8>(),
                self.err_entry
                    .min(std::mem::size_of::<ofi::fi_cq_err_entry>()),
            )
        };
        let (err_data, err_data_size) = if size > 0 && !buf.is_null() {
            let n = size.min(data.len());
            // SAFETY: the application's buffer of `size` bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), n) };
            (buf, n)
        } else {
            st.err_data = data;
            let p = if st.err_data.is_empty() {
                std::ptr::null_mut()
            } else {
                st.err_data.as_mut_ptr().cast()
            };
            (p, st.err_data.len())
        };
        // SAFETY: as above.
        unsafe {
            (*out).err_data = err_data;
            (*out).err_data_size = err_data_size;
        }
        1
    }
}

impl Watched for CqFilter {
    fn poll(&self) -> bool {
        if self.outstanding().count() == 0 || self.closed.load(Ordering::Acquire) {
            return false;
        }
        self.fill();
        true
    }
    fn wake(&self) -> Wake<'_> {
        Wake::After(POLL_MAX)
    }
}
