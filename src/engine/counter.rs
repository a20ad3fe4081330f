//! The counter: a [`Store`] (two values), plus the machinery to wake whoever waits on them.
//!
//! One file past 600 lines on purpose: the mutations, the waits (a software wait, a leader
//! over a blocker, its followers), `trywait`'s fd arming and the watcher's re-arming all read
//! and write one word, `wake`, and the argument that no wakeup is lost (below) is about all
//! of them at once; `tests/loom_wait.rs` model-checks them together, on this file's code.
//!
//! # Wake protocol
//! Every mutation (add, adderr, set, seterr) is a `SeqCst` atomic write followed by one `SeqCst`
//! load of `wake`. `wake` is zero unless somebody may be asleep: bit 0 is set while an FD is
//! armed by [`Counter::trywait`], and the rest counts threads blocked in [`Counter::wait`]. So a
//! mutation with no waiter costs one atomic RMW and one load, and never a syscall.
//!
//! A blocking waiter first adds itself to `wake`, then registers an `event_listener` listener,
//! then re-checks the counter, and only then sleeps. Because both sides write, then read the
//! other side's word, with `SeqCst`, either the waiter sees the new value or the mutator sees the
//! waiter and notifies it; and because the listener is registered before the re-check, that
//! notification cannot fall between the check and the sleep. No wakeup is lost.
//!
//! `tests/loom_wait.rs` model-checks this (and the fd arming of `trywait`) with loom, on this
//! code: `--cfg loom` swaps the atomics, the mutex, the spins and the eventfd for loom's
//! (`super::sync`). The store-then-load pairs the argument above rests on are marked with
//! `sync::store_load_order()`, a SeqCst fence under loom only (see there: loom models SeqCst
//! accesses more weakly than Rust does), nothing otherwise.
//!
//! # Changes from outside: polled stores and sources
//! Some counters change without a call through this `Counter`: a device moves a
//! [`Store::POLLED`] store, and a core provider completes the operations of the endpoints a
//! layered counter is bound to. [`Counter::wait_with`] takes the [`Source`] of such changes and
//! sleeps the way it says ([`Wake`]): on the core's own blocking primitive, between bounded
//! polls (a device), or yielding (a core with nothing to block on). Whatever the source, the
//! mutations made through this `Counter` still wake every waiter at once.
//!
//! Over a [`Blocker`] one waiter at a time, the *leader*, sleeps in it; the others sleep on the
//! listener as for a software counter, and the leader wakes them when it leaves so that one of
//! them takes over. The leader registers first (`BLOCKED` in `wake`, the blocker it sleeps in
//! beside it), takes the blocker's token, pulls and checks, arms, and only then blocks; a
//! mutator that sees `BLOCKED` interrupts the blocker (the counter's `kick` eventfd, or the
//! blocker's own wake-up). The same store-then-load argument as above shows no interrupt is
//! lost, and the blocker's token and arming cover the changes the source makes itself.
//!
//! An fd armed by `trywait` on a polled store is handed to the shared
//! [`watcher`](super::watcher) thread, which polls it on a doubling schedule up to the
//! counter's `poll_max` and signals the eventfd when the value or error count differs from
//! what `trywait` saw. Unarmed counters are never polled.
//!
//! Reads of a polled store may lag behind a mutation ("may not be immediately visible" in
//! rdma-core's words); `wait` stays correct because it re-reads until the deadline, and the
//! watcher compares against the values `trywait` actually read.

use super::backoff::{DEFAULT_SPIN_LIMIT, PollNap};
use super::source::{self, Blocker, NO_KICK_NAP, Room, Sleep, Source, Unsourced, Wake};
use super::store::{Atomics, Store, StoreError};
use super::sync::{AtomicBool, AtomicU32, AtomicU64, Mutex};
use super::trigger::{Starter, Tag, Triggers, Work};
use super::watcher::{self, Watched};
use super::{Backoff, EventFd, Timeout};
use event_listener::{Event, Listener};
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The first sleep of a waiter polling a [`Store::POLLED`] store; each later one doubles.
pub const POLL_FIRST: Duration = Duration::from_micros(2);
/// The default cap of a polling waiter's sleeps: the worst-case delay (plus timer slack)
/// between a device-side change becoming visible and a waiter or the watcher noticing it.
pub const DEFAULT_POLL_MAX: Duration = Duration::from_micros(100);

/// How a counter's waiters burn time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Doubling spin phases before a waiter yields (YIELD) or sleeps (UNSPEC, FD).
    pub spin_limit: u32,
    /// The longest sleep between two polls of a polled store (ignored for software stores).
    pub poll_max: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            spin_limit: DEFAULT_SPIN_LIMIT,
            poll_max: DEFAULT_POLL_MAX,
        }
    }
}

/// How `wait` waits, chosen from the counter's libfabric wait object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    /// FI_WAIT_NONE: no wait object. A wait polls like `Yield` (spins, then `sched_yield`),
    /// as sockets' and cxi's counters do: MPICH's triggered path and fabtests wait on such
    /// counters.
    None,
    /// FI_WAIT_YIELD: spin, then `sched_yield` until done. Mutators never make a syscall.
    Yield,
    /// FI_WAIT_UNSPEC: spin briefly, then sleep until a mutation wakes the thread.
    Block,
    /// FI_WAIT_FD: like `Block` for `wait`, plus an eventfd that `trywait` arms.
    Fd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The timeout passed before the threshold was reached.
    TimedOut,
    /// The error count changed after the wait began.
    ErrorChanged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryWaitError {
    /// A change happened since the previous `trywait`: read the counter before blocking.
    Pending,
    /// The counter has no fd to block on.
    NoFd,
}

const FD_ARMED: u32 = 1;
/// A leader sleeps in a source's blocker (`blocked_in`): mutations interrupt it.
const BLOCKED: u32 = 2;
/// Work has been queued on the counter (`triggers`): mutations check whether it is due (see
/// `super::trigger`). Set at the first such work and kept.
const TRIGGERS: u32 = 4;
const ONE_WAITER: u32 = 8;

/// What `trywait` compares against to tell whether a change is pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Snapshot {
    value: u64,
    errors: u64,
    /// Bumped by set/seterr, so a set back to an earlier value still counts as a change.
    sets: u64,
}

/// The blocker a leader sleeps in, for mutators to interrupt. Set and cleared by the leader,
/// whose borrow of the blocker outlives the time it is set.
#[derive(Clone, Copy)]
struct BlockedIn(*const dyn Blocker, Option<*const Room>);
// SAFETY: only dereferenced under `blocked_in`'s lock while the leader that set it is still
// inside its wait (it clears the slot, under the same lock, before its borrow ends); a
// Blocker is Sync.
unsafe impl Send for BlockedIn {}

/// A counter over a [`Store`]: software atomics by default, or a device's counter.
pub struct Counter<S: Store = Atomics> {
    store: S,
    sets: AtomicU64,
    /// Counts the core will make that are not the application's (see [`Counter::owe`]).
    owed: AtomicU64,
    wake: AtomicU32,
    strategy: WaitStrategy,
    tuning: Tuning,
    event: Event,
    fd: Option<EventFd>,
    armed_at: Mutex<Snapshot>,
    /// One waiter at a time sleeps in a source's blocker (see the module doc).
    leading: AtomicBool,
    blocked_in: Mutex<Option<BlockedIn>>,
    /// The leader's interrupt, made on first use (None if no fd could be made: the leader
    /// then yields instead of blocking).
    kick: OnceLock<Option<EventFd>>,
    /// An interrupt was sent since the leader last drained `kick` (most blockers' interrupts
    /// write it; the leader then reads it once, instead of once per sleep).
    kicked: AtomicBool,
    /// Work waiting for this counter's count (see `super::trigger`), made at the first.
    triggers: OnceLock<Arc<Triggers>>,
    /// This counter's own `Arc` (counters made by [`Counter::with_store`]; empty otherwise):
    /// the watcher holds an armed polled counter by it, and reads it only through a strong
    /// reference, so a counter whose last `Arc` is dropped is never read meanwhile.
    me: Weak<Self>,
}

impl<S: Store> std::fmt::Debug for Counter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("value", &self.read())
            .field("errors", &self.read_err())
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

impl Counter<Atomics> {
    /// A software counter at zero. Creating an FD counter fails only when the eventfd cannot be
    /// made.
    pub fn new(strategy: WaitStrategy) -> io::Result<Self> {
        Self::with_spin_limit(strategy, DEFAULT_SPIN_LIMIT)
    }

    pub fn with_spin_limit(strategy: WaitStrategy, spin_limit: u32) -> io::Result<Self> {
        let tuning = Tuning {
            spin_limit,
            ..Tuning::default()
        };
        Self::build(Atomics::default(), strategy, tuning)
    }
}

impl<S: Store> Counter<S> {
    /// A counter over `store`, shared. Counters over a [`Store::POLLED`] store are made here:
    /// the watcher thread holds an armed one by a `Weak` to it.
    pub fn with_store(store: S, strategy: WaitStrategy, tuning: Tuning) -> io::Result<Arc<Self>> {
        if S::POLLED && strategy == WaitStrategy::Fd {
            watcher::ensure_running()?;
        }
        let fd = Self::make_fd(strategy)?;
        Ok(Arc::new_cyclic(|me| {
            Self::assemble(store, strategy, tuning, fd, me.clone())
        }))
    }

    fn build(store: S, strategy: WaitStrategy, tuning: Tuning) -> io::Result<Self> {
        let fd = Self::make_fd(strategy)?;
        Ok(Self::assemble(store, strategy, tuning, fd, Weak::new()))
    }

    fn make_fd(strategy: WaitStrategy) -> io::Result<Option<EventFd>> {
        Ok(match strategy {
            WaitStrategy::Fd => Some(EventFd::new()?),
            _ => None,
        })
    }

    fn assemble(
        store: S,
        strategy: WaitStrategy,
        tuning: Tuning,
        fd: Option<EventFd>,
        me: Weak<Self>,
    ) -> Self {
        Counter {
            store,
            sets: AtomicU64::new(0),
            owed: AtomicU64::new(0),
            wake: AtomicU32::new(0),
            strategy,
            tuning: Tuning {
                spin_limit: tuning.spin_limit.min(16),
                poll_max: tuning.poll_max.max(POLL_FIRST),
            },
            event: Event::new(),
            fd,
            armed_at: Mutex::new(Snapshot::default()),
            leading: AtomicBool::new(false),
            blocked_in: Mutex::new(None),
            kick: OnceLock::new(),
            kicked: AtomicBool::new(false),
            triggers: OnceLock::new(),
            me,
        }
    }

    pub fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The longest a waiter sleeps between two polls of a polled store.
    pub fn poll_max(&self) -> Duration {
        self.tuning.poll_max
    }

    #[inline]
    pub fn read(&self) -> u64 {
        self.store.read()
    }

    #[inline]
    pub fn read_err(&self) -> u64 {
        self.store.read_err()
    }

    /// Adds `v`. Software values wrap modulo 2^64 (`max_cntr_value` is `u64::MAX`); a device
    /// wraps at its own maximum.
    #[inline]
    pub fn add(&self, v: u64) -> Result<(), StoreError> {
        let r = self.store.add(v);
        self.wake_waiters();
        r
    }

    #[inline]
    pub fn add_err(&self, v: u64) -> Result<(), StoreError> {
        let r = self.store.add_err(v);
        self.wake_waiters();
        r
    }

    /// The core will count `n` operations into this counter that are not the application's
    /// (rscntr's own: a notification of a remote access, deferred work the application asked
    /// no completion of). The next `n` counts that come from the core ([`Counter::add_counted`])
    /// are taken out. Until they come the value may read `n` low, never high: moving it back
    /// by `n` at once instead could wrap it below zero, to a value every waiter and every
    /// queued trigger takes as met.
    pub fn owe(&self, n: u64) {
        self.owed.fetch_add(n, SeqCst);
    }

    /// `n` counts owed ([`Counter::owe`]) will not come after all (the core refused the
    /// operation, or counted an error instead): cancelled, and where counts were already taken
    /// out for them, given back.
    pub fn forgive(&self, n: u64) -> Result<(), StoreError> {
        let cancelled = self.take_owed(n);
        if cancelled < n {
            self.add(n - cancelled)
        } else {
            Ok(())
        }
    }

    /// `n` counts the core made: what is owed ([`Counter::owe`]) is taken out first.
    #[inline]
    pub fn add_counted(&self, n: u64) -> Result<(), StoreError> {
        let n = if self.owed.load(SeqCst) == 0 {
            n
        } else {
            n - self.take_owed(n)
        };
        if n == 0 {
            return Ok(());
        }
        self.add(n)
    }

    /// Takes up to `n` from what is owed; how much.
    fn take_owed(&self, n: u64) -> u64 {
        match self
            .owed
            .fetch_update(SeqCst, SeqCst, |o| (o != 0).then(|| o - o.min(n)))
        {
            Ok(o) => o.min(n),
            Err(_) => 0,
        }
    }

    /// Counts owed and not yet taken out.
    pub fn owed(&self) -> u64 {
        self.owed.load(SeqCst)
    }

    pub fn set(&self, v: u64) -> Result<(), StoreError> {
        self.sets.fetch_add(1, SeqCst);
        let r = self.store.set(v);
        self.wake_waiters();
        r
    }

    pub fn set_err(&self, v: u64) -> Result<(), StoreError> {
        self.sets.fetch_add(1, SeqCst);
        let r = self.store.set_err(v);
        self.wake_waiters();
        r
    }

    /// Wakes every waiter to look again, without a change of value: the source changed how it
    /// can be waited on (the endpoints of a bound counter were enabled).
    pub fn notify_waiters(&self) {
        super::sync::store_load_order();
        let w = self.wake.load(SeqCst) & !(FD_ARMED | TRIGGERS);
        if w != 0 {
            self.wake_slow(w);
        }
    }

    #[inline]
    fn wake_waiters(&self) {
        super::sync::store_load_order();
        let w = self.wake.load(SeqCst);
        if w != 0 {
            self.wake_slow(w);
        }
    }

    #[cold]
    fn wake_slow(&self, w: u32) {
        // Someone is registered for this change: a leader's pull that gets here was not idle.
        super::stuck::note_woken();
        if w & TRIGGERS != 0
            && let Some(t) = self.triggers.get()
        {
            t.observe(self.count());
        }
        // One eventfd write per arming: later mutations find the bit clear and skip the syscall.
        if w & FD_ARMED != 0
            && self.wake.fetch_and(!FD_ARMED, SeqCst) & FD_ARMED != 0
            && let Some(fd) = &self.fd
        {
            fd.signal();
            super::stuck::note_woken_other();
        }
        if w & BLOCKED != 0 {
            let blocked_in = self.blocked_in.lock();
            if let Some(BlockedIn(b, Some(room))) = *blocked_in {
                // SAFETY: see BlockedIn; the room outlives its leader's wait.
                unsafe { &*room }.interrupt_leader(Some(unsafe { &*b }));
            } else if let (Some(BlockedIn(b, None)), Some(Some(kick))) =
                (*blocked_in, self.kick.get())
            {
                // SAFETY: see BlockedIn: the leader is inside its wait while the slot is set.
                unsafe { &*b }.interrupt(kick);
                // After the interrupt: a leader that sees the flag finds the write to drain.
                self.kicked.store(true, SeqCst);
            }
        }
        if w >= ONE_WAITER {
            self.event.notify(usize::MAX);
            super::stuck::note_woken_other();
        }
    }

    /// Waits until the value reaches `threshold` (`Ok`), the error count changes
    /// (`ErrorChanged`), or the timeout passes (`TimedOut`). The threshold is checked first.
    #[inline]
    pub fn wait(&self, threshold: u64, timeout: Timeout) -> Result<(), WaitError> {
        self.wait_inner(threshold, timeout, &Unsourced, || {})
    }

    /// [`Counter::wait`] for a counter that `source` also changes: pulls it before every
    /// check and sleeps the way it says (see the module doc).
    #[inline]
    pub fn wait_with(
        &self,
        threshold: u64,
        timeout: Timeout,
        source: &dyn Source,
    ) -> Result<(), WaitError> {
        self.wait_inner(threshold, timeout, source, || {})
    }

    /// [`Counter::wait`], calling `started` right after the wait has read the error count it
    /// compares against: an error-count change after `started` must end the wait (with
    /// `ErrorChanged`, or `Ok` if the threshold is met too). For tests, which must order their
    /// mutations after this point instead of sleeping and hoping the waiter has begun (the loom
    /// model, `tests/engine.rs`, `tests/hw.rs`).
    #[doc(hidden)]
    pub fn wait_observed(
        &self,
        threshold: u64,
        timeout: Timeout,
        started: impl FnOnce(),
    ) -> Result<(), WaitError> {
        self.wait_inner(threshold, timeout, &Unsourced, started)
    }

    /// [`Counter::wait_with`] with the `started` hook of [`Counter::wait_observed`].
    #[doc(hidden)]
    pub fn wait_with_observed(
        &self,
        threshold: u64,
        timeout: Timeout,
        source: &dyn Source,
        started: impl FnOnce(),
    ) -> Result<(), WaitError> {
        self.wait_inner(threshold, timeout, source, started)
    }

    /// How to sleep for `source`, with a polled store's own bound on every sleep.
    fn wake_for<'a>(&self, source: &'a dyn Source) -> Wake<'a> {
        let wake = source.wake();
        if matches!(self.strategy, WaitStrategy::Yield | WaitStrategy::None) {
            // Yielding while a thread of the source's own does the work only competes with
            // that thread for the CPU (100x slower ping-pongs over sockets, measured): sleep
            // in its wait like FI_WAIT_UNSPEC, the latency FI_WAIT_YIELD is chosen for.
            return match wake {
                Wake::Block(b) if !b.worth_spinning() => wake,
                _ => Wake::Yield,
            };
        }
        match wake {
            Wake::Notified if S::POLLED => Wake::After(self.tuning.poll_max),
            Wake::After(d) if S::POLLED => Wake::After(d.min(self.tuning.poll_max)),
            w => w,
        }
    }

    #[inline]
    fn wait_inner(
        &self,
        threshold: u64,
        timeout: Timeout,
        source: &dyn Source,
        started: impl FnOnce(),
    ) -> Result<(), WaitError> {
        let errors_at_start = self.read_err();
        started();
        let compare = || -> Option<Result<(), WaitError>> {
            if self.read() >= threshold {
                Some(Ok(()))
            } else if self.read_err() != errors_at_start {
                Some(Err(WaitError::ErrorChanged))
            } else {
                None
            }
        };
        let check = || -> Option<Result<(), WaitError>> {
            source.pull();
            compare()
        };
        if let Some(done) = check() {
            return done;
        }
        if timeout == Timeout::Poll {
            return Err(WaitError::TimedOut);
        }
        let deadline = timeout.deadline();
        let expired = || deadline.is_some_and(|d| Instant::now() >= d);
        let mut backoff = Backoff::new(self.tuning.spin_limit);
        let mut nap = PollNap::new(POLL_FIRST, self.tuning.poll_max);
        // A blocker that asks for it is pulled a while longer before the first sleep, yielding
        // between pulls (see `Blocker::pull_before_sleep`).
        let pull_until = match source.wake() {
            Wake::Block(b)
                if !matches!(self.strategy, WaitStrategy::Yield | WaitStrategy::None) =>
            {
                b.pull_before_sleep().map(|d| Instant::now() + d)
            }
            _ => None,
        };
        loop {
            let spin = !backoff.is_spun_out()
                && match source.wake() {
                    Wake::Block(b) => b.spin_before_sleep(),
                    _ => true,
                };
            let outcome = if spin {
                backoff.snooze();
                check()
            } else if pull_until.is_some_and(|t| Instant::now() < t) {
                super::sync::yield_now();
                check()
            } else {
                match self.wake_for(source) {
                    Wake::Yield => {
                        super::sync::yield_now();
                        check()
                    }
                    Wake::Notified => self.sleep(&check, &|| false, deadline),
                    Wake::After(max) => {
                        if nap.should_yield() {
                            // Between spinning and sleeping: a device-side change is often
                            // only a few microseconds away, and a futex sleep costs at least
                            // the timer slack.
                            super::sync::yield_now();
                            check()
                        } else {
                            let poll_at = Instant::now() + nap.next_sleep().min(max);
                            let until = deadline.map_or(poll_at, |d| d.min(poll_at));
                            self.sleep(&check, &|| false, Some(until))
                        }
                    }
                    Wake::Block(b) => match b.room() {
                        Some(room) => {
                            return self
                                .wait_in_room(room, b, source, &compare, deadline)
                                .unwrap_or(Err(WaitError::TimedOut));
                        }
                        None => self.block_in(b, &check, &compare, deadline),
                    },
                }
            };
            if let Some(done) = outcome {
                return done;
            }
            if expired() {
                return Err(WaitError::TimedOut);
            }
        }
    }

    /// One registered sleep on the listener: returns the result if the condition was met,
    /// `None` on a wakeup that leaves it unmet or when `stop_early` holds (the caller re-checks
    /// the deadline and decides again).
    fn sleep(
        &self,
        check: &dyn Fn() -> Option<Result<(), WaitError>>,
        stop_early: &dyn Fn() -> bool,
        deadline: Option<Instant>,
    ) -> Option<Result<(), WaitError>> {
        self.wake.fetch_add(ONE_WAITER, SeqCst);
        super::sync::store_load_order();
        let listener = self.event.listen();
        let result = match check() {
            Some(done) => Some(done),
            None if stop_early() => None,
            None => {
                match deadline {
                    Some(d) => {
                        listener.wait_deadline(d);
                    }
                    None => listener.wait(),
                }
                check()
            }
        };
        self.wake.fetch_sub(ONE_WAITER, SeqCst);
        result
    }

    /// Sleeps in `b` as the leader, or on the listener as a follower while another thread
    /// leads (it wakes the followers when it leaves).
    ///
    /// `check` pulls the source then compares; `compare` only compares. The leader pulls with
    /// `BLOCKED` clear, so that what its own pull counts does not interrupt it (a wasted
    /// eventfd write, or an addition to a core counter, per completion), then sets it again
    /// and compares once more: a mutation by another thread during the pull either saw
    /// `BLOCKED` and interrupts, or is seen by that comparison.
    fn block_in(
        &self,
        b: &dyn Blocker,
        check: &dyn Fn() -> Option<Result<(), WaitError>>,
        compare: &dyn Fn() -> Option<Result<(), WaitError>>,
        deadline: Option<Instant>,
    ) -> Option<Result<(), WaitError>> {
        if self.leading.swap(true, SeqCst) {
            super::sync::store_load_order();
            return self.sleep(check, &|| !self.leading.load(SeqCst), deadline);
        }
        let Some(kick) = self.kick.get_or_init(|| EventFd::new().ok()).as_ref() else {
            // No fd to be interrupted by: yield between pulls instead.
            self.leading.swap(false, SeqCst);
            super::sync::yield_now();
            return check();
        };
        // SAFETY (lifetime erasure): the slot is cleared below, before `b`'s borrow ends.
        let erased: *const (dyn Blocker + 'static) =
            unsafe { std::mem::transmute::<*const dyn Blocker, _>(b as *const dyn Blocker) };
        *self.blocked_in.lock() = Some(BlockedIn(erased, None));
        self.wake.fetch_or(BLOCKED, SeqCst);
        super::sync::store_load_order();
        let cap = S::POLLED.then_some(self.tuning.poll_max);
        let result = loop {
            if self.kicked.swap(false, SeqCst) {
                kick.drain();
            }
            let token = b.prepare();
            self.wake.fetch_and(!BLOCKED, SeqCst);
            let pulled = check();
            self.wake.fetch_or(BLOCKED, SeqCst);
            super::sync::store_load_order();
            if let Some(done) = pulled.or_else(compare) {
                break Some(done);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break None;
            }
            if !b.arm() {
                // Something is pending in the source: pull it in first.
                continue;
            }
            let until = match (deadline, cap) {
                (Some(d), Some(c)) => Some(d.min(now + c)),
                (d, None) => d,
                (None, Some(c)) => Some(now + c),
            };
            b.block(token, kick, until);
        };
        self.wake.fetch_and(!BLOCKED, SeqCst);
        *self.blocked_in.lock() = None;
        // An RMW, not a store: it must come after, in the flag's modification order, every
        // follower's swap that saw this thread lead (loom places a plain store before a swap
        // that ran earlier and read the older value, and then a follower never leads).
        self.leading.swap(false, SeqCst);
        super::sync::store_load_order();
        if self.wake.load(SeqCst) >= ONE_WAITER {
            // A follower takes over.
            self.event.notify(usize::MAX);
        }
        result
    }

    /// Waits as a member of `room` (see [`Room`]): leads when nobody does, else sleeps on
    /// this counter's listener until it changes or the lead is handed over. Returns the result,
    /// or None once `deadline` passed. Leaving (the membership dropped) hands off the lead.
    fn wait_in_room(
        &self,
        room: &Room,
        b: &dyn Blocker,
        source: &dyn Source,
        compare: &dyn Fn() -> Option<Result<(), WaitError>>,
        deadline: Option<Instant>,
    ) -> Option<Result<(), WaitError>> {
        let me = room.join(source, b, &self.event);
        if me.arms_itself() {
            // As the leader would: what happens after the arming makes the fd readable, which
            // the leader's sleep polls.
            if !source::pull_then_arm(source, b) {
                me.could_not_arm();
            }
        }
        loop {
            if room.try_lead(&me) {
                return self.lead_room(room, b, compare, deadline);
            }
            // A follower: registered before it looks at the counter and for a leader, so a
            // change or a hand-off after the look notifies it.
            self.wake.fetch_add(ONE_WAITER, SeqCst);
            super::sync::store_load_order();
            let listener = self.event.listen();
            let outcome = match compare() {
                Some(done) => Some(done),
                None if !room.is_led() => None,
                None => {
                    match deadline {
                        Some(d) => {
                            listener.wait_deadline(d);
                        }
                        None => listener.wait(),
                    }
                    compare()
                }
            };
            self.wake.fetch_sub(ONE_WAITER, SeqCst);
            if outcome.is_some() {
                return outcome;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
        }
    }

    /// The leader's rounds (see [`Room`]): pull every member's core, check this counter, arm,
    /// sleep on everything the members sleep on. A mutation of this counter interrupts the sleep
    /// as in [`Counter::block_in`], through the room's kick.
    fn lead_room(
        &self,
        room: &Room,
        b: &dyn Blocker,
        compare: &dyn Fn() -> Option<Result<(), WaitError>>,
        deadline: Option<Instant>,
    ) -> Option<Result<(), WaitError>> {
        let kick = room.kick();
        // SAFETY (lifetime erasure): the slot is cleared below, before `b`'s borrow ends.
        let erased: *const (dyn Blocker + 'static) =
            unsafe { std::mem::transmute::<*const dyn Blocker, _>(b as *const dyn Blocker) };
        *self.blocked_in.lock() = Some(BlockedIn(erased, Some(room as *const Room)));
        self.wake.fetch_or(BLOCKED, SeqCst);
        super::sync::store_load_order();
        let mut tokens = Vec::new();
        let mut sleep = Sleep::default();
        let mut readable = Vec::new();
        // A core fd that stays readable while nothing completes: nap instead of spinning.
        let mut stuck = super::stuck::Stuck::default();
        // A new leader pulls once whatever it shares a blocker with (one pull). Over many fds it
        // relies on their level: what the last leader left unpulled still makes them readable.
        if !room.many_fds() {
            room.mark_due(None);
        }
        let result = loop {
            room.drain_kick();
            self.wake.fetch_and(!BLOCKED, SeqCst);
            let (woken, count) = (super::stuck::woken_here(), self.count());
            if kick.is_some() && room.many_fds() {
                room.service_due();
            } else {
                room.pull_all(&mut tokens);
            }
            // Not idle when it moved this counter (short of its threshold: nobody else is
            // woken by that) or woke another member.
            stuck.pulled(super::stuck::woken_here() != woken || self.count() != count);
            self.wake.fetch_or(BLOCKED, SeqCst);
            super::sync::store_load_order();
            if let Some(done) = compare() {
                break Some(done);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break None;
            }
            if !room.arm_all(&mut sleep) {
                continue;
            }
            if let Some(kick) = kick
                && stuck.still_stuck(sleep.fds())
            {
                // Then every member is pulled.
                room.polls_nothing();
                stuck.nap_on(kick, deadline);
                room.mark_due(None);
                continue;
            }
            let shared = sleep.single.is_some_and(|s| std::ptr::addr_eq(s, erased));
            let slept_from = Instant::now();
            match kick {
                Some(kick) if shared => {
                    let token = tokens
                        .iter()
                        .find(|(t, _)| std::ptr::addr_eq(*t, erased))
                        .map_or(super::Token::default(), |(_, t)| *t);
                    b.block(token, kick, deadline);
                    // Which fd ended it is not known here: an early end counts.
                    stuck.slept(slept_from.elapsed(), true);
                    room.mark_due(None);
                }
                Some(_) if !sleep.no_fd => {
                    // The cap bounds the time between two pulls of every member, not one sleep:
                    // sleeps cut short by one member's fd would otherwise leave the others
                    // unpulled, and their core's timers (rxd's retransmissions) unrun.
                    let cap_left = sleep.cap.map(|c| c.saturating_sub(room.since_all_due()));
                    let until = source::limit(deadline, cap_left);
                    room.sleep_on_fds(&sleep.members, until, &mut readable);
                    stuck.slept(slept_from.elapsed(), !readable.is_empty());
                    // A bounded sleep that ran out, or the cap passed since the last time all
                    // were pulled: pull everybody.
                    let all_due = sleep
                        .cap
                        .is_some_and(|c| readable.is_empty() || room.since_all_due() >= c);
                    room.mark_due((!all_due).then_some(&readable[..]));
                }
                _ => {
                    // Nothing to sleep on for every member: nap, bounded.
                    let nap = source::limit(deadline, Some(NO_KICK_NAP));
                    super::sync::nap(nap.unwrap_or(NO_KICK_NAP));
                    room.mark_due(None);
                }
            }
        };
        self.wake.fetch_and(!BLOCKED, SeqCst);
        *self.blocked_in.lock() = None;
        b.leader_left();
        result
    }

    /// The eventfd of an FD counter.
    /// What thresholds of triggered work compare with: the value plus the error count
    /// (fi_trigger(3): "success plus error counter values").
    #[inline]
    pub fn count(&self) -> u64 {
        self.read().wrapping_add(self.read_err())
    }

    /// Queues `work` for when [`Counter::count`] reaches `threshold`; `starter` starts it then.
    /// Returns true if the count is there already: the caller may start it at once
    /// ([`Triggers::start_now`]), else the starter does. See `super::trigger` for why no
    /// trigger is lost.
    pub fn trigger(
        &self,
        starter: &Arc<Starter>,
        threshold: u64,
        tag: Tag,
        work: Box<dyn Work>,
    ) -> bool {
        let t = self.triggers.get_or_init(|| Triggers::new(starter.clone()));
        t.insert(threshold, tag, work);
        self.wake.fetch_or(TRIGGERS, SeqCst);
        super::sync::store_load_order();
        let count = self.count();
        t.observe(count);
        count >= threshold
    }

    /// The counter's queue of triggered work, once it had some.
    pub fn triggers(&self) -> Option<&Arc<Triggers>> {
        self.triggers.get()
    }

    pub fn fd(&self) -> Option<RawFd> {
        use std::os::fd::AsRawFd;
        self.fd.as_ref().map(|fd| fd.as_raw_fd())
    }

    /// Prepares the fd for blocking. `Ok` means nothing changed since the previous call and the
    /// fd will become readable on the next change of value or error count; `Pending` means a
    /// change happened since the previous call (the caller should read the counter and call
    /// again). Either way the fd is drained first and armed.
    ///
    /// On a polled store the armed counter is also handed to the watcher thread, which signals
    /// the fd when it sees the device move the value or the error count.
    pub fn trywait(&self) -> Result<(), TryWaitError> {
        let fd = self.fd.as_ref().ok_or(TryWaitError::NoFd)?;
        if S::POLLED {
            // The watcher must not poll against the previous snapshot once the fd is drained
            // and re-armed (it would signal a change this call is about to report anyway).
            // Before taking `armed_at`: the watcher takes it while holding its own lock.
            watcher::unwatch(self.key());
        }
        let pending = {
            let mut armed_at = self.armed_at.lock();
            fd.drain();
            self.wake.fetch_or(FD_ARMED, SeqCst);
            super::sync::store_load_order();
            let now = self.snapshot();
            let pending = now != *armed_at;
            *armed_at = now;
            pending
        };
        if S::POLLED {
            // FD_ARMED is set first: the watcher drops entries whose bit is clear.
            self.watch();
        }
        if pending {
            Err(TryWaitError::Pending)
        } else {
            Ok(())
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            sets: self.sets.load(SeqCst),
            value: self.read(),
            errors: self.read_err(),
        }
    }

    /// For an fd armed by `trywait`: signals it if the value, error count or sets differ from
    /// what `trywait` saw. True while it stays armed and unsignalled.
    pub fn signal_if_changed(&self) -> bool {
        if self.wake.load(SeqCst) & FD_ARMED == 0 {
            // A mutation through this counter signalled the fd already.
            return false;
        }
        if self.snapshot() == *self.armed_at.lock() {
            return true;
        }
        if self.wake.fetch_and(!FD_ARMED, SeqCst) & FD_ARMED != 0
            && let Some(fd) = &self.fd
        {
            fd.signal();
        }
        false
    }

    /// True while the (model) eventfd has an unread signal: what `poll()` would report.
    #[cfg(loom)]
    pub fn fd_readable(&self) -> bool {
        self.fd.as_ref().is_some_and(EventFd::is_readable)
    }

    /// True while an fd armed by [`Counter::trywait`] has not been signalled yet.
    pub fn fd_armed(&self) -> bool {
        self.wake.load(SeqCst) & FD_ARMED != 0
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    /// Hands the counter to the watcher (a polled store, armed).
    fn watch(&self) {
        debug_assert!(
            self.me.strong_count() > 0,
            "polled counter not made by with_store"
        );
        let me: Weak<dyn Watched> = self.me.clone();
        watcher::watch_shared(self.key(), me);
    }

    /// Takes this counter off the watcher, waiting for a poll in progress to finish, so that
    /// its store can be torn down. Returns whether it was armed, to pass to
    /// [`Counter::rewatch`] if the teardown fails and the counter lives on.
    pub fn unwatch(&self) -> bool {
        S::POLLED && watcher::unwatch(self.key())
    }

    /// Undoes [`Counter::unwatch`].
    pub fn rewatch(&self, armed: bool) {
        if armed {
            self.watch();
        }
    }

    /// True if a mutation would currently make a syscall (test and diagnostics aid).
    pub fn has_waiters(&self) -> bool {
        self.wake.load(SeqCst) & !TRIGGERS != 0
    }
}

impl<S: Store> Drop for Counter<S> {
    fn drop(&mut self) {
        if S::POLLED && self.fd.is_some() {
            // The entry of an armed counter: the watcher no longer reads it (its last `Arc`
            // is gone), so it only needs forgetting.
            watcher::unwatch(self.key());
        }
    }
}

impl<S: Store> Watched for Counter<S> {
    fn poll(&self) -> bool {
        self.signal_if_changed()
    }
    fn wake(&self) -> Wake<'_> {
        if S::POLLED {
            Wake::After(self.tuning.poll_max)
        } else {
            Wake::Notified
        }
    }
}
