//! The pure-Rust counter engine, sized for Miri: every operation, wakeups across threads,
//! -FI_EAVAIL, timeouts, fd arming (eventfd read/write are emulated by Miri; `poll` is not, so
//! readability is observed through `trywait`), and a polled store on the fake device with the
//! watcher thread. Miri checks them for undefined behaviour and data races, including inside
//! event_listener's intrusive list and the fake device's raw pointers.
//!
//! ```sh
//! cargo +nightly miri test --target-dir target/miri --test miri_engine
//! ```
//!
//! The same tests run natively in `cargo test` (they are small).

use rscntr::engine::{Counter, Timeout, TryWaitError, Tuning, WaitError, WaitStrategy};
use rscntr::verbs::abi::IbvCompCntr;
use rscntr::verbs::fake::{self, FakeConfig};
use rscntr::verbs::{CounterKind, Device};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const ALL_WAITABLE: [WaitStrategy; 3] =
    [WaitStrategy::Yield, WaitStrategy::Block, WaitStrategy::Fd];

/// A device counter handed to the thread playing the device (a pointer, not an integer, so
/// Miri keeps its provenance).
#[derive(Clone, Copy)]
struct DevCntr(*mut IbvCompCntr);
// SAFETY: the fake device's counters are shared with rscntr by design (atomics inside).
unsafe impl Send for DevCntr {}

fn counter(s: WaitStrategy) -> Arc<Counter> {
    // spin limit 2: Miri is slow, and the sleeping path is what matters here
    Arc::new(Counter::with_spin_limit(s, 2).expect("counter"))
}

#[test]
fn every_op_and_wrap() {
    for s in [
        WaitStrategy::None,
        WaitStrategy::Yield,
        WaitStrategy::Block,
        WaitStrategy::Fd,
    ] {
        let c = counter(s);
        c.add(5).unwrap();
        c.add_err(2).unwrap();
        assert_eq!((c.read(), c.read_err()), (5, 2));
        c.set(u64::MAX).unwrap();
        c.add(2).unwrap();
        c.set_err(u64::MAX).unwrap();
        c.add_err(1).unwrap();
        assert_eq!((c.read(), c.read_err()), (1, 0), "{s:?}");
        assert_eq!(c.wait(1, Timeout::Never), Ok(()));
    }
}

#[test]
fn adders_wake_a_blocked_waiter() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        let w = {
            let c = c.clone();
            thread::spawn(move || c.wait(40, Timeout::Never))
        };
        let adders: Vec<_> = (0..2)
            .map(|_| {
                let c = c.clone();
                thread::spawn(move || (0..20).for_each(|_| c.add(1).unwrap()))
            })
            .collect();
        adders.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(w.join().unwrap(), Ok(()), "{s:?}");
        assert_eq!(c.read(), 40);
        assert!(!c.has_waiters(), "{s:?}");
    }
}

#[test]
fn an_error_ends_a_blocked_wait() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        let w = {
            let c = c.clone();
            thread::spawn(move || c.wait(1, Timeout::Never))
        };
        thread::sleep(Duration::from_millis(5));
        c.add_err(1).unwrap();
        thread::sleep(Duration::from_millis(5));
        // if the wait only began after the error (it had 5 ms of Miri's clock), only the
        // value can end it
        c.add(1).unwrap();
        let r = w.join().unwrap();
        assert!(
            r == Err(WaitError::ErrorChanged) || r == Ok(()),
            "{s:?}: {r:?}"
        );
    }
}

#[test]
fn timeouts_expire() {
    for s in ALL_WAITABLE {
        let c = counter(s);
        assert_eq!(c.wait(1, Timeout::Poll), Err(WaitError::TimedOut));
        assert_eq!(c.wait(1, Timeout::from_ms(3)), Err(WaitError::TimedOut));
        assert!(!c.has_waiters());
    }
}

#[test]
fn trywait_arms_and_reports_changes() {
    let c = counter(WaitStrategy::Fd);
    assert!(c.fd().is_some());
    assert_eq!(c.trywait(), Ok(()));
    assert!(c.fd_armed());
    c.add(1).unwrap();
    assert!(!c.fd_armed(), "the add did not signal the armed fd");
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    assert_eq!(c.trywait(), Ok(()));
    c.set(1).unwrap(); // same value: still a change
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    // from another thread
    assert_eq!(c.trywait(), Ok(()));
    let c2 = c.clone();
    thread::spawn(move || c2.add_err(1).unwrap())
        .join()
        .unwrap();
    assert!(!c.fd_armed());
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
}

#[test]
fn a_polled_store_on_the_fake_device() {
    let api = fake::install(FakeConfig::parse("bytes=ok").expect("config"));
    let dev = Device::open(api, None).expect("fake device");
    for s in ALL_WAITABLE {
        let store = dev.create_counter(CounterKind::Wrs).expect("create");
        let c = Counter::with_store(store, s, Tuning::default()).expect("counter");
        let p = DevCntr(c.store().raw());
        let t = thread::spawn(move || {
            let p = p;
            thread::sleep(Duration::from_millis(2));
            // SAFETY: the counter outlives the join below.
            unsafe { fake::device_add(p.0, 3) };
        });
        assert_eq!(c.wait(3, Timeout::from_ms(60_000)), Ok(()), "{s:?}");
        t.join().unwrap();
        if s == WaitStrategy::Fd {
            // armed: the watcher thread notices the device's change and signals
            while c.trywait() == Err(TryWaitError::Pending) {}
            // SAFETY: the counter is alive.
            unsafe { fake::device_add(p.0, 1) };
            while c.fd_armed() {
                thread::sleep(Duration::from_micros(50));
            }
            assert_eq!(c.trywait(), Err(TryWaitError::Pending));
        }
        // dropping the last Arc takes it off the watcher and destroys the device counter
    }
    // as the provider's cleanup does: the thread must not outlive the test
    rscntr::engine::watcher::shutdown();
}
