//! A doorbell: how a thread that sleeps in the kernel is woken by another process that
//! completes work for it through shared memory it cannot see (a core provider's queues), with
//! no lost wake and no cost to that process while nobody sleeps.
//!
//! The sleeper owns one 32-bit word per place work can arrive (its **armed** word, in memory
//! both processes map), the worker only reads it, and clears it to ring. The protocol is the
//! store-then-load handshake of two threads that each publish then look (Dekker):
//!
//! - the sleeper **arms**: stores 1 in the word (a sequentially consistent swap), **then** looks
//!   for work (drives the core's progress and checks what it waits for), and sleeps only when
//!   that look found nothing;
//! - the worker **publishes** its work (the core's store into the sleeper's queue), issues a
//!   sequentially consistent fence, **then** loads the word: if armed, it swaps the word to 0,
//!   and the one worker whose swap saw 1 **rings** (one syscall, which makes the sleeper's fd
//!   readable).
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

/// Arms `word`; true when it was armed already (nobody rang since the last [`arm`]), false when
/// this arming is new: the caller must look for work once more before it sleeps.
#[inline]
pub fn arm(word: &AtomicU32) -> bool {
    let was = word.swap(1, SeqCst);
    // The look that follows is the core's own loads (C code, not SeqCst accesses): only a
    // fence keeps them after the swap on every architecture.
    fence(SeqCst);
    was == 1
}

/// Disarms `word` (the sleeper woke for its own reasons and stops sleeping for now): workers
/// stop ringing. A worker that loaded it armed just before still rings once: harmless.
#[inline]
pub fn disarm(word: &AtomicU32) {
    word.store(0, Relaxed);
}

/// For a worker that has just published work for the owner of `word`: true when it must ring
/// (the owner is armed and this worker is the one that disarmed it).
#[inline]
pub fn rings(word: &AtomicU32) -> bool {
    fence(SeqCst);
    rings_after_fence(word)
}

/// [`rings`] for a worker that has issued the SeqCst fence itself since it published (one
/// fence before looking at several owners' words). Without that fence a worker's load may be
/// ordered before its own publishing, and a sleeper that armed in between sleeps through the
/// work: the loom models call it unfenced and must catch that.
#[inline]
pub fn rings_after_fence(word: &AtomicU32) -> bool {
    word.load(Relaxed) != 0 && word.swap(0, SeqCst) != 0
}
