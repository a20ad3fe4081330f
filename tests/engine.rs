//! The counter engine on its own: every semantic fi_cntr promises, without libfabric.

mod common;

use common::until;
use rscntr::engine::{
    Blocker, Counter, EventFd, Source, Store, StoreError, Timeout, Token, TryWaitError, Tuning,
    WaitError, WaitStrategy, Wake, sleep_until_readable,
};
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const ALL_WAITABLE: [WaitStrategy; 3] =
    [WaitStrategy::Yield, WaitStrategy::Block, WaitStrategy::Fd];

fn counter(s: WaitStrategy) -> Arc<Counter> {
    Arc::new(Counter::new(s).expect("counter"))
}

fn readable(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    assert!(n >= 0, "poll failed");
    n == 1 && pfd.revents & libc::POLLIN != 0
}

#[test]
fn add_set_and_errors_are_visible_at_once() {
    let c = counter(WaitStrategy::None);
    assert_eq!((c.read(), c.read_err()), (0, 0));
    c.add(5).unwrap();
    c.add(7).unwrap();
    assert_eq!(c.read(), 12);
    c.add_err(3).unwrap();
    assert_eq!(c.read_err(), 3);
    c.set(100).unwrap();
    assert_eq!(c.read(), 100);
    c.set_err(1).unwrap();
    assert_eq!(c.read_err(), 1);
    assert_eq!(c.read(), 100, "error ops leave the value alone");
}

#[test]
fn values_wrap_modulo_2_pow_64() {
    let c = counter(WaitStrategy::None);
    c.set(u64::MAX - 1).unwrap();
    c.add(3).unwrap();
    assert_eq!(c.read(), 1);
}

/// Counts owed to rscntr's own operations come out of the core's next counts, never out of
/// the value: it reads low until they come, never high, never wrapped below zero.
#[test]
fn owed_counts_come_out_of_the_cores_next_counts() {
    let c = counter(WaitStrategy::None);
    c.owe(2);
    assert_eq!((c.read(), c.owed()), (0, 2), "owing moves nothing");
    c.add(5).unwrap();
    assert_eq!(c.read(), 5, "the application's own adds are not taken");
    c.add_counted(1).unwrap();
    assert_eq!((c.read(), c.owed()), (5, 1));
    c.add_counted(3).unwrap();
    assert_eq!(
        (c.read(), c.owed()),
        (7, 0),
        "one of three taken, the rest counted"
    );
    c.add_counted(1).unwrap();
    assert_eq!(c.read(), 8, "nothing owed: counted as it comes");
    c.add_err(1).unwrap();
    assert_eq!(c.read_err(), 1, "errors are never taken");
}

/// A count forgiven is cancelled while still owed, and given back once taken.
#[test]
fn forgiven_counts_are_cancelled_or_given_back() {
    let c = counter(WaitStrategy::None);
    c.owe(1);
    c.forgive(1).unwrap();
    assert_eq!(
        (c.read(), c.owed()),
        (0, 0),
        "cancelled before any count came"
    );
    c.add_counted(1).unwrap();
    assert_eq!(c.read(), 1);
    c.owe(2);
    c.add_counted(1).unwrap();
    assert_eq!((c.read(), c.owed()), (1, 1), "one taken, one still owed");
    c.forgive(2).unwrap();
    assert_eq!((c.read(), c.owed()), (2, 0), "the one taken is given back");
}

/// A trigger waiting for 1 does not run while a count is owed and the core counts only it.
#[test]
fn an_owed_count_runs_no_trigger() {
    use rscntr::engine::{Started, Starter, Tag, Work};
    use std::sync::atomic::AtomicU64;
    struct Ran(Arc<AtomicU64>);
    impl Work for Ran {
        fn start(&mut self) -> Started {
            self.0.fetch_add(1, SeqCst);
            Started::Done
        }
    }
    let c = counter(WaitStrategy::None);
    let ran = Arc::new(AtomicU64::new(0));
    c.owe(1);
    assert!(!c.trigger(
        &Starter::global(),
        1,
        Tag { owner: 1, key: 1 },
        Box::new(Ran(ran.clone()))
    ));
    c.add_counted(1).unwrap();
    assert_eq!(c.read(), 0);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(ran.load(SeqCst), 0, "the work ran on an owed count");
    c.add_counted(1).unwrap();
    let t0 = Instant::now();
    while ran.load(SeqCst) == 0 && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        ran.load(SeqCst),
        1,
        "the work never ran on the application's count"
    );
}

#[test]
fn wait_none_polls() {
    let c = counter(WaitStrategy::None);
    c.add(10).unwrap();
    assert_eq!(c.wait(1, Timeout::Never), Ok(()));
    assert_eq!(c.wait(11, Timeout::Poll), Err(WaitError::TimedOut));
    assert_eq!(
        c.wait(11, Timeout::After(std::time::Duration::from_millis(5))),
        Err(WaitError::TimedOut)
    );
}

#[test]
fn wait_returns_at_once_when_threshold_met() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        c.add(3).unwrap();
        assert_eq!(c.wait(3, Timeout::Never), Ok(()), "{s:?}");
        assert_eq!(c.wait(0, Timeout::Poll), Ok(()), "{s:?}");
        c.set(u64::MAX).unwrap();
        assert_eq!(c.wait(u64::MAX, Timeout::Poll), Ok(()), "{s:?}");
    }
}

#[test]
fn wait_poll_checks_once() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        assert_eq!(c.wait(1, Timeout::Poll), Err(WaitError::TimedOut), "{s:?}");
        assert!(!c.has_waiters(), "a poll registers nothing");
    }
}

#[test]
fn wait_times_out_after_the_timeout() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        let start = Instant::now();
        assert_eq!(
            c.wait(1, Timeout::from_ms(30)),
            Err(WaitError::TimedOut),
            "{s:?}"
        );
        assert!(
            start.elapsed() >= Duration::from_millis(30),
            "{s:?} returned early"
        );
        assert!(!c.has_waiters(), "{s:?} left a waiter registered");
    }
}

#[test]
fn timeout_conventions() {
    assert_eq!(Timeout::from_ms(-1), Timeout::Never);
    assert_eq!(Timeout::from_ms(i32::MIN), Timeout::Never);
    assert_eq!(Timeout::from_ms(0), Timeout::Poll);
    assert_eq!(
        Timeout::from_ms(i32::MAX),
        Timeout::After(Duration::from_millis(i32::MAX as u64))
    );
}

/// A thread waiting for the value 1 (10 s at most), returned once its wait has taken the
/// error count it compares against.
fn waiter_after_start(c: &Arc<Counter>) -> thread::JoinHandle<Result<(), WaitError>> {
    let began = Arc::new(Barrier::new(2));
    let (c2, began2) = (c.clone(), began.clone());
    let t = thread::spawn(move || {
        c2.wait_observed(1, Timeout::from_ms(10_000), || {
            began2.wait();
        })
    });
    began.wait();
    t
}

#[test]
fn error_change_after_the_call_began_gives_eavail() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        c.add_err(1).unwrap(); // before the call: not a reason to return
        assert_eq!(c.wait(1, Timeout::Poll), Err(WaitError::TimedOut), "{s:?}");
        // The error changes once the wait has begun (not after a sleep: on a loaded machine
        // the waiter may start later, and a change before the call rightly does not count).
        let t = waiter_after_start(&c);
        c.add_err(1).unwrap();
        assert_eq!(t.join().unwrap(), Err(WaitError::ErrorChanged), "{s:?}");
        // seterr to the same value is no change; to another value is.
        let t = waiter_after_start(&c);
        c.set_err(0).unwrap();
        assert_eq!(t.join().unwrap(), Err(WaitError::ErrorChanged), "{s:?}");
    }
}

#[test]
fn waiters_are_woken_by_add_and_set() {
    for s in ALL_WAITABLE {
        for by_set in [false, true] {
            let c = counter(s);
            let c2 = c.clone();
            let t = thread::spawn(move || c2.wait(5, Timeout::from_ms(10_000)));
            thread::sleep(Duration::from_millis(20));
            if by_set {
                c.set(5).unwrap()
            } else {
                c.add(5).unwrap()
            }
            assert_eq!(t.join().unwrap(), Ok(()), "{s:?} by_set={by_set}");
        }
    }
}

#[test]
fn many_waiters_with_different_thresholds() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        let handles: Vec<_> = (1..=8u64)
            .map(|k| {
                let c = c.clone();
                thread::spawn(move || (k, c.wait(k * 100, Timeout::from_ms(20_000)), c.read()))
            })
            .collect();
        for _ in 0..800 {
            c.add(1).unwrap();
        }
        for h in handles {
            let (k, r, seen) = h.join().unwrap();
            assert_eq!(r, Ok(()), "{s:?} threshold {}", k * 100);
            assert!(seen >= k * 100);
        }
        assert!(!c.has_waiters(), "{s:?}");
    }
}

#[test]
fn no_waiter_means_no_wake_bookkeeping() {
    let c = counter(WaitStrategy::Block);
    assert!(!c.has_waiters());
    c.add(1).unwrap();
    assert_eq!(c.wait(1, Timeout::Never), Ok(()));
    assert!(!c.has_waiters());
}

#[test]
fn eight_threads_times_a_million_adds_is_exact() {
    const THREADS: u64 = 8;
    const ADDS: u64 = 1_000_000;
    let c = counter(WaitStrategy::Block);
    let barrier = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (c, b) = (c.clone(), barrier.clone());
            thread::spawn(move || {
                b.wait();
                for _ in 0..ADDS {
                    c.add(1).unwrap();
                }
                c.add_err(1).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(c.read(), THREADS * ADDS);
    assert_eq!(c.read_err(), THREADS);
}

#[test]
fn a_waiter_sees_the_final_count_of_concurrent_adders() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        let waiter = {
            let c = c.clone();
            thread::spawn(move || c.wait(4 * 100_000, Timeout::from_ms(60_000)))
        };
        let adders: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                thread::spawn(move || (0..100_000).for_each(|_| c.add(1).unwrap()))
            })
            .collect();
        adders.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(waiter.join().unwrap(), Ok(()), "{s:?}");
    }
}

#[test]
fn only_fd_counters_have_an_fd() {
    assert!(counter(WaitStrategy::Fd).fd().is_some());
    for s in [WaitStrategy::None, WaitStrategy::Yield, WaitStrategy::Block] {
        let c = counter(s);
        assert!(c.fd().is_none());
        assert_eq!(c.trywait(), Err(TryWaitError::NoFd));
    }
}

#[test]
fn trywait_arms_the_fd_for_the_next_change() {
    let c = counter(WaitStrategy::Fd);
    let fd = c.fd().unwrap();
    assert_eq!(c.trywait(), Ok(()), "nothing changed since open");
    assert!(!readable(fd));
    assert!(c.has_waiters(), "armed");
    c.add(1).unwrap();
    assert!(readable(fd), "the change made the fd readable");
    assert!(!c.has_waiters(), "one signal per arming");
    c.add(1).unwrap(); // not armed: no signal needed, fd stays readable until trywait drains it
    assert!(readable(fd));
    assert_eq!(
        c.trywait(),
        Err(TryWaitError::Pending),
        "changed since the last trywait"
    );
    assert!(!readable(fd), "trywait drained the fd");
    assert_eq!(c.trywait(), Ok(()));
    c.add_err(1).unwrap();
    assert!(readable(fd), "error changes signal too");
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    assert_eq!(c.trywait(), Ok(()));
    c.set(2).unwrap(); // same value as before: still a change
    assert!(readable(fd));
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
}

#[test]
fn trywait_then_poll_wakes_on_a_remote_add() {
    let c = counter(WaitStrategy::Fd);
    let fd = c.fd().unwrap();
    while c.trywait().is_err() {}
    let c2 = c.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        c2.add(1).unwrap();
    });
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    t.join().unwrap();
    assert_eq!(n, 1, "poll timed out: the add did not signal the fd");
    assert_eq!(c.read(), 1);
}

#[test]
fn fd_counter_supports_blocking_wait_too() {
    let c = counter(WaitStrategy::Fd);
    let c2 = c.clone();
    let t = thread::spawn(move || c2.wait(2, Timeout::Never));
    thread::sleep(Duration::from_millis(20));
    c.add(2).unwrap();
    assert_eq!(t.join().unwrap(), Ok(()));
}

/// A store that changes behind the counter's back, as a device does: the engine must poll it.
#[derive(Default)]
struct BehindTheBack {
    value: std::sync::atomic::AtomicU64,
    errors: std::sync::atomic::AtomicU64,
}

impl Store for BehindTheBack {
    const POLLED: bool = true;
    fn read(&self) -> u64 {
        self.value.load(SeqCst)
    }
    fn read_err(&self) -> u64 {
        self.errors.load(SeqCst)
    }
    fn add(&self, v: u64) -> Result<(), StoreError> {
        self.value.fetch_add(v, SeqCst);
        Ok(())
    }
    fn add_err(&self, v: u64) -> Result<(), StoreError> {
        self.errors.fetch_add(v, SeqCst);
        Ok(())
    }
    fn set(&self, v: u64) -> Result<(), StoreError> {
        self.value.store(v, SeqCst);
        Ok(())
    }
    fn set_err(&self, v: u64) -> Result<(), StoreError> {
        self.errors.store(v, SeqCst);
        Ok(())
    }
}

fn polled(s: WaitStrategy) -> Arc<Counter<BehindTheBack>> {
    Counter::with_store(BehindTheBack::default(), s, Tuning::default()).expect("counter")
}

#[test]
fn any_polled_store_wakes_waiters_by_polling() {
    for s in ALL_WAITABLE {
        let c = polled(s);
        let c2 = c.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            c2.store().value.fetch_add(4, SeqCst); // nobody is notified
        });
        assert_eq!(c.wait(4, Timeout::from_ms(10_000)), Ok(()), "{s:?}");
        t.join().unwrap();
        assert!(!c.has_waiters(), "{s:?}");
    }
}

#[test]
fn any_polled_store_signals_an_armed_fd_through_the_watcher() {
    let c = polled(WaitStrategy::Fd);
    let fd = c.fd().unwrap();
    assert_eq!(c.trywait(), Ok(()));
    let c2 = c.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        c2.store().errors.fetch_add(1, SeqCst);
    });
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    t.join().unwrap();
    assert_eq!(
        n, 1,
        "the watcher did not signal a change made behind the counter's back"
    );
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    assert!(c.unwatch(), "the second trywait armed it again");
}

/// A core provider as the engine sees it: operations completed "on the wire" (written to a
/// pipe, one byte each) that only pulling takes into the counter, and the pipe's read end as
/// the fd a waiter sleeps on, as rscntr sleeps on tcp's progress fd.
struct PipeCore {
    rd: RawFd,
    wr: RawFd,
    pulls: std::sync::atomic::AtomicU64,
    /// What [`Blocker::spin_before_sleep`] answers (a network core's fd: false).
    spin_first: bool,
}

impl PipeCore {
    fn new() -> Arc<Self> {
        Self::spinning_first(true)
    }
    fn spinning_first(spin_first: bool) -> Arc<Self> {
        let mut fds = [0; 2];
        // SAFETY: fills two fds.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        Arc::new(PipeCore {
            rd: fds[0],
            wr: fds[1],
            pulls: Default::default(),
            spin_first,
        })
    }
    fn complete(&self) {
        // SAFETY: one byte from a live buffer to our own pipe.
        assert_eq!(unsafe { libc::write(self.wr, b"x".as_ptr().cast(), 1) }, 1);
    }
    /// What a pull takes off the wire into `counter`.
    fn take_into(&self, counter: &Counter) {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a live buffer from our own non-blocking pipe.
        let n = unsafe { libc::read(self.rd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            counter.add(n as u64).unwrap();
        }
    }
}

impl Drop for PipeCore {
    fn drop(&mut self) {
        // SAFETY: our own fds.
        unsafe {
            libc::close(self.rd);
            libc::close(self.wr);
        }
    }
}

impl Blocker for PipeCore {
    fn prepare(&self) -> Token {
        Token(0)
    }
    fn arm(&self) -> bool {
        !readable(self.rd)
    }
    fn block(&self, _: Token, kick: &EventFd, until: Option<Instant>) {
        use std::os::fd::AsRawFd;
        let limit = until.map(|u| u.saturating_duration_since(Instant::now()));
        sleep_until_readable(self.rd, kick.as_raw_fd(), limit);
    }
    fn spin_before_sleep(&self) -> bool {
        self.spin_first
    }
}

struct PipeSource<'a> {
    core: &'a PipeCore,
    counter: &'a Counter,
}

impl Source for PipeSource<'_> {
    fn pull(&self) {
        self.core.pulls.fetch_add(1, SeqCst);
        self.core.take_into(self.counter);
    }
    fn wake(&self) -> Wake<'_> {
        Wake::Block(self.core)
    }
}

fn wait_on_pipe(c: &Counter, core: &PipeCore, threshold: u64, ms: i32) -> Result<(), WaitError> {
    c.wait_with(
        threshold,
        Timeout::from_ms(ms),
        &PipeSource { core, counter: c },
    )
}

#[test]
fn a_source_completion_wakes_a_waiter_blocked_on_its_fd() {
    for s in [WaitStrategy::Block, WaitStrategy::Fd] {
        let c = counter(s);
        let core = PipeCore::new();
        let core2 = core.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            core2.complete();
        });
        assert_eq!(wait_on_pipe(&c, &core, 1, 10_000), Ok(()), "{s:?}");
        t.join().unwrap();
        // Asleep on the fd for 50 ms, not pulling in a loop: a handful of pulls (the spin
        // phase, the last check, the wake).
        let pulls = core.pulls.load(SeqCst);
        assert!(pulls < 50, "{s:?}: {pulls} pulls while idle");
        assert!(!c.has_waiters(), "{s:?}");
    }
}

/// A blocker that says a spin is not worth it (a network core's fd) is slept on after the
/// first checks, with no spin of pulls before: the pulls counted while the waiter is asleep are
/// those checks. The same wait on a blocker that spins first pulls once per spin step.
#[test]
fn a_blocker_that_does_not_spin_is_slept_on_at_once() {
    for (spin_first, strategy) in [
        (false, WaitStrategy::Block),
        (false, WaitStrategy::Fd),
        (true, WaitStrategy::Block),
    ] {
        let c = counter(strategy);
        let core = PipeCore::spinning_first(spin_first);
        let core2 = core.clone();
        let t = thread::spawn(move || {
            // Long enough for the waiter to reach its sleep, whatever it does first.
            thread::sleep(Duration::from_millis(200));
            let asleep_after = core2.pulls.load(SeqCst);
            core2.complete();
            asleep_after
        });
        assert_eq!(wait_on_pipe(&c, &core, 1, 10_000), Ok(()));
        let pulls = t.join().unwrap();
        if spin_first {
            assert!(
                pulls > 4,
                "{strategy:?}: a spinning waiter pulled {pulls} times"
            );
        } else {
            // The wait's first check and the leader's first pull.
            assert!(
                pulls <= 3,
                "{strategy:?}: {pulls} pulls before sleeping on a blocker not worth spinning on"
            );
        }
    }
}

#[test]
fn an_add_wakes_a_waiter_blocked_on_the_source_fd() {
    let c = counter(WaitStrategy::Block);
    let core = PipeCore::new();
    let c2 = c.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        c2.add(1).unwrap();
    });
    assert_eq!(wait_on_pipe(&c, &core, 1, 10_000), Ok(()));
    t.join().unwrap();
}

#[test]
fn waits_over_a_source_time_out_and_see_errors() {
    let c = counter(WaitStrategy::Block);
    let core = PipeCore::new();
    let t0 = Instant::now();
    assert_eq!(wait_on_pipe(&c, &core, 1, 30), Err(WaitError::TimedOut));
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!(wait_on_pipe(&c, &core, 1, 0), Err(WaitError::TimedOut));
    let c2 = c.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        c2.add_err(1).unwrap();
    });
    assert_eq!(
        wait_on_pipe(&c, &core, 1, 10_000),
        Err(WaitError::ErrorChanged)
    );
    t.join().unwrap();
}

/// Two waiters on one counter over one source: one sleeps on the fd, the other on the
/// listener; both must see their thresholds, whichever leads.
#[test]
fn two_waiters_over_one_source() {
    let c = counter(WaitStrategy::Block);
    let core = PipeCore::new();
    let (c2, core2) = (c.clone(), core.clone());
    let second = thread::spawn(move || wait_on_pipe(&c2, &core2, 2, 10_000));
    thread::sleep(Duration::from_millis(20));
    let core3 = core.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        core3.complete();
        thread::sleep(Duration::from_millis(20));
        core3.complete();
    });
    assert_eq!(wait_on_pipe(&c, &core, 1, 10_000), Ok(()));
    assert_eq!(second.join().unwrap(), Ok(()));
    t.join().unwrap();
    assert_eq!(c.read(), 2);
}

/// A member of a room whose core completes from its progress on a timer (rxd retransmitting
/// what went unacknowledged), not when its fd turns readable: its blocker caps each sleep so that
/// it is pulled in time. Pulled from `due` on, its counter gets its count.
struct TimedCore {
    pipe: Arc<PipeCore>,
    counter: Arc<Counter>,
    room: Arc<rscntr::engine::Room>,
    due: Instant,
    serial: u64,
    /// Completes from pulls (false: only its pipe's bytes count, as PipeSource).
    timed: bool,
}

impl Source for TimedCore {
    fn pull(&self) {
        self.pipe.take_into(&self.counter);
        if self.timed && Instant::now() >= self.due && self.counter.read() == 0 {
            self.counter.add(1).unwrap();
        }
    }
    fn wake(&self) -> Wake<'_> {
        Wake::Block(self)
    }
}

/// What [`TimedCore`]'s blocker caps each sleep at.
const TIMED_CAP: Duration = Duration::from_millis(10);

/// The pipe's blocker, each sleep capped.
impl Blocker for TimedCore {
    fn prepare(&self) -> Token {
        self.pipe.prepare()
    }
    fn arm(&self) -> bool {
        self.pipe.arm()
    }
    fn block(&self, token: Token, kick: &EventFd, until: Option<Instant>) {
        let capped = Instant::now() + TIMED_CAP;
        self.pipe
            .block(token, kick, Some(until.map_or(capped, |u| u.min(capped))));
    }
    fn spin_before_sleep(&self) -> bool {
        self.pipe.spin_before_sleep()
    }
    fn room(&self) -> Option<&rscntr::engine::Room> {
        Some(&self.room)
    }
    fn fd(&self) -> Option<RawFd> {
        Some(self.pipe.rd)
    }
    fn max_sleep(&self) -> Option<Duration> {
        Some(TIMED_CAP)
    }
    fn serial(&self) -> u64 {
        self.serial
    }
}

/// Two members of one room, each with a capped blocker: one whose fd a peer keeps making
/// readable (a completion every millisecond), one that completes only when pulled after its
/// time. The cap bounds the time between two pulls of every member, so the second one's wait
/// ends at its time, not at its timeout, however busy the first one's fd keeps the leader.
#[test]
fn a_timed_member_is_pulled_while_another_members_fd_keeps_the_leader_busy() {
    let room = Arc::new(rscntr::engine::Room::new());
    let member = |serial: u64, timed: bool, after: Duration| {
        Arc::new(TimedCore {
            pipe: PipeCore::spinning_first(false),
            counter: counter(WaitStrategy::Block),
            room: room.clone(),
            due: Instant::now() + after,
            serial,
            timed,
        })
    };
    let busy = member(9_000_001, false, Duration::ZERO);
    let timed = member(9_000_002, true, Duration::from_millis(200));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The busy member waits for more than it gets, and leads first.
    let b = busy.clone();
    let busy_waiter =
        thread::spawn(move || b.counter.wait_with(u64::MAX, Timeout::from_ms(4_000), &*b));
    thread::sleep(Duration::from_millis(20));
    let (b, s) = (busy.clone(), stop.clone());
    let peer = thread::spawn(move || {
        let mut made = 0u64;
        while !s.load(SeqCst) {
            b.pipe.complete();
            made += 1;
            thread::sleep(Duration::from_millis(1));
        }
        made
    });
    let t0 = Instant::now();
    let waited = timed.counter.wait_with(1, Timeout::from_ms(3_000), &*timed);
    let took = t0.elapsed();
    stop.store(true, SeqCst);
    let made = peer.join().unwrap();
    assert_eq!(
        waited,
        Ok(()),
        "the timed member's wait ended after {took:?}"
    );
    assert_eq!(busy_waiter.join().unwrap(), Err(WaitError::TimedOut));
    // How many the peer made depends on how busy the machine is; that each was counted does not.
    assert!(
        made > 0,
        "the peer completed nothing while the timed member waited"
    );
    assert_eq!(
        busy.counter.read(),
        made,
        "every completion of the busy member was counted"
    );
}

/// The progress thread (`engine/progress.rs`) drives a registered domain on its schedule, and
/// once `unregister` has returned it never touches it again.
/// The progress thread is one per process: its tests take turns.
static PROGRESS_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn progress_thread_drives_until_unregistered() {
    let _turn = PROGRESS_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    use rscntr::engine::progress::{self, Driven};
    use std::sync::atomic::AtomicU64;

    struct Domain {
        passes: AtomicU64,
        /// What a pass reports: something new (the quick schedule) or not (the slow one).
        busy: bool,
    }
    impl Driven for Domain {
        fn drive(&self) -> bool {
            self.passes.fetch_add(1, SeqCst);
            self.busy
        }
    }

    for busy in [false, true] {
        let d = Box::new(Domain {
            passes: AtomicU64::new(0),
            busy,
        });
        let key = &*d as *const Domain as usize;
        // SAFETY: `d` outlives the registration (unregistered below, before it is dropped).
        unsafe { progress::register(key, &*d as &dyn Driven as *const dyn Driven) }
            .expect("the progress thread starts");
        until("the thread made no passes", || d.passes.load(SeqCst) >= 3);
        assert!(progress::unregister(key));
        let after = d.passes.load(SeqCst);
        thread::sleep(Duration::from_millis(30));
        assert_eq!(
            d.passes.load(SeqCst),
            after,
            "driven after unregister returned"
        );
        drop(d);
        assert!(
            !progress::unregister(key),
            "a second unregister finds nothing"
        );
    }
    assert_eq!(progress::stats().0, 0);
}

/// An idle domain whose core has an fd (tcp's progress fd) is slept on, not passed over on a
/// schedule: no passes while nothing arrives, a pass once the fd is readable, and unregister
/// ends the sleep.
#[test]
fn progress_thread_sleeps_on_an_idle_domains_fd() {
    let _turn = PROGRESS_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    use rscntr::engine::progress::{self, Driven};
    use std::sync::atomic::AtomicU64;

    /// A core whose work arrives on a pipe: a pass takes what is there.
    struct Domain {
        passes: AtomicU64,
        taken: AtomicU64,
        fds: [RawFd; 2],
    }
    impl Driven for Domain {
        fn drive(&self) -> bool {
            self.passes.fetch_add(1, SeqCst);
            let mut buf = [0u8; 64];
            // SAFETY: reads into a live buffer from our own non-blocking pipe.
            let n = unsafe { libc::read(self.fds[0], buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                self.taken.fetch_add(n as u64, SeqCst);
            }
            n > 0
        }
        fn idle_fd(&self) -> Option<RawFd> {
            Some(self.fds[0])
        }
    }
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into a live array.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
        0
    );
    let d = Box::new(Domain {
        passes: AtomicU64::new(0),
        taken: AtomicU64::new(0),
        fds,
    });
    let key = &*d as *const Domain as usize;
    /// Unregisters on the way out, a failed assertion's too: the thread must not drive a
    /// dropped domain.
    struct Registered(usize);
    impl Drop for Registered {
        fn drop(&mut self) {
            progress::unregister(self.0);
        }
    }
    let (sleeps0, wakes0) = progress::fd_sleeps();
    // SAFETY: `d` outlives the registration (unregistered below, or by `_registered`, before
    // it is dropped: declared after it).
    unsafe { progress::register(key, &*d as &dyn Driven as *const dyn Driven) }
        .expect("the progress thread starts");
    let _registered = Registered(key);
    until("the idle domain's fd was never slept on", || {
        progress::fd_sleeps().0 > sleeps0
    });
    let before = d.passes.load(SeqCst);
    thread::sleep(Duration::from_millis(200));
    assert!(
        d.passes.load(SeqCst) <= before + 1,
        "passes went on while the domain slept on its fd ({} in 200 ms)",
        d.passes.load(SeqCst) - before
    );
    // SAFETY: one byte from a live buffer to our own pipe.
    assert_eq!(unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) }, 1);
    until("the byte on the fd was never taken", || {
        d.taken.load(SeqCst) == 1
    });
    assert!(
        progress::fd_sleeps().1 > wakes0,
        "the pass that took the byte did not follow a wake by the fd"
    );
    until("the domain never went back to sleep on its fd", || {
        progress::fd_sleeps().0 > sleeps0 + 1
    });
    // Unregister wakes the sleep it would otherwise wait for.
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(progress::unregister(key)).unwrap());
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "unregister did not end the sleep on the fd"
    );
    drop(d);
    for fd in fds {
        // SAFETY: our own pipe's fds, closed once.
        unsafe { libc::close(fd) };
    }
}
