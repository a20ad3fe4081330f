//! The feed of a counter bound over a core (a [`Feed`]): the core counter that stands for
//! the rscntr counter, opened at the first bind with FI_PEER so that the core's completions
//! increment the rscntr counter, on the wait set its waiters will sleep on (see `blocker.rs`);
//! taking in what the core counted itself; what a waiter sleeps on; what `fi_trywait` arms.
//!
//! Its part in a counter's bind is a `BindHook` (`hooks.rs`): the core counter opened at the
//! first bind, and the core's bind of it. The bound wait is decided in one place,
//! [`open_core_cntr`]: what the core blocks on, that opened, the core counter opened on it,
//! then armed ([`new_feed`]).

use super::blocker::{
    self as core_wait, CntrWaitBlocker, CoreBlocker, CoreWaits, FdBlocker, Held, Plan,
};
use super::reads::ReadDuty;
use crate::boundary::ffi;
use crate::boundary::peer_sys;
use crate::boundary::testhook::{self, Op};
use crate::boundary::versions::Counting;
use crate::cntr::{AnyCntr, Armed, Feed, FeedRequest, Tally};
use crate::engine::Wake;
use crate::layer::doorbell::bell::{BellBlocker, Progressed, SlotBlocker};
use crate::layer::hooks::{BindHook, CntrBind, Step, describe_flags};
use crate::{fi_info, fi_warn, ofi};
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

pub struct CoreFeed {
    /// The core counter; NULL once closed.
    core_cntr: AtomicPtr<ofi::fid_cntr>,
    /// Endpoints the counter is bound to that are not enabled yet: while any remain, reads
    /// and waits do not drive the core's progress (see `bind::control`).
    unenabled: AtomicUsize,
    /// The core counter's own value and error count as last taken in (see [`Feed::sync`]).
    seen: AtomicU64,
    seen_err: AtomicU64,
    /// What rscntr itself added to the core counter (to interrupt a wait in it, see
    /// `wait::CntrWaitBlocker`): not the core's counting, so not taken in.
    bias: AtomicU64,
    /// What waiters sleep on, chosen with the core counter.
    blocker: CoreBlocker,
    /// The core's fd is in the counter's FI_GETWAIT fd: fi_trywait arms the core instead of
    /// the watcher.
    fd_exported: bool,
    /// It holds the domain's claim on the core's fd (held plainly) until the counter closes
    /// (see [`CoreFeed::let_go_of_fd`]).
    holds_claim: AtomicBool,
    /// The domain's claim on holding the core's fd plainly (the home's, which outlives its
    /// counters).
    fd_claim: *const std::sync::atomic::AtomicBool,
    plan: Plan,
    watcher_may_progress: bool,
    /// The domain's lock against driving an endpoint the core is closing (the home's, which
    /// outlives its counters).
    closing: *const parking_lot::RwLock<()>,
    /// The FI_PEER context the core counter was opened with: a core may keep it (libfabric's
    /// util counters make it their fid's context), so it lives as long as the core counter.
    _peer_context: PeerContext,
    /// The ops table the core counter points at when rscntr counts its adds itself (tcp, rxm
    /// before libfabric 2.0, rxd: see [`count_through_peer`]); lives as long as the core
    /// counter. While there is one the core counter stays at zero, and a pull reads it once,
    /// for the progress the read runs, not its error count and then its value (the core's
    /// progress twice): a tcp ping-pong on counters
    /// (`fi_rdm_cntr_pingpong`, 8 B) took 8.85 µs per transfer instead of 9.39
    /// (`bench_pingpong_ab.sh -r 9`, one run). Cores that count through FI_PEER leave theirs at
    /// zero too, but still read both: over shm a pull's second progress run finds a peer's
    /// answer sooner (0.40 µs per transfer with one, 0.35 with two, one run of 11 repetitions),
    /// and over tcp;ofi_rxm one made no difference.
    counted_ops: Option<Box<ofi::fi_ops_cntr>>,
    /// Over a core whose counter read drives every bound endpoint and that counts straight into
    /// the rscntr counter: how often reads drive it (`reads.rs`).
    reads: Option<ReadDuty>,
    /// Over the doorbell: this feed's slot in the domain's bell (`BellBlocker::add_feed`), and
    /// where this counter's waiter sleeps while the slot has a bit of its own and the counter
    /// was bound to its endpoints before they were enabled (their name files carry the slot's
    /// hint; `bound_late` says otherwise); else in the domain's room.
    slot_sleep: Option<SlotBlocker>,
    bound_late_to_bell: AtomicBool,
    /// Over shm, the domain's peers: a read that drives the core rings those that asked it
    /// for answers (`answers.rs`).
    answering: Option<Arc<crate::layer::doorbell::answers::DomainAnswers>>,
}

/// What a core counter is opened with as its context (`fi_peer_cntr_context`), kept with it.
type PeerContext = Box<peer_sys::fi_peer_cntr_context>;

/// A core counter just opened, its context, and whether it was opened with FI_PEER.
type Opened = (*mut ofi::fid_cntr, PeerContext, bool);

// SAFETY: the raw pointers are the core counter (closed only through the feed), and the home's
// lock, which outlives the feed and is Sync.
unsafe impl Send for CoreFeed {}
// SAFETY: as above.
unsafe impl Sync for CoreFeed {}

/// The feed of `cntr`, a counter of `home`: opened at its first bind, shared by the later ones.
fn feed_of<'a>(cntr: &'a dyn AnyCntr, home: &CoreWaits<'_>) -> Result<&'a dyn Feed, c_int> {
    cntr.feed_or_open(&mut |request| {
        open_core_cntr(home, &request).map(|feed| feed as Box<dyn Feed>)
    })
}

/// The bound wait's part in a counter's bind (`hooks.rs`): the counter's core counter, opened at
/// its first bind with what its waiters sleep on, bound by the core in the counter's place.
impl BindHook for CoreWaits<'_> {
    fn bind_cntr(&self, bind: &CntrBind<'_>) -> Step {
        let core_cntr = match feed_of(bind.cntr, self) {
            Ok(f) => f.core_cntr(),
            Err(e) => return Step::Fail(e),
        };
        // SAFETY: the core binds its own counter to its own endpoint or MR.
        let ret = testhook::fail(Op::Bind)
            .unwrap_or_else(|| unsafe { (bind.core_bind)(bind.fid, core_cntr.cast(), bind.flags) });
        if ret != 0 {
            // The core counter stays open with the rscntr counter and is closed with it.
            fi_warn!(
                EpCtrl,
                "the core refused to bind the counter to fid class {} with flags {:#x}{}: {ret}",
                bind.class,
                bind.flags,
                describe_flags(bind.flags)
            );
            return Step::Fail(ret);
        }
        fi_info!(
            EpCtrl,
            "bound an rscntr counter to core {} fid class {} with flags {:#x}{}",
            bind.core,
            bind.class,
            bind.flags,
            describe_flags(bind.flags)
        );
        Step::Next
    }
}

/// Opens the core counter that stands for a counter of `core`, with its bound wait, decided
/// here and only here, in order: what the core blocks on for this counter (from the domain's
/// [`Plan`]), that wait object opened, the core counter opened on it, then armed
/// ([`new_feed`]). When the core refuses a step, an info line says so and waits fall back: in
/// the end they yield between progress calls.
fn open_core_cntr(core: &CoreWaits<'_>, request: &FeedRequest) -> Result<Box<CoreFeed>, c_int> {
    // What the core blocks on for this counter, opened.
    let plan = core.plan;
    let made = match plan {
        Plan::ProgressFd => core.progress_blocker().map(CoreBlocker::Fd),
        Plan::FdSet { cap, .. } => {
            FdBlocker::wait_set(core.fabric, cap, core.room.clone(), core.closing)
                .map(|b| CoreBlocker::Fd(Arc::new(b)))
        }
        Plan::CoreWait => Ok(CoreBlocker::Cntr(CntrWaitBlocker::default())),
        // The doorbell serves shm's counters whether the core counts into them through FI_PEER
        // (from libfabric 1.19) or into a core counter of its own (before): a rung waiter's
        // pull drives progress and takes in what the core counter holds either way.
        Plan::Bell => core.bell_blocker().map(CoreBlocker::Bell),
        Plan::Yield => Ok(CoreBlocker::Yield),
    };
    let mut blocker = made.unwrap_or_else(|e| {
        fi_info!(
            Cntr,
            "the core has no wait object for {plan:?} ({e}); waits on this counter yield"
        );
        CoreBlocker::Yield
    });
    // The core counter opened on it.
    let shared = matches!(core.plan, Plan::ProgressFd | Plan::Bell);
    let out = match blocker.wait_set(shared) {
        Some(set) => match open_core_cntr_on(core, request, set) {
            Ok(opened) => opened,
            Err(e) => {
                fi_info!(
                    Cntr,
                    "the core cannot open a counter on a wait set ({e}); waits on it yield"
                );
                blocker = CoreBlocker::Yield;
                open_core_cntr_on(core, request, std::ptr::null_mut())?
            }
        },
        None => open_core_cntr_on(core, request, std::ptr::null_mut())?,
    };
    Ok(new_feed(core, request, out, blocker, shared))
}

/// The feed of a core counter just opened, sleeping on `blocker`, armed: the core's fd in the
/// epoll set the application polls, the core counter handed to a blocker that sleeps in it.
fn new_feed(
    core: &CoreWaits<'_>,
    request: &FeedRequest,
    (out, peer_context, peer): Opened,
    blocker: CoreBlocker,
    shared: bool,
) -> Box<CoreFeed> {
    // A core that counts through its own counter's ops (`Counting::OwnAdd`: tcp, whatever the
    // counter was opened with; rxm before 2.0 and rxd, opened without FI_PEER): rscntr makes
    // those counts go straight into the rscntr counter (see `count_through_peer`).
    let counted_ops = matches!(core.counting, Counting::OwnAdd { .. })
        // SAFETY: the core counter was just opened with its peer context and is bound to
        // nothing yet; the ops live in the feed, as long as the core counter.
        .then(|| unsafe { count_through_peer(out) });
    let held = request.wait_fd.map_or(Held::No, |ep| {
        blocker.hold_in(ep, shared, core.watcher_may_progress, core.fd_held_plainly)
    });
    fi_info!(
        Cntr,
        "waits on this counter sleep on {}",
        match &blocker {
            CoreBlocker::Fd(_) if shared => "the core's progress fd",
            CoreBlocker::Fd(_) => "the core's wait set fd",
            CoreBlocker::Cntr(_) => "the core counter's own wait",
            CoreBlocker::Bell(_) => "the domain's doorbell (rung by rscntr peers)",
            CoreBlocker::Yield => "nothing (they yield between progress calls)",
        }
    );
    // Reads on a duty cycle where a read of the core counter runs the progress of every
    // endpoint bound to it and the core counts straight into the rscntr counter, so a read that
    // does not drive it misses nothing another thread's progress counted (util-based cores:
    // over FI_PEER, or through the hooked `add` of rxm before 2.0 and rxd): not tcp (its read
    // runs the domain's progress, whose cost does not grow with the counter's endpoints), nor
    // sockets (its own thread progresses, and it counts into its own counter).
    let direct = peer || counted_ops.is_some();
    let reads = (direct && matches!(core.plan, Plan::Yield | Plan::Bell | Plan::FdSet { .. }))
        .then(ReadDuty::new);
    let slot_sleep = match &blocker {
        CoreBlocker::Bell(b) => Some(SlotBlocker::new(b.clone())),
        _ => None,
    };
    let feed = Box::new(CoreFeed {
        core_cntr: AtomicPtr::new(out),
        unenabled: AtomicUsize::new(0),
        seen: AtomicU64::new(0),
        seen_err: AtomicU64::new(0),
        bias: AtomicU64::new(0),
        blocker,
        fd_exported: held != Held::No,
        holds_claim: AtomicBool::new(held == Held::Plainly),
        fd_claim: core.fd_held_plainly,
        plan: core.plan,
        watcher_may_progress: core.watcher_may_progress,
        closing: core.closing,
        _peer_context: peer_context,
        counted_ops,
        reads,
        slot_sleep,
        bound_late_to_bell: AtomicBool::new(false),
        answering: (core.plan == Plan::Bell).then(|| core.answers.clone()),
    });
    // SAFETY: boxed, the feed does not move.
    unsafe { feed.join_bell() };
    if let CoreBlocker::Cntr(b) = &feed.blocker {
        // SAFETY: the core counter and the bias live as long as the feed, which owns the
        // blocker (the core counter is closed only when the feed is); sockets' reads run no
        // progress under auto progress.
        unsafe { b.watch_counter(out, &feed.bias) };
    }
    feed
}

/// The wait object a core counter is opened with.
enum Wait {
    None,
    Set(*mut ofi::fid_wait),
}

impl From<*mut ofi::fid_wait> for Wait {
    fn from(set: *mut ofi::fid_wait) -> Wait {
        if set.is_null() {
            Wait::None
        } else {
            Wait::Set(set)
        }
    }
}

/// Opens the core counter, with FI_PEER if the core takes it, with the wait object `wait`;
/// returns it with the context it was opened with, which must live as long as it.
fn open_core_cntr_on(
    core: &CoreWaits<'_>,
    request: &FeedRequest,
    wait: impl Into<Wait>,
) -> Result<Opened, c_int> {
    let (wait_obj, wait_set) = match wait.into() {
        Wait::None => (ofi::fi_wait_obj_FI_WAIT_NONE, std::ptr::null_mut()),
        Wait::Set(set) => (ofi::fi_wait_obj_FI_WAIT_SET, set),
    };
    let mut attr = ofi::fi_cntr_attr {
        events: request.events,
        wait_obj,
        wait_set,
        flags: 0,
    };
    let mut ctx = Box::new(peer_sys::fi_peer_cntr_context {
        size: std::mem::size_of::<peer_sys::fi_peer_cntr_context>(),
        cntr: request.peer,
    });
    let open = |attr: &mut ofi::fi_cntr_attr, context: *mut c_void| {
        let mut out: *mut ofi::fid_cntr = std::ptr::null_mut();
        // SAFETY: an open core domain; attr lives across the call; the context (kept by util
        // counters as their fid's context) and the peer fid in it live as long as the counter.
        let ret = testhook::fail(Op::CntrOpen)
            .unwrap_or_else(|| unsafe { (core.cntr_open)(core.domain, attr, &mut out, context) });
        ffi::wrote(ret, !out.is_null()).map(|()| out)
    };
    // FI_PEER where the core takes it (tcp takes the flag but keeps counting through its
    // counter's ops, which `count_through_peer` then hooks).
    if core.counting.peer_flag() {
        attr.flags = ofi::FI_PEER;
        let peer = (&mut *ctx as *mut peer_sys::fi_peer_cntr_context).cast();
        match open(&mut attr, peer) {
            Ok(out) => return Ok((out, ctx, true)),
            // A core that refuses FI_PEER where `boundary::versions::counting` expected it
            // (sockets never gets here any more) counts in a counter of its own; `sync` takes
            // in its increases.
            Err(ret) => fi_info!(
                Cntr,
                "the core has no FI_PEER counters ({ret}); rscntr reads a core counter"
            ),
        }
        attr.flags = 0;
    }
    // The peer context is the counter's context even without FI_PEER: util counters keep it as
    // their fid's context, where `count_through_peer`'s ops find the rscntr counter.
    let peer = (&mut *ctx as *mut peer_sys::fi_peer_cntr_context).cast();
    open(&mut attr, peer)
        .inspect_err(|ret| {
            fi_warn!(
                Cntr,
                "the core cannot open a counter for rscntr to read: {ret}"
            )
        })
        .map(|out| (out, ctx, false))
}

impl Feed for CoreFeed {
    fn bell_hint(&self) -> u128 {
        BellBlocker::hint_of(self.bell_slot())
    }

    fn core_cntr(&self) -> *mut ofi::fid_cntr {
        self.core_cntr.load(Ordering::Acquire)
    }

    /// Drives the core's progress, as libfabric's own counters do on read and wait, and takes
    /// in whatever the core counted itself.
    ///
    /// Reading the core counter runs the core's progress for the endpoints bound to it. Cores
    /// that advertise FI_PROGRESS_AUTO may still only progress when asked (tcp starts its
    /// progress thread only for some wait objects), so rscntr always asks. Cores differ in how
    /// they count (`boundary::versions::counting`): util-based cores over FI_PEER (shm from
    /// libfabric 1.19, rxm from 2.0) call the peer's `owner_ops->inc`, and the cores whose
    /// counter's own `add` rscntr hooks (tcp, rxm before 2.0, rxd: [`count_through_peer`])
    /// count through it into the rscntr counter: either way the core counter reads 0. The
    /// others (sockets, and shm and udp before 1.19) keep the count in their own counter. rscntr
    /// takes the increase of the core counter's value since the last look into its own, so
    /// every kind counts exactly once. The core counter is never set or added to by rscntr,
    /// so it only grows; a compare-exchange on the last seen value makes each increase count
    /// once even when threads race. Skipped while an endpoint bound to this counter is not
    /// enabled: util-based cores crash progressing such an endpoint, and nothing completes on
    /// it; increases made meanwhile are taken in by the next sync.
    ///
    /// The error count, where it is read (see `counted_ops`), is read first: each read runs the
    /// core's progress before it reads, so what the last call's progress completes shows only
    /// in that call's value. A waiter about to sleep must see every completion the progress
    /// took off the wire (nothing will make the core's fd readable for it again), and
    /// completions are what it waits for.
    fn sync(&self, tally: &dyn Tally, errors_too: bool) {
        if let CoreBlocker::Bell(b) = &self.blocker {
            // A waiter's pull: this counter's endpoints (the bell's arming drives the whole
            // domain's, see `bell.rs`). The peers that asked for answers are rung when they
            // asked something new (`answers.rs`). When it moved the counter (the wait may end
            // now, and not arm again), a ring to each peer that sleeps: an answer this progress
            // made may be what it waits for. After a sleep that no ring ended, a count it brings in
            // came from a peer that did not ring.
            let before = tally.value();
            let unrung = match self.slot_sleeper() {
                Some(s) => s.take_unrung_wake(),
                None => b.take_unrung_wake(),
            };
            self.sync_answering(tally, errors_too);
            if tally.value() != before {
                b.ring_back();
                if unrung {
                    b.unrung_arrival();
                }
            }
            return;
        }
        self.sync_own(tally, errors_too);
    }

    /// `fi_cntr_read` and `fi_cntr_readerr`: on a duty cycle where the feed has one (see
    /// `engine/duty.rs`): a read that does not drive the core returns what the core counted
    /// into the rscntr counter already through FI_PEER, which is everything it delivered.
    ///
    /// Over shm, a read that drives the core rings the peers that asked the domain for answers
    /// (`answers.rs`): a rank that only reads its counters is a target they depend on.
    fn sync_read(&self, tally: &dyn Tally, errors_too: bool) {
        match &self.reads {
            Some(reads) => {
                reads.read(|| self.sync_answering(tally, errors_too));
            }
            None => self.sync_answering(tally, errors_too),
        }
    }

    fn may_progress(&self) -> bool {
        self.watcher_may_progress
    }

    fn live(&self) -> bool {
        !self.core_cntr.load(Ordering::Acquire).is_null()
            && self.unenabled.load(Ordering::Acquire) == 0
    }

    fn wake(&self) -> Wake<'_> {
        if !self.live() {
            // Bound to endpoints not enabled: nothing completes, only the counter's own ops
            // (and the enable, which notifies) change anything.
            return Wake::Notified;
        }
        match &self.blocker {
            CoreBlocker::Fd(b) => Wake::Block(&**b),
            CoreBlocker::Cntr(b) => Wake::Block(b),
            CoreBlocker::Bell(b) => match self.slot_sleeper() {
                Some(s) => Wake::Block(s),
                None => Wake::Block(&**b),
            },
            CoreBlocker::Yield => Wake::Yield,
        }
    }

    /// The core's fd is in the counter's epoll set, so arming the core is enough; otherwise
    /// the watcher sleeps on the core's behalf, where it may drive the core's progress, and
    /// where it may not, the application is told to read (-FI_EAGAIN).
    fn arm(&self, tally: &dyn Tally) -> Armed {
        if self.fd_exported {
            let Some(b) = self.blocker.blocker() else {
                return Armed::Ready;
            };
            // Something pending in the core: the application reads (which pulls it) and
            // tries again, as libfabric's fd protocol has it.
            for _ in 0..3 {
                // Over the doorbell the application sleeps in poll() on its socket.
                let armed = match &self.blocker {
                    CoreBlocker::Bell(bell) => bell.arm_socket(),
                    _ => b.arm(),
                };
                if armed {
                    // Over the doorbell, the watcher watches too where it may drive the core:
                    // a peer that never rings (plain shm) cannot leave an fd asleep for ever;
                    // it re-checks as the bell's waits do (see `bell.rs`).
                    if matches!(self.blocker, CoreBlocker::Bell(_)) && self.watcher_may_progress {
                        return Armed::Relay;
                    }
                    return Armed::Ready;
                }
                self.sync(tally, true);
            }
            return Armed::Pending;
        }
        let relay = match &self.blocker {
            // sockets' own progress thread counts; reading its counter drives nothing.
            CoreBlocker::Cntr(_) => true,
            _ => self.watcher_may_progress,
        };
        // Otherwise nothing would make the fd readable but the application's own reads (a
        // domain not FI_THREAD_SAFE over a core without a wait fd): it reads and tries again.
        if relay { Armed::Relay } else { Armed::Pending }
    }

    fn bound(&self, enabled: bool, late: bool) {
        if !enabled {
            self.unenabled.fetch_add(1, Ordering::AcqRel);
        }
        if late {
            self.bound_late();
        }
    }

    fn unbound(&self, enabled: bool) {
        if !enabled {
            self.unenabled.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn binding_enabled(&self) {
        self.unenabled.fetch_sub(1, Ordering::AcqRel);
    }

    /// rxm and rxd leave the closing endpoint in the counter's wait set (rxm adds its CQ's fid
    /// at FI_ENABLE, `rxm_ep_wait_fd_add`; rxd its datagram CQ's fd with `rxd_ep_trywait` at
    /// `fi_ep_bind`, `rxd_ep_bind`; neither removes it at close), so the wait set's
    /// `fi_trywait` would call into the freed endpoint (valgrind showed it over rxd:
    /// `rxd_ep_trywait` reading the freed `rxd_ep`): from now on this counter's waits never
    /// arm it and re-check every [`core_wait::LATE_BIND_CAP`]. rxm's only for an endpoint that
    /// was enabled.
    fn binding_closing(&self, enabled: bool) {
        if let (Plan::FdSet { fds_at_enable, .. }, CoreBlocker::Fd(b)) = (self.plan, &self.blocker)
            && (enabled || !fds_at_enable)
        {
            b.forget_trywait(core_wait::LATE_BIND_CAP);
        }
    }

    fn close(&self) -> Result<(), c_int> {
        let core = self.core_cntr.load(Ordering::Acquire);
        if core.is_null() {
            return Ok(());
        }
        // No waiter of the domain drives it from now on (a failed close puts it back).
        self.leave_bell();
        // SAFETY: the core counter was opened by open_core_cntr() and nothing else closes it.
        let ret = unsafe { ofi::fi_close(core.cast()) };
        if ret != 0 {
            // SAFETY: the feed stays where new_feed boxed it.
            unsafe { self.join_bell() };
            return Err(ret);
        }
        self.core_cntr
            .store(std::ptr::null_mut(), Ordering::Release);
        self.let_go_of_fd();
        Ok(())
    }
}

/// A waiter of the domain drives this counter's endpoints (see `bell.rs`): a read of the core
/// counter, which counts what completes straight into the rscntr counter (FI_PEER).
impl Progressed for CoreFeed {
    fn progress_only(&self) {
        // SAFETY: the domain's home outlives its counters.
        let _open = unsafe { &*self.closing }.read_recursive();
        let core = self.core_cntr.load(Ordering::Acquire);
        if core.is_null() || self.unenabled.load(Ordering::Acquire) != 0 {
            return;
        }
        // SAFETY: an open core counter; its ops table is the core's.
        if let Some(read) = unsafe { &*(*core).ops }.read {
            // SAFETY: as above.
            unsafe { read(core) };
        }
    }
}

impl Drop for CoreFeed {
    fn drop(&mut self) {
        self.leave_bell();
        self.let_go_of_fd();
    }
}

impl CoreFeed {
    /// The counter is done with the core's fd: another counter's set may hold it (once).
    fn let_go_of_fd(&self) {
        if self.holds_claim.swap(false, Ordering::SeqCst) {
            // SAFETY: the domain's home outlives its counters.
            unsafe { &*self.fd_claim }.store(false, Ordering::SeqCst);
        }
    }

    /// Over the doorbell: the blocker this counter's waiter sleeps on alone, when it has a slot
    /// of its own that its endpoints' peers know of (see `slot_sleep`).
    fn slot_sleeper(&self) -> Option<&SlotBlocker> {
        self.slot_sleep
            .as_ref()
            .filter(|s| s.serves() && !self.bound_late_to_bell.load(Ordering::Relaxed))
    }

    fn bell_slot(&self) -> usize {
        self.slot_sleep
            .as_ref()
            .map_or(usize::MAX, SlotBlocker::slot)
    }

    /// Over the doorbell: the feed joins the domain's bell (a slot, progressed by its
    /// waiters), until it removes itself (close, drop).
    ///
    /// # Safety
    /// The feed does not move until dropped (it is boxed).
    unsafe fn join_bell(&self) {
        if let CoreBlocker::Bell(b) = &self.blocker {
            // SAFETY: the feed removes itself (close, drop) before it is freed; it does not
            // move (the caller's contract).
            let slot = unsafe { b.add_feed(self as &dyn Progressed as *const dyn Progressed) };
            if let Some(s) = &self.slot_sleep {
                s.set_slot(slot);
            }
        }
    }

    /// Leaves the domain's bell (again, after a close: nothing).
    fn leave_bell(&self) {
        if let CoreBlocker::Bell(b) = &self.blocker {
            b.remove_feed(
                self.bell_slot(),
                self as &dyn Progressed as *const dyn Progressed,
            );
        }
    }

    /// [`Self::sync_own`], and over shm a ring after it to the peers that asked the domain
    /// something new before it (`answers.rs`).
    fn sync_answering(&self, tally: &dyn Tally, errors_too: bool) {
        match &self.answering {
            Some(answers) => answers.around(|| self.sync_own(tally, errors_too)),
            None => self.sync_own(tally, errors_too),
        }
    }

    /// Drives the progress of the endpoints bound to this counter (a read of the core counter)
    /// and takes in what the core counted itself (see [`Feed::sync`]).
    fn sync_own(&self, tally: &dyn Tally, errors_too: bool) {
        // SAFETY: the domain's home outlives its counters.
        let _open = unsafe { &*self.closing }.read_recursive();
        let core = self.core_cntr.load(Ordering::Acquire);
        if core.is_null() || self.unenabled.load(Ordering::Acquire) != 0 {
            return;
        }
        // SAFETY: an open core counter; its ops table is the core's.
        let ops = unsafe { &*(*core).ops };
        if errors_too
            && self.counted_ops.is_none()
            && let Some(readerr) = ops.readerr
        {
            // SAFETY: as above.
            let now = unsafe { readerr(core) };
            take_increase(&self.seen_err, now, |d| tally.count_err(d));
        }
        if let Some(read) = ops.read {
            // SAFETY: as above.
            let raw = unsafe { read(core) };
            // The bias is read after the value: an interrupt counts its bias before it adds
            // to the core counter, so a value that includes the addition comes with its bias.
            let now = raw.wrapping_sub(self.bias.load(Ordering::SeqCst));
            take_increase(&self.seen, now, |d| tally.count(d));
        }
    }

    /// Bound to an endpoint after its FI_ENABLE: a core that hands out its fds at enable
    /// (rxm) gives none for it, so waits are bounded instead.
    fn bound_late(&self) {
        if matches!(self.blocker, CoreBlocker::Bell(_)) {
            // The endpoint's name file was written at its FI_ENABLE, without this counter's
            // hint: its peers' rings would not reach this counter's slot.
            self.bound_late_to_bell.store(true, Ordering::Relaxed);
        }
        if let (
            Plan::FdSet {
                fds_at_enable: true,
                ..
            },
            CoreBlocker::Fd(b),
        ) = (self.plan, &self.blocker)
        {
            fi_info!(
                EpCtrl,
                "counter bound after FI_ENABLE: the core adds no fd for it; waits re-check every {:?}",
                core_wait::LATE_BIND_CAP
            );
            b.cap(core_wait::LATE_BIND_CAP);
        }
    }
}

/// Moves `seen` up to `now` and hands the difference to `add`, once, whoever races. A value
/// below `seen` (a read that saw an interrupt's bias before its addition) is no change: the
/// next read shows both.
fn take_increase(seen: &AtomicU64, now: u64, add: impl FnOnce(u64)) {
    let last = seen.load(Ordering::Acquire);
    let delta = now.wrapping_sub(last);
    if (delta as i64) > 0
        && seen
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        add(delta);
    }
}

/// Points a core counter at a copy of its ops whose `add` and `adderr` count into the rscntr
/// counter through the peer fid of the context it was opened with, as an FI_PEER core does,
/// instead of into the core counter. For the cores that count every completion with their
/// counter's own `add`/`adderr` ops (`boundary::versions::Counting::OwnAdd`): tcp
/// (`ofi_cntr_inc`, `xnet_cntr_incerr`), which keeps FI_PEER counters only for reads; rxm
/// before libfabric 2.0 (`ofi_cntr_inc`, `rxm_cntr_incerr`) and rxd (`ofi_cntr_inc`,
/// `rxd_cntr_report_error`), whose util counters are opened without FI_PEER. A completion made
/// by any thread's progress then reaches the rscntr counter, and wakes the one thread waiting
/// on it, at once; the core counter stays at zero, so [`Feed::sync`] takes nothing in twice,
/// and reading it still drives the core's progress (util's `ofi_cntr_read` runs the bound
/// endpoints' progress before it reads).
///
/// # Safety
/// `cntr` is a core counter just opened with a `fi_peer_cntr_context` as its context, used by
/// nothing yet; the returned table must outlive it.
unsafe fn count_through_peer(cntr: *mut ofi::fid_cntr) -> Box<ofi::fi_ops_cntr> {
    // SAFETY: caller's contract: an open core counter with its ops table.
    let mut ops = Box::new(unsafe { *(*cntr).ops });
    ops.add = Some(counted_add);
    ops.adderr = Some(counted_adderr);
    // SAFETY: as above; nothing calls the counter's ops yet.
    unsafe { (*cntr).ops = &mut *ops };
    ops
}

/// The peer fid of a core counter that `count_through_peer` hooked.
///
/// # Safety
/// `cntr` is such a counter.
unsafe fn peer_of(cntr: *mut ofi::fid_cntr) -> Option<*mut peer_sys::fid_peer_cntr> {
    // SAFETY: caller's contract: its context is the peer context it was opened with.
    let ctx = unsafe { cntr.as_ref() }?.fid.context as *const peer_sys::fi_peer_cntr_context;
    // SAFETY: as above; the context lives in the feed as long as the core counter.
    let peer = unsafe { ctx.as_ref() }?.cntr;
    (!peer.is_null()).then_some(peer)
}

/// Counts `n` through the peer fid's owner ops (`inc`, or `incerr` when `err`).
fn count_into_peer(cntr: *mut ofi::fid_cntr, n: u64, err: bool) -> c_int {
    // SAFETY: called by the core on a counter hooked by count_through_peer.
    let Some(peer) = (unsafe { peer_of(cntr) }) else {
        fi_warn!(Cntr, "a hooked core counter without its peer context");
        return ffi::err::EINVAL;
    };
    // SAFETY: the peer fid is the rscntr counter's, alive while its core counter is.
    let owner = unsafe { &*(*peer).owner_ops };
    let op = if err { owner.incerr } else { owner.inc };
    if let Some(op) = op {
        for _ in 0..n {
            // SAFETY: the rscntr counter's own owner op on its own peer fid.
            unsafe { op(peer) };
        }
    }
    0
}

unsafe extern "C" fn counted_add(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
    crate::ffi_boundary! { count_into_peer(cntr, value, false) }
}

unsafe extern "C" fn counted_adderr(cntr: *mut ofi::fid_cntr, value: u64) -> c_int {
    crate::ffi_boundary! { count_into_peer(cntr, value, true) }
}
