//! The initiator's side of rscntr's remote-access counters (`target.rs`): the rma and
//! atomic tables of an endpoint in a domain whose remote accesses rscntr counts.
//!
//! - a write of at most [`NOTIFY_AFTER`] bytes (256 KiB; over shm, of any length or of none:
//!   see [`split_after`]) carries its notification as remote CQ data:
//!   `write`, `writev`, `writemsg` and `inject` become the core's `writedata`, `writemsg` and
//!   `injectdata`; the application's own remote CQ data (`writedata`, `injectdata`,
//!   FI_REMOTE_CQ_DATA) rides in the same word, whatever the size;
//! - a longer write without the application's remote CQ data is the core's own write,
//!   followed by a notification injected to the same place (`notify_written`);
//! - a read or an atomic (a fetching one counts as both a write and a read), once the core
//!   took it, is followed by a write of nothing that
//!   carries the notification, on the same endpoint: the target's core handles a connection's
//!   requests in order, so it counts the access after performing it. The notification is
//!   rscntr's own deferred operation (`trigger/deferred.rs`): its completion never reaches the
//!   application's CQ, and the endpoint's FI_WRITE counters owe the core's count of it.
//!
//! Endpoints of other domains keep the core's tables. These tables sit under the trigger-able
//! ones (`trigger/endpoint.rs`), so triggered and deferred operations notify too.
//!
//! Over 600 lines: the endpoint's record and the table entries it installs, which call back
//! into it; apart, the two files would import each other.

use super::target::{Kind, RmaEvents, encode};
use crate::boundary::ffi::{copy_table, err, iov_len, ours_where_the_core_has};
use crate::cntr::AnyCntr;
use crate::layer::trigger::deferred::{Deferred, Target};
use crate::layer::trigger::endpoint::TriggerEp;
use crate::layer::trigger::op::{CoreOps, Op};
use crate::layer::trigger::outstanding::{forgive_counts, owe_counts};
use crate::{fi_warn, ofi};
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::{Duration, Instant};

const REMOTE_CQ_DATA: u64 = ofi::FI_REMOTE_CQ_DATA as u64;
const DELIVERY_COMPLETE: u64 = ofi::FI_DELIVERY_COMPLETE as u64;
/// What a notification (a write of nothing) is counted as at its initiator.
const FI_WRITE: u64 = ofi::FI_WRITE as u64;
/// Notifications outstanding on an endpoint from which its poster reads their completions.
const DRAIN_AT: usize = 64;
/// Writes longer than this (without the application's remote CQ data) go as the core's own
/// write followed by a notification ([`RmaEp::notify_written`]), rather than carrying the
/// notification themselves. At the target, tcp holds a write with remote CQ data that is still
/// arriving as a transfer to report; an endpoint closed meanwhile reports it cancelled, with
/// no context, and rxm's close crashes on that entry (`rxm_handle_comp_error`, libfabric 2.1:
/// SOS `unit/bigput` across hosts, whose 16 MiB puts to a peer were still on the wire when
/// the peer exited). A plain write still arriving is dropped silently, as over the core
/// alone, and the notification after it is complete as soon as its header is in. The second
/// message costs: measured on loopback (`scripts/bench_rma_event.sh`), nothing at 1 MiB, about
/// a quarter of the bandwidth at 64 KiB and half at 4 KiB; shorter writes, which take at most
/// a couple of milliseconds to arrive even over a 1 Gbit/s link, keep their one message and
/// the (narrower) window, as an application's own `fi_writedata` over the core has it.
pub const NOTIFY_AFTER: usize = 256 << 10;

/// The length past which a write over `core` goes as the core's write and a notification
/// after it ([`NOTIFY_AFTER`]).
///
/// shm: it depends on whether shm moves a plain write itself. With `FI_MR_VIRT_ADDR` and no
/// RMA ordering asked (`mr_mode`, `msg_order`: the endpoint's info), shm does a plain write or
/// read with one cross-memory copy in the initiator's own call (its "fast RMA"), while a write
/// with remote CQ data goes into the target's queue and completes at the initiator as soon as
/// it is queued. A write turned into a `writedata` would then complete before its data is in
/// place, and a read the application posts after that completion (its own or a triggered one)
/// would copy the old bytes. So there every write goes as the core's plain write, followed by
/// its notification: what the application sees is shm's own order. Without fast RMA every
/// operation goes through the target's queue in order, and a write keeps its notification in
/// one message whatever its length: shm reports a write with remote CQ data only once the data
/// is in place, whatever the protocol, and a second message would wait there after a SAR
/// transfer (shm refuses every operation toward that peer with -FI_EAGAIN until the peer has
/// taken all of it).
pub fn split_after(core: &str, mr_mode: u64, msg_order: u64) -> usize {
    if core != "shm" {
        return NOTIFY_AFTER;
    }
    let rma_order = (ofi::FI_ORDER_RAR
        | ofi::FI_ORDER_RAW
        | ofi::FI_ORDER_RAS
        | ofi::FI_ORDER_WAR
        | ofi::FI_ORDER_WAW
        | ofi::FI_ORDER_WAS
        | ofi::FI_ORDER_SAR
        | ofi::FI_ORDER_SAW) as u64
        | ofi::FI_ORDER_RMA_RAR
        | ofi::FI_ORDER_RMA_RAW
        | ofi::FI_ORDER_RMA_WAR
        | ofi::FI_ORDER_RMA_WAW
        | ofi::FI_ORDER_ATOMIC_RAR
        | ofi::FI_ORDER_ATOMIC_RAW
        | ofi::FI_ORDER_ATOMIC_WAR
        | ofi::FI_ORDER_ATOMIC_WAW;
    let fast_rma = mr_mode & ofi::FI_MR_VIRT_ADDR as u64 != 0 && msg_order & rma_order == 0;
    if fast_rma { 0 } else { usize::MAX }
}

/// An endpoint's rma and atomic tables (its table pointers point into this record).
#[repr(C)]
pub struct RmaEp {
    rma: ofi::fi_ops_rma,
    atomic: ofi::fi_ops_atomic,
    core_rma: *const ofi::fi_ops_rma,
    core_atomic: *const ofi::fi_ops_atomic,
    ep: *mut ofi::fid_ep,
    /// The endpoint's default transmit flags (its info's), for the calls without flags that
    /// become `writemsg`.
    op_flags: u64,
    /// Writes longer than this go as the core's write and a notification ([`split_after`]).
    split: usize,
    /// shm: a non-fetching atomic asked to complete at delivery goes without
    /// FI_DELIVERY_COMPLETE, its notification with it ([`RmaEp::atomic_delivered`]).
    delivered_by_notification: bool,
    deferred: *const Deferred,
    /// The domain's remote-access counters, which outlive its endpoints.
    events: *const RmaEvents,
    /// The endpoint's bookkeeping of bound counters and CQs (always made for these
    /// endpoints), set right after this record.
    trigger: AtomicPtr<TriggerEp>,
}

// SAFETY: the core's endpoint and static tables, the domain's record (which outlives its
// endpoints) and the endpoint's trigger record (freed after this one is unused).
unsafe impl Send for RmaEp {}
// SAFETY: as above.
unsafe impl Sync for RmaEp {}

impl RmaEp {
    /// Gives `ep` rscntr's rma and atomic tables; the record lives until [`RmaEp::free`].
    ///
    /// # Safety
    /// `ep` is an open core endpoint of the domain whose deferred operations are `deferred`;
    /// `op_flags` its default transmit flags; `core` the core's name; `mr_mode` and `msg_order`
    /// its info's (see [`split_after`]); `events` the domain's remote-access counters.
    pub unsafe fn patch(
        ep: *mut ofi::fid_ep,
        deferred: &Deferred,
        events: &RmaEvents,
        op_flags: u64,
        core: &str,
        mr_mode: u64,
        msg_order: u64,
    ) -> *mut RmaEp {
        // SAFETY: a valid endpoint whose table pointers are NULL or valid.
        unsafe {
            let e = &mut *ep;
            let mut r = Box::new(RmaEp {
                rma: copy_table(e.rma),
                atomic: copy_table(e.atomic),
                core_rma: e.rma,
                core_atomic: e.atomic,
                ep,
                op_flags,
                split: split_after(core, mr_mode, msg_order),
                delivered_by_notification: core == "shm",
                deferred,
                events,
                trigger: AtomicPtr::new(std::ptr::null_mut()),
            });
            ours_where_the_core_has!(
                r.rma.write => write,
                r.rma.writev => writev,
                r.rma.writemsg => writemsg,
                r.rma.inject => inject,
                r.rma.writedata => writedata,
                r.rma.injectdata => injectdata,
                r.rma.read => read,
                r.rma.readv => readv,
                r.rma.readmsg => readmsg,
                r.atomic.write => atomic_write,
                r.atomic.writev => atomic_writev,
                r.atomic.writemsg => atomic_writemsg,
                r.atomic.inject => atomic_inject,
                r.atomic.readwrite => atomic_readwrite,
                r.atomic.readwritev => atomic_readwritev,
                r.atomic.readwritemsg => atomic_readwritemsg,
                r.atomic.compwrite => atomic_compwrite,
                r.atomic.compwritev => atomic_compwritev,
                r.atomic.compwritemsg => atomic_compwritemsg,
            );
            let r = Box::into_raw(r);
            if !(*r).core_rma.is_null() {
                e.rma = &mut (*r).rma;
            }
            if !(*r).core_atomic.is_null() {
                e.atomic = &mut (*r).atomic;
            }
            r
        }
    }

    /// The endpoint's bookkeeping, made right after this record, on top of it: the
    /// endpoint's table pointers then point at its tables, and it leads back here.
    ///
    /// # Safety
    /// `t` is the endpoint's trigger record, live as long as this one.
    pub unsafe fn set_trigger(&self, t: *mut TriggerEp) {
        // SAFETY: caller's contract.
        unsafe {
            (*t).below
                .store(self as *const Self as *mut c_void, Ordering::Release)
        };
        self.trigger.store(t, Ordering::Release);
    }

    /// Frees the record once the core closed its endpoint.
    ///
    /// # Safety
    /// `r` came from [`RmaEp::patch`]; nothing uses it any more.
    pub unsafe fn free(r: *mut RmaEp) {
        // SAFETY: caller's contract.
        drop(unsafe { Box::from_raw(r) });
    }

    fn core_rma(&self) -> &ofi::fi_ops_rma {
        // SAFETY: the core's static table (present: only then are rma entries installed).
        unsafe { &*self.core_rma }
    }

    fn core_atomic(&self) -> &ofi::fi_ops_atomic {
        // SAFETY: as above, for atomics.
        unsafe { &*self.core_atomic }
    }

    /// After the core's plain write (`ret`): when it took it, notifies `dest` of it
    /// ([`RmaEp::notify_written`]).
    fn then_notify(
        &self,
        ret: isize,
        dest: ofi::fi_addr_t,
        places: impl IntoIterator<Item = (u64, u64)>,
    ) -> isize {
        if ret != 0 {
            return ret;
        }
        crate::ffi_boundary! {
            self.notify_written(dest, places);
            0isize
        }
    }

    /// Notifies `dest` of an access of `kind` to each MR of `keys` (once per MR).
    fn notify(&self, dest: ofi::fi_addr_t, keys: impl IntoIterator<Item = u64>, kind: Kind) {
        self.notify_with(dest, keys, kind, 0);
    }

    /// As [`RmaEp::notify`], the notifications posted with `extra` flags too.
    fn notify_with(
        &self,
        dest: ofi::fi_addr_t,
        keys: impl IntoIterator<Item = u64>,
        kind: Kind,
        extra: u64,
    ) {
        let mut seen: Vec<u64> = Vec::new();
        for key in keys {
            if !seen.contains(&key) {
                seen.push(key);
                self.notify_one(dest, key, kind, extra);
            }
        }
    }

    fn notify_one(&self, dest: ofi::fi_addr_t, key: u64, kind: Kind, extra: u64) {
        // SAFETY: set right after patch, freed after this record is unused.
        let Some(t) = (unsafe { self.trigger.load(Ordering::Acquire).as_ref() }) else {
            return;
        };
        // SAFETY: all-zero is a valid fi_msg_rma (no iovs, NULL context).
        let mut msg: ofi::fi_msg_rma = unsafe { std::mem::zeroed() };
        msg.addr = dest;
        msg.data = encode(kind, key, 0);
        let core = CoreOps {
            msg: std::ptr::null(),
            tagged: std::ptr::null(),
            rma: self.core_rma,
            atomic: std::ptr::null(),
        };
        let mut target = t.target();
        target.core = &core;
        target.own = true;
        if t.deferred() >= DRAIN_AT {
            // Beside the watcher, the posting thread takes their completions before the
            // core's CQ fills up with them.
            t.settle_deferred(Duration::ZERO);
        }
        let tx = t.transmit_filter();
        self.retry(t, || match tx {
            // SAFETY: a message without buffers; the domain's deferred operations.
            Some(_) => unsafe { self.post_notification(&target, &msg, extra) },
            None => self.inject_notification(&target.bound, &msg, extra),
        });
    }

    /// Posts a notification with `post` until the core takes it (-FI_EAGAIN: retried for
    /// up to 1 s, the endpoint's transmit CQ progressed meanwhile, and every endpoint of the
    /// domain: the target may be one of them, whose progress the core waits for, as shm
    /// refuses every operation toward a peer while a SAR transfer to it, such as a read where
    /// CMA is not allowed, is not all taken); a refusal is logged.
    fn retry(&self, t: &TriggerEp, mut post: impl FnMut() -> isize) -> isize {
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut nap = Duration::from_micros(20);
        let tx = t.transmit_filter();
        loop {
            let ret = post();
            if ret != err::EAGAIN as isize {
                if ret != 0 {
                    fi_warn!(
                        EpData,
                        "the core refused the notification of a remote access ({ret}): \
                        the target's counter misses it"
                    );
                }
                return ret;
            }
            if Instant::now() >= deadline {
                fi_warn!(
                    EpData,
                    "the core kept refusing the notification of a remote access (-FI_EAGAIN \
                    for 1 s): the target's counter misses it"
                );
                return ret;
            }
            if let Some(f) = tx {
                // SAFETY: the domain's filters live until it closes.
                unsafe { (*f).progress() };
            }
            // SAFETY: the domain's record outlives its endpoints.
            unsafe { (*self.events).drive() };
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }

    /// A long write's notification, once the core took the write: a write of nothing to
    /// where the write went (`places`: remote address and key, one per MR), injected with
    /// the mark as its remote CQ data. An inject writes no CQ entry, so nothing is filtered
    /// out or read back: it costs the posting thread one more call. The endpoint's FI_WRITE
    /// counters, which count it, owe that count from before it is posted (they read one low
    /// until the core counts it, never one high), and are forgiven it when the core refuses
    /// it. Without the core's injectdata, the notification a read gets.
    fn notify_written(&self, dest: ofi::fi_addr_t, places: impl IntoIterator<Item = (u64, u64)>) {
        let Some(inject) = self.core_rma().injectdata else {
            self.notify(dest, places.into_iter().map(|(_, key)| key), Kind::Write);
            return;
        };
        // SAFETY: set right after patch, freed after this record is unused.
        let Some(t) = (unsafe { self.trigger.load(Ordering::Acquire).as_ref() }) else {
            return;
        };
        let bound = t.target().bound;
        let mut seen: Vec<u64> = Vec::new();
        for (addr, key) in places {
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let owed = owe_counts(&bound, FI_WRITE);
            let data = encode(Kind::Write, key, 0);
            // SAFETY: the core's own op on its endpoint; no bytes to copy.
            let ret = self.retry(t, || unsafe {
                inject(self.ep, std::ptr::null(), 0, data, dest, addr, key)
            });
            if ret != 0 {
                forgive_counts(&owed);
            }
        }
    }

    /// The notification as rscntr's own deferred operation: its completion is taken out of
    /// the endpoint's CQ and its count out of the endpoint's counters.
    ///
    /// # Safety
    /// `msg` has no buffers; `target` is this endpoint with the core's tables.
    unsafe fn post_notification(
        &self,
        target: &Target<'_>,
        msg: &ofi::fi_msg_rma,
        extra: u64,
    ) -> isize {
        // SAFETY: no arrays to copy.
        let mut op = unsafe { Op::rma(msg, true) };
        // SAFETY: set right after patch.
        let t = unsafe { &*self.trigger.load(Ordering::Acquire) };
        t.hold_deferred();
        // SAFETY: the domain's record; the endpoint is held.
        match unsafe { (*self.deferred).post(target, &mut op, REMOTE_CQ_DATA | extra, None) } {
            Ok(()) => 0,
            Err(()) => {
                t.deferred_done();
                err::EAGAIN as isize
            }
        }
    }

    /// Without a transmit CQ, nothing reports the notification's completion: it goes as an
    /// inject, and the endpoint's FI_WRITE counters, which will count it, owe that count
    /// from before it is posted.
    fn inject_notification(
        &self,
        bound: &[(*const dyn AnyCntr, u64)],
        msg: &ofi::fi_msg_rma,
        extra: u64,
    ) -> isize {
        let owed = owe_counts(bound, FI_WRITE);
        // An inject completes when posted: not one asked to complete at delivery.
        let inject = if extra & DELIVERY_COMPLETE != 0 {
            0
        } else {
            ofi::FI_INJECT as u64
        };
        // SAFETY: the core's own op on its endpoint, with a message without buffers.
        let ret = unsafe {
            self.core_rma().writemsg.unwrap()(self.ep, msg, REMOTE_CQ_DATA | inject | extra)
        };
        if ret != 0 {
            forgive_counts(&owed);
        }
        ret
    }
}

impl RmaEp {
    /// Does a non-fetching atomic posted with `flags` (or, `None`, the endpoint's own) go
    /// through [`RmaEp::atomic_delivered`]?
    fn delivered_here(&self, flags: Option<u64>) -> bool {
        self.delivered_by_notification && flags.unwrap_or(self.op_flags) & DELIVERY_COMPLETE != 0
    }

    /// A non-fetching atomic over shm asked to complete at delivery. shm (libfabric 2.1)
    /// gives such an atomic an inject buffer of the target's, which both the target
    /// (`smr_progress_inject_atomic`: no fetch, so it releases it) and the initiator
    /// (`smr_progress_resp_entry`, on the delivery's response) put back: two later
    /// operations then share one buffer, and their operands and results mix (a fetching add
    /// came back with a compare-and-swap's operand; atomics added the wrong values). So the
    /// atomic goes to the core without FI_DELIVERY_COMPLETE (inline, complete when posted),
    /// its notification, which follows it in the target's queue, with it, and the endpoint's
    /// FI_WRITE counters owe the atomic's own count from before it is posted: they move when
    /// the notification is delivered, after the atomic was performed, as they would on
    /// delivery of the atomic itself.
    ///
    /// # Safety
    /// `msg` is the application's valid message; `flags` its flags.
    unsafe fn atomic_delivered(&self, msg: &ofi::fi_msg_atomic, flags: u64) -> isize {
        // SAFETY: set right after patch, freed after this record is unused.
        let Some(t) = (unsafe { self.trigger.load(Ordering::Acquire).as_ref() }) else {
            return err::EINVAL as isize;
        };
        let owed = owe_counts(&t.target().bound, FI_WRITE);
        // SAFETY: the core's own op with the application's message.
        let ret = unsafe {
            self.core_atomic().writemsg.unwrap()(self.ep, msg, flags & !DELIVERY_COMPLETE)
        };
        if ret != 0 {
            forgive_counts(&owed);
            return ret;
        }
        crate::ffi_boundary! {
            // SAFETY: its remote iovs.
            let keys = unsafe { keys_of(msg.rma_iov, msg.rma_iov_count, |v| v.key) };
            self.notify_with(msg.addr, keys, Kind::Write, DELIVERY_COMPLETE);
            // The notification owes its own count now (or was refused and owes nothing): the
            // atomic's comes when the notification is delivered.
            forgive_counts(&owed);
            0isize
        }
    }
}

/// The record of an endpoint whose tables these are: its table pointers point at the trigger
/// record on top (always there, see `bind::patch_ep`), which leads here.
macro_rules! record_of {
    ($ep:expr, rma) => {
        // SAFETY: only endpoints patched by RmaEp::patch, then TriggerEp::patch, reach these
        // ops; the trigger record's `below` is this record, set before any op could run.
        unsafe { &*(TriggerEp::of_rma($ep).below.load(Ordering::Acquire) as *const RmaEp) }
    };
    ($ep:expr, atomic) => {
        // SAFETY: as above, for the atomic table.
        unsafe { &*(TriggerEp::of_atomic($ep).below.load(Ordering::Acquire) as *const RmaEp) }
    };
}

/// What `key` takes from each of a message's remote iovs (their keys, or places).
///
/// # Safety
/// `iov` holds `n` elements (NULL when 0).
unsafe fn keys_of<T, K>(iov: *const T, n: usize, key: impl Fn(&T) -> K) -> Vec<K> {
    if iov.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(iov, n) }
        .iter()
        .map(key)
        .collect()
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn write(
    ep: *mut ofi::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let r = record_of!(ep, rma);
    if len > r.split {
        // SAFETY: the core's own op (present: only then is this installed), as asked.
        let ret =
            unsafe { r.core_rma().write.unwrap()(ep, buf, len, desc, dest, addr, key, context) };
        return r.then_notify(ret, dest, [(addr, key)]);
    }
    let data = encode(Kind::Write, key, 0);
    match r.core_rma().writedata {
        // SAFETY: the core's own op with the application's arguments.
        Some(f) => unsafe { f(ep, buf, len, desc, data, dest, addr, key, context) },
        None => err::ENOSYS as isize,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn writev(
    ep: *mut ofi::fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let r = record_of!(ep, rma);
    // SAFETY: the application's iovs, `count` of them.
    let len = unsafe { iov_len(iov, count) };
    if len > r.split {
        // SAFETY: the core's own op (present: only then is this installed), as asked.
        let ret =
            unsafe { r.core_rma().writev.unwrap()(ep, iov, desc, count, dest, addr, key, context) };
        return r.then_notify(ret, dest, [(addr, key)]);
    }
    let rma_iov = ofi::fi_rma_iov { addr, len, key };
    let msg = ofi::fi_msg_rma {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr: dest,
        rma_iov: &rma_iov,
        rma_iov_count: 1,
        context,
        data: encode(Kind::Write, key, 0),
    };
    // SAFETY: the core's own op; the message lives across the call.
    unsafe { r.core_rma().writemsg.unwrap()(ep, &msg, r.op_flags | REMOTE_CQ_DATA) }
}

unsafe extern "C" fn writemsg(
    ep: *mut ofi::fid_ep,
    msg: *const ofi::fi_msg_rma,
    flags: u64,
) -> isize {
    let r = record_of!(ep, rma);
    crate::ffi_boundary! {
        // SAFETY: the application's message.
        let Some(m) = (unsafe { msg.as_ref() }) else { return err::EINVAL as isize };
        // SAFETY: its remote iovs.
        let keys = unsafe { keys_of(m.rma_iov, m.rma_iov_count, |v| v.key) };
        let Some(&first) = keys.first() else {
            // SAFETY: the core's own op, as asked.
            return unsafe { r.core_rma().writemsg.unwrap()(ep, msg, flags) };
        };
        if flags & REMOTE_CQ_DATA == 0 {
            // SAFETY: the application's iovs, `iov_count` of them.
            if unsafe { iov_len(m.msg_iov, m.iov_count) } > r.split {
                // SAFETY: the core's own op, as asked.
                let ret = unsafe { r.core_rma().writemsg.unwrap()(ep, msg, flags) };
                // SAFETY: its remote iovs.
                let places = unsafe { keys_of(m.rma_iov, m.rma_iov_count, |v| (v.addr, v.key)) };
                return r.then_notify(ret, m.addr, places);
            }
        }
        let mut ours = *m;
        ours.data = if flags & REMOTE_CQ_DATA != 0 {
            encode(Kind::WriteData, first, m.data)
        } else {
            encode(Kind::Write, first, 0)
        };
        // SAFETY: the core's own op; the copy points at the application's arrays.
        let ret = unsafe { r.core_rma().writemsg.unwrap()(ep, &ours, flags | REMOTE_CQ_DATA) };
        if ret == 0 {
            // The first MR is notified by the write itself; any other by a notification.
            r.notify(m.addr, keys.into_iter().filter(|k| *k != first), Kind::Write);
        }
        ret
    }
}

unsafe extern "C" fn inject(
    ep: *mut ofi::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let r = record_of!(ep, rma);
    if len > r.split {
        // SAFETY: the core's own op (present: only then is this installed), as asked.
        let ret = unsafe { r.core_rma().inject.unwrap()(ep, buf, len, dest, addr, key) };
        return r.then_notify(ret, dest, [(addr, key)]);
    }
    let data = encode(Kind::Write, key, 0);
    match r.core_rma().injectdata {
        // SAFETY: the core's own op with the application's arguments.
        Some(f) => unsafe { f(ep, buf, len, data, dest, addr, key) },
        None => err::ENOSYS as isize,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn writedata(
    ep: *mut ofi::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let r = record_of!(ep, rma);
    let data = encode(Kind::WriteData, key, data);
    // SAFETY: the core's own op (present: only then is this installed).
    unsafe { r.core_rma().writedata.unwrap()(ep, buf, len, desc, data, dest, addr, key, context) }
}

unsafe extern "C" fn injectdata(
    ep: *mut ofi::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let r = record_of!(ep, rma);
    let data = encode(Kind::WriteData, key, data);
    // SAFETY: the core's own op (present: only then is this installed).
    unsafe { r.core_rma().injectdata.unwrap()(ep, buf, len, data, dest, addr, key) }
}

/// A core op of table `$table` (`$core`), then a notification of `$kind` to `$dest` for
/// `$key` when the core took it.
macro_rules! then_notify {
    ($name:ident, $table:ident, $core:ident, $slot:ident, $kind:expr,
     ($($a:ident : $t:ty),* $(,)?), $dest:ident, $key:ident) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(ep: *mut ofi::fid_ep, $($a: $t),*) -> isize {
            let r = record_of!(ep, $table);
            // SAFETY: the core's own op (present: only then is this installed).
            let ret = unsafe { r.$core().$slot.unwrap()(ep, $($a),*) };
            if ret == 0 {
                crate::ffi_boundary! {
                    r.notify($dest, [$key], $kind);
                    0isize
                }
            } else {
                ret
            }
        }
    };
}

then_notify!(read, rma, core_rma, read, Kind::Read,
    (buf: *mut c_void, len: usize, desc: *mut c_void, src: ofi::fi_addr_t, addr: u64, key: u64,
     context: *mut c_void), src, key);
then_notify!(readv, rma, core_rma, readv, Kind::Read,
    (iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, src: ofi::fi_addr_t,
     addr: u64, key: u64, context: *mut c_void), src, key);
then_notify!(core_atomic_write, atomic, core_atomic, write, Kind::Write,
    (buf: *const c_void, count: usize, desc: *mut c_void, dest: ofi::fi_addr_t, addr: u64,
     key: u64, datatype: ofi::fi_datatype, op: ofi::fi_op, context: *mut c_void), dest, key);
then_notify!(core_atomic_writev, atomic, core_atomic, writev, Kind::Write,
    (iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize, dest: ofi::fi_addr_t,
     addr: u64, key: u64, datatype: ofi::fi_datatype, op: ofi::fi_op, context: *mut c_void),
    dest, key);

/// An atomic message of the calls without flags, for [`RmaEp::atomic_delivered`].
#[allow(clippy::too_many_arguments)]
fn atomic_msg(
    iov: *const ofi::fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    dest: ofi::fi_addr_t,
    rma_iov: &ofi::fi_rma_ioc,
    datatype: ofi::fi_datatype,
    op: ofi::fi_op,
    context: *mut c_void,
) -> ofi::fi_msg_atomic {
    ofi::fi_msg_atomic {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr: dest,
        rma_iov,
        rma_iov_count: 1,
        datatype,
        op,
        context,
        data: 0,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomic_write(
    ep: *mut ofi::fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
    datatype: ofi::fi_datatype,
    op: ofi::fi_op,
    context: *mut c_void,
) -> isize {
    let r = record_of!(ep, atomic);
    if !r.delivered_here(None) {
        // SAFETY: the application's arguments.
        return unsafe {
            core_atomic_write(ep, buf, count, desc, dest, addr, key, datatype, op, context)
        };
    }
    let ioc = ofi::fi_ioc {
        addr: buf as *mut c_void,
        count,
    };
    let mut desc = desc;
    let rma_ioc = ofi::fi_rma_ioc { addr, count, key };
    let msg = atomic_msg(&ioc, &mut desc, 1, dest, &rma_ioc, datatype, op, context);
    // SAFETY: a message of the application's arguments, live across the call.
    unsafe { r.atomic_delivered(&msg, r.op_flags) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomic_writev(
    ep: *mut ofi::fid_ep,
    iov: *const ofi::fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    dest: ofi::fi_addr_t,
    addr: u64,
    key: u64,
    datatype: ofi::fi_datatype,
    op: ofi::fi_op,
    context: *mut c_void,
) -> isize {
    let r = record_of!(ep, atomic);
    if !r.delivered_here(None) {
        // SAFETY: the application's arguments.
        return unsafe {
            core_atomic_writev(ep, iov, desc, count, dest, addr, key, datatype, op, context)
        };
    }
    // SAFETY: the application's iocs, `count` of them.
    let total: usize = unsafe { keys_of(iov, count, |v| v.count) }.iter().sum();
    let rma_ioc = ofi::fi_rma_ioc {
        addr,
        count: total,
        key,
    };
    let msg = atomic_msg(iov, desc, count, dest, &rma_ioc, datatype, op, context);
    // SAFETY: a message of the application's arguments, live across the call.
    unsafe { r.atomic_delivered(&msg, r.op_flags) }
}
then_notify!(atomic_inject, atomic, core_atomic, inject, Kind::Write,
    (buf: *const c_void, count: usize, dest: ofi::fi_addr_t, addr: u64, key: u64,
     datatype: ofi::fi_datatype, op: ofi::fi_op), dest, key);
then_notify!(atomic_readwrite, atomic, core_atomic, readwrite, Kind::ReadWrite,
    (buf: *const c_void, count: usize, desc: *mut c_void, result: *mut c_void,
     result_desc: *mut c_void, dest: ofi::fi_addr_t, addr: u64, key: u64,
     datatype: ofi::fi_datatype, op: ofi::fi_op, context: *mut c_void), dest, key);
then_notify!(atomic_readwritev, atomic, core_atomic, readwritev, Kind::ReadWrite,
    (iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize, resultv: *mut ofi::fi_ioc,
     result_desc: *mut *mut c_void, result_count: usize, dest: ofi::fi_addr_t, addr: u64,
     key: u64, datatype: ofi::fi_datatype, op: ofi::fi_op, context: *mut c_void), dest, key);
then_notify!(atomic_compwrite, atomic, core_atomic, compwrite, Kind::ReadWrite,
    (buf: *const c_void, count: usize, desc: *mut c_void, compare: *const c_void,
     compare_desc: *mut c_void, result: *mut c_void, result_desc: *mut c_void,
     dest: ofi::fi_addr_t, addr: u64, key: u64, datatype: ofi::fi_datatype, op: ofi::fi_op,
     context: *mut c_void), dest, key);
then_notify!(atomic_compwritev, atomic, core_atomic, compwritev, Kind::ReadWrite,
    (iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize, comparev: *const ofi::fi_ioc,
     compare_desc: *mut *mut c_void, compare_count: usize, resultv: *mut ofi::fi_ioc,
     result_desc: *mut *mut c_void, result_count: usize, dest: ofi::fi_addr_t, addr: u64,
     key: u64, datatype: ofi::fi_datatype, op: ofi::fi_op, context: *mut c_void), dest, key);

unsafe extern "C" fn readmsg(
    ep: *mut ofi::fid_ep,
    msg: *const ofi::fi_msg_rma,
    flags: u64,
) -> isize {
    let r = record_of!(ep, rma);
    // SAFETY: the core's own op, as asked.
    let ret = unsafe { r.core_rma().readmsg.unwrap()(ep, msg, flags) };
    if ret != 0 {
        return ret;
    }
    crate::ffi_boundary! {
        // SAFETY: the application's message (the core took it, so it is valid).
        let m = unsafe { &*msg };
        // SAFETY: its remote iovs.
        r.notify(m.addr, unsafe { keys_of(m.rma_iov, m.rma_iov_count, |v| v.key) }, Kind::Read);
        0isize
    }
}

/// The notification of an atomic message's MRs, once the core took it.
///
/// # Safety
/// `msg` is a valid atomic message the core took.
unsafe fn notify_atomic(r: &RmaEp, msg: *const ofi::fi_msg_atomic, kind: Kind) {
    // SAFETY: caller's contract.
    let m = unsafe { &*msg };
    // SAFETY: its remote iovs.
    r.notify(
        m.addr,
        unsafe { keys_of(m.rma_iov, m.rma_iov_count, |v| v.key) },
        kind,
    );
}

unsafe extern "C" fn atomic_writemsg(
    ep: *mut ofi::fid_ep,
    msg: *const ofi::fi_msg_atomic,
    flags: u64,
) -> isize {
    let r = record_of!(ep, atomic);
    if r.delivered_here(Some(flags))
        // SAFETY: the application's message (NULL checked).
        && let Some(m) = unsafe { msg.as_ref() }
    {
        // SAFETY: as above.
        return unsafe { r.atomic_delivered(m, flags) };
    }
    // SAFETY: the core's own op, as asked.
    let ret = unsafe { r.core_atomic().writemsg.unwrap()(ep, msg, flags) };
    if ret != 0 {
        return ret;
    }
    crate::ffi_boundary! {
        // SAFETY: the core took the message.
        unsafe { notify_atomic(r, msg, Kind::Write) };
        0isize
    }
}

unsafe extern "C" fn atomic_readwritemsg(
    ep: *mut ofi::fid_ep,
    msg: *const ofi::fi_msg_atomic,
    resultv: *mut ofi::fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    let r = record_of!(ep, atomic);
    // SAFETY: the core's own op, as asked.
    let ret = unsafe {
        r.core_atomic().readwritemsg.unwrap()(ep, msg, resultv, result_desc, result_count, flags)
    };
    if ret != 0 {
        return ret;
    }
    crate::ffi_boundary! {
        // SAFETY: the core took the message.
        unsafe { notify_atomic(r, msg, Kind::ReadWrite) };
        0isize
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomic_compwritemsg(
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
    let r = record_of!(ep, atomic);
    // SAFETY: the core's own op, as asked.
    let ret = unsafe {
        r.core_atomic().compwritemsg.unwrap()(
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
    if ret != 0 {
        return ret;
    }
    crate::ffi_boundary! {
        // SAFETY: the core took the message.
        unsafe { notify_atomic(r, msg, Kind::ReadWrite) };
        0isize
    }
}
