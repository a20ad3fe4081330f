//! How often a counter read drives the core's progress (`crate::engine::duty`): the feed of a
//! counter over a core whose counter read runs the progress of every endpoint bound to it
//! (util-based cores, which count through FI_PEER straight into the rscntr counter: shm,
//! `…;ofi_rxm`, `…;ofi_rxd`) keeps one, and `fi_cntr_read`/`fi_cntr_readerr` drive the core
//! only when it says so. Waits, the watcher and `fi_trywait` always drive it.

use crate::engine::duty::{DutyCycle, Read, Turn};
use std::time::Instant;

pub struct ReadDuty {
    duty: DutyCycle,
    clock: Instant,
}

impl ReadDuty {
    pub fn new() -> Self {
        ReadDuty {
            duty: DutyCycle::new(),
            clock: Instant::now(),
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
        self.clock.elapsed().as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
