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
use crate::engine::watcher::{self, Watched};
use crate::engine::{
    Atomics, Counter, Source, Store, StoreError, Timeout, TryWaitError, Tuning, WaitError,
    WaitStrategy, Wake,
};
use crate::fabric::Children;
use crate::ffi::{self, FidObject, err};
use crate::hw::{self, Choice};
use crate::layer::wait::{self as core_wait, CoreBlocker, CoreFabric, FdBlocker, Plan};
use crate::testhook::{self, Op};
use crate::verbs::HwCounter;
use crate::{fi_info, fi_warn, info, ofi, params, peer_sys};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Where counters live: a domain's bookkeeping of its counters (the `cntr_cnt` limit and the
/// open children that keep it from closing) and, in a layered domain, the core domain whose
/// completions the counters count.
pub struct CntrHome {
    pub children: Children,
    slots: AtomicUsize,
    core: Option<CoreDomain>,
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
    /// The domain is FI_THREAD_SAFE, so rscntr's watcher thread may drive the core's progress
    /// while the application sleeps in poll(). Under weaker threading models the application
    /// promised the core serialized calls, and only its own calls (fi_cntr_read/wait, CQ
    /// reads) drive progress; an armed fd then fires on the changes those calls bring in.
    pub watcher_may_progress: bool,
    /// The core fabric's ops for wait sets, and how this core is waited on.
    pub fabric: CoreFabric,
    pub plan: Plan,
    /// The core counts through FI_PEER counters (see `layer::wait::peer_counters_work`).
    pub peer: bool,
    /// The core's own cq_open (for the progress-fd CQ of [`Plan::ProgressFd`]).
    pub cq_open: crate::layer::CqOpenFn,
    /// The domain's progress-fd blocker, shared by its counters, made at the first bind.
    pub progress: Mutex<Option<Arc<FdBlocker>>>,
}

impl CoreDomain {
    fn progress_blocker(&self) -> Result<Arc<FdBlocker>, c_int> {
        let mut progress = self.progress.lock();
        if let Some(b) = &*progress {
            return Ok(b.clone());
        }
        // SAFETY: the open core domain of this fabric, with its own cq_open.
        let b =
            Arc::new(unsafe { FdBlocker::progress_fd(self.fabric, self.domain, self.cq_open) }?);
        *progress = Some(b.clone());
        Ok(b)
    }

    /// Closes the progress-fd CQ, before the core domain closes (the counters that used it
    /// are closed: the domain has no children).
    pub fn release_progress(&self) {
        self.progress.lock().take();
    }
}

impl CntrHome {
    /// True when the watcher thread may drive this domain's core.
    pub fn watcher_may_progress(&self) -> bool {
        self.core.as_ref().is_some_and(|c| c.watcher_may_progress)
    }
}

impl CntrHome {
    pub fn standalone() -> Self {
        CntrHome {
            children: Children::default(),
            slots: AtomicUsize::new(0),
            core: None,
        }
    }

    pub fn layered(core: CoreDomain) -> Self {
        CntrHome {
            core: Some(core),
            ..Self::standalone()
        }
    }

    /// The core side of a layered domain.
    pub fn core(&self) -> Option<&CoreDomain> {
        self.core.as_ref()
    }

    /// Claims one of the domain's `cntr_cnt` counter slots. The guard gives it back unless
    /// [`SlotGuard::keep`] is called, so a failure or a panic half-way through opening a
    /// counter cannot leave the domain with a child it can never close.
    fn claim_slot(&self) -> Result<SlotGuard<'_>, c_int> {
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
        Ok(SlotGuard(Some(self)))
    }

    fn release_slot(&self) {
        self.slots.fetch_sub(1, Ordering::AcqRel);
        self.children.remove();
    }
}

/// A claimed counter slot, released on drop unless kept (see [`CntrHome::claim_slot`]).
struct SlotGuard<'a>(Option<&'a CntrHome>);

impl SlotGuard<'_> {
    /// The counter opened: the slot now belongs to it (released by its close).
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if let Some(home) = self.0 {
            home.release_slot();
        }
    }
}

/// The `fid_peer_cntr` rscntr hands a core provider (libfabric's peer API): the core calls
/// `owner_ops->inc/incerr` on every completion it would have counted itself.
#[repr(C)]
struct PeerCntr {
    fid: peer_sys::fid_peer_cntr,
}

static PEER_FI_OPS: ofi::fi_ops = ffi::fi_ops(peer_close, ffi::no_control, ffi::no_ops_open);

/// `FI_XPU` (bit 44) from libfabric 2.7's headers, where `fi_cntr_attr` also grows `xpu_ctx`.
pub const FI_XPU: u64 = 1 << 44;

/// Which implementation backs a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Software,
    Hardware,
}

/// A counter fid over one kind of engine. Each kind has its own ops tables, so the software
/// path is exactly the engine's software counter, with no test of which backend it is.
#[repr(C)]
pub struct Cntr<B: Backing> {
    fid: ofi::fid_cntr,
    home: *const CntrHome,
    wait_obj: ofi::fi_wait_obj,
    events: ofi::fi_cntr_events,
    ops_flags: AtomicU64,
    /// The core counter opened on first bind in a layered domain (see `core_cntr`).
    core_cntr: AtomicPtr<ofi::fid_cntr>,
    core_open: Mutex<()>,
    /// Endpoints and MRs this counter is bound to; it cannot close while any remain.
    bindings: AtomicUsize,
    /// Of those, endpoints not enabled yet: while any remain, reads and waits do not drive the
    /// core's progress (see `layer::bind::control`).
    unenabled: AtomicUsize,
    /// The core counter's own value and error count as last taken in (see `sync`).
    core_seen: AtomicU64,
    core_seen_err: AtomicU64,
    /// What rscntr itself added to the core counter (to interrupt a wait in it, see
    /// `layer::wait::CntrWaitBlocker`): not the core's counting, so not taken in.
    core_bias: AtomicU64,
    /// What waiters sleep on once bound (see `layer::wait`), chosen with the core counter.
    blocker: OnceLock<CoreBlocker>,
    /// FD counters of a layered domain: the fd handed out by FI_GETWAIT, an epoll set of the
    /// counter's eventfd and, once bound, the core's fd, so that poll() on it is woken by the
    /// core's own event.
    wait_set: Option<OwnedFd>,
    /// The core's fd is in `wait_set`: fi_trywait arms the core instead of the watcher.
    core_fd_exported: AtomicBool,
    peer: PeerCntr,
    engine: B,
}

// SAFETY: the raw pointers in a counter fid are set at open and never change (the fid header
// and peer fid, read by libfabric and the core; the home, which outlives the counter), or are
// atomics; everything else it holds is Sync. The fd watcher polls it from its thread.
unsafe impl<B: Backing> Sync for Cntr<B> {}
// SAFETY: as above.
unsafe impl<B: Backing> Send for Cntr<B> {}

/// The software engine lives inside the fid; the hardware one is shared with the fd watcher.
pub type SwEngine = Counter<Atomics>;
pub type HwEngine = Arc<Counter<HwCounter>>;

/// What a counter fid needs from its engine.
pub trait Backing: Sized + Send + Sync + 'static {
    type Store: Store;
    const BACKEND: Backend;
    fn counter(&self) -> &Counter<Self::Store>;
    fn fi_ops() -> &'static ofi::fi_ops;
    fn ops() -> &'static CntrOps;
    /// The peer-counter ops a core calls to count into a counter of this kind.
    fn owner_ops() -> &'static peer_sys::fi_ops_cntr_owner;
    /// Releases device resources before close; an error makes fi_close fail, the counter
    /// staying open.
    fn teardown(&self) -> Result<(), c_int>;
}

impl Backing for SwEngine {
    type Store = Atomics;
    const BACKEND: Backend = Backend::Software;
    #[inline]
    fn counter(&self) -> &Counter<Atomics> {
        self
    }
    fn fi_ops() -> &'static ofi::fi_ops {
        &SW_FI_OPS
    }
    fn ops() -> &'static CntrOps {
        &SW_OPS
    }
    fn owner_ops() -> &'static peer_sys::fi_ops_cntr_owner {
        &SW_OWNER_OPS
    }
    fn teardown(&self) -> Result<(), c_int> {
        Ok(())
    }
}

impl Backing for HwEngine {
    type Store = HwCounter;
    const BACKEND: Backend = Backend::Hardware;
    #[inline]
    fn counter(&self) -> &Counter<HwCounter> {
        self
    }
    fn fi_ops() -> &'static ofi::fi_ops {
        &HW_FI_OPS
    }
    fn ops() -> &'static CntrOps {
        &HW_OPS
    }
    fn owner_ops() -> &'static peer_sys::fi_ops_cntr_owner {
        &HW_OWNER_OPS
    }
    fn teardown(&self) -> Result<(), c_int> {
        // Off the watcher first (waiting out a poll in progress), so nothing reads the device
        // counter while or after it is destroyed.
        let armed = self.unwatch();
        match self.store().destroy() {
            Ok(()) => Ok(()),
            Err(e) => {
                self.rewatch(armed);
                fi_warn!(Cntr, "cannot close the hardware counter: {e}");
                Err(hw::fi_errno(e.errno))
            }
        }
    }
}

/// `fi_ops_cntr` in the newest layout: libfabric 2.7 appends `export_xpu`, which its inline
/// `fi_cntr_export_xpu` calls without checking `size`.
#[repr(C)]
pub struct CntrOps {
    base: ofi::fi_ops_cntr,
    export_xpu: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

const fn cntr_ops<B: Backing>() -> CntrOps {
    CntrOps {
        base: ofi::fi_ops_cntr {
            size: std::mem::size_of::<CntrOps>(),
            read: Some(cntr_read::<B>),
            readerr: Some(cntr_readerr::<B>),
            add: Some(cntr_add::<B>),
            set: Some(cntr_set::<B>),
            wait: Some(cntr_wait::<B>),
            adderr: Some(cntr_adderr::<B>),
            seterr: Some(cntr_seterr::<B>),
        },
        export_xpu: ffi::no_xpu,
    }
}

static SW_FI_OPS: ofi::fi_ops = ffi::fi_ops(
    cntr_close::<SwEngine>,
    cntr_control::<SwEngine>,
    ffi::no_ops_open,
);
static SW_OPS: CntrOps = cntr_ops::<SwEngine>();
static HW_FI_OPS: ofi::fi_ops = ffi::fi_ops(
    cntr_close::<HwEngine>,
    cntr_control::<HwEngine>,
    ffi::no_ops_open,
);
static HW_OPS: CntrOps = cntr_ops::<HwEngine>();

const fn owner_ops<B: Backing>() -> peer_sys::fi_ops_cntr_owner {
    peer_sys::fi_ops_cntr_owner {
        size: std::mem::size_of::<peer_sys::fi_ops_cntr_owner>(),
        inc: Some(peer_inc::<B>),
        incerr: Some(peer_incerr::<B>),
    }
}
static SW_OWNER_OPS: peer_sys::fi_ops_cntr_owner = owner_ops::<SwEngine>();
static HW_OWNER_OPS: peer_sys::fi_ops_cntr_owner = owner_ops::<HwEngine>();
const _: () = assert!(std::mem::size_of::<CntrOps>() == 72);

// SAFETY: repr(C) with fid_cntr first; every Cntr<B> is built by `cntr_open` with FI_CLASS_CNTR
// and B's fi_ops table, which differs between the two kinds.
unsafe impl<B: Backing> FidObject for Cntr<B> {
    const FCLASS: u32 = ofi::FI_CLASS_CNTR;
    const NAME: &'static str = "counter";
    fn fi_ops() -> *const ofi::fi_ops {
        B::fi_ops()
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
    if cntr.is_null() {
        fi_warn!(Cntr, "NULL counter out pointer");
        return err::EINVAL;
    }
    // SAFETY: NULL or the application's attr, of at least the 2.1 size (see parse_attr).
    let config = match parse_attr(unsafe { attr.as_ref() }) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let choice = match hw::choose(config.events) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let slot = match home.claim_slot() {
        Ok(slot) => slot,
        Err(e) => return e,
    };
    // The test hook panics with the slot claimed: the guard must give it back.
    testhook::panic(Op::CntrOpen);
    let fid = match choice {
        Choice::Software => Counter::with_spin_limit(config.strategy, params::spin_limit())
            .and_then(|engine| new_fid(home, &config, context, engine)),
        Choice::Hardware(store) => {
            let tuning = Tuning {
                spin_limit: params::spin_limit(),
                poll_max: params::hw().poll_max,
            };
            let device = store.device().name().to_owned();
            Counter::with_store(store, config.strategy, tuning).and_then(|engine| {
                fi_info!(Cntr, "hardware counter on {device}");
                new_fid(home, &config, context, engine)
            })
        }
    };
    match fid {
        Ok(fid) => {
            slot.keep();
            // SAFETY: non-NULL out pointer checked above.
            unsafe { *cntr = fid.cast() };
            0
        }
        Err(e) => {
            drop(slot);
            fi_warn!(Cntr, "cannot create the counter's eventfd or watcher: {e}");
            -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as i32)
        }
    }
}

/// The epoll set an FD counter of a layered domain hands out, holding its eventfd.
fn fd_wait_set(eventfd: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: no memory arguments; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    epoll_add(ep.as_raw_fd(), eventfd)?;
    Ok(ep)
}

fn epoll_add(ep: RawFd, fd: RawFd) -> std::io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: fd as u64,
    };
    // SAFETY: a live epoll fd and event.
    if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn new_fid<B: Backing>(
    home: &CntrHome,
    config: &Config,
    context: *mut c_void,
    engine: B,
) -> std::io::Result<*mut ofi::fid> {
    let wait_set = match engine.counter().fd() {
        Some(fd) if home.core.is_some() => Some(fd_wait_set(fd)?),
        _ => None,
    };
    let mut obj = Box::new(Cntr {
        fid: ofi::fid_cntr {
            fid: ffi::fid_header(ofi::FI_CLASS_CNTR, context, B::fi_ops()),
            ops: &B::ops().base as *const _ as *mut _,
        },
        home,
        wait_obj: config.wait_obj,
        events: config.events,
        ops_flags: AtomicU64::new(0),
        core_cntr: AtomicPtr::new(std::ptr::null_mut()),
        core_open: Mutex::new(()),
        bindings: AtomicUsize::new(0),
        unenabled: AtomicUsize::new(0),
        core_seen: AtomicU64::new(0),
        core_seen_err: AtomicU64::new(0),
        core_bias: AtomicU64::new(0),
        blocker: OnceLock::new(),
        wait_set,
        core_fd_exported: AtomicBool::new(false),
        peer: PeerCntr {
            fid: peer_sys::fid_peer_cntr {
                fid: ffi::fid_header(ofi::FI_CLASS_PEER_CNTR, std::ptr::null_mut(), &PEER_FI_OPS),
                owner_ops: B::owner_ops() as *const _ as *mut _,
            },
        },
        engine,
    });
    // The core finds its way back to the counter through the peer fid's context.
    obj.peer.fid.fid.context = (&*obj as *const Cntr<B>).cast_mut().cast();
    fi_info!(
        Cntr,
        "opened a {:?} counter (events {}, wait object {}{})",
        B::BACKEND,
        config.events,
        config.wait_obj,
        if home.core.is_some() { ", layered" } else { "" }
    );
    Ok(ffi::into_fid(obj))
}

/// What the extension ops, fi_trywait and the layered binds need from a counter of either kind.
pub trait AnyCntr {
    fn backend(&self) -> Backend;
    fn trywait(&self) -> c_int;
    /// The domain the counter belongs to (binds check it).
    fn home_ptr(&self) -> *const CntrHome;
    /// The core counter that feeds this counter in its layered domain, opened on first use.
    fn core_cntr(&self) -> Result<*mut ofi::fid_cntr, c_int>;
    /// A bind succeeded, to an endpoint not enabled yet unless `enabled`; `late` when the
    /// endpoint had been enabled before the bind.
    fn bound(&self, enabled: bool, late: bool);
    /// The endpoint or MR closed (`enabled`: as it was then).
    fn unbound(&self, enabled: bool);
    /// An endpoint this counter is bound to was enabled.
    fn binding_enabled(&self);
    /// True for FI_CNTR_EVENTS_BYTES counters.
    fn counts_bytes(&self) -> bool;
}

impl<B: Backing> AnyCntr for Cntr<B> {
    fn backend(&self) -> Backend {
        B::BACKEND
    }
    fn home_ptr(&self) -> *const CntrHome {
        self.home
    }
    fn core_cntr(&self) -> Result<*mut ofi::fid_cntr, c_int> {
        self.open_core_cntr()
    }
    fn bound(&self, enabled: bool, late: bool) {
        if !enabled {
            self.unenabled.fetch_add(1, Ordering::AcqRel);
        }
        self.bindings.fetch_add(1, Ordering::AcqRel);
        if late {
            self.bound_late();
        }
        self.engine.counter().notify_waiters();
    }
    fn unbound(&self, enabled: bool) {
        if !enabled {
            self.unenabled.fetch_sub(1, Ordering::AcqRel);
        }
        self.bindings.fetch_sub(1, Ordering::AcqRel);
    }
    fn binding_enabled(&self) {
        self.unenabled.fetch_sub(1, Ordering::AcqRel);
        // Waiters that found nothing to pull look again: now the core can be driven.
        self.engine.counter().notify_waiters();
    }
    fn counts_bytes(&self) -> bool {
        self.events == ofi::fi_cntr_events_FI_CNTR_EVENTS_BYTES
    }
    fn trywait(&self) -> c_int {
        // What the core completed already is taken in first, so that the comparison below
        // sees it and the core's fd is not left readable for work that is done.
        let live = self.live();
        if live {
            self.sync(true);
        }
        match self.engine.counter().trywait() {
            Ok(()) => {
                if live {
                    return self.arm_core();
                }
                0
            }
            Err(TryWaitError::Pending) => err::EAGAIN,
            Err(TryWaitError::NoFd) => {
                fi_warn!(
                    Cntr,
                    "fi_trywait on a counter without FI_WAIT_FD (wait object {})",
                    self.wait_obj
                );
                err::EINVAL
            }
        }
    }
}

/// Recognises an rscntr counter of either kind without logging (for fids that may be anything).
///
/// # Safety
/// `fid` is NULL or a readable fid.
pub unsafe fn as_cntr<'a>(fid: *mut ofi::fid) -> Option<&'a dyn AnyCntr> {
    // SAFETY: caller's contract.
    unsafe {
        ffi::try_object::<Cntr<SwEngine>>(fid)
            .map(|c| c as &dyn AnyCntr)
            .or_else(|| ffi::try_object::<Cntr<HwEngine>>(fid).map(|c| c as &dyn AnyCntr))
    }
}

/// Looks up an rscntr counter of either kind.
///
/// # Safety
/// `fid` is NULL or a readable fid.
unsafe fn any<'a>(fid: *mut ofi::fid) -> Result<&'a dyn AnyCntr, c_int> {
    // SAFETY: non-NULL and readable by the caller's contract.
    if !fid.is_null() && std::ptr::eq(unsafe { (*fid).ops }, &HW_FI_OPS) {
        // SAFETY: caller's contract.
        return unsafe { ffi::object::<Cntr<HwEngine>>(fid) }.map(|c| c as &dyn AnyCntr);
    }
    // SAFETY: caller's contract; object() rejects anything that is not a software counter.
    unsafe { ffi::object::<Cntr<SwEngine>>(fid) }.map(|c| c as &dyn AnyCntr)
}

/// Looks up an rscntr counter for the extension ops.
///
/// # Safety
/// `cntr` is NULL or a readable fid.
pub unsafe fn lookup<'a>(cntr: *mut ofi::fid_cntr) -> Result<&'a dyn AnyCntr, c_int> {
    // SAFETY: fid_cntr begins with struct fid; caller's contract.
    unsafe { any(cntr.cast()) }
}

/// # Safety
/// `cntr` is NULL or a readable fid.
unsafe fn get<'a, B: Backing>(cntr: *mut ofi::fid_cntr) -> Result<&'a Cntr<B>, c_int> {
    // SAFETY: fid_cntr begins with struct fid; the caller's contract covers the rest.
    unsafe { ffi::object::<Cntr<B>>(cntr.cast()) }
}

impl<B: Backing> Cntr<B> {
    fn home(&self) -> &CntrHome {
        // SAFETY: the home (domain) outlives its counters: it refuses to close with children.
        unsafe { &*self.home }
    }

    /// True when the core may count into this counter and pulling it drives progress: bound,
    /// and every endpoint it is bound to enabled.
    fn live(&self) -> bool {
        !self.core_cntr.load(Ordering::Acquire).is_null()
            && self.unenabled.load(Ordering::Acquire) == 0
    }

    /// After `fi_trywait` armed the counter's own fd: makes the core's event reach it too.
    /// The core's fd is in the counter's epoll set, so arming the core is enough; otherwise
    /// the watcher sleeps on the core's behalf, where it may drive the core's progress.
    fn arm_core(&self) -> c_int {
        if self.core_fd_exported.load(Ordering::Acquire) {
            let Some(b) = self.blocker.get().and_then(CoreBlocker::blocker) else {
                return 0;
            };
            // Something pending in the core: the application reads (which pulls it) and
            // tries again, as libfabric's fd protocol has it.
            for _ in 0..3 {
                if b.arm() {
                    return 0;
                }
                self.sync(true);
            }
            return err::EAGAIN;
        }
        let relay = match self.blocker.get() {
            // sockets' own progress thread counts; reading its counter drives nothing.
            Some(CoreBlocker::Cntr(_)) => true,
            _ => self.home().watcher_may_progress(),
        };
        if relay {
            // SAFETY: cntr_close unwatches before the counter is freed.
            unsafe { watcher::watch(self.key(), self.as_watched()) };
        }
        0
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    fn as_watched(&self) -> *const (dyn Watched + 'static) {
        watcher::target_of(self)
    }

    /// Bound to an endpoint after its FI_ENABLE: a core that hands out its fds at enable
    /// (rxm) gives none for it, so waits are bounded instead.
    fn bound_late(&self) {
        let Some(core) = &self.home().core else {
            return;
        };
        if let (
            Plan::FdSet {
                fds_at_enable: true,
                ..
            },
            Some(CoreBlocker::Fd(b)),
        ) = (core.plan, self.blocker.get())
        {
            fi_info!(
                EpCtrl,
                "counter bound after FI_ENABLE: the core adds no fd for it; waits re-check every {:?}",
                core_wait::LATE_BIND_CAP
            );
            b.cap(core_wait::LATE_BIND_CAP);
        }
    }

    /// Drives the core's progress, as libfabric's own counters do on read and wait, and takes
    /// in whatever the core counted itself.
    ///
    /// Reading the core counter runs the core's progress for the endpoints bound to it. Cores
    /// that advertise FI_PROGRESS_AUTO may still only progress when asked (tcp starts its
    /// progress thread only for some wait objects), so rscntr always asks. Cores differ in how
    /// they honour FI_PEER: util-based cores that call the peer's `owner_ops->inc` (shm, rxm,
    /// rxd) count nothing themselves and read 0; tcp increments through its own counter ops
    /// and keeps the count in its own counter; sockets has no peer counters at all. rscntr
    /// takes the increase of the core counter's value since the last look into its own, so
    /// every kind counts exactly once. The core counter is never set or added to by rscntr,
    /// so it only grows; a compare-exchange on the last seen value makes each increase count
    /// once even when threads race. Skipped while an endpoint bound to this counter is not
    /// enabled: util-based cores crash progressing such an endpoint, and nothing completes on
    /// it; increases made meanwhile are taken in by the next sync.
    ///
    /// The error count is read first: each read runs the core's progress before it reads, so
    /// what the last call's progress completes shows only in that call's value. A waiter
    /// about to sleep must see every completion the progress took off the wire (nothing will
    /// make the core's fd readable for it again), and completions are what it waits for.
    pub fn sync(&self, errors_too: bool) {
        let core = self.core_cntr.load(Ordering::Acquire);
        if core.is_null() || self.unenabled.load(Ordering::Acquire) != 0 {
            return;
        }
        // SAFETY: an open core counter; its ops table is the core's.
        let ops = unsafe { &*(*core).ops };
        let counter = self.engine.counter();
        if errors_too && let Some(readerr) = ops.readerr {
            // SAFETY: as above.
            let now = unsafe { readerr(core) };
            take_increase(&self.core_seen_err, now, |d| note(counter.add_err(d)));
        }
        if let Some(read) = ops.read {
            // SAFETY: as above.
            let raw = unsafe { read(core) };
            // The bias is read after the value: an interrupt counts its bias before it adds
            // to the core counter, so a value that includes the addition comes with its bias.
            let now = raw.wrapping_sub(self.core_bias.load(Ordering::SeqCst));
            take_increase(&self.core_seen, now, |d| note(counter.add(d)));
        }
    }

    /// The core counter that stands for this counter in its layered domain, opened on first
    /// bind with FI_PEER so that the core's completions increment this counter, on the wait
    /// set its waiters will sleep on (see `layer::wait`).
    fn open_core_cntr(&self) -> Result<*mut ofi::fid_cntr, c_int> {
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
        let mut blocker =
            core_wait::counter_blocker(core.plan, core.fabric, || core.progress_blocker());
        let shared = core.plan == Plan::ProgressFd;
        let out = match blocker.wait_set(shared) {
            Some(set) => match self.open_core_cntr_on(core, set) {
                Ok(out) => out,
                Err(e) => {
                    fi_info!(
                        Cntr,
                        "the core cannot open a counter on a wait set ({e}); waits on it yield"
                    );
                    blocker = CoreBlocker::Yield;
                    self.open_core_cntr_on(core, std::ptr::null_mut())?
                }
            },
            None => self.open_core_cntr_on(core, std::ptr::null_mut())?,
        };
        if let CoreBlocker::Cntr(b) = &blocker {
            // SAFETY: the core counter and the bias live as long as this counter, which owns
            // the blocker; sockets' reads run no progress under auto progress.
            unsafe { b.watch_counter(out, &self.core_bias) };
        }
        if let (Some(ep), CoreBlocker::Fd(b)) = (&self.wait_set, &blocker) {
            match epoll_add(ep.as_raw_fd(), b.fd()) {
                Ok(()) => self.core_fd_exported.store(true, Ordering::Release),
                Err(e) => fi_warn!(Cntr, "cannot add the core's fd to the counter's: {e}"),
            }
        }
        fi_info!(
            Cntr,
            "waits on this counter sleep on {}",
            match &blocker {
                CoreBlocker::Fd(_) if shared => "the core's progress fd",
                CoreBlocker::Fd(_) => "the core's wait set fd",
                CoreBlocker::Cntr(_) => "the core counter's own wait",
                CoreBlocker::Yield => "nothing (they yield between progress calls)",
            }
        );
        let _ = self.blocker.set(blocker);
        self.core_cntr.store(out, Ordering::Release);
        Ok(out)
    }

    /// Opens the core counter, with FI_PEER if the core takes it, on `set` unless NULL.
    fn open_core_cntr_on(
        &self,
        core: &CoreDomain,
        set: *mut ofi::fid_wait,
    ) -> Result<*mut ofi::fid_cntr, c_int> {
        let mut attr = ofi::fi_cntr_attr {
            events: self.events,
            wait_obj: if set.is_null() {
                ofi::fi_wait_obj_FI_WAIT_NONE
            } else {
                ofi::fi_wait_obj_FI_WAIT_SET
            },
            wait_set: set,
            flags: if core.peer { ofi::FI_PEER } else { 0 },
        };
        let mut ctx = peer_sys::fi_peer_cntr_context {
            size: std::mem::size_of::<peer_sys::fi_peer_cntr_context>(),
            cntr: &self.peer.fid as *const _ as *mut _,
        };
        let mut out: *mut ofi::fid_cntr = std::ptr::null_mut();
        // SAFETY: an open core domain; attr and ctx live across the call, and the core keeps
        // only the peer fid pointer, which lives as long as this counter.
        let ret = testhook::fail(Op::CntrOpen).unwrap_or_else(|| unsafe {
            (core.cntr_open)(
                core.domain,
                &mut attr,
                &mut out,
                (&mut ctx as *mut peer_sys::fi_peer_cntr_context).cast(),
            )
        });
        if ret == 0 && !out.is_null() {
            return Ok(out);
        }
        if !core.peer {
            fi_warn!(
                Cntr,
                "the core cannot open a counter for rscntr to read: {ret}"
            );
            return Err(if ret != 0 { ret } else { err::EOTHER });
        }
        // A core without peer counters (sockets) counts in a counter of its own; `sync`
        // takes in its increases.
        fi_info!(
            Cntr,
            "the core has no FI_PEER counters ({ret}); rscntr reads a core counter"
        );
        attr.flags = 0;
        out = std::ptr::null_mut();
        // SAFETY: as above, without the peer context.
        let ret = testhook::fail(Op::CntrOpen).unwrap_or_else(|| unsafe {
            (core.cntr_open)(core.domain, &mut attr, &mut out, std::ptr::null_mut())
        });
        if ret != 0 || out.is_null() {
            fi_warn!(
                Cntr,
                "the core cannot open a counter for rscntr to read: {ret}"
            );
            return Err(if ret != 0 { ret } else { err::EOTHER });
        }
        Ok(out)
    }
}

/// The core a bound counter counts for: pulled before every check of a wait, and slept on
/// the way `layer::wait` chose for it.
impl<B: Backing> Source for Cntr<B> {
    fn pull(&self) {
        self.sync(true);
    }
    fn wake(&self) -> Wake<'_> {
        if !self.live() {
            // Unbound, or bound to endpoints not enabled: nothing completes, only this
            // counter's own ops (and the enable, which notifies) change anything.
            return Wake::Notified;
        }
        match self.blocker.get() {
            Some(CoreBlocker::Fd(b)) => Wake::Block(&**b),
            Some(CoreBlocker::Cntr(b)) => Wake::Block(b),
            Some(CoreBlocker::Yield) | None => Wake::Yield,
        }
    }
}

impl<B: Backing> Watched for Cntr<B> {
    fn poll(&self) -> bool {
        self.sync(true);
        self.engine.counter().signal_if_changed()
    }
    fn wake(&self) -> Wake<'_> {
        Source::wake(self)
    }
}

/// Moves `seen` up to `now` and hands the difference to `add`, once, whoever races. A value
/// below `seen` (a read that saw an interrupt's bias before its addition) is no change: the
/// next read shows both.
fn take_increase(seen: &AtomicU64, now: u64, add: impl FnOnce(u64)) {
    let last = seen.load(Ordering::Acquire);
    let delta = now.wrapping_sub(last);
    if delta != 0
        && (delta as i64) > 0
        && seen
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        add(now.wrapping_sub(last));
    }
}

/// A device update that failed while taking in the core's counts: logged, not returned (the
/// application's call was a read).
fn note(r: Result<(), StoreError>) {
    if let Err(e) = r {
        store_error("counting a core completion", e);
    }
}

/// The core calls this for every completion it counts into an rscntr counter.
unsafe extern "C" fn peer_inc<B: Backing>(peer: *mut peer_sys::fid_peer_cntr) {
    crate::ffi_boundary! {
        // SAFETY: the core passes back the peer fid we gave it; its context is our counter.
        if let Some(c) = unsafe { peer.as_ref() }.and_then(|p| unsafe { (p.fid.context as *const Cntr<B>).as_ref() }) {
            note(c.engine.counter().add(1));
        }
    }
}

unsafe extern "C" fn peer_incerr<B: Backing>(peer: *mut peer_sys::fid_peer_cntr) {
    crate::ffi_boundary! {
        // SAFETY: as in peer_inc.
        if let Some(c) = unsafe { peer.as_ref() }.and_then(|p| unsafe { (p.fid.context as *const Cntr<B>).as_ref() }) {
            note(c.engine.counter().add_err(1));
        }
    }
}

/// The core never owns our peer fid; closing it is a no-op.
unsafe extern "C" fn peer_close(_: *mut ofi::fid) -> c_int {
    0
}

unsafe extern "C" fn cntr_close<B: Backing>(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr<B>>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let bound = cntr.bindings.load(Ordering::Acquire);
        if bound != 0 {
            fi_warn!(Cntr, "counter is still bound to {bound} endpoint(s)/MR(s)");
            return err::EBUSY;
        }
        // Off the watcher first: once this returns it neither polls the counter nor sleeps in
        // its blocker.
        watcher::unwatch(cntr.key());
        let core = cntr.core_cntr.load(Ordering::Acquire);
        if !core.is_null() {
            // SAFETY: the core counter was opened by open_core_cntr() and nothing else closes it.
            let ret = unsafe { ofi::fi_close(core.cast()) };
            if ret != 0 {
                fi_warn!(Cntr, "closing the core's counter failed: {ret}");
                return ret;
            }
            cntr.core_cntr.store(std::ptr::null_mut(), Ordering::Release);
        }
        if let Err(e) = cntr.engine.teardown() {
            return e;
        }
        cntr.home().release_slot();
        // SAFETY: the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(cntr) });
        0
    }
}

unsafe extern "C" fn cntr_control<B: Backing>(
    fid: *mut ofi::fid,
    command: c_int,
    arg: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { ffi::object::<Cntr<B>>(fid) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY (every arm): `arg` is NULL or the out/in pointer type fi_cntr(3) documents for
        // the command; write_out and the explicit check reject NULL.
        ffi::status(match command as u32 {
            ofi::FI_GETWAIT => match cntr.wait_set.as_ref().map(|ep| ep.as_raw_fd()).or(cntr.engine.counter().fd()) {
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
                if command == testhook::PANIC_CMD {
                    testhook::panic(Op::Control);
                }
                fi_warn!(Cntr, "unknown fi_control command {other}");
                Err(err::ENOSYS)
            }
        })
    }
}

unsafe extern "C" fn cntr_read<B: Backing>(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us; a bad fid reads as 0.
        unsafe { get::<B>(cntr) }.map_or(0, |c| {
            c.sync(false);
            c.engine.counter().read()
        })
    }
}

unsafe extern "C" fn cntr_readerr<B: Backing>(cntr: *mut ofi::fid_cntr) -> u64 {
    crate::ffi_boundary! {
        // SAFETY: as in cntr_read.
        unsafe { get::<B>(cntr) }.map_or(0, |c| {
            c.sync(true);
            c.engine.counter().read_err()
        })
    }
}

/// A failed device update: logged, as -FI_E*. Software stores never fail.
#[cold]
fn store_error(op: &str, e: StoreError) -> c_int {
    fi_warn!(
        Cntr,
        "{op} on a hardware counter failed: {}",
        std::io::Error::from_raw_os_error(e.0)
    );
    hw::fi_errno(e.0)
}

macro_rules! mutator {
    ($name:ident, $method:ident, $op:literal) => {
        unsafe extern "C" fn $name<B: Backing>(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
            crate::ffi_boundary! {
                // SAFETY: libfabric passes the fid it got from us.
                match unsafe { get::<B>(cntr) } {
                    Ok(c) => match c.engine.counter().$method(value) {
                        Ok(()) => 0,
                        Err(e) => store_error($op, e),
                    },
                    Err(e) => e,
                }
            }
        }
    };
}
mutator!(cntr_add, add, "fi_cntr_add");
mutator!(cntr_adderr, add_err, "fi_cntr_adderr");
mutator!(cntr_set, set, "fi_cntr_set");
mutator!(cntr_seterr, set_err, "fi_cntr_seterr");

unsafe extern "C" fn cntr_wait<B: Backing>(
    cntr: *mut ofi::fid_cntr,
    threshold: u64,
    timeout: c_int,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let cntr = match unsafe { get::<B>(cntr) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let timeout = Timeout::from_ms(timeout);
        let counter = cntr.engine.counter();
        let result = counter.wait_with(threshold, timeout, cntr);
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
    match unsafe { any(fid) } {
        Ok(c) => c.trywait(),
        Err(e) => e,
    }
}
