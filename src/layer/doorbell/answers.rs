//! Answers over shm ring their askers. Some operations complete at their initiator
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
//! page's descriptor) and counts the operation there: its own count, then the page's sum
//! (`asked`). The target loads the sum before each progress call (its CQs' reads, `ring_cq.rs`;
//! counter reads and a waiter's pull, `bell.rs` and `feed.rs`); when it differs from the last
//! one answered, it takes the askers' counts too, before the call, and after it rings each asker
//! whose count grew since it was last rung: its armed word with those hints, and those slot
//! waiters only. What was counted before the call was in the target's queue before its progress
//! ran; what came during the call is rung after the next one.
//!
//! A target that answers nobody pays one load per CQ read. A ring is per asker and per count
//! seen, not per poll: a ring back after every CQ read (tried) woke every armed waiter
//! of every mapped peer on every poll. An answer that takes more than one of the target's
//! progress calls (a long send whose receive is not posted yet; SAR copies where CMA is not
//! allowed) may be rung before it is made: the asker then sleeps until its bound, and its domain falls back to
//! re-checking (`BellBlocker::unrung_arrival`), as it did before for every answer.

use super::bell_files::{ASKERS, AnswersPage, Mutex, PAGE, answers_page};
use super::peer_bell::{PeerBell, map_bell};
use super::peers::DomainPeers;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};

/// [`PeerBell::listed`] when this domain could not be listed (no answers page, or a full list).
const REFUSED: u32 = u32::MAX;

/// Why a domain's waits fall back when it cannot ask a peer to ring its answers.
pub(super) const NOT_LISTED: &str = "a peer whose answers page is full or missing, answering a read, a fetching atomic or a \
     send past shm's inject size,";

/// A domain's answers page and what its progress last answered.
pub struct AnswerDesk {
    memfd: OwnedFd,
    page: *mut AnswersPage,
    /// The page's sum when it was last taken for answering (see [`AnswerDesk::asked`]).
    answered: AtomicU32,
    /// The askers by their index in the page: each mapped once (None: a key that did not check
    /// out), and the count it was last rung for.
    askers: Mutex<Vec<Asker>>,
}

struct Asker {
    key: u64,
    bell: Option<Box<PeerBell>>,
    rung: u32,
}

/// What the askers had asked before a progress call (see [`AnswerDesk::asked`]): the page's
/// sum, and each listed asker's count, from the front of the list.
struct Asked {
    sum: u32,
    counts: Vec<u32>,
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

    /// Before a progress call: None (one load) while the askers' sum is the one last answered;
    /// otherwise what each asker had asked, for [`Self::answered`] after the call.
    #[inline]
    fn asked(&self) -> Option<Box<Asked>> {
        let sum = self.page().asked.load(SeqCst);
        if sum == self.answered.load(Relaxed) {
            return None;
        }
        self.take_counts(sum)
    }

    #[cold]
    fn take_counts(&self, sum: u32) -> Option<Box<Asked>> {
        let page = self.page();
        let listed = page
            .askers
            .iter()
            .position(|k| k.load(SeqCst) == 0)
            .unwrap_or(ASKERS);
        let counts = page.counts[..listed]
            .iter()
            .map(|c| c.load(SeqCst))
            .collect();
        Some(Box::new(Asked { sum, counts }))
    }

    /// After a progress call: rings each asker whose count in `asked` (taken before the call)
    /// is past the one it was last rung for. `peers`: the domain's.
    #[inline]
    fn answered(&self, asked: Option<Box<Asked>>, peers: &DomainPeers) {
        if let Some(asked) = asked {
            self.answer(&asked, peers);
        }
    }

    /// Runs `progress` (a call that drives the core) between the two halves of answering: what
    /// was asked taken before, the askers rung after when it is new. `peers`: the domain's.
    #[inline]
    pub(super) fn around<R>(&self, peers: &DomainPeers, progress: impl FnOnce() -> R) -> R {
        let asked = self.asked();
        let ret = progress();
        self.answered(asked, peers);
        ret
    }

    #[cold]
    fn answer(&self, asked: &Asked, peers: &DomainPeers) {
        let newer = |a: u32, b: u32| (a.wrapping_sub(b) as i32) > 0;
        let mut last = self.answered.load(SeqCst);
        while newer(asked.sum, last) {
            match self
                .answered
                .compare_exchange(last, asked.sum, SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(now) => last = now,
            }
        }
        let page = self.page();
        let mut askers = self.askers.lock();
        for (i, &count) in asked.counts.iter().enumerate() {
            let key = page.askers[i].load(SeqCst);
            if askers.len() <= i {
                askers.push(Asker {
                    key: 0,
                    bell: None,
                    rung: 0,
                });
            }
            let a = &mut askers[i];
            if a.key != key {
                // A new asker (or garbage where one was): mapped once per key.
                let shown = format!("asker {key:#x}");
                a.bell = map_bell((key >> 32) as u32, key as u32 as i32, 0, &shown)
                    .filter(|b| !peers.is_own(b))
                    .map(Box::new);
                a.key = key;
                a.rung = 0;
            }
            if newer(count, a.rung) {
                a.rung = count;
                if let Some(b) = &a.bell {
                    b.ring_answered();
                }
            }
        }
    }
}

/// A domain's answers over shm: its answers page, made at the first use (the first name record
/// of one of its endpoints, or its first CQ), and the peers whose bells it knows (its own is
/// never rung). Every rscntr(shm) domain has one, whether it waits or not.
pub struct DomainAnswers {
    peers: Arc<DomainPeers>,
    desk: OnceLock<Option<AnswerDesk>>,
}

impl DomainAnswers {
    pub fn new(peers: Arc<DomainPeers>) -> DomainAnswers {
        DomainAnswers {
            peers,
            desk: OnceLock::new(),
        }
    }

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

    /// The domain's peers (its own bell among them, never rung).
    pub(super) fn peers(&self) -> &DomainPeers {
        &self.peers
    }

    /// The domain's answers page's descriptor, for its name records (-1: none).
    pub fn fd(&self) -> RawFd {
        self.desk().map_or(-1, |d| d.memfd.as_raw_fd())
    }

    /// Runs `progress` (a call that drives the core), then rings the peers that asked this
    /// domain something new before it (see [`AnswerDesk::around`]); one load when nothing is
    /// new, none before the domain has its answers page.
    #[inline]
    pub fn around<R>(&self, progress: impl FnOnce() -> R) -> R {
        match self.desk.get() {
            Some(Some(d)) => d.around(&self.peers, progress),
            _ => progress(),
        }
    }
}

impl PeerBell {
    /// After the core accepted an operation toward this peer that only its progress answers:
    /// lists the asking domain (`asker`, see `bell_files::asker_key`) in the peer's answers page
    /// (once) and counts the operation there, its own count first, then the page's sum. False
    /// when the peer cannot ring the answer (no answers page, or its list is full).
    pub(super) fn ask(&self, asker: u64) -> bool {
        // SAFETY: mapped as long as self lives (NULL when the peer has none).
        let Some(page) = (unsafe { self.answers.as_ref() }) else {
            return false;
        };
        let at = match self.listed.load(Relaxed) {
            REFUSED => return false,
            0 => {
                let at = list(page, asker);
                self.listed
                    .store(at.map_or(REFUSED, |i| i as u32 + 1), SeqCst);
                match at {
                    Some(i) => i,
                    None => return false,
                }
            }
            i => i as usize - 1,
        };
        page.counts[at].fetch_add(1, SeqCst);
        page.asked.fetch_add(1, SeqCst);
        true
    }
}

/// Puts `key` in the first free entry of `page`'s askers, unless it is there already: its index.
fn list(page: &AnswersPage, key: u64) -> Option<usize> {
    for (i, slot) in page.askers.iter().enumerate() {
        match slot.compare_exchange(0, key, SeqCst, SeqCst) {
            Ok(_) => return Some(i),
            Err(k) if k == key => return Some(i),
            Err(_) => {}
        }
    }
    crate::fi_info!(
        EpData,
        "a peer's answers page lists {ASKERS} askers already: this domain's waits re-check for \
         its answers"
    );
    None
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// An asker lists itself once, a full list refuses; counts taken before a progress call are
    /// answered after it, each asker's once, and nothing is taken while the sum is unchanged.
    #[test]
    fn asked_counts_are_answered_once() {
        let peers = DomainAnswers::new(Arc::new(DomainPeers::default()));
        assert!(peers.desk.get().is_none(), "no page before the first use");
        assert!(peers.fd() >= 0);
        let d = peers.desk.get().unwrap().as_ref().unwrap();
        let page = d.page();
        assert_eq!(list(page, 7 << 32 | 3), Some(0));
        assert_eq!(list(page, 7 << 32 | 3), Some(0), "listed already");
        assert_eq!(list(page, 7 << 32 | 4), Some(1));
        assert!(d.asked().is_none(), "listed, nothing asked");
        page.counts[1].fetch_add(1, SeqCst);
        page.asked.fetch_add(1, SeqCst);
        let asked = d.asked().expect("a new sum");
        assert_eq!((asked.sum, asked.counts.clone()), (1, vec![0, 1]));
        assert_eq!(peers.around(|| 7), 7, "the call's own value");
        assert_eq!(
            d.answered.load(SeqCst),
            1,
            "that call took the new sum and answered it"
        );
        d.answered(Some(asked), &peers.peers);
        assert_eq!(d.answered.load(SeqCst), 1);
        {
            let askers = d.askers.lock();
            assert_eq!(askers.len(), 2);
            assert_eq!(
                (askers[0].rung, askers[1].rung),
                (0, 1),
                "only the one that asked"
            );
            assert!(
                askers[1].bell.is_none(),
                "its key names no page: not mapped"
            );
        }
        assert!(d.asked().is_none(), "answered: one load again");
        for k in 2..ASKERS as u64 {
            assert!(list(page, 8 << 32 | k).is_some());
        }
        assert_eq!(list(page, 9 << 32 | 1), None, "full");
    }
}
