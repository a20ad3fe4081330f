//! How a thread waits for a core to complete something for a bound counter: on what the core
//! itself blocks on, never by polling it on a timer.
//!
//! | core | rscntr sleeps on | as the core's own counters do |
//! |---|---|---|
//! | `tcp` | the domain's progress fd (the epoll set of its sockets), as the wait fd of a core CQ opened with `FI_WAIT_FD` for nothing else ([`Plan::ProgressFd`]) | tcp's counters and CQs block on that fd |
//! | `…;ofi_rxm`, `…;ofi_rxd` | a core wait set (`fi_wait_open`, `FI_WAIT_FD`) per counter, on which the core counter is opened: the utility provider adds the fds of the inner CQs of the endpoints the counter is bound to ([`Plan::FdSet`]) | rxm and rxd add the same fds to their own waitable counters |
//! | `sockets` | the core counter's own `fi_cntr_wait`, which sockets' progress thread wakes on every count; rscntr interrupts it by adding one to the core counter, which it then does not count ([`Plan::CoreWait`]) | the same wait |
//! | `shm` | the domain's doorbell (`bell.rs`): a socket its rscntr peers ring after operations toward it ([`Plan::Bell`]) | shm's waits yield |
//! | others (and shm with `FI_RSCNTR_SHM_BELL=0`) | nothing: yield between pulls ([`Plan::Yield`]) | |
//!
//! Each is an engine [`Blocker`]: a waiter takes a token, pulls (drives the core's progress)
//! and checks, arms (the core's `fi_trywait`), then blocks, and is woken by the core's own
//! event or by rscntr's interrupt (an eventfd beside the core's fd, or an increment of the
//! core counter).

use crate::boundary::ffi::{self, err};
use crate::boundary::testhook;
use crate::boundary::versions::{self, Api, Counting};
use crate::engine::{Blocker, EventFd, Room, Token, epoll_ctl, sleep_until_readable};
use crate::layer::doorbell::answers::DomainAnswers;
use crate::layer::doorbell::bell::BellBlocker;
use crate::layer::doorbell::peers::DomainPeers;
use crate::{fi_info, fi_warn, ofi};
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// How a core is waited on, from its name (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    ProgressFd,
    FdSet {
        /// rxm adds its inner CQ's fd at FI_ENABLE only: a counter bound to an endpoint that
        /// is already enabled gets no fd from it.
        fds_at_enable: bool,
        /// The longest sleep, and for a room's leader the longest between two pulls of each
        /// member, so that the core's retransmission timers run (rxd's own waits wake for
        /// them the same way).
        cap: Option<Duration>,
    },
    CoreWait,
    Bell,
    Yield,
}

/// rxd retransmits unacknowledged packets from its progress; its own waits wake for that.
const RXD_CAP: Duration = Duration::from_millis(10);
/// The longest sleep of a counter bound to an rxm endpoint after its FI_ENABLE, when rxm
/// gives it no fd (rxm's own counters then sleep 50 ms between progress calls).
pub const LATE_BIND_CAP: Duration = Duration::from_millis(1);

pub fn plan_for(core: &str) -> Plan {
    let util = core.rsplit_once(';').map(|(_, u)| u);
    match (core, util) {
        ("tcp", _) => Plan::ProgressFd,
        (_, Some("ofi_rxm")) => Plan::FdSet {
            fds_at_enable: true,
            cap: versions::unannounced_progress(core, Api::running()),
        },
        (_, Some("ofi_rxd")) => Plan::FdSet {
            fds_at_enable: false,
            cap: Some(RXD_CAP),
        },
        ("sockets", _) => Plan::CoreWait,
        ("shm", _) if crate::boundary::params::shm_bell() => Plan::Bell,
        _ => Plan::Yield,
    }
}

/// How the core counts into a bound rscntr counter under the running libfabric
/// (`boundary::versions::counting` decides; this says in the log which path serves): through
/// FI_PEER, through its own counter's `add`, which rscntr points at its counter, or into a
/// core counter whose increases rscntr takes in.
pub fn core_counting(core: &str) -> Counting {
    let api = Api::running();
    let mut path = versions::counting(core, api);
    if matches!(path, Counting::OwnAdd { .. })
        && core.ends_with(";ofi_rxm")
        && rxm_passthru(std::env::var(RXM_PASSTHRU).ok().as_deref())
    {
        // A pass-through rxm domain (over tcp's FI_PROTO_RXM_TCP infos, which rxm offers first
        // when this is set) opens a tcp counter behind each of its counters, which tcp counts
        // into with its own ops (`rxm_cntr_open`, prov/rxm/src/rxm_domain.c, 1.17 to 1.22):
        // the hook on rxm's `add` would see none of it, and reads take in only the value.
        path = Counting::CoreCounter(
            "FI_OFI_RXM_ENABLE_PASSTHRU: rxm's pass-through counters count in a tcp counter behind them",
        );
    }
    match path {
        Counting::Peer => fi_info!(
            Domain,
            "counters over {core} (libfabric {api}): the core counts into rscntr's through FI_PEER"
        ),
        Counting::OwnAdd { peer_flag } => fi_info!(
            Domain,
            "counters over {core} (libfabric {api}): the core counts through its counter's own add, which rscntr points at its counter{}",
            if peer_flag {
                " (opened with FI_PEER)"
            } else {
                ""
            }
        ),
        Counting::CoreCounter(why) => fi_info!(
            Domain,
            "counters over {core} (libfabric {api}): rscntr takes in a core counter's counts ({why})"
        ),
    }
    path
}

/// rxm's parameter for its pass-through domains (off by default).
const RXM_PASSTHRU: &str = "FI_OFI_RXM_ENABLE_PASSTHRU";

/// Whether `value` of [`RXM_PASSTHRU`] turns it on, as libfabric's `fi_param_get` reads a
/// boolean (`fi_parse_bool`, src/var.c): `1`, or `true`, `yes`, `on` in any case.
fn rxm_passthru(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        v == "1"
            || ["true", "yes", "on"]
                .iter()
                .any(|t| v.eq_ignore_ascii_case(t))
    })
}

/// A core domain's own `cq_open`.
pub type CqOpenFn = unsafe extern "C" fn(
    *mut ofi::fid_domain,
    *mut ofi::fi_cq_attr,
    *mut *mut ofi::fid_cq,
    *mut c_void,
) -> c_int;

/// A core domain's own `cntr_open`: the domain's ops table now leads to rscntr's.
pub type CntrOpenFn = unsafe extern "C" fn(
    *mut ofi::fid_domain,
    *mut ofi::fi_cntr_attr,
    *mut *mut ofi::fid_cntr,
    *mut c_void,
) -> c_int;

pub type TrywaitFn = unsafe extern "C" fn(*mut ofi::fid_fabric, *mut *mut ofi::fid, c_int) -> c_int;

/// The core fabric's own ops, for opening wait sets and arming them.
#[derive(Clone, Copy)]
pub struct CoreFabric {
    pub fabric: *mut ofi::fid_fabric,
    pub wait_open: Option<
        unsafe extern "C" fn(
            *mut ofi::fid_fabric,
            *mut ofi::fi_wait_attr,
            *mut *mut ofi::fid_wait,
        ) -> c_int,
    >,
    pub trywait: Option<TrywaitFn>,
}

/// What a layered domain knows of waiting on its core, lent to the bound waits of its counters
/// (made by the domain's home, which owns all of it and outlives its counters).
pub struct CoreWaits<'a> {
    pub domain: *mut ofi::fid_domain,
    /// The core's own cntr_open.
    pub cntr_open: CntrOpenFn,
    /// The core's own cq_open (for the progress-fd CQ of [`Plan::ProgressFd`]).
    pub cq_open: CqOpenFn,
    /// The core fabric's ops for wait sets, and how this core is waited on.
    pub fabric: CoreFabric,
    pub plan: Plan,
    /// How the core counts into a bound rscntr counter (see [`core_counting`]).
    pub counting: Counting,
    /// rscntr's watcher thread may drive the core's progress (the domain is FI_THREAD_SAFE).
    pub watcher_may_progress: bool,
    /// The domain's progress-fd blocker, shared by its counters, made at the first use.
    pub progress: &'a parking_lot::Mutex<Option<std::sync::Arc<FdBlocker>>>,
    /// Where the waiters of the domain's counters meet (see [`FdBlocker::room`]).
    pub room: &'a std::sync::Arc<Room>,
    /// The domain's lock against driving an endpoint the core is closing.
    pub closing: &'a parking_lot::RwLock<()>,
    /// The domain's doorbell ([`Plan::Bell`]), made at the first use.
    pub bell: &'a parking_lot::Mutex<Option<std::sync::Arc<BellBlocker>>>,
    /// The peers the domain's endpoints ring over shm, whether the domain waits or not.
    pub peers: &'a std::sync::Arc<DomainPeers>,
    /// What the domain's progress answers its peers over shm (`answers.rs`).
    pub answers: &'a std::sync::Arc<DomainAnswers>,
    /// An endpoint of the domain was enabled without a doorbell (before the domain waited).
    pub unbelled: &'a AtomicBool,
    /// An FD counter's epoll set holds the core's fd plainly ([`CoreBlocker::hold_in`]).
    pub fd_held_plainly: &'a AtomicBool,
}

const UNBELLED: &str = "an endpoint enabled before the domain opened a counter or CQ that waits";

impl CoreWaits<'_> {
    /// The domain's doorbell, made by the first counter or endpoint that needs it.
    pub fn bell_blocker(&self) -> Result<std::sync::Arc<BellBlocker>, c_int> {
        let mut bell = self.bell.lock();
        if let Some(b) = &*bell {
            return Ok(b.clone());
        }
        let b = std::sync::Arc::new(BellBlocker::new(
            self.room.clone(),
            self.peers.clone(),
            self.answers.clone(),
        )?);
        if self.unbelled.load(SeqCst) {
            b.fall_back(UNBELLED);
        }
        *bell = Some(b.clone());
        Ok(b)
    }

    /// An endpoint of the domain is enabled without a doorbell: nothing rings for it.
    pub fn without_bell(&self) {
        self.unbelled.store(true, SeqCst);
        if let Some(b) = &*self.bell.lock() {
            b.fall_back(UNBELLED);
        }
    }

    /// The domain's progress-fd blocker, made by the first counter that needs it.
    pub fn progress_blocker(&self) -> Result<std::sync::Arc<FdBlocker>, c_int> {
        let mut progress = self.progress.lock();
        if let Some(b) = &*progress {
            return Ok(b.clone());
        }
        // SAFETY: the open core domain of this fabric, with its own cq_open.
        let b = std::sync::Arc::new(unsafe {
            FdBlocker::progress_fd(
                self.fabric,
                self.domain,
                self.cq_open,
                self.room.clone(),
                self.closing,
            )
        }?);
        *progress = Some(b.clone());
        Ok(b)
    }
}

/// Sleeps on a core fd: a wait set's, or a CQ's whose wait set holds the core's progress fd.
pub struct FdBlocker {
    core: CoreFabric,
    /// The core object whose `fi_trywait` arms the fd, closed with the blocker.
    fid: *mut ofi::fid,
    fd: RawFd,
    /// The longest sleep in nanoseconds (0: none).
    cap_ns: AtomicU64,
    warned: AtomicBool,
    /// The domain's lock against driving the core while it closes an endpoint.
    closing: *const parking_lot::RwLock<()>,
    /// The core's `fi_trywait` on this object is no longer safe (see
    /// [`FdBlocker::forget_trywait`]): arming does nothing.
    no_trywait: AtomicBool,
    /// The domain's room: the waiters of every counter that sleeps on a blocker of this domain
    /// meet there, and one of them sleeps for all (see `engine::Room`).
    room: std::sync::Arc<Room>,
    /// Under `FI_RSCNTR_TEST_STUCK_FD` (`boundary/testhook.rs`): what rscntr's own sleepers
    /// poll instead of `fd` ([`FdBlocker::sleep_fd`]).
    stuck: Option<EventFd>,
    /// This blocker's number among all made in the process (`Blocker::serial`).
    serial: u64,
}

/// The last [`FdBlocker`] serial handed out.
static LAST_SERIAL: AtomicU64 = AtomicU64::new(0);

// SAFETY: the core objects are only used through the core's calls, which are thread safe for
// wait sets and CQs (util providers lock them); the pointer fields never change after creation,
// and the closing lock is the home's, which outlives its blockers and is Sync.
unsafe impl Send for FdBlocker {}
// SAFETY: as above.
unsafe impl Sync for FdBlocker {}

fn control_getwait<T>(fid: *mut ofi::fid, out: &mut T) -> c_int {
    // SAFETY: an open core fid; FI_GETWAIT writes a T for the wait object it was opened with.
    unsafe {
        match (*(*fid).ops).control {
            Some(control) => control(
                fid,
                ofi::FI_GETWAIT as c_int,
                (out as *mut T).cast::<c_void>(),
            ),
            None => err::ENOSYS,
        }
    }
}

fn close_fid(fid: *mut ofi::fid, what: &str) {
    // SAFETY: an open core fid that rscntr opened and nothing else closes.
    let ret = unsafe { ofi::fi_close(fid) };
    if ret != 0 {
        fi_warn!(Domain, "closing the core's {what} failed: {ret}");
    }
}

impl FdBlocker {
    /// For tcp: a core CQ with FI_WAIT_FD, never bound to anything, whose wait fd holds the
    /// domain's progress fd. `cq_open` is the core's own.
    ///
    /// # Safety
    /// `domain` is an open core domain of `core`'s fabric and `cq_open` its CQ open.
    pub unsafe fn progress_fd(
        core: CoreFabric,
        domain: *mut ofi::fid_domain,
        cq_open: CqOpenFn,
        room: std::sync::Arc<Room>,
        closing: *const parking_lot::RwLock<()>,
    ) -> Result<FdBlocker, c_int> {
        let mut attr = ofi::fi_cq_attr {
            size: 1,
            flags: 0,
            format: ofi::fi_cq_format_FI_CQ_FORMAT_CONTEXT,
            wait_obj: ofi::fi_wait_obj_FI_WAIT_FD,
            signaling_vector: 0,
            wait_cond: ofi::fi_cq_wait_cond_FI_CQ_COND_NONE,
            wait_set: std::ptr::null_mut(),
        };
        let mut cq: *mut ofi::fid_cq = std::ptr::null_mut();
        // SAFETY: caller's contract; attr and cq live across the call.
        let ret = unsafe { cq_open(domain, &mut attr, &mut cq, std::ptr::null_mut()) };
        ffi::wrote(ret, !cq.is_null())?;
        FdBlocker::on_wait_fd(core, cq.cast(), "wait CQ", None, room, closing)
    }

    /// A core wait set with FI_WAIT_FD, for the core counter to be opened on.
    pub fn wait_set(
        core: CoreFabric,
        cap: Option<Duration>,
        room: std::sync::Arc<Room>,
        closing: *const parking_lot::RwLock<()>,
    ) -> Result<FdBlocker, c_int> {
        let set = open_wait_set(core, ofi::fi_wait_obj_FI_WAIT_FD)?;
        FdBlocker::on_wait_fd(core, set.cast(), "wait set", cap, room, closing)
    }

    /// A blocker on the wait fd (FI_GETWAIT) of `fid`, a core object rscntr just opened (`what`,
    /// for the log), which it closes when dropped, or at once when the core gives no fd.
    fn on_wait_fd(
        core: CoreFabric,
        fid: *mut ofi::fid,
        what: &str,
        cap: Option<Duration>,
        room: std::sync::Arc<Room>,
        closing: *const parking_lot::RwLock<()>,
    ) -> Result<FdBlocker, c_int> {
        let mut fd: c_int = -1;
        if let Err(e) = ffi::wrote(control_getwait(fid, &mut fd), fd >= 0) {
            close_fid(fid, what);
            return Err(e);
        }
        let stuck = testhook::stuck_fd().then(|| stuck_eventfd(what)).flatten();
        Ok(FdBlocker {
            core,
            fid,
            fd,
            stuck,
            cap_ns: AtomicU64::new(cap.map_or(0, |c| c.as_nanos() as u64)),
            warned: AtomicBool::new(false),
            no_trywait: AtomicBool::new(false),
            closing,
            room,
            serial: LAST_SERIAL.fetch_add(1, SeqCst) + 1,
        })
    }

    /// What rscntr's own sleepers poll: the core's fd, or under `FI_RSCNTR_TEST_STUCK_FD` an
    /// eventfd signalled once and never drained, a core fd that stays readable. (Not an epoll
    /// set holding both: one set more passes Linux's epoll nesting limit over rxm.) An FD
    /// counter's set holds the core's fd itself ([`FdBlocker::fd`]).
    fn sleep_fd(&self) -> RawFd {
        self.stuck
            .as_ref()
            .map_or(self.fd, |always| always.as_raw_fd())
    }

    /// The wait set, for the core counter's attr.
    pub fn as_wait_set(&self) -> *mut ofi::fid_wait {
        self.fid.cast()
    }

    /// The fd the core makes readable.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Never calls the core's `fi_trywait` on this object again (an endpoint whose fid the core
    /// keeps in it is closing), and bounds every sleep by `cap` instead. Called under the
    /// domain's closing lock, which arming also takes.
    pub fn forget_trywait(&self, cap: Duration) {
        if !self.no_trywait.swap(true, SeqCst) {
            fi_info!(
                Cntr,
                "an endpoint bound to this counter closed: the core keeps it in the wait set, so waits no longer arm it and re-check every {cap:?}"
            );
        }
        self.cap(cap);
    }

    /// Bounds every sleep from now on (never loosens an existing bound).
    pub fn cap(&self, cap: Duration) {
        let ns = cap.as_nanos() as u64;
        let _ = self
            .cap_ns
            .fetch_update(SeqCst, SeqCst, |old| (old == 0 || ns < old).then_some(ns));
    }
}

impl Drop for FdBlocker {
    fn drop(&mut self) {
        close_fid(self.fid, "wait object");
    }
}

/// Whether the log has said that `FI_RSCNTR_TEST_STUCK_FD` is in force.
static SAID_STUCK: AtomicBool = AtomicBool::new(false);

/// For `FI_RSCNTR_TEST_STUCK_FD`: an eventfd signalled once, to be polled instead of the core's
/// `what` (the first one made says so in the log).
fn stuck_eventfd(what: &str) -> Option<EventFd> {
    match EventFd::new() {
        Ok(always) => {
            always.signal();
            if !SAID_STUCK.swap(true, SeqCst) {
                fi_warn!(
                    Cntr,
                    "FI_RSCNTR_TEST_STUCK_FD: waits poll an fd that stays readable instead of the core's {what}"
                );
            }
            Some(always)
        }
        Err(e) => {
            fi_warn!(
                Cntr,
                "FI_RSCNTR_TEST_STUCK_FD: cannot make the eventfd: {e}"
            );
            None
        }
    }
}

/// Opens a wait set on the core fabric.
fn open_wait_set(
    core: CoreFabric,
    wait_obj: ofi::fi_wait_obj,
) -> Result<*mut ofi::fid_wait, c_int> {
    let Some(wait_open) = core.wait_open else {
        return Err(err::ENOSYS);
    };
    let mut attr = ofi::fi_wait_attr { wait_obj, flags: 0 };
    let mut set: *mut ofi::fid_wait = std::ptr::null_mut();
    // SAFETY: the core's own op on its own fabric; attr and set live across the call.
    let ret = unsafe { wait_open(core.fabric, &mut attr, &mut set) };
    ffi::wrote(ret, !set.is_null())?;
    Ok(set)
}

/// The time left until `until`, bounded by `cap_ns` (0: no bound); None: no limit.
fn sleep_for(until: Option<Instant>, cap_ns: u64) -> Option<Duration> {
    let cap = (cap_ns != 0).then(|| Duration::from_nanos(cap_ns));
    let left = until.map(|u| u.saturating_duration_since(Instant::now()));
    match (left, cap) {
        (Some(l), Some(c)) => Some(l.min(c)),
        (l, None) => l,
        (None, c) => c,
    }
}

impl Blocker for FdBlocker {
    fn prepare(&self) -> Token {
        Token(0)
    }

    fn arm(&self) -> bool {
        let Some(trywait) = self.core.trywait else {
            return true;
        };
        // Not while the core closes an endpoint (whose fid the core may keep in this object).
        // SAFETY: the domain's home, which owns the lock, outlives its blockers.
        let _open = unsafe { &*self.closing }.read_recursive();
        if self.no_trywait.load(SeqCst) {
            return true;
        }
        let mut fid = self.fid;
        // SAFETY: the core's own trywait on its own object.
        match unsafe { trywait(self.core.fabric, &mut fid, 1) } {
            0 => true,
            e if e == err::EAGAIN => false,
            e => {
                // Never returned by the cores rscntr knows; block anyway, briefly.
                if !self.warned.swap(true, SeqCst) {
                    fi_warn!(
                        Cntr,
                        "the core's fi_trywait failed ({e}); waits poll every ms"
                    );
                }
                self.cap(Duration::from_millis(1));
                true
            }
        }
    }

    fn block(&self, _token: Token, kick: &EventFd, until: Option<Instant>) {
        let limit = sleep_for(until, self.cap_ns.load(SeqCst));
        sleep_until_readable(self.sleep_fd(), kick.as_raw_fd(), limit);
    }

    fn room(&self) -> Option<&Room> {
        Some(&self.room)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.sleep_fd())
    }

    fn max_sleep(&self) -> Option<Duration> {
        let ns = self.cap_ns.load(SeqCst);
        (ns != 0).then(|| Duration::from_nanos(ns))
    }

    fn serial(&self) -> u64 {
        self.serial
    }

    /// A network core (tcp, rxm, rxd; verbs and efa by the same code): each pull is an
    /// `epoll_wait`, and the answer takes longer than a spin. The core's own counter waits
    /// sleep at once; so do these. Measured with one waiter over tcp (fi_rdm_cntr_pingpong,
    /// 8 B): spinning ~8 pulls first made it 1.3-1.7x slower than tcp's own counters, as the
    /// spinner held the CPU its peer, woken onto it, needed.
    fn spin_before_sleep(&self) -> bool {
        false
    }
}

/// Sleeps in the core counter's own `fi_cntr_wait` (sockets), which its progress thread wakes
/// on every count: the core checks and sleeps under the counter's mutex, and increments and
/// wakes under it, so no count is missed. rscntr interrupts it by adding one to the core
/// counter itself, an addition it keeps in `bias` and subtracts from what it takes in.
pub struct CntrWaitBlocker {
    cntr: std::sync::atomic::AtomicPtr<ofi::fid_cntr>,
    /// What rscntr added to the core counter to interrupt waits (lives in the rscntr counter).
    bias: std::sync::atomic::AtomicPtr<AtomicU64>,
    /// sockets' wait returns -FI_EAVAIL at once, for ever, after its first error: from then on
    /// waits sleep [`AFTER_ERROR`] between pulls.
    errored: AtomicBool,
}

/// The longest nap of a wait with a timeout on a sockets counter under libfabric before 1.22,
/// whose own timed wait returns at once (`Api::timed_cond_waits_sleep`).
const TIMED_WAIT_NAP: Duration = Duration::from_millis(1);

/// The longest sleep of a wait on a sockets counter that has had an error (see
/// [`CntrWaitBlocker`]).
pub const AFTER_ERROR: Duration = Duration::from_millis(1);

// SAFETY: the pointers are set once, before the blocker is used, to objects that outlive it;
// sockets' counter ops are thread safe.
unsafe impl Send for CntrWaitBlocker {}
// SAFETY: as above.
unsafe impl Sync for CntrWaitBlocker {}

impl Default for CntrWaitBlocker {
    fn default() -> Self {
        CntrWaitBlocker {
            cntr: Default::default(),
            bias: Default::default(),
            errored: AtomicBool::new(false),
        }
    }
}

impl CntrWaitBlocker {
    /// The core counter to sleep in, and where the rscntr counter keeps the bias.
    ///
    /// # Safety
    /// Both outlive the blocker; reading the counter runs no progress (sockets with auto
    /// progress, the only core this blocker serves).
    pub unsafe fn watch_counter(&self, cntr: *mut ofi::fid_cntr, bias: &AtomicU64) {
        self.bias
            .store((bias as *const AtomicU64).cast_mut(), SeqCst);
        self.cntr.store(cntr, SeqCst);
    }

    fn ops(&self) -> Option<(*mut ofi::fid_cntr, &ofi::fi_ops_cntr)> {
        let c = self.cntr.load(SeqCst);
        // SAFETY: an open core counter (see watch_counter).
        (!c.is_null()).then(|| (c, unsafe { &*(*c).ops }))
    }
}

impl Blocker for CntrWaitBlocker {
    fn prepare(&self) -> Token {
        // The core's own value: the wait below returns once it moves past it.
        // SAFETY: the core's own read on its own counter.
        Token(
            self.ops()
                .and_then(|(c, o)| o.read.map(|r| unsafe { r(c) }))
                .unwrap_or(0),
        )
    }

    fn arm(&self) -> bool {
        true
    }

    fn block(&self, token: Token, _kick: &EventFd, until: Option<Instant>) {
        let left = until.map(|u| u.saturating_duration_since(Instant::now()));
        let (Some((c, ops)), false) = (self.ops(), self.errored.load(SeqCst)) else {
            std::thread::sleep(left.map_or(AFTER_ERROR, |l| l.min(AFTER_ERROR)));
            return;
        };
        let Some(wait) = ops.wait else { return };
        if let Some(left) = left.filter(|_| !Api::running().timed_cond_waits_sleep()) {
            // The core's wait with a timeout would return at once: nap instead, and let the
            // pull after it take in what the core counted meanwhile. A wait without a limit
            // still sleeps in the core's (below), woken by its progress thread.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                fi_info!(
                    Cntr,
                    "libfabric {}: the core's timed counter waits return at once (before 1.22); waits with a timeout nap {TIMED_WAIT_NAP:?} between pulls",
                    Api::running()
                )
            });
            std::thread::sleep(left.min(TIMED_WAIT_NAP));
            return;
        }
        // Milliseconds, rounded up; -1: no limit.
        let ms = left.map_or(-1, |l| {
            l.as_micros().div_ceil(1000).min(i32::MAX as u128) as c_int
        });
        // SAFETY: the core's own wait on its own counter.
        if unsafe { wait(c, token.0.wrapping_add(1), ms) } == err::EAVAIL {
            fi_info!(
                Cntr,
                "the core's counter reports an error on every wait from now on; waits on it poll every {AFTER_ERROR:?}"
            );
            self.errored.store(true, SeqCst);
        }
    }

    fn interrupt(&self, _kick: &EventFd) {
        let b = self.bias.load(SeqCst);
        let Some((c, ops)) = self.ops().filter(|_| !b.is_null()) else {
            return;
        };
        // Counted as rscntr's own before the core sees it: a reader that sees the core's value
        // grown also sees the bias (see CoreFeed::sync).
        // SAFETY: see watch_counter.
        unsafe { &*b }.fetch_add(1, SeqCst);
        if let Some(add) = ops.add {
            // SAFETY: the core's own add on its own counter.
            unsafe { add(c, 1) };
        }
    }

    fn worth_spinning(&self) -> bool {
        // sockets' progress thread counts; spinning here would take its CPU.
        false
    }
}

/// How an FD counter's epoll set holds the core's fd ([`CoreBlocker::hold_in`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Held {
    /// Not at all: the watcher polls it for the counter, or the application reads.
    No,
    /// With `EPOLLEXCLUSIVE` among several sets, or as the one set that holds it.
    Yes,
    /// Plainly, as the one set of the domain's counters that does (the kernel refuses
    /// `EPOLLEXCLUSIVE` for the fd), until the counter closes and lets go of the domain's claim.
    Plainly,
}

/// What a bound counter sleeps on.
pub enum CoreBlocker {
    Fd(std::sync::Arc<FdBlocker>),
    Cntr(CntrWaitBlocker),
    Bell(std::sync::Arc<BellBlocker>),
    Yield,
}

impl CoreBlocker {
    pub fn blocker(&self) -> Option<&dyn Blocker> {
        match self {
            CoreBlocker::Fd(b) => Some(&**b),
            CoreBlocker::Cntr(b) => Some(b),
            CoreBlocker::Bell(b) => Some(&**b),
            CoreBlocker::Yield => None,
        }
    }

    /// The fd that an FD counter's epoll set holds beside its eventfd, if any.
    pub fn fd(&self) -> Option<RawFd> {
        match self {
            CoreBlocker::Fd(b) => Some(b.fd()),
            CoreBlocker::Bell(b) => Some(b.socket_fd()),
            _ => None,
        }
    }

    /// Puts the core's fd into `ep`, an FD counter's epoll set, so that the core's own event
    /// wakes the thread in `poll()` on it. Where several counters' sets would hold fds that one
    /// completion makes readable, each of their pollers would be woken by it (a herd that
    /// spins: `prov_test/room_stress.c` counted 250 readable polls per message over
    /// `tcp;ofi_rxm` with 32 pollers). The doorbell's socket is added with `EPOLLEXCLUSIVE`
    /// (one poller woken). Linux refuses that flag for an epoll fd, and the core fds are
    /// epoll fds: tcp's progress fd, shared by the domain's counters (`shared`), or each
    /// counter's own wait set (rxm, rxd), which holds the same core fds as the others'. So
    /// one counter's set of the domain holds its fd plainly (`claim`: its poller is woken by
    /// the core itself, in one hop) and the others' are left to the watcher, which polls the
    /// core for them and signals the counter a completion moved (two hops, one poller woken).
    /// Where the watcher may not drive the core (`relay` false: not FI_THREAD_SAFE) every set
    /// holds its fd plainly: a herd of pollers rather than fds that only the application's
    /// reads make readable.
    pub fn hold_in(&self, ep: RawFd, shared: bool, relay: bool, claim: &AtomicBool) -> Held {
        let Some(fd) = self.fd() else {
            return Held::No;
        };
        let core_epoll_fd = matches!(self, CoreBlocker::Fd(_));
        let held = if core_epoll_fd && !shared {
            hold_plainly(ep, fd, relay, claim)
        } else {
            match epoll_add_shared(ep, fd) {
                // tcp's progress fd is an epoll fd
                Err(e) if core_epoll_fd && e.raw_os_error() == Some(libc::EINVAL) => {
                    hold_plainly(ep, fd, relay, claim)
                }
                added => added.map(|()| Held::Yes),
            }
        };
        held.unwrap_or_else(|e| {
            fi_warn!(Cntr, "cannot add the core's fd to the counter's: {e}");
            Held::No
        })
    }

    /// The wait set to open the core counter on, if the plan has one per counter.
    pub fn wait_set(&self, shared_fd: bool) -> Option<*mut ofi::fid_wait> {
        match self {
            CoreBlocker::Fd(b) if !shared_fd => Some(b.as_wait_set()),
            _ => None,
        }
    }
}

/// Adds the core's fd to `ep` plainly if this set takes the domain's `claim` (or if every set
/// must: `relay` false); see [`CoreBlocker::hold_in`].
fn hold_plainly(ep: RawFd, fd: RawFd, relay: bool, claim: &AtomicBool) -> std::io::Result<Held> {
    let claimed = !claim.swap(true, SeqCst);
    if !claimed && relay {
        fi_info!(
            Cntr,
            "another FD counter's set holds the core's fd: the watcher polls the core for this counter's fd"
        );
        return Ok(Held::No);
    }
    epoll_add(ep, fd)
        .map(|()| if claimed { Held::Plainly } else { Held::Yes })
        .inspect_err(|_| {
            if claimed {
                claim.store(false, SeqCst);
            }
        })
}

/// The epoll set an FD counter of a layered domain hands out, holding its eventfd (and, once the
/// counter is bound, the core's fd: see [`epoll_add`]), so that `poll()` on it is woken by the
/// core's own event.
pub use crate::engine::epoll_set;

pub fn epoll_add(ep: RawFd, fd: RawFd) -> std::io::Result<()> {
    epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32)
}

/// Adds a core fd that several counters' epoll sets hold (the doorbell's socket; Linux refuses
/// the flag for an epoll fd such as tcp's progress fd: see [`CoreBlocker::hold_in`]) with
/// `EPOLLEXCLUSIVE`: one completion then wakes one of the threads in `poll()` on
/// those sets, not all; whichever it is drives the core's progress with its next call on its
/// counter (`fi_trywait`, `fi_cntr_read`), which counts into every counter and signals the
/// eventfd of each one it moved, so the thread the completion was for wakes too.
pub fn epoll_add_shared(ep: RawFd, fd: RawFd) -> std::io::Result<()> {
    let events = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
    epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, events)
}

#[cfg(test)]
mod tests {
    use super::rxm_passthru;

    #[test]
    fn rxm_passthru_is_read_as_libfabric_reads_a_boolean() {
        for on in ["1", "true", "YES", "On"] {
            assert!(rxm_passthru(Some(on)), "{on}");
        }
        for off in [
            None,
            Some("0"),
            Some("no"),
            Some("off"),
            Some(""),
            Some("2"),
        ] {
            assert!(!rxm_passthru(off), "{off:?}");
        }
    }
}
