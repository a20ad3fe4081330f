//! The counter: a [`Store`] (two values), plus the machinery to wake whoever waits on them.
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
//! # Polled stores (hardware counters)
//! A device moves a [`Store::POLLED`] store without telling anyone, so the protocol above covers
//! only the mutations made through this `Counter` (they still wake waiters at once). For the
//! rest, waiters poll:
//! - `wait` spins, then yields a few times, then sleeps on the same listener with a deadline
//!   that doubles from [`POLL_FIRST`] up to the counter's `poll_max`, re-reading the store after
//!   each sleep. A change made by the device is seen at most `poll_max` (plus the kernel's timer
//!   slack, 50 µs by default) after it became visible.
//! - an fd armed by `trywait` is handed to the shared [`watcher`](super::watcher) thread, which
//!   polls every armed polled counter on the same schedule and signals the eventfd when the
//!   value or error count differs from what `trywait` saw. Unarmed counters are never polled.
//!
//! Reads of a polled store may lag behind a mutation ("may not be immediately visible" in
//! rdma-core's words); `wait` stays correct because it re-reads until the deadline, and the
//! watcher compares against the values `trywait` actually read.

use super::backoff::{DEFAULT_SPIN_LIMIT, PollNap};
use super::store::{Atomics, Store, StoreError};
use super::sync::{AtomicU32, AtomicU64, Mutex};
use super::watcher::{self, Snap, Watched};
use super::{Backoff, EventFd, Timeout};
use event_listener::{Event, Listener};
use std::io;
use std::os::fd::RawFd;
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
    /// FI_WAIT_NONE: the counter cannot be waited on.
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
    /// The counter's strategy is `None`.
    NotWaitable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryWaitError {
    /// A change happened since the previous `trywait`: read the counter before blocking.
    Pending,
    /// The counter has no fd to block on.
    NoFd,
}

const FD_ARMED: u32 = 1;
const ONE_WAITER: u32 = 2;

/// What `trywait` compares against to tell whether a change is pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Snapshot {
    value: u64,
    errors: u64,
    /// Bumped by set/seterr, so a set back to an earlier value still counts as a change.
    sets: u64,
}

/// A counter over a [`Store`]: software atomics by default, or a device's counter.
#[derive(Debug)]
pub struct Counter<S: Store = Atomics> {
    store: S,
    sets: AtomicU64,
    wake: AtomicU32,
    strategy: WaitStrategy,
    tuning: Tuning,
    event: Event,
    fd: Option<EventFd>,
    armed_at: Mutex<Snapshot>,
    /// This counter's own `Arc`, so `trywait` can hand a polled counter to the watcher.
    /// Empty for counters not built by [`Counter::with_store`].
    me: Weak<Self>,
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
        Self::build(Atomics::default(), strategy, tuning, Weak::new())
    }
}

impl<S: Store> Counter<S> {
    /// A counter over `store`, shared. Counters over a [`Store::POLLED`] store must be made
    /// here: an armed fd is polled by the watcher thread, which holds a `Weak` to the counter.
    pub fn with_store(store: S, strategy: WaitStrategy, tuning: Tuning) -> io::Result<Arc<Self>> {
        let fd = Self::make_fd(strategy)?;
        if S::POLLED && strategy == WaitStrategy::Fd {
            watcher::ensure_running()?;
        }
        Ok(Arc::new_cyclic(|me| {
            Self::assemble(store, strategy, tuning, fd, me.clone())
        }))
    }

    fn build(store: S, strategy: WaitStrategy, tuning: Tuning, me: Weak<Self>) -> io::Result<Self> {
        let fd = Self::make_fd(strategy)?;
        Ok(Self::assemble(store, strategy, tuning, fd, me))
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
            wake: AtomicU32::new(0),
            strategy,
            tuning: Tuning {
                spin_limit: tuning.spin_limit.min(16),
                poll_max: tuning.poll_max.max(POLL_FIRST),
            },
            event: Event::new(),
            fd,
            armed_at: Mutex::new(Snapshot::default()),
            me,
        }
    }

    pub fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    pub fn store(&self) -> &S {
        &self.store
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
        // One eventfd write per arming: later mutations find the bit clear and skip the syscall.
        if w & FD_ARMED != 0
            && self.wake.fetch_and(!FD_ARMED, SeqCst) & FD_ARMED != 0
            && let Some(fd) = &self.fd
        {
            fd.signal();
        }
        if w >= ONE_WAITER {
            self.event.notify(usize::MAX);
        }
    }

    /// Waits until the value reaches `threshold` (`Ok`), the error count changes
    /// (`ErrorChanged`), or the timeout passes (`TimedOut`). The threshold is checked first.
    #[inline]
    pub fn wait(&self, threshold: u64, timeout: Timeout) -> Result<(), WaitError> {
        self.wait_inner(threshold, timeout, || {})
    }

    /// [`Counter::wait`], calling `started` right after the wait has read the error count it
    /// compares against: an error-count change after `started` must end the wait (with
    /// `ErrorChanged`, or `Ok` if the threshold is met too). The loom model
    /// (`tests/loom_wait.rs`) orders its mutations after this point.
    #[cfg(loom)]
    pub fn wait_observed(
        &self,
        threshold: u64,
        timeout: Timeout,
        started: impl FnOnce(),
    ) -> Result<(), WaitError> {
        self.wait_inner(threshold, timeout, started)
    }

    #[inline]
    fn wait_inner(
        &self,
        threshold: u64,
        timeout: Timeout,
        started: impl FnOnce(),
    ) -> Result<(), WaitError> {
        if self.strategy == WaitStrategy::None {
            return Err(WaitError::NotWaitable);
        }
        let errors_at_start = self.read_err();
        started();
        let check = || -> Option<Result<(), WaitError>> {
            if self.read() >= threshold {
                Some(Ok(()))
            } else if self.read_err() != errors_at_start {
                Some(Err(WaitError::ErrorChanged))
            } else {
                None
            }
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
        loop {
            let must_sleep = self.strategy != WaitStrategy::Yield && backoff.is_spun_out();
            if must_sleep && S::POLLED && nap.should_yield() {
                // Between spinning and sleeping: a device-side change is often only a few
                // microseconds away, and a futex sleep costs at least the timer slack.
                super::sync::yield_now();
                if let Some(done) = check() {
                    return done;
                }
            } else if must_sleep {
                // A polled store may change with nobody to notify us: sleep only until the
                // next poll. A software store is always notified: sleep until the deadline.
                let until = if S::POLLED {
                    let poll_at = Instant::now() + nap.next_sleep();
                    Some(deadline.map_or(poll_at, |d| d.min(poll_at)))
                } else {
                    deadline
                };
                if let Some(done) = self.sleep(&check, until) {
                    return done;
                }
            } else {
                backoff.snooze();
                if let Some(done) = check() {
                    return done;
                }
            }
            if expired() {
                return Err(WaitError::TimedOut);
            }
        }
    }

    /// One registered sleep: returns the result if the condition was met, `None` on a wakeup
    /// that leaves it unmet (the caller re-checks the deadline and sleeps again).
    fn sleep(
        &self,
        check: &dyn Fn() -> Option<Result<(), WaitError>>,
        deadline: Option<Instant>,
    ) -> Option<Result<(), WaitError>> {
        self.wake.fetch_add(ONE_WAITER, SeqCst);
        super::sync::store_load_order();
        let listener = self.event.listen();
        let result = match check() {
            Some(done) => Some(done),
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

    /// The eventfd of an FD counter.
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
        let mut armed_at = self.armed_at.lock();
        if S::POLLED {
            // The watcher must not poll against the previous snapshot once the fd is drained
            // and re-armed (it would signal a change this call is about to report anyway).
            watcher::unwatch(self.key());
        }
        fd.drain();
        self.wake.fetch_or(FD_ARMED, SeqCst);
        super::sync::store_load_order();
        let now = Snapshot {
            sets: self.sets.load(SeqCst),
            value: self.read(),
            errors: self.read_err(),
        };
        if S::POLLED {
            // Set FD_ARMED first, then register: the watcher drops entries whose bit is clear.
            debug_assert!(
                self.me.strong_count() > 0,
                "polled counter not built by with_store"
            );
            let me: Weak<dyn Watched> = self.me.clone();
            watcher::watch(
                self.key(),
                me,
                Snap(now.value, now.errors),
                self.tuning.poll_max,
            );
        }
        if now == *armed_at {
            Ok(())
        } else {
            *armed_at = now;
            Err(TryWaitError::Pending)
        }
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

    /// Takes this counter off the watcher, waiting for a poll in progress to finish, so that
    /// its store can be torn down. Returns what to pass to [`Counter::rewatch`] if the
    /// teardown fails and the counter lives on.
    pub fn unwatch(&self) -> Option<Snap> {
        if S::POLLED {
            watcher::unwatch(self.key())
        } else {
            None
        }
    }

    /// Undoes [`Counter::unwatch`].
    pub fn rewatch(&self, snap: Option<Snap>) {
        if let Some(snap) = snap {
            let me: Weak<dyn Watched> = self.me.clone();
            watcher::watch(self.key(), me, snap, self.tuning.poll_max);
        }
    }

    /// True if a mutation would currently make a syscall (test and diagnostics aid).
    pub fn has_waiters(&self) -> bool {
        self.wake.load(SeqCst) != 0
    }
}

impl<S: Store> Watched for Counter<S> {
    fn poll(&self, armed_at: Snap) -> bool {
        if self.wake.load(SeqCst) & FD_ARMED == 0 {
            // A mutation through this counter signalled the fd already.
            return false;
        }
        if Snap(self.read(), self.read_err()) == armed_at {
            return true;
        }
        if self.wake.fetch_and(!FD_ARMED, SeqCst) & FD_ARMED != 0
            && let Some(fd) = &self.fd
        {
            fd.signal();
        }
        false
    }
}
