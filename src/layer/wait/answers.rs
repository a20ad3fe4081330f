//! Answers over shm ring their askers (issue 48). Some operations complete at their initiator
//! only when the target's progress has answered them: a read's data, a fetching or compare
//! atomic's result, a send or write past shm's inject size or asked with FI_DELIVERY_COMPLETE
//! (`ring.rs`, `answered_len`). That progress runs inside the target application's own calls (a
//! CQ read, a counter read, a waiter's pull), where no operation toward the initiator is made
//! and so nothing rings it.
//!
//! So every rscntr(shm) domain, whether it waits or not, has an answers page (an
//! [`AnswersPage`], a sealed memfd named by each of its endpoints' name records): an initiator
//! whose domain waits, after the core accepted such an operation toward it, marks in its own
//! bell's page which of its feeds wait for answers (`answer_hints`, `answer_slots`: the counters
//! bound to the asking endpoint), lists itself once in the target's page (its pid and its bell
//! page's descriptor) and counts the operation there (`asked`). The target loads that count
//! before each progress call (its CQs' reads, `ring_cq.rs`; a waiter's pull, `bell.rs` and
//! `feed.rs`) and, when the count it loaded differs from the last one it answered, rings every
//! listed asker after the call: the asker's armed word with those hints, and those slot waiters
//! only. What was counted before the call was in the target's queue before its progress ran;
//! what came during the call is rung after the next one.
//!
//! A target that answers nobody pays one load per CQ read. A ring is per count seen, not per
//! poll: a ring back after every CQ read (tried, issue 48) woke every armed waiter of every
//! mapped peer on every poll. An answer that takes more than one of the target's progress calls
//! (a long send whose receive is not posted yet; SAR copies where CMA is not allowed) may be rung
//! before it is made: the asker then sleeps until its bound, and its domain falls back to
//! re-checking (`BellBlocker::unrung_arrival`), as it did before for every answer.

use super::bell::BellBlocker;
use super::bell_files::{ASKERS, AnswersPage, Mutex, PAGE, answers_page, asker_key};
use super::peers::{DomainPeers, PeerBell, map_bell};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed, Ordering::SeqCst};

/// What [`PeerBell::listed`] says (0: not asked yet).
const LISTED: u8 = 1;
/// The peer's list was full, or it has no answers page: this domain's waits re-check.
const REFUSED: u8 = 2;

/// Why a domain's waits fall back when it cannot ask a peer to ring its answers.
pub(super) const NOT_LISTED: &str = "a peer whose answers page is full or missing, answering a read, a fetching atomic or a \
     send past shm's inject size,";

/// A domain's answers page and what its progress last answered.
pub struct AnswerDesk {
    memfd: OwnedFd,
    page: *mut AnswersPage,
    /// The count of `asked` last rung for.
    answered: AtomicU32,
    /// The askers mapped so far, by key (None: a key that did not check out).
    askers: Mutex<Vec<(u64, Option<Box<PeerBell>>)>>,
}

// SAFETY: the page is a shared mapping touched through its atomics only; the rest is Sync.
unsafe impl Send for AnswerDesk {}
// SAFETY: as above.
unsafe impl Sync for AnswerDesk {}

impl Drop for AnswerDesk {
    fn drop(&mut self) {
        // SAFETY: mapped by answers_page, unmapped once.
        unsafe { libc::munmap(self.page.cast(), PAGE) };
    }
}

impl AnswerDesk {
    fn new() -> std::io::Result<AnswerDesk> {
        let (memfd, page) = answers_page()?;
        Ok(AnswerDesk {
            memfd,
            page,
            answered: AtomicU32::new(0),
            askers: Mutex::new(Vec::new()),
        })
    }

    fn page(&self) -> &AnswersPage {
        // SAFETY: mapped as long as self lives.
        unsafe { &*self.page }
    }

    /// Rings every listed asker once `before` (the count loaded before a progress call) is
    /// past what was last rung for; one thread rings for each new count.
    #[cold]
    fn answer_past(&self, before: u32, peers: &DomainPeers) {
        let mut last = self.answered.load(SeqCst);
        loop {
            // Counts wrap: `before` is newer when it is ahead by less than half the range.
            if (before.wrapping_sub(last) as i32) <= 0 {
                return;
            }
            match self.answered.compare_exchange(last, before, SeqCst, SeqCst) {
                Ok(_) => break,
                Err(now) => last = now,
            }
        }
        let mut askers = self.askers.lock();
        for slot in &self.page().askers {
            let key = slot.load(SeqCst);
            if key == 0 {
                break;
            }
            let known = askers.iter().position(|(k, _)| *k == key);
            let at = match known {
                Some(at) => at,
                None => {
                    let shown = format!("asker {key:#x}");
                    let bell = map_bell((key >> 32) as u32, key as u32 as i32, 0, &shown)
                        .filter(|b| !peers.is_own(b))
                        .map(Box::new);
                    askers.push((key, bell));
                    askers.len() - 1
                }
            };
            if let Some(b) = &askers[at].1 {
                b.ring_answered();
            }
        }
    }
}

impl AnswerDesk {
    /// Before a progress call: the count of operations asked of this domain (one load).
    #[inline]
    pub(super) fn asked(&self) -> u32 {
        self.page().asked.load(SeqCst)
    }

    /// After a progress call: rings the askers when `before` (from [`Self::asked`] before the
    /// call) is a count not answered yet; one load otherwise. `peers`: the domain's.
    #[inline]
    pub(super) fn answered(&self, before: u32, peers: &DomainPeers) {
        if self.answered.load(Relaxed) != before {
            self.answer_past(before, peers);
        }
    }
}

impl DomainPeers {
    /// The domain's answers page, made at the first call (None when it cannot be, logged once:
    /// its peers' waits then re-check for its answers).
    pub(super) fn desk(&self) -> Option<&AnswerDesk> {
        self.desk
            .get_or_init(|| {
                AnswerDesk::new()
                    .inspect_err(|e| {
                        crate::fi_info!(Domain, "cannot make the domain's answers page: {e}")
                    })
                    .ok()
            })
            .as_ref()
    }

    /// The domain's answers page's descriptor, for its name records (-1: none).
    pub fn answers_fd(&self) -> RawFd {
        self.desk().map_or(-1, |d| d.memfd.as_raw_fd())
    }

    /// Before a progress call: the count of operations asked of this domain (one load).
    #[inline]
    pub fn asked(&self) -> u32 {
        match self.desk.get() {
            Some(Some(d)) => d.asked(),
            _ => 0,
        }
    }

    /// After a progress call: rings the askers when `before` (from [`Self::asked`] before the
    /// call) is a count not answered yet; one load otherwise.
    #[inline]
    pub fn answered(&self, before: u32) {
        if let Some(Some(d)) = self.desk.get() {
            d.answered(before, self);
        }
    }
}

impl PeerBell {
    /// After the core accepted an operation toward this peer that only its progress answers:
    /// lists `bell`'s domain in the peer's answers page (once) and counts the operation there.
    /// False when the peer cannot ring the answer (no answers page, or its list is full).
    pub(super) fn ask(&self, bell: &BellBlocker) -> bool {
        // SAFETY: mapped as long as self lives (NULL when the peer has none).
        let Some(page) = (unsafe { self.answers.as_ref() }) else {
            return false;
        };
        match self.listed.load(Relaxed) {
            LISTED => {}
            REFUSED => return false,
            _ => {
                let listed = list(page, asker_key(std::process::id(), bell.page_fd()));
                self.listed
                    .store(if listed { LISTED } else { REFUSED }, SeqCst);
                if !listed {
                    return false;
                }
            }
        }
        page.asked.fetch_add(1, SeqCst);
        true
    }
}

/// Puts `key` in the first free entry of `page`'s askers, unless it is there already.
fn list(page: &AnswersPage, key: u64) -> bool {
    for slot in &page.askers {
        match slot.compare_exchange(0, key, SeqCst, SeqCst) {
            Ok(_) => return true,
            Err(k) if k == key => return true,
            Err(_) => {}
        }
    }
    crate::fi_info!(
        EpData,
        "a peer's answers page lists {ASKERS} askers already: this domain's waits re-check for \
         its answers"
    );
    false
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// An asker lists itself once, a full list refuses, and a count is rung for once: a count
    /// loaded before a progress call is answered after it, and not again.
    #[test]
    fn asked_counts_are_answered_once() {
        let peers = DomainPeers::default();
        assert_eq!(peers.asked(), 0, "no page yet: nothing asked");
        assert!(peers.answers_fd() >= 0);
        let d = peers.desk.get().unwrap().as_ref().unwrap();
        let page = d.page();
        assert!(list(page, 7 << 32 | 3));
        assert!(list(page, 7 << 32 | 3), "listed already");
        assert_eq!(page.askers[1].load(SeqCst), 0, "once");
        page.asked.fetch_add(1, SeqCst);
        let before = peers.asked();
        assert_eq!(before, 1);
        peers.answered(before);
        assert_eq!(d.answered.load(SeqCst), 1);
        assert_eq!(
            d.askers.lock().len(),
            1,
            "the asker was looked at (its key names no page: not mapped)"
        );
        assert!(d.askers.lock()[0].1.is_none());
        peers.answered(0);
        assert_eq!(d.answered.load(SeqCst), 1, "an older count rings nothing");
        for k in 1..ASKERS as u64 {
            assert!(list(page, 8 << 32 | k));
        }
        assert!(!list(page, 9 << 32 | 1), "full");
    }
}
