//! Helpers shared by the integration tests (each `tests/*.rs` includes this with `mod common;`).

use std::thread;
use std::time::{Duration, Instant};

/// Waits until `done`, looking every millisecond; fails saying `what` never happened if it has
/// not within 10 s.
pub fn until(what: &str, done: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: not within 10 s"
        );
        thread::sleep(Duration::from_millis(1));
    }
}
