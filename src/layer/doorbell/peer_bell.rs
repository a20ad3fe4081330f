//! A peer's doorbell over shm, as the domains that ring it see it (see `bell.rs` for the whole
//! design): its pages mapped from its name file (the bell page, and the answers page of
//! `answers.rs`), checked, and rung when armed. The tables that find a peer by address, and a
//! domain's peers, are `peers.rs`.

use super::bell_files::{
    ADDR_MAX, ANSWERS_MAGIC, AnswersPage, HINT_ALL, Hints, MAGIC, NO_PAGE, PAGE, Page, SLOT_WORDS,
    VERSION, bare_name, join_hints, last_error, map_page, name_path, pid_ns, read_record,
    slot_bits_of, split_hints,
};
use crate::engine::{bell, futex};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::SeqCst;

/// A peer's bell, mapped: its armed word, and its socket's address (copied once, checked); and
/// the peer's answers page, where this domain's waiters ask (see `answers.rs`). A peer whose
/// domain never waits has the answers page only (`page` NULL: nothing to ring).
pub struct PeerBell {
    page: *mut Page,
    /// The peer's domain's answers page (NULL: none, or it did not check out).
    pub(super) answers: *mut AnswersPage,
    /// Where this domain is listed in `answers`: 0 not yet, its index + 1, or `u32::MAX` when it
    /// could not be (see [`PeerBell::ask`]).
    pub(super) listed: std::sync::atomic::AtomicU32,
    addr: libc::sockaddr_un,
    addr_len: libc::socklen_t,
    /// What to set in the page's `hints` when ringing (from the peer's name record).
    hints: Hints,
    /// The bits of `hints` in the page's slot words: the waiters to wake one by one.
    slot_bits: [u32; SLOT_WORDS],
    /// The page's file (device, inode): the domain's own bell when an endpoint sends to an
    /// endpoint of its own domain (see [`DomainPeers::is_own`]).
    pub(super) file: (u64, u64),
}

impl Drop for PeerBell {
    fn drop(&mut self) {
        for p in [self.page.cast::<u8>(), self.answers.cast()] {
            if !p.is_null() {
                // SAFETY: mapped by map_peer (or map_asker), unmapped once.
                unsafe { libc::munmap(p.cast(), PAGE) };
            }
        }
    }
}

impl PeerBell {
    /// After an operation toward the peer: one fence and one load while it is not armed.
    #[inline]
    pub fn ring_if_armed(&self) {
        // SAFETY: mapped as long as self lives; only its atomics are touched.
        let page = unsafe { &*self.page };
        let ways = bell::rings_telling(&page.armed, || self.hint(page));
        if ways != 0 {
            self.ring(ways);
        }
        self.ring_slots(page);
    }

    /// As `ring_if_armed`, for a caller that has issued the fence already.
    #[inline]
    pub(super) fn ring_if_armed_fenced(&self) {
        // SAFETY: mapped as long as self lives; only its atomics are touched.
        let page = unsafe { &*self.page };
        let ways = bell::rings_after_fence_telling(&page.armed, || self.hint(page));
        if ways != 0 {
            self.ring(ways);
        }
        self.ring_slots(page);
    }

    /// After the armed word (and its fence): the waiters asleep on the slots of the counters
    /// bound to the endpoint, each woken alone (one load per slot word while none is armed).
    #[inline]
    fn ring_slots(&self, page: &Page) {
        for (word, &bits) in page.slots.iter().zip(&self.slot_bits) {
            if bits != 0 {
                let taken = bell::rings_slots_after_fence(word, bits);
                if taken != 0 {
                    self.wake_slots(page, word, taken);
                }
            }
        }
    }

    /// Wakes the sleepers of the slot bits `taken` of `word` (see [`SlotBlocker`]).
    #[cold]
    fn wake_slots(&self, page: &Page, word: &bell::AtomicU32, taken: u32) {
        page.note_ringers_cpu();
        // SAFETY: the peer's word, mapped as long as self lives.
        unsafe { futex::wake_bits(std::ptr::from_ref(word).cast(), taken) };
    }

    /// Where the operation landed, for the thread the ring wakes (see `progress_hinted`) or, the
    /// word rung (`engine::bell::RUNG`), for the next arming (see `arm_for`); every feed when
    /// the peer's record names none.
    #[cold]
    fn hint(&self, page: &Page) {
        let bits = if self.hints != 0 {
            self.hints
        } else {
            HINT_ALL
        };
        for (half, bits) in page.hints.iter().zip(split_hints(bits)) {
            if bits != 0 {
                half.fetch_or(bits, SeqCst);
            }
        }
    }

    /// Rings an asker after this domain's progress answered what it asked (see `answers.rs`):
    /// its armed word with the hints of its feeds that wait for answers, then those feeds' slot
    /// waiters; nothing for a peer without a bell.
    #[cold]
    pub(super) fn ring_answered(&self) {
        // SAFETY: mapped as long as self lives; only its atomics are touched.
        let Some(page) = (unsafe { self.page.as_ref() }) else {
            return;
        };
        let ways = bell::rings_telling(&page.armed, || {
            for (half, asked) in page.hints.iter().zip(&page.answer_hints) {
                let bits = asked.load(SeqCst);
                if bits != 0 {
                    half.fetch_or(bits, SeqCst);
                }
            }
        });
        if ways != 0 {
            self.ring(ways);
        }
        for (word, asked) in page.slots.iter().zip(&page.answer_slots) {
            let bits = asked.load(SeqCst);
            if bits != 0 {
                let taken = bell::rings_slots_after_fence(word, bits);
                if taken != 0 {
                    self.wake_slots(page, word, taken);
                }
            }
        }
    }

    /// Rings the `ways` this thread disarmed: one syscall each.
    #[cold]
    fn ring(&self, ways: u32) {
        if ways & bell::FUTEX != 0 {
            // SAFETY: mapped as long as self lives; only its atomics are touched.
            let page = unsafe { &*self.page };
            page.note_ringers_cpu();
            // SAFETY: the peer's word, mapped as long as self lives.
            unsafe { futex::wake_all(page.armed_word()) };
        }
        if ways & bell::SOCKET == 0 {
            return;
        }
        let byte = [1u8];
        // Errors are ignored: EAGAIN means a wake is queued already; a peer that closed or
        // died has nobody to wake.
        // SAFETY: the process's sending socket; byte and addr live across the call.
        unsafe {
            libc::sendto(
                send_socket(),
                byte.as_ptr().cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (&self.addr as *const libc::sockaddr_un).cast(),
                self.addr_len,
            )
        };
    }
}

/// The process's socket for ringing (unbound).
pub(super) fn send_socket() -> RawFd {
    static SOCK: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    SOCK.get_or_init(|| {
        // SAFETY: no memory arguments; checked.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        // SAFETY: a fresh descriptor nothing else owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
    .map_or(-1, |s| s.as_raw_fd())
}

/// What a peer's name file says about it.
pub(super) enum Mapped {
    /// Its bell, mapped (and its answers page, when it has one).
    Bell(PeerBell),
    /// An rscntr endpoint of this pid namespace whose domain never waits: it rings its peers,
    /// nobody needs to ring it; its answers page when it has one (`page` NULL).
    Ringer(Option<PeerBell>),
}

/// Maps the bell published under a peer's shm address, if there is one that checks out.
pub(super) fn map_peer(addr: &[u8]) -> Option<Mapped> {
    let path = name_path(addr);
    let shown = String::from_utf8_lossy(bare_name(addr)).into_owned();
    let Some(r) = read_record(std::path::Path::new(path.to_str().ok()?)) else {
        crate::fi_dbg!(EpData, "no doorbell for peer {shown:?} ({path:?})");
        return None;
    };
    if r.pid_ns != pid_ns() {
        crate::fi_dbg!(
            EpData,
            "the doorbell of peer {shown:?} is in another pid namespace"
        );
        return None;
    }
    let answers = map_answers(r.pid, r.answers, &shown);
    if r.fd == NO_PAGE {
        crate::fi_dbg!(EpData, "peer {shown:?} rings, and has no doorbell");
        return Some(Mapped::Ringer(
            (!answers.is_null()).then(|| PeerBell::answers_only(answers)),
        ));
    }
    let bell = map_bell(r.pid, r.fd, join_hints(r.hints), &shown);
    match bell {
        Some(mut b) => {
            b.answers = answers;
            Some(Mapped::Bell(b))
        }
        None => {
            if !answers.is_null() {
                // SAFETY: mapped just above, by nothing else.
                unsafe { libc::munmap(answers.cast(), PAGE) };
            }
            None
        }
    }
}

/// A sealed page of exactly [`PAGE`] bytes, descriptor `fd` of process `pid` (of this pid
/// namespace), mapped; and its file (device, inode).
fn map_sealed(pid: u32, fd: i32, shown: &str) -> Option<(*mut Page, (u64, u64))> {
    if fd < 0 || pid == 0 {
        return None;
    }
    let proc_path = CString::new(format!("/proc/{pid}/fd/{fd}")).ok()?;
    // Non-blocking and never a controlling terminal: a key from a peer's garbage may name any
    // descriptor of any process of this user (only a sealed page of ours is then kept).
    // SAFETY: a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            proc_path.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        crate::fi_dbg!(
            EpData,
            "cannot open the page of peer {shown:?} ({proc_path:?}): {}",
            last_error()
        );
        return None;
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    // Sealed against shrinking, exactly a page: mapping it can never fault.
    // SAFETY: our descriptor.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    // SAFETY: an all-zero stat is valid as an out value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st lives across the call.
    let ok = seals >= 0
        && seals & libc::F_SEAL_SHRINK != 0
        && unsafe { libc::fstat(file.as_raw_fd(), &mut st) } == 0
        && st.st_size as usize == PAGE;
    if !ok {
        crate::fi_dbg!(EpData, "the page of peer {shown:?} is not a sealed page");
        return None;
    }
    let page = map_page(file.as_raw_fd()).ok()?;
    Some((page, (st.st_dev, st.st_ino)))
}

/// A peer's answers page (descriptor `fd` of `pid`), mapped if it checks out; NULL otherwise.
fn map_answers(pid: u32, fd: i32, shown: &str) -> *mut AnswersPage {
    let Some((page, _)) = map_sealed(pid, fd, shown) else {
        return std::ptr::null_mut();
    };
    let page: *mut AnswersPage = page.cast();
    // SAFETY: a mapping of PAGE bytes; read once, checked.
    let (magic, version) = unsafe { ((*page).magic, (*page).version) };
    if magic != ANSWERS_MAGIC || version != VERSION {
        crate::fi_dbg!(
            EpData,
            "the answers page of peer {shown:?} does not check out"
        );
        // SAFETY: mapped just above.
        unsafe { libc::munmap(page.cast(), PAGE) };
        return std::ptr::null_mut();
    }
    page
}

/// A bell page (descriptor `fd` of `pid`), mapped if it checks out, rung with `hints`.
pub(super) fn map_bell(pid: u32, fd: i32, hints: Hints, shown: &str) -> Option<PeerBell> {
    let (page, file) = map_sealed(pid, fd, shown)?;
    // SAFETY: a mapping of PAGE bytes; read once, checked.
    let (magic, version, len, bytes) = unsafe {
        (
            (*page).magic,
            (*page).version,
            (*page).addr_len as usize,
            (*page).addr,
        )
    };
    if magic != MAGIC || version != VERSION || len == 0 || len > ADDR_MAX {
        crate::fi_dbg!(
            EpData,
            "the doorbell page of peer {shown:?} does not check out"
        );
        // SAFETY: mapped just above.
        unsafe { libc::munmap(page.cast(), PAGE) };
        return None;
    }
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in sa.sun_path.iter_mut().zip(bytes.iter().take(len)) {
        *dst = *src as libc::c_char;
    }
    Some(PeerBell {
        page,
        answers: std::ptr::null_mut(),
        listed: std::sync::atomic::AtomicU32::new(0),
        addr: sa,
        addr_len: (std::mem::size_of::<libc::sa_family_t>() + len) as libc::socklen_t,
        hints,
        slot_bits: slot_bits_of(hints),
        file,
    })
}

impl PeerBell {
    /// A peer whose domain never waits: its answers page only.
    fn answers_only(answers: *mut AnswersPage) -> PeerBell {
        // SAFETY: an all-zero sockaddr_un is valid.
        let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        PeerBell {
            page: std::ptr::null_mut(),
            answers,
            listed: std::sync::atomic::AtomicU32::new(0),
            addr,
            addr_len: 0,
            hints: 0,
            slot_bits: [0; SLOT_WORDS],
            file: (0, 0),
        }
    }

    /// Whether the peer has a bell (a peer whose domain never waits has none).
    pub(super) fn has_bell(&self) -> bool {
        !self.page.is_null()
    }
}
