//! The C ops of a filtered CQ (`cq_filter.rs`): its reads, blocking reads and close, and
//! [`install`], which gives a CQ the filter's table.

use super::cq_filter::{CqFilter, FI_ADDR_NOTAVAIL, Formats, Notes, Stash};
use super::outstanding::Outstanding;
use crate::boundary::ffi::err;
use crate::engine::watcher;
use crate::ofi;
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A filter for `cq`, whose table it becomes; the filter lives until the domain frees it.
///
/// # Safety
/// `cq` is an open CQ of the domain whose deferred operations are `outstanding`, and whose
/// lock against closing endpoints is `closing`; both outlive the filter.
pub(super) unsafe fn install(
    cq: *mut ofi::fid_cq,
    formats: Formats,
    notes: Option<Notes>,
    outstanding: &Outstanding,
    closing: &parking_lot::RwLock<()>,
) -> *mut CqFilter {
    // SAFETY: an open CQ.
    let current = unsafe { (*cq).ops };
    // SAFETY: the CQ's current table is valid.
    let inner = unsafe { *current };
    let mut f = Box::new(CqFilter {
        ops: inner,
        inner: current,
        cq,
        entry: formats.entry,
        core_entry: formats.core_entry,
        err_entry: formats.err_entry,
        notes,
        outstanding,
        closing,
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
    f
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
