//! A doorbell: how a thread that sleeps in the kernel is woken by another process that
//! completes work for it through shared memory it cannot see (a core provider's queues), with
//! no lost wake and no cost to that process while nobody sleeps.
//!
//! The sleeper owns one 32-bit word per place work can arrive (its **armed** word, in memory
//! both processes map), the worker only reads it, and clears it to ring. The protocol is the
//! store-then-load handshake of two threads that each publish then look (Dekker):
//!
//! - the sleeper **arms**: sets its way's bit in the word (a sequentially consistent
//!   read-modify-write), **then** looks for work (drives the core's progress and checks what it
//!   waits for), and sleeps only when that look found nothing;
//! - the worker **publishes** its work (the core's store into the sleeper's queue), issues a
//!   sequentially consistent fence, **then** loads the word: if armed, it swaps the word to 0,
//!   and the one worker whose swap saw a bit **rings** that way (one syscall each: a datagram
//!   that makes the sleeper's socket readable, or a `FUTEX_WAKE` on the word).
//!
//! With both orders sequentially consistent, either the sleeper's look sees the work, or the
//! worker's load sees the word armed (and it, or another worker, rings): a sleeper never sleeps
//! through work published before its look. A worker pays one fence and one load per operation
//! while nobody is armed, and one syscall per arming, not per operation. A word found cleared
//! when the sleeper arms again means a worker rang (or is ringing) since: [`arm`] says so, and
//! the sleeper looks again before sleeping.
//!
//! `tests/loom_wait.rs` model-checks it with a worker that loads without the fence
//! ([`rings_after_fence`] with no fence before it, a planted lost wake the models must catch).

use super::sync::fence;

/// An armed word: std's atomic (loom's under loom), which the layer places in shared memory.
pub type AtomicU32 = super::sync::AtomicU32;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// The armed word's bits, one per way a sleeper sleeps (a worker rings each way it finds
/// armed, with one syscall each): a sleeper in `poll`/`epoll` on a socket (woken by a
/// datagram), and one in `futex(2)` on the word itself (woken by `FUTEX_WAKE`).
pub const SOCKET: u32 = 1;
pub const FUTEX: u32 = 2;

/// Arms `word` for the sleepers of `way` ([`SOCKET`] or [`FUTEX`]); true when it was armed for
/// them already (nobody rang since the last [`arm`]), false when this arming is new: the caller
/// must look for work once more before it sleeps.
#[inline]
pub fn arm(word: &AtomicU32, way: u32) -> bool {
    let was = word.fetch_or(way, SeqCst);
    // The look that follows is the core's own loads (C code, not SeqCst accesses): only a
    // fence keeps them after the arming on every architecture.
    fence(SeqCst);
    was & way != 0
}

/// Disarms `word` for the sleepers of `way` (a sleeper interrupted for its own reasons: it
/// looks again before it sleeps, arming anew). A worker that loaded it armed just before still
/// rings once: harmless.
#[inline]
pub fn disarm(word: &AtomicU32, way: u32) {
    if word.load(Relaxed) & way != 0 {
        word.fetch_and(!way, SeqCst);
    }
}

/// For a worker that has just published work for the owner of `word`: the ways it must ring
/// (those armed, which this worker disarmed; 0: none).
#[inline]
pub fn rings(word: &AtomicU32) -> u32 {
    rings_telling(word, || {})
}

/// [`rings`], leaving a hint first (see [`rings_after_fence_telling`]).
#[inline]
pub fn rings_telling(word: &AtomicU32, tell: impl FnOnce()) -> u32 {
    fence(SeqCst);
    rings_after_fence_telling(word, tell)
}

/// [`rings`] for a worker that has issued the SeqCst fence itself since it published (one
/// fence before looking at several owners' words). Without that fence a worker's load may be
/// ordered before its own publishing, and a sleeper that armed in between sleeps through the
/// work: the loom models call it unfenced and must catch that.
#[inline]
pub fn rings_after_fence(word: &AtomicU32) -> u32 {
    rings_after_fence_telling(word, || {})
}

/// [`rings_after_fence`], calling `tell` between the load that found the word armed and the
/// swap that disarms it: what the worker leaves for the sleeper (a hint of where to look
/// first) is in place before the sleeper can see the word cleared. Not part of the no-lost-wake
/// protocol: a worker that loses the swap to another, or a sleeper that looks before `tell`,
/// only makes the hint arrive late.
#[inline]
pub fn rings_after_fence_telling(word: &AtomicU32, tell: impl FnOnce()) -> u32 {
    if word.load(Relaxed) == 0 {
        return 0;
    }
    tell();
    word.swap(0, SeqCst)
}
