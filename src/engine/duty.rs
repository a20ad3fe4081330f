//! When a counter read drives the core's progress: reads whose cost does not grow with the
//! number of endpoints bound to the counter.
//!
//! Over a util-based core (shm, `…;ofi_rxm`, `…;ofi_rxd`) reading the core counter runs the
//! progress of every endpoint bound to it, so a read of a counter bound to N endpoints costs N
//! endpoint progresses. With a [`DutyCycle`] a read drives that progress only once the time
//! since the last read's progress ended is at least [`PAUSE_NUM`]/[`PAUSE_DEN`] times what that
//! progress took (capped at [`MAX_PAUSE_NS`]), and only one reader at a time; the others return the
//! counter as it is (what the core delivered is in it already: such cores count straight into
//! the rscntr counter). A thread that spins on reads then spends at most about two thirds of its
//! time in the core's progress and every read between costs a clock read, so amortised reads
//! are O(1); reads further apart than half a progress always drive it, so an application that
//! reads now and then sees what a read always saw, and a spinning reader sees each completion
//! within about one and a quarter sweeps of the endpoints instead of one. (A pause as long as
//! the progress made reads a little cheaper and a spinning reader slower: bench/growth.c.)
//!
//! Measured on the project's VM before choosing (bench/growth.c, shm, 256 endpoints): driving
//! the endpoints in groups, one group per read, in turn ("lanes": the same total work spread
//! over reads) made a spinning reader 2 to 5 times slower to see a message than one sweep of
//! all 256 per read, at any group size from 4 to 64, with or without a pause: one sweep is far
//! cheaper per endpoint than the same endpoints driven group by group. So a read that drives
//! progress drives all of it, and the duty cycle bounds how often.
//!
//! While the progress is cheaper than a read on the duty cycle would be on average (under
//! [`MIN_COST_NS`]: one shm endpoint) reads drive it every time as they always did, untimed, one
//! in [`SAMPLE`] timed to notice it growing.
//!
//! No libfabric in here: times are nanoseconds on whatever monotonic clock the caller keeps.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A read drives the core's progress once the time since the last one ended is at least
/// PAUSE_NUM / PAUSE_DEN times what it took.
pub const PAUSE_NUM: u64 = 1;
pub const PAUSE_DEN: u64 = 2;

/// The longest a read holds back the core's progress after the last one (ns): however long
/// that progress took (a reader preempted in it), a spinning reader drives it again within
/// this.
pub const MAX_PAUSE_NS: u64 = 50_000;

/// Below this smoothed cost (ns) a read drives the core as it always did, with no clock read
/// and no pause, but one such read in [`SAMPLE`] is timed, to notice the cost growing. A read
/// on the duty cycle costs about three skipped reads on average (the progress takes two thirds
/// of a spinning reader's time; a skipped read is a clock read and a few loads, 10-15 ns):
/// about 35 ns on the project's VM, what a read of a counter bound to one shm endpoint costs
/// when it drives. At 1 µs, as before, reads of a counter bound to 16 shm endpoints (330 ns of
/// progress) or to one tcp;ofi_rxm endpoint (250 ns) drove at every read, 10 times the read of
/// one shm endpoint (docs/growth.md).
pub const MIN_COST_NS: u64 = 50;
pub const SAMPLE: u32 = 64;

/// What a read does.
pub enum Read {
    /// Drive the core's progress, untimed.
    Drive,
    /// Drive it and time it: hand the turn back to [`DutyCycle::end`].
    Timed(Turn),
    /// Return the counter as it is.
    Skip,
}

/// When reads drive the core's progress (see the module doc). Times are ns on any monotonic
/// clock the caller keeps.
#[derive(Debug, Default)]
pub struct DutyCycle {
    /// A reader is driving progress now.
    busy: AtomicBool,
    /// When the last read's progress ended.
    last_end: AtomicU64,
    /// What a read's progress takes, smoothed.
    cost: AtomicU64,
    /// Reads since the last timed one while the progress is cheap.
    untimed: AtomicU32,
}

/// Proof that this read drives progress; hand it back to [`DutyCycle::end`].
#[must_use]
pub struct Turn {
    start: u64,
}

impl DutyCycle {
    pub fn new() -> Self {
        Self::default()
    }

    /// A read, `clock` giving the time if the read needs it.
    pub fn read(&self, clock: impl FnOnce() -> u64) -> Read {
        if self.cost.load(Ordering::Relaxed) < MIN_COST_NS
            && !self
                .untimed
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(SAMPLE)
        {
            return Read::Drive;
        }
        match self.begin(clock()) {
            Some(turn) => Read::Timed(turn),
            None => Read::Skip,
        }
    }

    /// A read at `now`, timed: Some when it drives progress (then [`end`](Self::end) it), None when
    /// it returns the counter as it is, the progress having run less than its cost ago, or
    /// running in another reader.
    pub fn begin(&self, now: u64) -> Option<Turn> {
        let pause = self.cost.load(Ordering::Relaxed).saturating_mul(PAUSE_NUM) / PAUSE_DEN;
        let pause = pause.min(MAX_PAUSE_NS);
        let last = self.last_end.load(Ordering::Relaxed);
        // (A `now` before `last`: another reader's progress ended after this read began.)
        if now < last.saturating_add(pause) {
            return None;
        }
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Turn { start: now })
    }

    /// The read's progress ended at `now`.
    pub fn end(&self, turn: Turn, now: u64) {
        let took = now.saturating_sub(turn.start);
        let old = self.cost.load(Ordering::Relaxed);
        // Smoothed over about four reads: one slow pass (a preemption) does not hold reads
        // back for long, and the cap bounds it anyway.
        let cost = if old == 0 { took } else { (3 * old + took) / 4 };
        self.cost.store(cost, Ordering::Relaxed);
        self.last_end.store(now, Ordering::Relaxed);
        self.busy.store(false, Ordering::Release);
    }

    /// What a read's progress takes now, smoothed (ns).
    pub fn cost(&self) -> u64 {
        self.cost.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_read_drives() {
        let d = DutyCycle::new();
        assert!(d.begin(0).is_some());
        let d = DutyCycle::new();
        assert!(d.begin(123_456_789).is_some());
    }

    fn pause(cost: u64) -> u64 {
        cost * PAUSE_NUM / PAUSE_DEN
    }

    #[test]
    fn a_read_drives_once_the_pause_is_over() {
        let d = DutyCycle::new();
        let t = d.begin(1_000).unwrap();
        d.end(t, 5_000); // took 4 µs
        assert_eq!(d.cost(), 4_000);
        assert!(d.begin(5_000).is_none());
        assert!(d.begin(5_000 + pause(4_000) - 1).is_none());
        let t = d
            .begin(5_000 + pause(4_000))
            .expect("a pause in proportion to the progress");
        let end = 5_000 + pause(4_000) + 4_000;
        d.end(t, end);
        assert!(d.begin(end + pause(4_000) - 1).is_none());
        assert!(d.begin(end + pause(4_000)).is_some());
    }

    #[test]
    fn cheap_progress_is_driven_untimed_but_sampled() {
        let d = DutyCycle::new();
        let clock_reads = std::cell::Cell::new(0u32);
        let mut now = 0u64;
        let mut tick = || {
            clock_reads.set(clock_reads.get() + 1);
            now += MIN_COST_NS / 2;
            now
        };
        for _ in 0..(4 * SAMPLE) {
            match d.read(&mut tick) {
                Read::Drive => {}
                Read::Timed(t) => {
                    let end = tick();
                    d.end(t, end); // took 100 ns
                }
                Read::Skip => panic!("a cheap progress is never skipped"),
            }
        }
        // one timed read per SAMPLE, two clock reads each
        assert_eq!(clock_reads.get(), 2 * 4);
        assert_eq!(d.cost(), MIN_COST_NS / 2);
    }

    #[test]
    fn a_costly_progress_times_every_read() {
        let d = DutyCycle::new();
        let Read::Timed(t) = d.read(|| 0) else {
            panic!("the first read is timed");
        };
        d.end(t, MIN_COST_NS * 4);
        // every read now reads the clock, and skips within the pause
        let mut clocked = 0;
        for _ in 0..10 {
            let r = d.read(|| {
                clocked += 1;
                MIN_COST_NS * 4 + 1
            });
            assert!(matches!(r, Read::Skip));
        }
        assert_eq!(clocked, 10);
    }

    #[test]
    fn only_one_reader_drives_at_a_time() {
        let d = DutyCycle::new();
        let t = d.begin(10).unwrap();
        assert!(d.begin(10).is_none());
        assert!(d.begin(1_000_000).is_none(), "still driving");
        d.end(t, 20);
        assert!(d.begin(1_000_000).is_some());
    }

    #[test]
    fn a_slow_pass_holds_reads_back_no_longer_than_the_cap() {
        let d = DutyCycle::new();
        let t = d.begin(0).unwrap();
        d.end(t, 10_000_000); // 10 ms: preempted
        assert!(d.begin(10_000_000 + MAX_PAUSE_NS - 1).is_none());
        assert!(d.begin(10_000_000 + MAX_PAUSE_NS).is_some());
    }

    #[test]
    fn the_cost_is_smoothed() {
        let d = DutyCycle::new();
        let mut now = 0;
        for _ in 0..20 {
            let t = d.begin(now).unwrap();
            now += 1_000;
            d.end(t, now);
            now += 10_000_000;
        }
        assert_eq!(d.cost(), 1_000);
        let t = d.begin(now).unwrap();
        d.end(t, now + 41_000); // one slow pass
        assert_eq!(d.cost(), 11_000);
        assert!(d.cost() < 41_000);
    }

    #[test]
    fn reads_spaced_wider_than_the_progress_always_drive() {
        let d = DutyCycle::new();
        let mut now = 0;
        for _ in 0..100 {
            let t = d.begin(now).expect("due");
            d.end(t, now + 500);
            now += 1_000; // the application works 500 ns between reads
        }
    }

    #[test]
    fn a_spinning_reader_drives_in_proportion() {
        // reads back to back: each skipped read costs 20 ns, each driving one 2 µs
        let d = DutyCycle::new();
        let (mut now, mut driving, mut spent) = (0u64, 0u64, 0u64);
        while now < 10_000_000 {
            if let Some(t) = d.begin(now) {
                now += 2_000;
                spent += 2_000;
                driving += 1;
                d.end(t, now);
            } else {
                now += 20;
            }
        }
        let share = spent as f64 / now as f64;
        let expected = PAUSE_DEN as f64 / (PAUSE_DEN + PAUSE_NUM) as f64;
        assert!((share - expected).abs() < 0.05, "{share} vs {expected}");
        assert!(driving > 2_000, "{driving}");
    }
}
