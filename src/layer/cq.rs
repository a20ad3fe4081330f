//! Completion-queue wait objects a core lacks: tcp and rxm CQs refuse FI_WAIT_YIELD, shm CQs
//! refuse FI_WAIT_FD. rscntr then opens the core CQ without a wait object and provides the
//! requested one itself: `fi_cq_sread` reads the core CQ (driving its progress) after a short
//! spin, yielding between reads (what FI_WAIT_YIELD asks for, and what shm's own waits do),
//! and an FD CQ gets an eventfd that the engine's fd watcher makes readable as soon as the
//! core CQ has an entry, after `fi_trywait` armed it (yielding between polls, as shm's waits
//! do, only while armed). Reads, writes and everything else stay the core's own.
//!
//! Over shm's doorbell (`doorbell/bell.rs`) an FD CQ hands out an epoll set holding its eventfd and
//! the doorbell's socket, and `fi_trywait` arms the socket: a peer's ring makes the fd readable
//! whoever drives the core, as an FD counter's does. (The watcher alone could not: it may drive
//! the core only in `FI_THREAD_SAFE` domains, and fabtests' `-c fd` asks `FI_THREAD_DOMAIN`.)

use super::doorbell::bell::BellBlocker;
use super::doorbell::ring_cq;
use super::home::CoreHome;
use super::interpose::close_through_core;
use super::wait::{CqOpenFn, Plan, epoll_add_shared, epoll_set};
use crate::boundary::ffi::{self, err};
use crate::boundary::testhook::{self, Op};
use crate::engine::watcher::{self, Watched};
use crate::engine::{Backoff, EventFd, Wake};
use crate::{fi_info, fi_warn, ofi};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Each patched CQ's record, by the CQ's fid: what the record's ops use to find it, as the
/// CQ's tables may be another patch's by then (a domain's CQ filter, `trigger/deferred.rs`, installs
/// itself over this one once the CQ is bound). Only the waits, signal, control and close look.
static PATCHED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

#[repr(C)]
pub struct LayeredCq {
    fi_ops: ofi::fi_ops,
    ops: ofi::fi_ops_cq,
    orig_fi_ops: *const ofi::fi_ops,
    orig_ops: *const ofi::fi_ops_cq,
    cq: *mut ofi::fid_cq,
    home: *const CoreHome,
    wait_obj: ofi::fi_wait_obj,
    fd: Option<EventFd>,
    /// Over the doorbell, the FD CQ's wait fd: an epoll set holding `fd` and the doorbell's
    /// socket.
    fd_set: Option<OwnedFd>,
    signaled: AtomicBool,
    /// Over shm, the domain's doorbell (`doorbell/bell.rs`): waits sleep on it instead of yielding.
    bell: Option<std::sync::Arc<BellBlocker>>,
    /// The kicks of the threads asleep in this CQ's sread on the doorbell, for `fi_cq_signal`.
    sleeping: std::sync::Mutex<Vec<std::os::fd::RawFd>>,
}

/// Opens a core CQ; when the core refuses the wait object, opens it without one and emulates.
///
/// Over shm, the CQ's reads then ring the peers that asked the domain for answers
/// (`doorbell/ring_cq.rs`).
///
/// # Safety
/// As fi_cq_open; `home` is the domain's and outlives the CQ.
pub unsafe fn open(
    orig: CqOpenFn,
    domain: *mut ofi::fid_domain,
    attr: *mut ofi::fi_cq_attr,
    cq: *mut *mut ofi::fid_cq,
    context: *mut c_void,
    home: &CoreHome,
) -> c_int {
    // SAFETY: caller's contract.
    let ret = unsafe { open_with_wait(orig, domain, attr, cq, context, home) };
    if ret == 0 && home.plan == Plan::Bell {
        // SAFETY: just opened (the core wrote it), not handed to the application yet.
        unsafe { ring_cq::patch(*cq, home.answers.clone()) };
    }
    ret
}

/// # Safety
/// As [`open`].
unsafe fn open_with_wait(
    orig: CqOpenFn,
    domain: *mut ofi::fid_domain,
    attr: *mut ofi::fi_cq_attr,
    cq: *mut *mut ofi::fid_cq,
    context: *mut c_void,
    home: &CoreHome,
) -> c_int {
    // Over shm, rscntr provides UNSPEC and FD itself, sleeping on the domain's doorbell: the
    // core's UNSPEC would yield, and it has no FD.
    // SAFETY: attr NULL or valid.
    let take_over = unsafe { attr.as_ref() }.is_some_and(|a| bell_for(home, a.wait_obj).is_some());
    // SAFETY: forwarded as the application passed them.
    let ret = if take_over {
        err::ENOSYS
    } else {
        testhook::fail(Op::CqOpen).unwrap_or_else(|| unsafe { orig(domain, attr, cq, context) })
    };
    // SAFETY: attr NULL or valid.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return ret;
    };
    let wanted = a.wait_obj;
    let emulable = matches!(
        wanted,
        ofi::fi_wait_obj_FI_WAIT_YIELD
            | ofi::fi_wait_obj_FI_WAIT_FD
            | ofi::fi_wait_obj_FI_WAIT_UNSPEC
    );
    if ret == 0 || cq.is_null() || !emulable || ![err::EINVAL, err::ENOSYS, -95].contains(&ret) {
        return ret;
    }
    // Over shm, UNSPEC and FD waits sleep on the domain's doorbell.
    let bell = bell_for(home, wanted);
    let fd = if wanted == ofi::fi_wait_obj_FI_WAIT_FD {
        match EventFd::new() {
            Ok(fd) => Some(fd),
            Err(e) => {
                fi_warn!(Domain, "cannot create the eventfd of an FI_WAIT_FD CQ: {e}");
                return -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as c_int);
            }
        }
    } else {
        None
    };
    let fd_set = match (&fd, &bell) {
        (Some(fd), Some(bell)) => match bell_fd_set(fd, bell) {
            Ok(set) => Some(set),
            Err(e) => {
                fi_warn!(Domain, "cannot make the epoll set of an FI_WAIT_FD CQ: {e}");
                return -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as c_int);
            }
        },
        _ => None,
    };
    let mut plain = *a;
    plain.wait_obj = ofi::fi_wait_obj_FI_WAIT_NONE;
    plain.wait_cond = ofi::fi_cq_wait_cond_FI_CQ_COND_NONE;
    plain.wait_set = std::ptr::null_mut();
    // SAFETY: the same request without a wait object.
    if testhook::fail(Op::CqOpen)
        .unwrap_or_else(|| unsafe { orig(domain, &mut plain, cq, context) })
        != 0
    {
        return ret;
    }
    fi_info!(
        Domain,
        "the core's CQ lacks wait object {wanted}; rscntr provides it"
    );
    // SAFETY: a just-opened core CQ with valid ops tables.
    unsafe {
        let c = &mut **cq;
        let mut l = Box::new(LayeredCq {
            fi_ops: *c.fid.ops,
            ops: *c.ops,
            orig_fi_ops: c.fid.ops,
            orig_ops: c.ops,
            cq: *cq,
            home,
            wait_obj: wanted,
            fd,
            fd_set,
            signaled: AtomicBool::new(false),
            bell,
            sleeping: std::sync::Mutex::new(Vec::new()),
        });
        l.fi_ops.close = Some(cq_close);
        l.fi_ops.control = Some(cq_control);
        l.ops.size = l.ops.size.min(std::mem::size_of::<ofi::fi_ops_cq>());
        l.ops.sread = Some(cq_sread);
        l.ops.sreadfrom = Some(cq_sreadfrom);
        l.ops.signal = Some(cq_signal);
        let l = Box::into_raw(l);
        c.fid.ops = &mut (*l).fi_ops;
        c.ops = &mut (*l).ops;
        PATCHED
            .lock()
            .insert(&mut c.fid as *mut ofi::fid as usize, l as usize);
    }
    0
}

impl LayeredCq {
    /// # Safety
    /// `fid` is a CQ patched by [`open`].
    unsafe fn of<'a>(fid: *mut ofi::fid) -> &'a LayeredCq {
        let found = PATCHED.lock().get(&(fid as usize)).copied();
        // SAFETY: registered by `open` until the CQ closes (caller's contract: patched).
        unsafe { &*(found.expect("a CQ patched by open") as *const LayeredCq) }
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    fn orig(&self) -> &ofi::fi_ops_cq {
        // SAFETY: the core's static table.
        unsafe { &*self.orig_ops }
    }

    /// True when the core CQ holds an entry. A read of zero entries runs the core's progress
    /// and reports whether the queue is empty without taking anything (util CQs).
    fn has_entry(&self) -> bool {
        // SAFETY: the core's own read on its own CQ, asking for no entries.
        let r = unsafe { self.orig().read.unwrap()(self.cq, std::ptr::null_mut(), 0) };
        r != err::EAGAIN as isize
    }
}

/// Is `fid` a CQ whose wait object rscntr emulates?
///
/// # Safety
/// `fid` is a readable fid.
pub unsafe fn is_emulated(fid: *mut ofi::fid) -> bool {
    // By the registry, not the fid's close: other patches go over this one's tables (a CQ's
    // answering tables over shm, `doorbell/ring_cq.rs`; a deferred-work filter).
    // SAFETY: a readable fid.
    (unsafe { (*fid).fclass }) as u32 == ofi::FI_CLASS_CQ
        && PATCHED.lock().contains_key(&(fid as usize))
}

/// fi_trywait on an emulated FD CQ: -FI_EAGAIN while it holds entries; otherwise armed.
///
/// # Safety
/// `fid` satisfies [`is_emulated`].
pub unsafe fn trywait(fid: *mut ofi::fid) -> c_int {
    // SAFETY: caller's contract.
    let l = unsafe { LayeredCq::of(fid) };
    let Some(fd) = &l.fd else { return err::EINVAL };
    fd.drain();
    if l.has_entry() {
        return err::EAGAIN;
    }
    if l.fd_set.is_some()
        && let Some(bell) = &l.bell
        && !arm_bell(l, bell)
    {
        return err::EAGAIN;
    }
    // SAFETY: the home outlives its CQs.
    let home = unsafe { &*l.home };
    if home.watcher_may_progress {
        // SAFETY: cq_close unwatches before the CQ is freed.
        unsafe { watcher::watch(l.key(), watcher::target_of(l)) };
    } else if l.fd_set.is_none() {
        // Nothing but the application's own reads drives the core here (a domain not
        // FI_THREAD_SAFE, no doorbell): an fd it polled would never become readable. It reads
        // and tries again instead, as libfabric's fd protocol allows.
        if !SAID_READS_INSTEAD.swap(true, Ordering::Relaxed) {
            fi_info!(
                Domain,
                "fi_trywait on an FD CQ answers -FI_EAGAIN: in a domain not FI_THREAD_SAFE over a core without a wait fd, only the application's reads progress it"
            );
        }
        return err::EAGAIN;
    }
    0
}

/// Whether the log has said why [`trywait`] answers -FI_EAGAIN where nothing could wake a poll.
static SAID_READS_INSTEAD: AtomicBool = AtomicBool::new(false);

/// Arms the doorbell's socket for a thread about to `poll()` the CQ's epoll set, looking at the
/// CQ again after each arming (a completion that landed before it rang nobody): false when the
/// CQ has an entry or a ring keeps coming, and the application reads and tries again.
fn arm_bell(l: &LayeredCq, bell: &BellBlocker) -> bool {
    for _ in 0..3 {
        let armed = bell.arm_socket();
        if l.has_entry() {
            return false;
        }
        if armed {
            return true;
        }
    }
    false
}

/// The wait fd of an FD CQ over the doorbell: its eventfd (signals, the watcher) and the
/// doorbell's socket, which several sets may hold (`EPOLLEXCLUSIVE`: one ring wakes one poller).
fn bell_fd_set(fd: &EventFd, bell: &BellBlocker) -> std::io::Result<OwnedFd> {
    let set = epoll_set(fd.as_raw_fd())?;
    epoll_add_shared(set.as_raw_fd(), bell.socket_fd())?;
    Ok(set)
}

// SAFETY: the raw pointers are set at open and never change (the core's CQ and tables, the
// home, which outlives the CQ); the rest is atomics and an eventfd. The watcher polls it from
// its thread; the core's CQ read is thread safe in the FI_THREAD_SAFE domains it does so in.
unsafe impl Sync for LayeredCq {}

impl Watched for LayeredCq {
    fn poll(&self) -> bool {
        if self.has_entry() {
            if let Some(fd) = &self.fd {
                fd.signal();
            }
            false
        } else {
            true
        }
    }
    fn wake(&self) -> Wake<'_> {
        match &self.bell {
            Some(b) => Wake::Block(&**b),
            // The cores whose CQs lack FI_WAIT_FD (shm without the doorbell) have nothing to
            // block on either.
            None => Wake::Yield,
        }
    }
}

unsafe extern "C" fn cq_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let l = unsafe { LayeredCq::of(fid) } as *const LayeredCq as *mut LayeredCq;
        // SAFETY: live until freed below.
        watcher::unwatch(unsafe { (*l).key() });
        // SAFETY: the record of this CQ, off the watcher.
        match unsafe { close_through_core(fid, l, (*l).orig_fi_ops) } {
            Ok(record) => {
                // Only this record's entry: a CQ opened meanwhile at the same address has its own.
                let mut patched = PATCHED.lock();
                if patched.get(&(fid as usize)) == Some(&(&*record as *const LayeredCq as usize)) {
                    patched.remove(&(fid as usize));
                }
                if patched.is_empty() {
                    // The map's last node goes too: nothing of it outlives the last CQ (the
                    // static is unmapped with the DSO at exit).
                    *patched = BTreeMap::new();
                }
                0
            }
            Err(e) => e,
        }
    }
}

unsafe extern "C" fn cq_control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let l = unsafe { LayeredCq::of(fid) };
        // SAFETY (both arms): arg NULL or the documented out pointer.
        match command as u32 {
            ofi::FI_GETWAIT => match (&l.fd_set, &l.fd) {
                (Some(set), _) => ffi::status(unsafe { ffi::write_out(arg.cast::<c_int>(), set.as_raw_fd(), "wait") }),
                (None, Some(fd)) => ffi::status(unsafe { ffi::write_out(arg.cast::<c_int>(), fd.as_raw_fd(), "wait") }),
                (None, None) => err::ENODATA,
            },
            ofi::FI_GETWAITOBJ => ffi::status(unsafe { ffi::write_out(arg.cast(), l.wait_obj, "wait object") }),
            // SAFETY: the core's own control.
            _ => unsafe { (*l.orig_fi_ops).control.map_or(err::ENOSYS, |c| c(fid, command, arg)) },
        }
    }
}

/// Reads the core CQ until an entry, a signal or the timeout (-FI_EAGAIN, as libfabric's
/// sread), spinning briefly and then yielding between reads.
fn sread_loop(l: &LayeredCq, timeout: c_int, mut read: impl FnMut() -> isize) -> isize {
    let deadline = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    let mut backoff = Backoff::default();
    // Over the doorbell: pulled (yielding) a while, then asleep on it (see `doorbell/bell.rs`).
    let sleep_after = l
        .bell
        .as_ref()
        .and_then(|b| crate::engine::Blocker::pull_before_sleep(&**b))
        .map(|d| Instant::now() + d);
    loop {
        let r = read();
        if r != err::EAGAIN as isize {
            return r;
        }
        if l.signaled.swap(false, Ordering::AcqRel) {
            return err::EAGAIN as isize;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return err::EAGAIN as isize;
        }
        if let (Some(bell), Some(after)) = (&l.bell, sleep_after)
            && backoff.is_spun_out()
            && Instant::now() >= after
        {
            return sleep_on_bell(l, bell, deadline, read);
        }
        backoff.snooze();
    }
}

/// The rest of an sread over the doorbell: asleep on it between reads, woken by a ring, a
/// signal (`fi_cq_signal` kicks the sleepers) or the deadline.
fn sleep_on_bell(
    l: &LayeredCq,
    bell: &BellBlocker,
    deadline: Option<Instant>,
    mut read: impl FnMut() -> isize,
) -> isize {
    let kick = match EventFd::new() {
        Ok(k) => k,
        Err(e) => {
            fi_warn!(
                Domain,
                "cannot make an eventfd to sleep on ({e}); this read polls"
            );
            return err::EAGAIN as isize;
        }
    };
    l.sleeping
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(kick.as_raw_fd());
    let found = bell.sleep_outside_room(&kick, deadline, || {
        let r = read();
        if r != err::EAGAIN as isize {
            Some(r)
        } else if l.signaled.swap(false, Ordering::AcqRel) {
            Some(err::EAGAIN as isize)
        } else {
            None
        }
    });
    let fd = kick.as_raw_fd();
    l.sleeping
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|f| *f != fd);
    found.unwrap_or(err::EAGAIN as isize)
}

/// Whether a CQ of `home` asking for `wait_obj` sleeps on the domain's doorbell: over shm
/// (the doorbell on) for UNSPEC and FD.
fn bell_for(home: &CoreHome, wait_obj: ofi::fi_wait_obj) -> Option<std::sync::Arc<BellBlocker>> {
    let asks = matches!(
        wait_obj,
        ofi::fi_wait_obj_FI_WAIT_UNSPEC | ofi::fi_wait_obj_FI_WAIT_FD
    );
    if !(asks && home.plan == Plan::Bell) {
        return None;
    }
    home.waits().bell_blocker().ok()
}

unsafe extern "C" fn cq_sread(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let l = unsafe { LayeredCq::of(cq.cast()) };
        // SAFETY: the core's own read with the caller's buffer.
        sread_loop(l, timeout, || unsafe { l.orig().read.unwrap()(cq, buf, count) })
    }
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut ofi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src_addr: *mut ofi::fi_addr_t,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let l = unsafe { LayeredCq::of(cq.cast()) };
        // SAFETY: the core's own readfrom with the caller's buffers.
        sread_loop(l, timeout, || unsafe { l.orig().readfrom.unwrap()(cq, buf, count, src_addr) })
    }
}

unsafe extern "C" fn cq_signal(cq: *mut ofi::fid_cq) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched CQs reach this op.
        let l = unsafe { LayeredCq::of(cq.cast()) };
        l.signaled.store(true, Ordering::Release);
        if let Some(fd) = &l.fd {
            fd.signal();
        }
        for k in l.sleeping.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // The kick of a thread asleep in this CQ's sread, registered while it sleeps.
            crate::engine::signal_raw(*k);
        }
        if let Some(bell) = &l.bell {
            // They sleep in a futex on the doorbell's word (`doorbell/bell.rs`).
            bell.kick_sleepers();
        }
        0
    }
}
