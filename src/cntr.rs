//! The counter fid: libfabric's `fi_ops_cntr` over the engine's [`Counter`].
//!
//! Error contract (documented in the README):
//! - `fi_cntr_wait`: 0 once value >= threshold; -FI_EAVAIL when the error count changed after the
//!   call began; -FI_ETIMEDOUT after `timeout` ms (0 = check once, negative = forever);
//!   -FI_ENOSYS on a FI_WAIT_NONE counter (as libfabric's util counters do).
//! - `fi_control`: FI_GETWAIT (int *) gives the eventfd of an FI_WAIT_FD counter, -FI_ENODATA for
//!   other wait objects; FI_GETWAITOBJ (enum fi_wait_obj *); FI_GETOPSFLAG / FI_SETOPSFLAG
//!   (uint64_t *); anything else -FI_ENOSYS; NULL arg -FI_EINVAL.

use crate::domain::Domain;
use crate::engine::{Counter, Timeout, TryWaitError, WaitError, WaitStrategy, wait_polled};
use crate::fabric::Children;
use crate::ffi::{self, FidObject, err};
use crate::layer::Watched;
use crate::{fi_info, fi_warn, info, ofi, params, peer_sys};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Where counters live: a domain's bookkeeping of its counters (the `cntr_cnt` limit and the
/// open children that keep it from closing) and, in a layered domain, the core domain whose
/// completions the counters count.
pub struct CntrHome {
    pub children: Children,
    slots: AtomicUsize,
    core: Option<CoreDomain>,
    /// Drives the core's progress for armed FDs of a layered domain (started on first use).
    watcher: std::sync::OnceLock<crate::layer::Watcher>,
}

pub type CntrOpenFn = unsafe extern "C" fn(
    *mut ofi::fid_domain,
    *mut ofi::fi_cntr_attr,
    *mut *mut ofi::fid_cntr,
    *mut c_void,
) -> c_int;

/// The core side of a layered domain.
pub struct CoreDomain {
    pub domain: *mut ofi::fid_domain,
    /// The core's own cntr_open: the domain's ops table now leads to rscntr's.
    pub cntr_open: CntrOpenFn,
}

impl CntrHome {
    pub fn standalone() -> Self {
        CntrHome {
            children: Children::default(),
            slots: AtomicUsize::new(0),
            core: None,
            watcher: std::sync::OnceLock::new(),
        }
    }

    pub fn layered(core: CoreDomain) -> Self {
        CntrHome {
            core: Some(core),
            ..Self::standalone()
        }
    }

    /// The watcher thread of a layered domain, started on first use.
    pub fn watcher(&self) -> &crate::layer::Watcher {
        self.watcher.get_or_init(crate::layer::Watcher::default)
    }

    /// Claims one of the domain's `cntr_cnt` counter slots.
    fn claim_slot(&self) -> Result<(), c_int> {
        let claimed = self.slots.fetch_add(1, Ordering::AcqRel);
        if claimed >= info::MAX_CNTRS {
            self.slots.fetch_sub(1, Ordering::AcqRel);
            fi_warn!(
                Domain,
                "domain already has cntr_cnt = {} counters open",
                info::MAX_CNTRS
            );
            return Err(err::ENOSPC);
        }
        self.children.add();
        Ok(())
    }

    fn release_slot(&self) {
        self.slots.fetch_sub(1, Ordering::AcqRel);
        self.children.remove();
    }
}

/// The `fid_peer_cntr` rscntr hands a core provider (libfabric's peer API): the core calls
/// `owner_ops->inc/incerr` on every completion it would have counted itself.
#[repr(C)]
struct PeerCntr {
    fid: peer_sys::fid_peer_cntr,
}

static PEER_FI_OPS: ofi::fi_ops = ffi::fi_ops(peer_close, ffi::no_control, ffi::no_ops_open);
static PEER_OWNER_OPS: peer_sys::fi_ops_cntr_owner = peer_sys::fi_ops_cntr_owner {
    size: std::mem::size_of::<peer_sys::fi_ops_cntr_owner>(),
    inc: Some(peer_inc),
    incerr: Some(peer_incerr),
};

/// `FI_XPU` (bit 44) from libfabric 2.7's headers, where `fi_cntr_attr` also grows `xpu_ctx`.
pub const FI_XPU: u64 = 1 << 44;

/// Which implementation backs a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Software,
}

#[repr(C)]
pub struct Cntr {
    fid: ofi::fid_cntr,
    home: *const CntrHome,
    wait_obj: ofi::fi_wait_obj,
    events: ofi::fi_cntr_events,
    /// The core counter opened with FI_PEER on first bind in a layered domain.
    core_cntr: AtomicPtr<ofi::fid_cntr>,
    core_open: Mutex<()>,
    /// Endpoints and MRs this counter is bound to; it cannot close while any remain.
    bindings: AtomicUsize,
    /// The core counter's own value and error count as last taken in (see `sync`).
    core_seen: AtomicU64,
    core_seen_err: AtomicU64,
    peer: PeerCntr,
    ops_flags: AtomicU64,
    backend: Backend,
    engine: Counter,
}

/// `fi_ops_cntr` in the newest layout: libfabric 2.7 appends `export_xpu`, which its inline
/// `fi_cntr_export_xpu` calls without checking `size`.
#[repr(C)]
pub struct CntrOps {
    base: ofi::fi_ops_cntr,
    export_xpu: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

static CNTR_FI_OPS: ofi::fi_ops = ffi::fi_ops(cntr_close, cntr_control, ffi::no_ops_open);
static CNTR_OPS: CntrOps = CntrOps {
    base: ofi::fi_ops_cntr {
        size: std::mem::size_of::<CntrOps>(),
        read: Some(cntr_read),
        readerr: Some(cntr_readerr),
        add: Some(cntr_add),
        set: Some(cntr_set),
        wait: Some(cntr_wait),
        adderr: Some(cntr_adderr),
        seterr: Some(cntr_seterr),
    },
    export_xpu: ffi::no_xpu,
};
const _: () = assert!(std::mem::size_of::<CntrOps>() == 72);

// SAFETY: repr(C) with fid_cntr first; every Cntr is built by `cntr_open` with FI_CLASS_CNTR and
// CNTR_FI_OPS.
unsafe impl FidObject for Cntr {
    const FCLASS: u32 = ofi::FI_CLASS_CNTR;
    const NAME: &'static str = "counter";
    fn fi_ops() -> *const ofi::fi_ops {
        &CNTR_FI_OPS
    }
}

/// The parts of `fi_cntr_attr` rscntr accepts, validated.
struct Config {
    events: ofi::fi_cntr_events,
    wait_obj: ofi::fi_wait_obj,
    strategy: WaitStrategy,
}

/// Validates an application's counter attributes. Reads only the 2.1 fields (24 bytes): older
/// applications pass the smaller struct, and `xpu_ctx` exists only with FI_XPU, refused here.
fn parse_attr(attr: Option<&ofi::fi_cntr_attr>) -> Result<Config, c_int> {
    let Some(attr) = attr else {
        // NULL attr: the defaults libfabric documents for an all-zero attr, but waitable.
        return Ok(Config {
            events: ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP,
            wait_obj: ofi::fi_wait_obj_FI_WAIT_UNSPEC,
            strategy: WaitStrategy::Block,
        });
    };
    if attr.flags & FI_XPU != 0 {
        fi_warn!(Cntr, "FI_XPU counters are not supported");
        return Err(err::ENOSYS);
    }
    if attr.flags & ofi::FI_PEER != 0 {
        fi_warn!(Cntr, "FI_PEER counters are not supported");
        return Err(err::ENOSYS);
    }
    if attr.flags != 0 {
        fi_warn!(Cntr, "unknown counter flags {:#x}", attr.flags);
        return Err(err::EINVAL);
    }
    match attr.events {
        ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP | ofi::fi_cntr_events_FI_CNTR_EVENTS_BYTES => {}
        other => {
            fi_warn!(Cntr, "unknown counter events {other}");
            return Err(err::EINVAL);
        }
    }
    let strategy = match attr.wait_obj {
        ofi::fi_wait_obj_FI_WAIT_NONE => WaitStrategy::None,
        ofi::fi_wait_obj_FI_WAIT_UNSPEC => WaitStrategy::Block,
        ofi::fi_wait_obj_FI_WAIT_YIELD => WaitStrategy::Yield,
        ofi::fi_wait_obj_FI_WAIT_FD => WaitStrategy::Fd,
        ofi::fi_wait_obj_FI_WAIT_SET if attr.wait_set.is_null() => {
            fi_warn!(Cntr, "FI_WAIT_SET without a wait set");
            return Err(err::EINVAL);
        }
        ofi::fi_wait_obj_FI_WAIT_SET | ofi::fi_wait_obj_FI_WAIT_MUTEX_COND => {
            fi_warn!(
                Cntr,
                "wait object {} is deprecated and not supported; use FI_WAIT_FD, \
                            FI_WAIT_YIELD or FI_WAIT_UNSPEC",
                attr.wait_obj
            );
            return Err(err::ENOSYS);
        }
        ofi::fi_wait_obj_FI_WAIT_POLLFD => {
            fi_warn!(Cntr, "FI_WAIT_POLLFD is not supported; use FI_WAIT_FD");
            return Err(err::ENOSYS);
        }
        other => {
            fi_warn!(Cntr, "unknown wait object {other}");
            return Err(err::EINVAL);
        }
    };
    Ok(Config {
        events: attr.events,
        wait_obj: attr.wait_obj,
        strategy,
    })
}

pub unsafe extern "C" fn cntr_open(
    domain: *mut ofi::fid_domain,
    attr: *mut ofi::fi_cntr_attr,
    cntr: *mut *mut ofi::fid_cntr,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: fid_domain begins with struct fid.
        let domain = match unsafe { ffi::object::<Domain>(domain.cast()) } {
            Ok(d) => d,
            Err(e) => return e,
        };
        // SAFETY: forwarded from the caller.
        unsafe { open_in(&domain.home, attr, cntr, context) }
    }
}

/// Opens a counter in `home` (a standalone or a layered domain).
///
/// # Safety
/// `attr` NULL or an application's attr; `cntr` NULL or an out pointer; `home` outlives the
/// counter (the domain refuses to close while it has children).
pub unsafe fn open_in(
    home: &CntrHome,
    attr: *mut ofi::fi_cntr_attr,
    cntr: *mut *mut ofi::fid_cntr,
    context: *mut c_void,
) -> c_int {
    {
        if cntr.is_null() {
            fi_warn!(Cntr, "NULL counter out pointer");
            return err::EINVAL;
        }
        // SAFETY: NULL or the application's attr, of at least the 2.1 size (see parse_attr).
        let config = match parse_attr(unsafe { attr.as_ref() }) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let engine = match Counter::with_spin_limit(config.strategy, params::spin_limit()) {
            Ok(c) => c,
            Err(e) => {
                fi_warn!(Cntr, "cannot create the counter's eventfd: {e}");
                return -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as i32);
            }
        };
        if let Err(e) = home.claim_slot() {
            return e;
        }
        let mut obj = Box::new(Cntr {
            fid: ofi::fid_cntr {
                fid: ffi::fid_header(ofi::FI_CLASS_CNTR, context, &CNTR_FI_OPS),
                ops: &CNTR_OPS.base as *const _ as *mut _,
            },
            home,
            wait_obj: config.wait_obj,
            events: config.events,
            core_cntr: AtomicPtr::new(std::ptr::null_mut()),
            core_open: Mutex::new(()),
            bindings: AtomicUsize::new(0),
            core_seen: AtomicU64::new(0),
            core_seen_err: AtomicU64::new(0),
            peer: PeerCntr {
                fid: peer_sys::fid_peer_cntr {
                    fid: ffi::fid_header(
                        ofi::FI_CLASS_PEER_CNTR,
                        std::ptr::null_mut(),
                        &PEER_FI_OPS,
                    ),
                    owner_ops: &PEER_OWNER_OPS as *const _ as *mut _,
                },
            },
            ops_flags: AtomicU64::new(0),
            backend: Backend::Software,
            engine,
        });
        // The core finds its way back to the counter through the peer fid's context.
        obj.peer.fid.fid.context = (&*obj as *const Cntr).cast_mut().cast();
        fi_info!(
            Cntr,
            "opened a software counter (events {}, wait object {}{})",
            config.events,
            config.wait_obj,
            if home.core.is_some() { ", layered" } else { "" }
        );
        // SAFETY: non-NULL out pointer checked above.
        unsafe { *cntr = ffi::into_fid(obj).cast() };
        0
    }
}

/// # Safety
/// `cntr` is NULL or a readable fid.
unsafe fn get<'a>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr, c_int> {
    // SAFETY: fid_cntr begins with struct fid; the caller's contract covers the rest.
    unsafe { ffi::object::<Cntr>(cntr.cast()) }
}

impl Cntr {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    fn home(&self) -> &CntrHome {
        // SAFETY: the home (domain) outlives its counters: it refuses to close with children.
        unsafe { &*self.home }
    }

    /// Drives the core's progress, as libfabric's own counters do on read and wait: a read of
    /// the core's peer counter runs the core's progress for the endpoints bound to it. Cores
    /// that advertise FI_PROGRESS_AUTO may still only progress when asked (tcp starts its
    /// progress thread only for some wait objects), so rscntr always asks.
    #[inline]
    pub fn progress(&self) {
        self.sync(false);
    }

    /// Drives the core's progress and takes in whatever the core counted itself.
    ///
    /// Cores differ in how they honour FI_PEER: util-based cores that call the peer's
    /// `owner_ops->inc` (shm, rxm, rxd) count nothing themselves and read 0; tcp increments
    /// through its own counter ops and keeps the count in its own counter. rscntr takes the
    /// increase of the core counter's value since the last look into its own, so both kinds
    /// count exactly once. The core counter is never set or added to by rscntr, so it only
    /// grows; a compare-exchange on the last seen value makes each increase count once even
    /// when threads race.
    pub fn sync(&self, errors_too: bool) {
        let core = self.core_cntr.load(Ordering::Acquire);
        if core.is_null() {
            return;
        }
        // SAFETY: an open core counter; its ops table is the core's.
        let ops = unsafe { &*(*core).ops };
        if let Some(read) = ops.read {
            // SAFETY: as above.
            let now = unsafe { read(core) };
            take_increase(&self.core_seen, now, |d| self.engine.add(d));
        }
        if errors_too && let Some(readerr) = ops.readerr {
            // SAFETY: as above.
            let now = unsafe { readerr(core) };
            take_increase(&self.core_seen_err, now, |d| self.engine.add_err(d));
        }
    }

    /// True when waits must drive the core's progress instead of sleeping until woken.
    fn polled(&self) -> bool {
        !self.core_cntr.load(Ordering::Acquire).is_null()
    }

    /// True while an FD armed by fi_trywait waits for a change.
    pub fn fd_armed(&self) -> bool {
        self.engine.fd_armed()
    }

    /// The core counter that stands for this counter in its layered domain, opened with
    /// FI_PEER on first use so that the core's completions increment this counter.
    pub fn core_cntr(&self) -> Result<*mut ofi::fid_cntr, c_int> {
        let existing = self.core_cntr.load(Ordering::Acquire);
        if !existing.is_null() {
            return Ok(existing);
        }
        let Some(core) = &self.home().core else {
            fi_warn!(Cntr, "counter of a standalone domain cannot be bound");
            return Err(err::EINVAL);
        };
        let _guard = self.core_open.lock();
        let existing = self.core_cntr.load(Ordering::Acquire);
        if !existing.is_null() {
            return Ok(existing);
        }
        let mut attr = ofi::fi_cntr_attr {
            events: self.events,
            wait_obj: ofi::fi_wait_obj_FI_WAIT_NONE,
            wait_set: std::ptr::null_mut(),
            flags: ofi::FI_PEER,
        };
        let mut ctx = peer_sys::fi_peer_cntr_context {
            size: std::mem::size_of::<peer_sys::fi_peer_cntr_context>(),
            cntr: &self.peer.fid as *const _ as *mut _,
        };
        let mut out: *mut ofi::fid_cntr = std::ptr::null_mut();
        // SAFETY: an open core domain; attr and ctx live across the call, and the core keeps
        // only the peer fid pointer, which lives as long as this counter.
        let ret = unsafe {
            (core.cntr_open)(
                core.domain,
                &mut attr,
                &mut out,
                (&mut ctx as *mut peer_sys::fi_peer_cntr_context).cast(),
            )
        };
        if ret != 0 || out.is_null() {
            // A core without peer counters (sockets) counts in a counter of its own; `sync`
            // takes in its increases.
            fi_info!(
                Cntr,
                "the core has no FI_PEER counters ({ret}); rscntr reads a core counter"
            );
            attr.flags = 0;
            out = std::ptr::null_mut();
            // SAFETY: as above, without the peer context.
            let ret =
                unsafe { (core.cntr_open)(core.domain, &mut attr, &mut out, std::ptr::null_mut()) };
            if ret != 0 || out.is_null() {
                fi_warn!(
                    Cntr,
                    "the core cannot open a counter for rscntr to read: {ret}"
                );
                return Err(if ret != 0 { ret } else { err::EOTHER });
            }
        }
        self.core_cntr.store(out, Ordering::Release);
        Ok(out)
    }

    pub fn bound(&self) {
        self.bindings.fetch_add(1, Ordering::AcqRel);
    }

    pub fn unbound(&self) {
        self.bindings.fetch_sub(1, Ordering::AcqRel);
    }

    pub fn home_ptr(&self) -> *const CntrHome {
        self.home
    }
}

impl Watched for Cntr {
    fn poll(&self) -> bool {
        self.sync(true);
        self.fd_armed()
    }
}

/// Moves `seen` up to `now` and hands the difference to `add`, once, whoever races.
fn take_increase(seen: &AtomicU64, now: u64, add: impl FnOnce(u64)) {
    let last = seen.load(Ordering::Acquire);
    if now != last
        && seen
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        add(now.wrapping_sub(last));
    }
}

/// Recognises an rscntr counter without logging (for fids that may be anything).
///
/// # Safety
/// `fid` is NULL or a readable fid.
pub unsafe fn as_cntr<'a>(fid: *mut ofi::fid) -> Option<&'a Cntr> {
    // SAFETY: caller's contract.
    unsafe { ffi::try_object::<Cntr>(fid) }
}

unsafe extern "C" fn peer_inc(peer: *mut peer_sys::fid_peer_cntr) {
    crate::ffi_boundary! {
        // SAFETY: the core passes back the peer fid we gave it; its context is our counter.
        if let Some(c) = unsafe { peer.as_ref() }.and_then(|p| unsafe { (p.fid.context as *const Cntr).as_ref() }) {
            c.engine.add(1);
        }
    }
}

unsafe extern "C" fn peer_incerr(peer: *mut peer_sys::fid_peer_cntr) {
    crate::ffi_boundary! {
        // SAFETY: as in peer_inc.
        if let Some(c) = unsafe { peer.as_ref() }.and_then(|p| unsafe { (p.fid.context as *const Cntr).as_ref() }) {
            c.engine.add_err(1);
        }
    }
}

/// The core never owns our peer fid; closing it is a no-op.
unsafe extern "C" fn peer_close(_: *mut ofi::fid) -> c_int {
    0
}

/// Looks up an rscntr counter for the extension ops.
///
/// # Safety
/// `cntr` is NULL or a readable fid.
pub unsafe fn lookup<'a>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr, c_int> {
    // SAFETY: caller's contract.
    unsafe { get(cntr) }
}

unsafe extern "C" fn cntr_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let bound = cntr.bindings.load(Ordering::Acquire);
        if bound != 0 {
            fi_warn!(Cntr, "counter is still bound to {bound} endpoint(s)/MR(s)");
            return err::EBUSY;
        }
        if let Some(w) = cntr.home().watcher.get() {
            w.unwatch(cntr as &dyn Watched);
        }
        let core = cntr.core_cntr.load(Ordering::Acquire);
        if !core.is_null() {
            // SAFETY: the core counter was opened by core_cntr() and nothing else closes it.
            let ret = unsafe { ofi::fi_close(core.cast()) };
            if ret != 0 {
                fi_warn!(Cntr, "closing the core's peer counter failed: {ret}");
                return ret;
            }
        }
        cntr.home().release_slot();
        // SAFETY: the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(cntr) });
        0
    }
}

unsafe extern "C" fn cntr_control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY (every arm): `arg` is NULL or the out/in pointer type fi_cntr(3) documents for
        // the command; write_out and the explicit check reject NULL.
        ffi::status(match command as u32 {
            ofi::FI_GETWAIT => match cntr.engine.fd() {
                Some(fd) => unsafe { ffi::write_out(arg.cast::<c_int>(), fd, "wait fd") },
                None => {
                    fi_warn!(Cntr, "FI_GETWAIT: the counter has no fd (open it with FI_WAIT_FD)");
                    Err(err::ENODATA)
                }
            },
            ofi::FI_GETWAITOBJ => unsafe { ffi::write_out(arg.cast(), cntr.wait_obj, "wait object") },
            ofi::FI_GETOPSFLAG => unsafe {
                ffi::write_out(arg.cast::<u64>(), cntr.ops_flags.load(Ordering::Relaxed), "flags")
            },
            ofi::FI_SETOPSFLAG => match unsafe { arg.cast::<u64>().as_ref() } {
                Some(flags) => {
                    cntr.ops_flags.store(*flags, Ordering::Relaxed);
                    Ok(())
                }
                None => Err(err::EINVAL),
            },
            other => {
                fi_warn!(Cntr, "unknown fi_control command {other}");
                Err(err::ENOSYS)
            }
        })
    }
}

unsafe extern "C" fn cntr_read(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us; a bad fid reads as 0.
        unsafe { get(cntr) }.map_or(0, |c| {
            c.progress();
            c.engine.read()
        })
    }
}

unsafe extern "C" fn cntr_readerr(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: as in cntr_read.
        unsafe { get(cntr) }.map_or(0, |c| {
            c.sync(true);
            c.engine.read_err()
        })
    }
}

macro_rules! mutator {
    ($name:ident, $method:ident) => {
        unsafe extern "C" fn $name(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
            crate::ffi_boundary! {
                // SAFETY: libfabric passes the fid it got from us.
                ffi::status(unsafe { get(cntr) }.map(|c| c.engine.$method(value)))
            }
        }
    };
}
mutator!(cntr_add, add);
mutator!(cntr_adderr, add_err);
mutator!(cntr_set, set);
mutator!(cntr_seterr, set_err);

unsafe extern "C" fn cntr_wait(cntr: *mut ofi::fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { get(cntr) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let timeout = Timeout::from_ms(timeout);
        let result = if cntr.polled() {
            wait_polled(&cntr.engine, threshold, timeout, &mut || cntr.sync(true))
        } else {
            cntr.engine.wait(threshold, timeout)
        };
        match result {
            Ok(()) => 0,
            Err(WaitError::TimedOut) => err::ETIMEDOUT,
            Err(WaitError::ErrorChanged) => err::EAVAIL,
            Err(WaitError::NotWaitable) => {
                fi_warn!(Cntr, "fi_cntr_wait on a counter opened with FI_WAIT_NONE");
                err::ENOSYS
            }
        }
    }
}

/// `fi_trywait` for a counter: see [`Counter::trywait`].
///
/// # Safety
/// `fid` is a readable fid.
pub unsafe fn trywait(fid: *mut ofi::fid) -> c_int {
    // SAFETY: caller's contract.
    let cntr = match unsafe { ffi::object::<Cntr>(fid) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    match cntr.engine.trywait() {
        Ok(()) => {
            // Nobody else drives a layered counter's core while the application sleeps in
            // poll(): the home's watcher does, until the fd fires.
            if cntr.polled() {
                cntr.home().watcher().watch(cntr as &dyn Watched);
            }
            0
        }
        Err(TryWaitError::Pending) => err::EAGAIN,
        Err(TryWaitError::NoFd) => {
            fi_warn!(
                Cntr,
                "fi_trywait on a counter without FI_WAIT_FD (wait object {})",
                cntr.wait_obj
            );
            err::EINVAL
        }
    }
}
