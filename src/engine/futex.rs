//! Sleeping on a 32-bit word that other processes map too (`futex(2)`, shared, not
//! `FUTEX_PRIVATE_FLAG`): the kernel keys such a futex by the page it lives in, so a process
//! that maps the same memory wakes whoever sleeps on it.
//!
//! Why a futex where a socket would do (the doorbell's sleepers that need no fd, `bell.rs` in
//! the layer): a datagram or a pipe write wakes its reader as a *synchronous* wake (the kernel's
//! hint that the waker is about to sleep), which makes the scheduler prefer the waker's CPU for
//! the woken thread. A waker that goes on running (a ping-pong peer, yielding) then shares one
//! CPU with the thread it woke until the load balancer parts them, milliseconds later.
//! `FUTEX_WAKE` is a plain wake; the kernel may still keep the woken thread on its waker's CPU
//! (when that was its last CPU and the cache domain looks busy), which the doorbell undoes
//! itself (`leave_the_ringers_cpu` in `bell.rs`).

use std::time::Duration;

/// Wakes every thread, of any process, asleep in [`wait_bits`] on `word`, whatever its bits.
///
/// # Safety
/// As [`wait_bits`].
pub unsafe fn wake_all(word: *const u32) {
    // SAFETY: the caller's contract; FUTEX_WAKE uses nothing but the word's address.
    unsafe { libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE, i32::MAX) };
}

/// Sleeps while `*word == expected`, for at most `limit` (None: no limit), until a wake whose
/// bits meet `bits` ([`wake_bits`]; [`wake_all`] meets every bits): one word serves sleepers woken
/// one by one (`FUTEX_WAIT_BITSET`). Returns false when the limit ended the sleep, true otherwise
/// (woken, the word changed before the sleep, or a signal: the caller looks again in every case).
///
/// # Safety
/// `word` points at a live, aligned u32 (an atomic word of a mapping the caller keeps).
pub unsafe fn wait_bits(
    word: *const u32,
    expected: u32,
    limit: Option<Duration>,
    bits: u32,
) -> bool {
    // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time.
    let ts = limit.map(|d| {
        // SAFETY: an all-zero timespec is valid as an out value.
        let mut now: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: now lives across the call.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let ns = now.tv_nsec as u64 + d.subsec_nanos() as u64;
        libc::timespec {
            tv_sec: (now.tv_sec as u64)
                .saturating_add(d.as_secs())
                .saturating_add(ns / 1_000_000_000)
                .min(i64::MAX as u64 / 2) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        }
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is live and aligned (the caller's contract); the kernel only reads it;
    // tsp is NULL or a live timespec; the fifth argument is unused by this operation.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word,
            libc::FUTEX_WAIT_BITSET,
            expected,
            tsp,
            std::ptr::null::<u32>(),
            bits,
        )
    };
    !(r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
}

/// Wakes every thread, of any process, asleep in [`wait_bits`] on `word` for bits that meet
/// `bits`.
///
/// # Safety
/// As [`wait_bits`].
pub unsafe fn wake_bits(word: *const u32, bits: u32) {
    // SAFETY: the caller's contract; FUTEX_WAKE_BITSET uses nothing but the word's address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word,
            libc::FUTEX_WAKE_BITSET,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            bits,
        )
    };
}
