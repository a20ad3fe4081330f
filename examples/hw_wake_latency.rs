//! Wake latency over the polled hardware path, with the fake device (a benchmark, not a test).
//!
//!   cargo run --release --example hw_wake_latency [iterations]
//!
//! A "device" thread pauses a random 100–500 µs, notes the time and moves the counter the way a
//! device does (no call through rscntr, so nobody is notified); the waiter notes when its wait
//! returns. The difference is the wake latency: what polling costs compared with a software
//! mutation, which wakes waiters directly. Printed per wait object: median, p99 and max.

use rscntr::engine::{Counter, Timeout, Tuning, WaitStrategy};
use rscntr::verbs::abi::IbvCompCntr;
use rscntr::verbs::fake::{self, FakeConfig};
use rscntr::verbs::{CounterKind, Device, HwCounter};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq)]
enum Mover {
    Device,
    Software,
}

fn wait_for(c: &Counter<HwCounter>, s: WaitStrategy, target: u64) {
    if s == WaitStrategy::Fd {
        let fd = c.fd().unwrap();
        while c.read() < target {
            if c.trywait().is_ok() {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, 10_000) };
            }
        }
    } else {
        if let Err(e) = c.wait(target, Timeout::from_ms(10_000)) {
            panic!(
                "wait for {target}: {e:?}, value {} errors {}",
                c.read(),
                c.read_err()
            );
        }
    }
}

/// The default tuning, or RSCNTR_BENCH_POLL_US as the poll cap.
fn tuning() -> Tuning {
    let mut t = Tuning::default();
    if let Some(us) = std::env::var("RSCNTR_BENCH_POLL_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        t.poll_max = Duration::from_micros(us);
    }
    t
}

fn run(dev: &Arc<Device>, s: WaitStrategy, mover: Mover, iters: u64) -> Vec<Duration> {
    let store = dev.create_counter(CounterKind::Wrs).expect("create");
    let c = Counter::with_store(store, s, tuning()).expect("counter");
    let base = Instant::now();
    let moved_at = Arc::new(AtomicU64::new(0));
    // Lock-step: the mover starts its next pause only once the waiter saw the previous move,
    // so a slow wake is measured as slow instead of hiding behind a value already reached.
    let seen = Arc::new(AtomicU64::new(0));
    let raw = c.store().raw() as usize;
    let mover_thread = {
        let (c, moved_at, seen) = (c.clone(), moved_at.clone(), seen.clone());
        thread::spawn(move || {
            // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
            let mut seed = 0x2545_f491_4f6c_dd1d_u64;
            for k in 0..iters {
                while seen.load(Ordering::SeqCst) < k {
                    thread::yield_now();
                }
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Sleep most of the pause (precisely: 1 µs timer slack), then spin the last
                // 20–80 µs: a mover woken by its timer alone would fire together with the
                // waiter's poll timer (timer slack coalesces them) and flatter the result, and
                // spinning the whole pause would starve the waiter on a small machine.
                let pause = Duration::from_micros(100 + seed % 400);
                let until = Instant::now() + pause;
                thread::sleep(pause.saturating_sub(Duration::from_micros(20 + (seed >> 20) % 60)));
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                moved_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                match mover {
                    // SAFETY: the counter outlives this thread (joined below).
                    Mover::Device => unsafe { fake::device_add(raw as *mut IbvCompCntr, 1) },
                    Mover::Software => c.add(1).unwrap(),
                }
            }
        })
    };
    let mut lat = Vec::with_capacity(iters as usize);
    for k in 1..=iters {
        wait_for(&c, s, k);
        let now = base.elapsed().as_nanos() as u64;
        lat.push(Duration::from_nanos(
            now.saturating_sub(moved_at.load(Ordering::SeqCst)),
        ));
        seen.store(k, Ordering::SeqCst);
    }
    mover_thread.join().unwrap();
    lat.sort();
    lat
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let api = fake::install(FakeConfig::default());
    let dev = Device::open(api, None).expect("fake device");
    println!(
        "wake latency, {iters} wakes each, fake device (no visibility delay), poll cap {:?}",
        tuning().poll_max
    );
    println!(
        "{:<8} {:<9} {:>10} {:>10} {:>10}",
        "wait", "moved by", "median", "p99", "max"
    );
    for (name, s) in [
        ("UNSPEC", WaitStrategy::Block),
        ("YIELD", WaitStrategy::Yield),
        ("FD", WaitStrategy::Fd),
    ] {
        for mover in [Mover::Device, Mover::Software] {
            let lat = run(&dev, s, mover, iters);
            let pick = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
            println!(
                "{:<8} {:<9} {:>10.1?} {:>10.1?} {:>10.1?}",
                name,
                if mover == Mover::Device {
                    "device"
                } else {
                    "software"
                },
                pick(0.5),
                pick(0.99),
                lat[lat.len() - 1]
            );
        }
    }
}
