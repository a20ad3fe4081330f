//! The ringer's side of the doorbell over shm (see `bell.rs` for the whole design): the peers a
//! domain's endpoints send to, found by address (one table per AV) and each mapped once
//! (`peer_bell.rs`), and rung when armed. Every rscntr(shm) domain has its peers
//! ([`DomainPeers`]), whether its own counters and CQs wait or not: a peer that sleeps is rung by
//! whoever completes work toward it.

use super::bell_files::Mutex;
pub use super::peer_bell::PeerBell;
use super::peer_bell::{Mapped, map_peer};
use std::sync::atomic::{AtomicPtr, Ordering::SeqCst};

/// The peers `ring_back` walks without a lock (the rest under it).
pub(super) const RING_LIST: usize = 64;

/// The peers reached through one AV, by fi_addr: looked up once each, lock-free after.
pub struct PeerTable {
    av: usize,
    /// fi_addr → NULL (not looked up), [`NO_BELL`] (none), [`RINGER`] (no bell, rings), or a
    /// mapped peer (owned by `all`).
    fast: Box<[AtomicPtr<PeerBell>]>,
    /// Every mapped peer (freed with the table), and the addresses beyond `fast`. Boxed: `fast`
    /// and `far` point at them while the vector grows.
    #[allow(clippy::vec_box)]
    all: Mutex<Vec<Box<PeerBell>>>,
    far: Mutex<std::collections::HashMap<u64, *const PeerBell>>,
}

// SAFETY: the peers are shared mappings touched through their atomic word only.
unsafe impl Send for PeerTable {}
// SAFETY: as above.
unsafe impl Sync for PeerTable {}

pub(super) const FAST: usize = 4096;
/// A peer without a bell that does not ring either (plain shm, another pid namespace).
pub(super) const NO_BELL: *mut PeerBell = std::ptr::without_provenance_mut(1);
/// A peer without a bell that rings (an rscntr endpoint of a domain that never waits).
pub(super) const RINGER: *mut PeerBell = std::ptr::without_provenance_mut(2);

/// Whether a table entry is a mapped peer (not NULL, [`NO_BELL`] or [`RINGER`]).
#[inline]
fn is_mapped(p: *const PeerBell) -> bool {
    p.addr() > RINGER.addr()
}

/// What a peer lookup found, for the caller's log.
pub enum Looked<'a> {
    Bell(&'a PeerBell),
    /// Neither a bell nor a peer that rings: the domain's waits must not count on rings.
    NoBell,
    /// No bell, but a peer that rings; its answers page, where it has one.
    Ringer(Option<&'a PeerBell>),
}

impl<'a> Looked<'a> {
    /// # Safety
    /// `p` is a table entry other than NULL; a mapped peer lives as long as `'a`.
    unsafe fn of(p: *const PeerBell) -> Looked<'a> {
        if is_mapped(p) {
            // SAFETY: caller's contract.
            let peer = unsafe { &*p };
            if peer.has_bell() {
                Looked::Bell(peer)
            } else {
                Looked::Ringer(Some(peer))
            }
        } else if p == RINGER.cast_const() {
            Looked::Ringer(None)
        } else {
            Looked::NoBell
        }
    }
}

impl PeerTable {
    fn new(av: usize) -> PeerTable {
        PeerTable {
            av,
            fast: (0..FAST)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            all: Mutex::new(Vec::new()),
            far: Mutex::new(Default::default()),
        }
    }

    /// The peer at `fi_addr`, looked up with `lookup` (its shm address) the first time, and
    /// the same answer from its table entry every time after.
    #[inline]
    pub fn get(
        &self,
        fi_addr: u64,
        lookup: impl FnOnce() -> Option<Vec<u8>>,
        peers: &DomainPeers,
    ) -> Looked<'_> {
        if let Some(slot) = self.fast.get(fi_addr as usize) {
            let p = slot.load(std::sync::atomic::Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: not NULL; a mapped peer is owned by `all`, freed with the table.
                return unsafe { Looked::of(p) };
            }
        }
        self.slow(fi_addr, lookup, peers)
    }

    #[cold]
    fn slow(
        &self,
        fi_addr: u64,
        lookup: impl FnOnce() -> Option<Vec<u8>>,
        peers: &DomainPeers,
    ) -> Looked<'_> {
        if (fi_addr as usize) >= FAST
            && let Some(p) = self.far.lock().get(&fi_addr).copied()
        {
            // SAFETY: as in get.
            return unsafe { Looked::of(p) };
        }
        let found = lookup().and_then(|addr| map_peer(&addr));
        let p = match found {
            Some(Mapped::Ringer(None)) => RINGER,
            Some(Mapped::Ringer(Some(b))) => {
                let b = Box::new(b);
                let p = &*b as *const PeerBell as *mut PeerBell;
                // Nothing to ring: never on the ring-back list.
                self.all.lock().push(b);
                p
            }
            Some(Mapped::Bell(b)) => {
                let b = Box::new(b);
                let p = &*b as *const PeerBell as *mut PeerBell;
                // Boxed, it stays where it is; listed after the table's lock is let go (see
                // `DomainPeers::ring_back` for the lock order).
                let own = peers.is_own(&b);
                self.all.lock().push(b);
                if !own {
                    peers.listed(p);
                }
                p
            }
            None => NO_BELL,
        };
        match self.fast.get(fi_addr as usize) {
            Some(slot) => {
                // A racing lookup of the same address may have stored its own: keep the first.
                if let Err(existing) = slot.compare_exchange(
                    std::ptr::null_mut(),
                    p,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                ) && is_mapped(existing)
                {
                    // SAFETY: as in get.
                    return unsafe { Looked::of(existing) };
                }
            }
            None => {
                self.far.lock().insert(fi_addr, p);
            }
        }
        // SAFETY: as in get.
        unsafe { Looked::of(p) }
    }

    /// Rings every mapped peer that is armed, but the domain's own bell (see
    /// `DomainPeers::listed`).
    fn ring_armed(&self, peers: &DomainPeers) {
        for p in self.all.lock().iter() {
            if p.has_bell() && !peers.is_own(p) {
                p.ring_if_armed();
            }
        }
    }
}

/// The peers a domain's endpoints have mapped, one [`PeerTable`] per AV, and the first
/// [`RING_LIST`] of them on a list walked without a lock: what a pull in the domain rings
/// afterwards (`ring_back`: a response its progress made may be what a sleeping peer waits
/// for). A domain has one whether it waits or not.
pub struct DomainPeers {
    tables: Mutex<Vec<std::sync::Arc<PeerTable>>>,
    ring_list: [AtomicPtr<PeerBell>; RING_LIST],
    ring_list_len: std::sync::atomic::AtomicUsize,
    /// The (device, inode) of the domain's own bell's page, once it has a bell.
    own: std::sync::OnceLock<(u64, u64)>,
}

impl Default for DomainPeers {
    fn default() -> Self {
        DomainPeers {
            tables: Mutex::new(Vec::new()),
            ring_list: [const { AtomicPtr::new(std::ptr::null_mut()) }; RING_LIST],
            ring_list_len: std::sync::atomic::AtomicUsize::new(0),
            own: std::sync::OnceLock::new(),
        }
    }
}

impl DomainPeers {
    /// The domain made its bell, whose page is the file (device, inode): never listed for
    /// `ring_back` (see [`Self::listed`]). Set before the bell is published, so before any peer
    /// (an endpoint of the domain itself among them) can map it.
    pub fn set_own(&self, file: (u64, u64)) {
        let _ = self.own.set(file);
    }

    /// The peers an endpoint of the domain rings through its AV `av` (one table per AV).
    pub fn table_of(&self, av: usize) -> std::sync::Arc<PeerTable> {
        let mut tables = self.tables.lock();
        if let Some(t) = tables.iter().find(|t| t.av == av) {
            return t.clone();
        }
        let t = std::sync::Arc::new(PeerTable::new(av));
        tables.push(t.clone());
        t
    }

    /// Rings each peer the domain's endpoints have mapped that is armed: one load while none
    /// is mapped, one fence and a load per peer otherwise.
    pub fn ring_back(&self) {
        let n = self
            .ring_list_len
            .load(std::sync::atomic::Ordering::Acquire);
        if n == 0 {
            return;
        }
        // One fence for all the loads (see `engine::bell::rings`): what this thread's progress
        // published comes before them.
        std::sync::atomic::fence(SeqCst);
        for slot in &self.ring_list[..n] {
            let p = slot.load(std::sync::atomic::Ordering::Acquire);
            // SAFETY: a peer of one of this domain's tables, which it keeps (and the tables
            // their peers) until it is dropped.
            if let Some(p) = unsafe { p.as_ref() } {
                p.ring_if_armed_fenced();
            }
        }
        if n == RING_LIST {
            // More peers than the list holds: every peer of every table the slow way (the
            // list's own twice: a word swapped to 0 rings once). Lock order: the domain's
            // tables, then a table's (`PeerTable::slow` lets go of the table's before it lists).
            for t in self.tables.lock().iter() {
                t.ring_armed(self);
            }
        }
    }

    /// Whether `peer` is the domain's own bell, mapped by an endpoint of the domain that sends
    /// to another endpoint of it (MPI ranks put their own address in their AV).
    pub(super) fn is_own(&self, peer: &PeerBell) -> bool {
        self.own.get() == Some(&peer.file)
    }

    /// A peer just mapped by a table of the domain: on the list `ring_back` walks. Never the
    /// domain's own bell ([`Self::is_own`]): `ring_back` follows a waiter's pull, and that
    /// waiter has just armed its own word; ringing it would undo the arming (a datagram on its
    /// own socket, its word cleared), and the waiter would never sleep. Work that its pull
    /// completes for another waiter of the domain reaches it through the counters it moves
    /// (they interrupt their sleeping leader); a send toward the domain's own endpoint still
    /// rings it (`ring.rs`).
    fn listed(&self, p: *const PeerBell) {
        let _one_at_a_time = self.tables.lock();
        let n = self
            .ring_list_len
            .load(std::sync::atomic::Ordering::Acquire);
        if n < RING_LIST {
            self.ring_list[n].store(p.cast_mut(), std::sync::atomic::Ordering::Release);
            self.ring_list_len
                .store(n + 1, std::sync::atomic::Ordering::Release);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layer::doorbell::bell_files::{NO_PAGE, NameFile};

    /// An endpoint of a domain that never waits says that it rings; a peer that sends to it
    /// takes it for a ringer, not for a peer that never rings (plain shm: no file at all).
    #[test]
    fn a_ringer_record_maps_as_a_ringer_and_no_file_as_nothing() {
        let addr = format!("fi_shm://rscntr_ringer_test_{}", std::process::id());
        assert!(map_peer(addr.as_bytes()).is_none(), "no file yet");
        let name = NameFile::create(addr.as_bytes(), NO_PAGE, -1, 0).expect("published");
        assert!(matches!(
            map_peer(addr.as_bytes()),
            Some(Mapped::Ringer(None))
        ));
        drop(name);
        assert!(
            map_peer(addr.as_bytes()).is_none(),
            "the file went with the record"
        );
        let gone = NameFile::create(addr.as_bytes(), -1, -1, 0).expect("published");
        assert!(
            map_peer(addr.as_bytes()).is_none(),
            "a record naming no page"
        );
        drop(gone);
    }

    /// A table answers each address's lookup once: a ringer and a peer without a bell are told
    /// apart the first time, and told the same again without a lookup.
    #[test]
    fn a_table_looks_each_address_up_once() {
        let addr = format!("fi_shm://rscntr_table_test_{}", std::process::id());
        let name = NameFile::create(addr.as_bytes(), NO_PAGE, -1, 0).expect("published");
        let peers = DomainPeers::default();
        let table = peers.table_of(1);
        let lookups = std::cell::Cell::new(0);
        let look = |a: &str| {
            lookups.set(lookups.get() + 1);
            Some(a.as_bytes().to_vec())
        };
        for _ in 0..2 {
            assert!(matches!(
                table.get(3, || look(&addr), &peers),
                Looked::Ringer(None)
            ));
            assert!(matches!(
                table.get(4, || look("fi_shm://nobody_here"), &peers),
                Looked::NoBell
            ));
        }
        assert_eq!(lookups.get(), 2);
        drop(name);
    }
}
