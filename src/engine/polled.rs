//! Waiting on a counter whose changes only happen when someone drives them: a counter fed by a
//! core provider with manual progress. The waiting thread calls `poll` (which drives the core's
//! progress) between checks, with a bounded back-off, so it notices traffic within
//! [`MAX_POLL_INTERVAL`] even after a long idle period, and within microseconds while busy.

use super::{Backoff, Counter, Store, Timeout, WaitError, WaitStrategy};
use std::time::{Duration, Instant};

/// The longest a polling waiter sleeps between two polls: the worst-case added wake latency.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_micros(200);
/// How long a polling waiter yields between polls before it starts sleeping.
const YIELD_PHASE: Duration = Duration::from_millis(2);

/// Same contract as [`Counter::wait`], driving `poll` between checks.
pub fn wait_polled<S: Store>(
    counter: &Counter<S>,
    threshold: u64,
    timeout: Timeout,
    poll: &mut dyn FnMut(),
) -> Result<(), WaitError> {
    if counter.strategy() == WaitStrategy::None {
        return Err(WaitError::NotWaitable);
    }
    let errors_at_start = counter.read_err();
    let check = |poll: &mut dyn FnMut()| -> Option<Result<(), WaitError>> {
        poll();
        if counter.read() >= threshold {
            Some(Ok(()))
        } else if counter.read_err() != errors_at_start {
            Some(Err(WaitError::ErrorChanged))
        } else {
            None
        }
    };
    if let Some(done) = check(poll) {
        return done;
    }
    if timeout == Timeout::Poll {
        return Err(WaitError::TimedOut);
    }
    let start = Instant::now();
    let deadline = timeout.deadline();
    let mut backoff = Backoff::default();
    let mut sleep = Duration::from_micros(10);
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Err(WaitError::TimedOut);
        }
        if !backoff.is_spun_out() || now - start < YIELD_PHASE {
            backoff.snooze();
        } else {
            let nap = deadline.map_or(sleep, |d| sleep.min(d - now));
            std::thread::sleep(nap);
            sleep = (sleep * 2).min(MAX_POLL_INTERVAL);
        }
        if let Some(done) = check(poll) {
            return done;
        }
    }
}
