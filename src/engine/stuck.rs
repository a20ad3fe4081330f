//! A room's leader (and the fd watcher) over a core whose fd stays readable while nothing
//! completes.
//!
//! The leader sleeps in `poll()` on the core's fds (see [`Room`](super::Room)); a fd that is
//! readable returns at once, the leader drives the core's progress, arms it (`fi_trywait`
//! answers "nothing pending") and polls again. A core that leaves its fd readable after its
//! progress ran (a level-triggered fd whose cause its progress does not clear: nested wait sets,
//! data its progress leaves in a socket) turns that loop into a spin that takes a whole core
//! while no waiter is any closer to its threshold: measured with `FI_RSCNTR_TEST_STUCK_FD`
//! over tcp, room_stress used 1.4 s of CPU where it otherwise used 0.2 s (and 0.2 s with this).
//!
//! [`Stuck`] tells that loop apart from traffic: a round is *idle* when the sleep before it
//! returned at once and the pull it made moved nothing anyone waits for: not the leader's own
//! counter, and no counter with a waiter, an armed fd or triggered work ([`note_woken`],
//! counted per thread, is called wherever a mutation finds someone to wake). After
//! [`IDLE_ROUNDS`] idle rounds in a row, the leader looks at the core's fds without sleeping
//! before each sleep: if one is still readable it naps instead, woken only by its room's kick
//! (a member joining, a mutation of its counter) or the nap's end: [`FIRST_NAP`], doubling up
//! to [`MAX_NAP`] while the rounds stay idle, one pull of the members after each. A pull that
//! wakes someone, or fds no longer readable, ends it. So a stuck fd costs a waiter at most
//! [`MAX_NAP`] of latency and no spinning core; traffic never naps (each of its rounds wakes
//! the waiter it was for).
//!
//! Not part of the wake protocol (nothing is lost while napping: the nap ends with a pull of
//! every member), so it is off under loom.

use super::EventFd;
use super::eventfd::sleep_until_any_readable;
use std::cell::Cell;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Idle rounds in a row before the leader naps.
pub const IDLE_ROUNDS: u32 = 16;
/// A sleep shorter than this returned at once (a wake by another thread takes longer: the
/// kernel's wake alone is tens of µs on this project's machine).
pub const AT_ONCE: Duration = Duration::from_micros(10);
/// The first nap.
pub const FIRST_NAP: Duration = Duration::from_micros(50);
/// The longest nap: 4 ms, not 1, because a thread woken from a nap counts as running for the
/// ~50 µs its wake takes on this project's machine, and at 1 ms `bound_wait` (under
/// `FI_RSCNTR_TEST_STUCK_FD`) found an idle waiter awake too often.
pub const MAX_NAP: Duration = Duration::from_millis(4);

thread_local! {
    static WOKEN: Cell<u64> = const { Cell::new(0) };
    static WOKEN_OTHERS: Cell<u64> = const { Cell::new(0) };
}

/// A mutation on this thread found someone to wake (see the module doc).
#[inline]
pub fn note_woken() {
    WOKEN.with(|w| w.set(w.get().wrapping_add(1)));
}

/// How many times this thread's mutations woke someone (compared before and after a pull).
#[inline]
pub fn woken_here() -> u64 {
    WOKEN.with(Cell::get)
}

/// A mutation on this thread woke another thread: a listener (a follower, a waiter without a
/// blocker) or a counter's fd (a thread in `poll()`), not only a leader's own wait.
#[inline]
pub fn note_woken_other() {
    WOKEN_OTHERS.with(|w| w.set(w.get().wrapping_add(1)));
}

/// How many times this thread's mutations woke another thread (see [`note_woken_other`]):
/// the doorbell's leader yields to a waiter its pull woke (`layer/doorbell/bell.rs`).
#[inline]
pub fn woken_others_here() -> u64 {
    WOKEN_OTHERS.with(Cell::get)
}

/// A leader's record of its rounds (one per leading, on its stack).
#[derive(Default)]
pub struct Stuck {
    idle: u32,
    at_once: bool,
    nap: Duration,
}

impl Stuck {
    /// After a sleep on the core's fds that lasted `slept`: `readable` when it ended with a
    /// core fd readable (or, unable to tell, ended early).
    pub fn slept(&mut self, slept: Duration, readable: bool) {
        self.at_once = readable && slept < AT_ONCE;
        if !self.at_once {
            self.reset();
        }
    }

    /// After the pull that followed: `woke` when it woke someone.
    pub fn pulled(&mut self, woke: bool) {
        if woke || !self.at_once {
            self.reset();
        } else {
            self.idle = self.idle.saturating_add(1);
        }
        self.at_once = false;
    }

    /// Before a sleep on `fds`: true when the rounds have been idle long enough and one of
    /// `fds` is readable at once (a look without sleeping); the caller then naps
    /// ([`Stuck::nap_on`]) instead. When none is, the rounds start over: sleep as usual.
    pub fn still_stuck(&mut self, fds: impl IntoIterator<Item = RawFd>) -> bool {
        if !self.idle() {
            return false;
        }
        let mut readable = Vec::new();
        sleep_until_any_readable(fds, -1, Some(Duration::ZERO), &mut readable);
        if readable.is_empty() {
            self.reset();
        }
        !readable.is_empty()
    }

    /// Naps until `kick` is readable (a member joined, a counter changed), the next nap's
    /// length has passed, or `until`.
    pub fn nap_on(&mut self, kick: &EventFd, until: Option<Instant>) {
        let nap = self.nap();
        let left = until.map_or(nap, |u| {
            nap.min(u.saturating_duration_since(Instant::now()))
        });
        sleep_until_any_readable([], kick.as_raw_fd(), Some(left), &mut Vec::new());
    }

    fn idle(&self) -> bool {
        !cfg!(loom) && self.idle >= IDLE_ROUNDS
    }

    /// How long to nap (each nap in a row twice the last, up to [`MAX_NAP`]); the round after
    /// it counts as idle unless its pull wakes someone.
    fn nap(&mut self) -> Duration {
        self.nap = if self.nap.is_zero() {
            FIRST_NAP
        } else {
            (self.nap * 2).min(MAX_NAP)
        };
        self.at_once = true;
        self.nap
    }

    fn reset(&mut self) {
        self.idle = 0;
        self.nap = Duration::ZERO;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn idle_round(s: &mut Stuck) {
        s.slept(Duration::from_micros(1), true);
        s.pulled(false);
    }

    #[test]
    fn naps_only_after_idle_rounds_and_doubles_up_to_the_cap() {
        let mut s = Stuck::default();
        for _ in 0..IDLE_ROUNDS - 1 {
            idle_round(&mut s);
            assert!(!s.idle());
        }
        idle_round(&mut s);
        assert!(s.idle());
        assert_eq!(s.nap(), FIRST_NAP);
        let mut last = FIRST_NAP;
        for _ in 0..10 {
            // The pull after a nap wakes nobody: still idle, the next nap twice as long.
            s.pulled(false);
            assert!(s.idle());
            let n = s.nap();
            assert_eq!(n, (last * 2).min(MAX_NAP));
            last = n;
        }
        assert_eq!(last, MAX_NAP);
        let quiet = EventFd::new().unwrap();
        assert!(!s.still_stuck([quiet.as_raw_fd()]), "no fd readable");
        assert!(!s.idle(), "the rounds start over");
    }

    #[test]
    fn a_round_that_wakes_someone_or_a_real_sleep_ends_it() {
        let mut s = Stuck::default();
        for _ in 0..IDLE_ROUNDS {
            idle_round(&mut s);
        }
        assert!(s.idle());
        s.nap();
        s.pulled(true);
        assert!(!s.idle(), "traffic: the pull after the nap woke its waiter");
        for _ in 0..IDLE_ROUNDS {
            idle_round(&mut s);
        }
        s.slept(Duration::from_micros(1), true);
        s.pulled(true);
        assert!(!s.idle(), "traffic: the pull woke its waiter");
        for _ in 0..IDLE_ROUNDS {
            idle_round(&mut s);
        }
        s.slept(Duration::from_millis(3), true);
        s.pulled(false);
        assert!(!s.idle(), "the fd let the leader sleep");
        for _ in 0..IDLE_ROUNDS {
            idle_round(&mut s);
        }
        s.slept(Duration::from_micros(1), false);
        s.pulled(false);
        assert!(!s.idle(), "woken by the kick, not the fd");
    }

    #[test]
    fn still_stuck_looks_at_the_fds_only_once_idle() {
        let readable = EventFd::new().unwrap();
        readable.signal();
        let fds = [readable.as_raw_fd()];
        let mut s = Stuck::default();
        assert!(!s.still_stuck(fds), "not idle yet");
        for _ in 0..IDLE_ROUNDS {
            idle_round(&mut s);
        }
        assert!(s.still_stuck(fds));
        let kick = EventFd::new().unwrap();
        let t0 = Instant::now();
        s.nap_on(&kick, None);
        assert!(t0.elapsed() >= FIRST_NAP, "napped");
        kick.signal();
        let t0 = Instant::now();
        s.nap_on(&kick, Some(Instant::now() + Duration::from_secs(5)));
        assert!(t0.elapsed() < Duration::from_secs(5), "the kick ends a nap");
    }

    #[test]
    fn counts_wakes_per_thread() {
        let before = woken_here();
        note_woken();
        assert_eq!(woken_here(), before + 1);
        std::thread::spawn(|| assert_eq!(woken_here(), 0))
            .join()
            .unwrap();
    }
}
