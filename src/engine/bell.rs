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
const WAYS: u32 = SOCKET | FUTEX;

/// Not a way: what a worker that took the [`FUTEX`] way leaves in its place. Until it is
/// cleared ([`end_rung`]), every worker that finds the word non-zero leaves its hint (`tell`)
/// before it looks at the word again, and rings if it is armed by then: so a sleeper whose
/// arming finds `RUNG` ([`arm_seeing`]) has every work published since that ring, and not seen
/// by a look that took the hints, behind a hint. Workers pay for it only while a woken sleeper
/// is between its wake and its next arming; while the word is 0, one fence and one load still.
pub const RUNG: u32 = 4;

/// Arms `word` for the sleepers of `way` ([`SOCKET`] or [`FUTEX`]); true when it was armed for
/// them already (nobody rang since the last [`arm`]), false when this arming is new: the caller
/// must look for work once more before it sleeps.
#[inline]
pub fn arm(word: &AtomicU32, way: u32) -> bool {
    arm_seeing(word, way) & way != 0
}

/// [`arm`], returning the word as it was before (with [`RUNG`] in it, the look that follows may
/// go only where hints point).
#[inline]
pub fn arm_seeing(word: &AtomicU32, way: u32) -> u32 {
    let was = word.fetch_or(way, SeqCst);
    // The look that follows is the core's own loads (C code, not SeqCst accesses): only a
    // fence keeps them after the arming on every architecture.
    fence(SeqCst);
    was
}

/// Ends the period [`RUNG`] opened (the sleeper that was rung leaves its wait, or it may have
/// missed work that left no hint): workers stop leaving hints, and the next arming looks
/// everywhere. Always safe.
#[inline]
pub fn end_rung(word: &AtomicU32) {
    if word.load(Relaxed) & RUNG != 0 {
        word.fetch_and(!RUNG, SeqCst);
    }
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

/// [`rings_after_fence`], calling `tell` (which must be a sequentially consistent write) when
/// the word is not 0: what the worker leaves for the sleeper (a hint of where to look) is in
/// place before the sleeper can see the word disarmed, and, while the word is [`RUNG`], before
/// a sleeper that takes the hints after arming could miss it. The word is loaded again after
/// `tell`: a sleeper that took the hints before this worker's hint armed before it, so that load
/// sees it armed and this worker rings. Then the armed ways are taken (and [`RUNG`] left for the
/// futex way's sleeper, see there).
#[inline]
pub fn rings_after_fence_telling(word: &AtomicU32, tell: impl FnOnce()) -> u32 {
    if word.load(Relaxed) == 0 {
        return 0;
    }
    tell();
    take_ways(word)
}

/// Takes the ways armed in `word` (a sequentially consistent look, then the swap if any), leaving
/// [`RUNG`] where it took the futex way.
#[inline]
fn take_ways(word: &AtomicU32) -> u32 {
    let taken = word.fetch_update(SeqCst, SeqCst, |w| {
        let rung = if w & FUTEX != 0 { RUNG } else { 0 };
        (w & WAYS != 0).then_some((w & !WAYS) | rung)
    });
    taken.map_or(0, |was| was & WAYS)
}

/// For a worker that has just published work for the sleepers of slot `bits` of a *slot word*
/// (one bit per sleeper instead of per way: a sleeper arms its own bit with [`arm`] and sleeps on
/// the word for that bit alone, so that a worker wakes only the sleepers its work is for): the
/// bits of `bits` that were armed, which this worker disarmed and must wake (0: none). The same
/// handshake as [`rings`]: one fence and one load while none of `bits` is armed.
#[inline]
pub fn rings_slots(word: &AtomicU32, bits: u32) -> u32 {
    fence(SeqCst);
    rings_slots_after_fence(word, bits)
}

/// [`rings_slots`] for a worker that has issued the SeqCst fence itself since it published
/// (without it, the planted lost wake of the slot models).
#[inline]
pub fn rings_slots_after_fence(word: &AtomicU32, bits: u32) -> u32 {
    if word.load(Relaxed) & bits == 0 {
        return 0;
    }
    word.fetch_and(!bits, SeqCst) & bits
}

/// The planted lost wake of the hints ([`RUNG`]): a worker that, the word found [`RUNG`] and not
/// armed, leaves its hint and does not look at the word again. A sleeper that armed and took the
/// hints just before the hint sleeps through the work: the loom models must catch it.
#[doc(hidden)]
pub fn rings_without_second_look(word: &AtomicU32, tell: impl FnOnce()) -> u32 {
    fence(SeqCst);
    let w = word.load(Relaxed);
    if w == 0 {
        return 0;
    }
    tell();
    if w & WAYS == 0 {
        return 0;
    }
    take_ways(word)
}
