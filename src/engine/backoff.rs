//! Spin, then yield: the one place that decides how a waiting thread burns time.

use super::sync::{spin_loop, yield_now};
use std::time::Duration;

/// Exponential back-off for a thread that polls a condition.
///
/// Each [`Backoff::snooze`] first spins for 1, 2, 4, … iterations of `spin_loop` (cheap and
/// fastest to notice a change on another core), and once the spin budget is spent calls
/// `sched_yield`, so that on an oversubscribed machine the thread that will change the counter
/// gets the core.
#[derive(Debug)]
pub struct Backoff {
    step: u32,
    spin_limit: u32,
}

/// 2^6 = 64 spins at the last spinning step: about 1 µs of spinning in total on current x86.
pub const DEFAULT_SPIN_LIMIT: u32 = 6;

impl Default for Backoff {
    fn default() -> Self {
        Self::new(DEFAULT_SPIN_LIMIT)
    }
}

impl Backoff {
    pub fn new(spin_limit: u32) -> Self {
        Backoff {
            step: 0,
            spin_limit: spin_limit.min(16),
        }
    }

    /// Waits a little, longer on each call.
    pub fn snooze(&mut self) {
        if self.step <= self.spin_limit {
            for _ in 0..(1u32 << self.step) {
                spin_loop();
            }
            self.step += 1;
        } else {
            yield_now();
        }
    }

    /// True once the spinning phase is over: a blocking waiter should go to sleep now.
    pub fn is_spun_out(&self) -> bool {
        self.step > self.spin_limit
    }
}

/// The schedule of a thread polling a store that nobody will notify it about: a few yields,
/// then sleeps doubling from `first` up to `max`. `max` bounds how late a change is noticed.
#[derive(Debug)]
pub struct PollNap {
    yields_left: u32,
    next: Duration,
    max: Duration,
}

/// Yields a polling waiter makes before its first sleep: on an idle core each takes well under
/// a microsecond, so these cover changes that arrive a few microseconds after the spin phase.
pub const POLL_YIELDS: u32 = 32;

impl PollNap {
    pub fn new(first: Duration, max: Duration) -> Self {
        PollNap {
            yields_left: POLL_YIELDS,
            next: first.min(max),
            max,
        }
    }

    /// True (and one yield used up) while the yield phase lasts.
    pub fn should_yield(&mut self) -> bool {
        if self.yields_left == 0 {
            return false;
        }
        self.yields_left -= 1;
        true
    }

    /// How long to sleep before the next poll.
    pub fn next_sleep(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }
}
