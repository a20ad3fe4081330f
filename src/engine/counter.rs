//! The software counter: two atomics, plus the machinery to wake whoever waits on them.
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

use super::{Backoff, EventFd, Timeout};
use event_listener::{Event, Listener};
use parking_lot::Mutex;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::Instant;

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

/// Keeps the hot value on its own cache line, away from the waiter bookkeeping.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// What `trywait` compares against to tell whether a change is pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Snapshot {
    value: u64,
    errors: u64,
    /// Bumped by set/seterr, so a set back to an earlier value still counts as a change.
    sets: u64,
}

#[derive(Debug)]
pub struct Counter {
    value: Padded<AtomicU64>,
    errors: AtomicU64,
    sets: AtomicU64,
    wake: AtomicU32,
    strategy: WaitStrategy,
    spin_limit: u32,
    event: Event,
    fd: Option<EventFd>,
    armed_at: Mutex<Snapshot>,
}

impl Counter {
    /// A counter at zero. Creating an FD counter fails only when the eventfd cannot be made.
    pub fn new(strategy: WaitStrategy) -> io::Result<Self> {
        Self::with_spin_limit(strategy, super::backoff::DEFAULT_SPIN_LIMIT)
    }

    pub fn with_spin_limit(strategy: WaitStrategy, spin_limit: u32) -> io::Result<Self> {
        let fd = match strategy {
            WaitStrategy::Fd => Some(EventFd::new()?),
            _ => None,
        };
        Ok(Counter {
            value: Padded(AtomicU64::new(0)),
            errors: AtomicU64::new(0),
            sets: AtomicU64::new(0),
            wake: AtomicU32::new(0),
            strategy,
            spin_limit,
            event: Event::new(),
            fd,
            armed_at: Mutex::new(Snapshot::default()),
        })
    }

    pub fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    #[inline]
    pub fn read(&self) -> u64 {
        self.value.0.load(SeqCst)
    }

    #[inline]
    pub fn read_err(&self) -> u64 {
        self.errors.load(SeqCst)
    }

    /// Adds `v`; values wrap modulo 2^64 (the counter's `max_cntr_value` is `u64::MAX`).
    #[inline]
    pub fn add(&self, v: u64) {
        self.value.0.fetch_add(v, SeqCst);
        self.wake_waiters();
    }

    #[inline]
    pub fn add_err(&self, v: u64) {
        self.errors.fetch_add(v, SeqCst);
        self.wake_waiters();
    }

    pub fn set(&self, v: u64) {
        self.sets.fetch_add(1, SeqCst);
        self.value.0.swap(v, SeqCst);
        self.wake_waiters();
    }

    pub fn set_err(&self, v: u64) {
        self.sets.fetch_add(1, SeqCst);
        self.errors.swap(v, SeqCst);
        self.wake_waiters();
    }

    #[inline]
    fn wake_waiters(&self) {
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
    pub fn wait(&self, threshold: u64, timeout: Timeout) -> Result<(), WaitError> {
        if self.strategy == WaitStrategy::None {
            return Err(WaitError::NotWaitable);
        }
        let errors_at_start = self.read_err();
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
        let mut backoff = Backoff::new(self.spin_limit);
        loop {
            let must_sleep = self.strategy != WaitStrategy::Yield && backoff.is_spun_out();
            if must_sleep {
                if let Some(done) = self.sleep(&check, deadline) {
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
    pub fn trywait(&self) -> Result<(), TryWaitError> {
        let fd = self.fd.as_ref().ok_or(TryWaitError::NoFd)?;
        let mut armed_at = self.armed_at.lock();
        fd.drain();
        self.wake.fetch_or(FD_ARMED, SeqCst);
        let now = Snapshot {
            sets: self.sets.load(SeqCst),
            value: self.read(),
            errors: self.read_err(),
        };
        if now == *armed_at {
            Ok(())
        } else {
            *armed_at = now;
            Err(TryWaitError::Pending)
        }
    }

    /// True while an fd armed by [`Counter::trywait`] has not been signalled yet.
    pub fn fd_armed(&self) -> bool {
        self.wake.load(SeqCst) & FD_ARMED != 0
    }

    /// True if a mutation would currently make a syscall (test and diagnostics aid).
    pub fn has_waiters(&self) -> bool {
        self.wake.load(SeqCst) != 0
    }
}
