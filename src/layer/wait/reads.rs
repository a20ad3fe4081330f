//! How often a counter read drives the core's progress (`crate::engine::duty`): the feed of a
//! counter over a core whose counter read runs the progress of every endpoint bound to it
//! (util-based cores, which count through FI_PEER straight into the rscntr counter: shm,
//! `…;ofi_rxm`, `…;ofi_rxd`) keeps one, and `fi_cntr_read`/`fi_cntr_readerr` drive the core
//! only when it says so. Waits, the watcher and `fi_trywait` always drive it.

use crate::engine::duty::{DutyCycle, Read, Turn};

pub struct ReadDuty {
    duty: DutyCycle,
}

impl ReadDuty {
    pub fn new() -> Self {
        // The clock's epoch is taken now, not at the first read.
        clock::now_ns();
        ReadDuty {
            duty: DutyCycle::new(),
        }
    }

    /// Runs `drive` (the core's progress) if this read is due to; true when it ran.
    pub fn read(&self, drive: impl FnOnce()) -> bool {
        let turn = match self.duty.read(|| self.now()) {
            Read::Drive => {
                drive();
                return true;
            }
            Read::Skip => return false,
            Read::Timed(turn) => turn,
        };
        // Ends the turn even if `drive` unwinds (the ffi boundary catches it): a turn never
        // ended would keep every later read from driving.
        struct Ending<'a>(&'a ReadDuty, Option<Turn>);
        impl Drop for Ending<'_> {
            fn drop(&mut self) {
                if let Some(turn) = self.1.take() {
                    self.0.duty.end(turn, self.0.now());
                }
            }
        }
        let _ending = Ending(self, Some(turn));
        drive();
        true
    }

    fn now(&self) -> u64 {
        clock::now_ns()
    }
}

/// The duty cycle's clock: nanoseconds since the first call, from the CPU's time-stamp counter
/// once it is known how fast it counts, else from `Instant`. A skipped read is a clock read and
/// a few loads, so the clock is most of its cost: `clock_gettime` took 23.5 ns here and
/// `rdtsc` 9.5 on the project's VM (10⁷ calls each, back to back), and the mean read of a
/// counter whose reads are on a duty cycle is about three skipped reads (the progress takes
/// two thirds of a spinning reader's time).
///
/// The counter is used only where the kernel keeps its own clock on it (the clocksource is
/// `tsc`: it found the counters of all CPUs in step and running at a constant rate); its rate
/// is measured against `Instant` over the first [`CALIBRATE`] (reads until then use `Instant`,
/// on the same epoch).
mod clock {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    /// How long the counter is measured against `Instant` before it is used.
    const CALIBRATE: Duration = Duration::from_millis(2);

    /// The most ticks between the two counter reads around the `Instant` read that measures
    /// the rate (tens of µs at any rate the counter runs at).
    const PAIRED: u64 = 100_000;

    struct Epoch {
        at: Instant,
        /// The counter at `at`; None: not used (another clocksource or architecture).
        ticks: Option<u64>,
    }

    static EPOCH: OnceLock<Epoch> = OnceLock::new();
    /// Nanoseconds per tick in 32.32 fixed point; 0 until measured.
    static NS_PER_TICK: AtomicU64 = AtomicU64::new(0);

    pub fn now_ns() -> u64 {
        let epoch = EPOCH.get_or_init(|| Epoch {
            at: Instant::now(),
            ticks: kernel_uses_tsc().then(ticks),
        });
        let Some(t0) = epoch.ticks else {
            return epoch.at.elapsed().as_nanos() as u64;
        };
        let rate = NS_PER_TICK.load(Relaxed);
        if rate != 0 {
            let dt = ticks().wrapping_sub(t0) as u128;
            return ((dt * rate as u128) >> 32) as u64;
        }
        let t = ticks();
        let ns = epoch.at.elapsed();
        // Not from a pair of reads that a preemption came between.
        if ns >= CALIBRATE && ticks().wrapping_sub(t) < PAIRED {
            let dt = t.wrapping_sub(t0).max(1) as u128;
            let rate = ((ns.as_nanos() << 32) / dt).min(u64::MAX as u128) as u64;
            NS_PER_TICK.store(rate.max(1), Relaxed);
        }
        ns.as_nanos() as u64
    }

    fn kernel_uses_tsc() -> bool {
        cfg!(target_arch = "x86_64")
            && std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .is_ok_and(|s| s.trim() == "tsc")
    }

    #[cfg(target_arch = "x86_64")]
    fn ticks() -> u64 {
        // SAFETY: rdtsc reads a register; every x86_64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn ticks() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_clock_counts_nanoseconds() {
        // Against Instant over the same spans, on whichever of its sources the clock is (its
        // rate is measured 2 ms after the first call, which another test may have made). Each
        // of our reads is bracketed by two of Instant's, so a preemption between the two
        // clocks' reads widens the bracket instead of failing the check.
        for span in [Duration::from_micros(500), Duration::from_millis(20)] {
            let (a0, c0, b0) = (Instant::now(), clock::now_ns(), Instant::now());
            std::thread::sleep(span);
            let (a1, c1, b1) = (Instant::now(), clock::now_ns(), Instant::now());
            let ours = c1 - c0;
            let (least, most) = ((a1 - b0).as_nanos() as u64, (b1 - a0).as_nanos() as u64);
            assert!(
                ours + least / 10 >= least && ours <= most + most / 10,
                "{ours} ns against Instant's {least} to {most}"
            );
        }
        let mut last = clock::now_ns();
        for _ in 0..1000 {
            let now = clock::now_ns();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
    }

    #[test]
    fn a_read_after_a_long_gap_drives() {
        let r = ReadDuty::new();
        let mut ran = 0;
        for _ in 0..3 {
            assert!(r.read(|| ran += 1));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(ran, 3);
    }

    #[test]
    fn back_to_back_reads_skip_some_and_still_drive() {
        let r = ReadDuty::new();
        let (mut driven, mut reads) = (0, 0);
        let t0 = Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(20) {
            reads += 1;
            r.read(|| {
                driven += 1;
                let t = Instant::now();
                while t.elapsed() < std::time::Duration::from_micros(20) {}
            });
        }
        assert!(driven > 10, "{driven} of {reads}");
        assert!(driven < reads, "{driven} of {reads}");
    }

    #[test]
    fn a_drive_that_unwinds_ends_its_turn() {
        let r = ReadDuty::new();
        let hit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.read(|| panic!("core"));
        }));
        assert!(hit.is_err());
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(r.read(|| {}), "the turn was ended");
    }
}
