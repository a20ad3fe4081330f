//! The synchronisation primitives the engine's wake protocol is built from, in one place so
//! that `--cfg loom` can swap them for loom's model-checked ones (`tests/loom_wait.rs`).
//! Normal builds get std's atomics and mutex, real spins and yields; nothing here
//! costs anything over using those directly. (`event_listener`, the engine's sleep/notify,
//! switches to loom by itself under `cfg(loom)` with its `loom` feature, enabled in
//! Cargo.toml for that cfg only.)

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, fence};

/// A mutex whose `lock` cannot fail: std's (a panic while holding it leaves nothing
/// half-updated, so poisoning is ignored), loom's under loom. Not parking_lot's: a parked
/// thread makes it allocate a process-wide table that would outlive the DSO.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

#[cfg(not(loom))]
impl<T> Mutex<T> {
    pub(crate) const fn new(v: T) -> Self {
        Mutex(std::sync::Mutex::new(v))
    }
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(v: T) -> Self {
        Mutex(loom::sync::Mutex::new(v))
    }
    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

/// One iteration of a busy wait.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    // Under loom a spin is a point where another thread must be let run, or a waiter spinning
    // on a value nobody has written yet would loop forever inside the model.
    #[cfg(loom)]
    loom::hint::spin_loop();
}

/// Gives the core away.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Marks the store-buffering points of the wake protocol: a SeqCst write followed by a SeqCst
/// load of *another* atomic, where correctness needs the two to stay in that order (a
/// mutator's value write, then its load of `wake`; a waiter's `wake` increment, then its
/// re-check; trywait's arming, then its snapshot). C++ (and Rust) give that order to SeqCst
/// accesses themselves, so in normal builds this is nothing at all. loom models SeqCst
/// accesses as AcqRel (its README: "they impose weaker synchronization, causing Loom to
/// generate false alarms") but models `fence(SeqCst)` exactly, so under loom this is that
/// fence: the model gets the order the real code has, and no more (the fence sits between
/// the two accesses that already carry it, and orders nothing else the real code leaves
/// unordered across it).
#[inline(always)]
pub(crate) fn store_load_order() {
    #[cfg(loom)]
    loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Sleeps for `d` (a bounded nap); under loom, a yield (loom has no clock).
#[inline]
pub(crate) fn nap(d: std::time::Duration) {
    #[cfg(not(loom))]
    std::thread::sleep(d);
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
}
