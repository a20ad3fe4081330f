//! A room leader's sleep over many members' fds, as one persistent epoll set of what those fds
//! are made of (their *leaves*), instead of a `ppoll` over the fds themselves.
//!
//! Over `tcp;ofi_rxm` each member's fd is a wait set (an epoll fd) that holds other wait sets,
//! and all of them hold tcp's one progress fd (an epoll set of the domain's sockets). A `ppoll`
//! over 64 such fds registers on all 64 before each sleep, every completion runs 64 wakeup
//! chains through the nesting, and the leader's look after a pull (which members are still
//! readable) polls all 64 again (docs/design.md, "One wake per completion"). A persistent epoll
//! set of the members' own fds is refused by the kernel past about 50 of them (the limit on
//! wakeup paths through nested sets, `reverse_path_check`). This set holds instead what the
//! members' wait sets hold, read from `/proc/self/fdinfo` (proc(5): one `tfd:` line per item of
//! an epoll fd, with its event mask and the file's inode and device):
//!
//! - a wait set that holds other epoll sets (a *wrapper*: rxm's and util's wait sets) is
//!   replaced by its items, recursively;
//! - an epoll set that holds none (a core's own set of sockets, whose masks the core changes as
//!   it goes), and any other file, is a leaf, registered once however many members hold it.
//!
//! So tcp's progress fd is registered once, a completion runs one wakeup chain, and a look
//! returns only the leaves that are ready, which map back to their members. Readiness is the
//! same as the nested sets' (a set is readable when one of its items is, under the item's own
//! mask; items registered edge-triggered, one-shot or exclusive are refused, and the room falls
//! back to `ppoll`).
//!
//! What a wrapper holds changes only when the core adds or removes fds: rxm and rxd do it when
//! an endpoint is bound, enabled or closed, which the layer sees, and tells the room
//! ([`Room::wait_sets_changed`](super::Room::wait_sets_changed)): the set is then rebuilt before
//! the leader's next sleep. In case a core changes a wrapper without such a call, a leader never
//! sleeps here longer than [`RECHECK`] without looking at the members' own fds: one readable
//! there that no leaf reported rebuilds the set (a wake at most that late, never lost).

use super::eventfd::{epoll_ctl, epoll_set};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The longest sleep in the set before the members' own fds are looked at (see the module doc).
pub const RECHECK: Duration = Duration::from_secs(1);

/// Nesting deeper than this is not flattened (rxm over tcp nests three deep).
const MAX_DEPTH: u32 = 6;

/// Item flags under which a nested set does not report its item as a plain level-triggered
/// registration would.
const UNFLATTENABLE: u32 = (libc::EPOLLET | libc::EPOLLONESHOT | libc::EPOLLEXCLUSIVE) as u32;
/// The readiness bits an item's mask selects (EPOLLERR and EPOLLHUP are always reported).
const READINESS: u32 = (libc::EPOLLIN
    | libc::EPOLLPRI
    | libc::EPOLLOUT
    | libc::EPOLLRDNORM
    | libc::EPOLLRDBAND
    | libc::EPOLLWRNORM
    | libc::EPOLLWRBAND
    | libc::EPOLLMSG
    | libc::EPOLLRDHUP) as u32;

/// Ready leaves taken per wait (more are returned by the next one: the set is level-triggered).
const READY_AT_ONCE: usize = 256;

/// `epoll_pwait2` (Linux 5.11, a timeout in nanoseconds) was refused once: `epoll_wait` since.
static NO_PWAIT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Why a set of fds could not be flattened; the room then polls the fds themselves.
#[derive(Debug)]
pub enum Unflattened {
    /// `/proc/self/fdinfo` unreadable or not as expected.
    Proc(RawFd),
    /// An item registered with a flag that flattening would change (edge, one-shot, exclusive).
    Flags(RawFd),
    /// Nested deeper than [`MAX_DEPTH`].
    Depth(RawFd),
    /// An item's fd number no longer names the file the set holds (closed, and the number
    /// reused, while the file lives on elsewhere).
    Stale(RawFd),
    /// The kernel refused to register a leaf.
    Register(RawFd, io::Error),
}

impl std::fmt::Display for Unflattened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unflattened::Proc(fd) => write!(f, "/proc/self/fdinfo/{fd} unreadable or unexpected"),
            Unflattened::Flags(fd) => {
                write!(
                    f,
                    "fd {fd} holds an edge-triggered, one-shot or exclusive item"
                )
            }
            Unflattened::Depth(fd) => write!(f, "fd {fd} nests deeper than {MAX_DEPTH}"),
            Unflattened::Stale(fd) => write!(f, "fd {fd} is no longer the file its set holds"),
            Unflattened::Register(fd, e) => write!(f, "epoll_ctl refused leaf {fd}: {e}"),
        }
    }
}

/// What ended [`FlatSet::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// Leaves were ready (their members are in `readable`).
    Leaves,
    /// Only the kick.
    Kick,
    /// The limit passed.
    TimedOut,
    /// A signal.
    Interrupted,
}

/// A file a member's fd is made of, with the mask its wait set registered it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub fd: RawFd,
    pub events: u32,
}

/// A member's fd, as flattened: `active` while the leader's sleep is for it; `registered` while
/// its leaves are in the set, which they stay after the member left (it *rests*) until a leaf
/// of it is ready with no active holder ([`FlatSet::evict`]).
struct Member {
    serial: u64,
    fd: RawFd,
    leaves: Vec<Leaf>,
    active: bool,
    registered: bool,
}

/// A leaf in the epoll set: how many members whose leaves are in the set (active or resting)
/// hold it, under which mask.
struct Registered {
    fd: RawFd,
    events: u32,
    holders: u32,
}

/// The leader's persistent epoll set (see the module doc). Used by one thread at a time (the
/// room's leader, which holds the room's lock of it while it sleeps in it).
pub struct FlatSet {
    ep: OwnedFd,
    /// The room's kick, in the set from the start (its data its fd, as every leaf's).
    kick: RawFd,
    /// The device of anonymous-inode files (epoll sets, eventfds such as the kick), in the
    /// kernel's encoding: the only items that may be epoll sets (sockets, pipes and files are
    /// not). None if the kick could not be looked at: then every item is asked.
    anon_dev: Option<u64>,
    /// The room's wait-set generation this set was built for.
    generation: u64,
    members: Vec<Member>,
    registered: Vec<Registered>,
    ready: Vec<libc::epoll_event>,
    /// Leaves the last wait found ready that no active member holds.
    orphans: Vec<RawFd>,
}

impl FlatSet {
    /// An empty set that `kick` (an eventfd) interrupts.
    pub fn new(kick: RawFd) -> io::Result<Self> {
        let set = FlatSet {
            ep: epoll_set(kick)?,
            kick,
            anon_dev: file_id(kick).map(|(dev, _)| dev),
            generation: 0,
            members: Vec::new(),
            registered: Vec::new(),
            ready: vec![libc::epoll_event { events: 0, u64: 0 }; READY_AT_ONCE],
            orphans: Vec::new(),
        };
        Ok(set)
    }

    /// The generation of the wait sets this set was built for (see [`FlatSet::sync`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Makes the set hold the leaves of `members` (`(serial, fd)`: a blocker's
    /// [`serial`](super::Blocker::serial), 0 when it has none, and its fd), which are its active
    /// members from now on. A member flattened before under the same serial and `generation`
    /// is not read again. The leaves of members that are not asked for any more stay in the set
    /// (they rest: a waiter whose wait returned is back soon, and its coming back then costs no
    /// `epoll_ctl`) until [`FlatSet::evict`]. On an error the set is emptied (the caller polls
    /// the fds themselves).
    pub fn sync(&mut self, generation: u64, members: &[(u64, RawFd)]) -> Result<(), Unflattened> {
        if generation != self.generation {
            self.reset(generation)?;
        }
        let result = self.sync_members(members);
        if result.is_err() {
            // The next sync starts from nothing.
            self.reset(generation)?;
        }
        result
    }

    fn sync_members(&mut self, members: &[(u64, RawFd)]) -> Result<(), Unflattened> {
        for m in &mut self.members {
            m.active = members
                .iter()
                .any(|&(s, fd)| s == m.serial && fd == m.fd && (s != 0 || m.active));
        }
        // A member without a serial cannot be told from another under its fd number once it
        // left: it does not rest. Forget too what no sync asks for any more (a closed
        // counter's blocker), except the active ones.
        if self.members.len() > 2 * members.len() + 16 {
            self.forget(|m| !m.active);
        } else {
            self.forget(|m| m.serial == 0 && !m.active);
        }
        let mut seen = Seen {
            anon_dev: self.anon_dev,
            ..Seen::default()
        };
        for &(serial, fd) in members {
            let k = match self
                .members
                .iter()
                .position(|m| m.serial == serial && m.fd == fd && (serial != 0 || m.active))
            {
                Some(k) => k,
                None => {
                    // Another member under this fd number (a blocker without a serial, or one
                    // closed and its number reused) is not this one.
                    self.forget(|m| m.fd == fd);
                    let mut leaves = Vec::new();
                    flatten(fd, libc::EPOLLIN as u32, 0, &mut seen, &mut leaves)?;
                    self.members.push(Member {
                        serial,
                        fd,
                        leaves,
                        active: false,
                        registered: false,
                    });
                    self.members.len() - 1
                }
            };
            self.members[k].active = true;
            if self.members[k].registered {
                continue;
            }
            let leaves = std::mem::take(&mut self.members[k].leaves);
            self.members[k].registered = true;
            let mut failed = None;
            for l in &leaves {
                if let Err(e) = self.register(*l) {
                    failed = Some(Unflattened::Register(l.fd, e));
                    break;
                }
            }
            self.members[k].leaves = leaves;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Takes the leaves of the member with fd `fd` out of the set, if it is not active (it
    /// left, and a leaf only it and other absent members hold was ready: [`FlatSet::orphans`]).
    pub fn evict(&mut self, fd: RawFd) {
        if let Some(k) = self
            .members
            .iter()
            .position(|m| m.fd == fd && m.registered && !m.active)
        {
            self.unregister_member(k);
        }
    }

    /// Unregisters and drops the members `which` selects.
    fn forget(&mut self, which: impl Fn(&Member) -> bool) {
        for k in 0..self.members.len() {
            if which(&self.members[k]) {
                self.unregister_member(k);
            }
        }
        self.members.retain(|m| !which(m));
    }

    fn unregister_member(&mut self, k: usize) {
        if std::mem::replace(&mut self.members[k].registered, false) {
            let leaves = std::mem::take(&mut self.members[k].leaves);
            for l in &leaves {
                self.unregister(l.fd);
            }
            self.members[k].leaves = leaves;
        }
    }

    /// The serials of the members whose leaves are in the set (active or resting).
    pub fn held(&self) -> impl Iterator<Item = u64> + '_ {
        self.members
            .iter()
            .filter(|m| m.registered && m.serial != 0)
            .map(|m| m.serial)
    }

    /// The leaves the last [`FlatSet::wait`] found ready that no active member holds.
    pub fn orphans(&self) -> &[RawFd] {
        &self.orphans
    }

    /// The resting members (serial and fd) that hold leaf `leaf`.
    pub fn resting_holders(&self, leaf: RawFd) -> impl Iterator<Item = (u64, RawFd)> + '_ {
        self.members
            .iter()
            .filter(move |m| m.registered && !m.active && m.leaves.iter().any(|l| l.fd == leaf))
            .map(|m| (m.serial, m.fd))
    }

    /// Drops every registration (a new epoll set: the files of the old one's fd numbers may
    /// have been closed and the numbers reused) and every flattening.
    fn reset(&mut self, generation: u64) -> Result<(), Unflattened> {
        self.ep = epoll_set(self.kick).map_err(|e| Unflattened::Register(self.kick, e))?;
        self.generation = generation;
        self.members.clear();
        self.registered.clear();
        self.orphans.clear();
        Ok(())
    }

    /// Sleeps until a leaf or the kick is ready, or `limit` passed (None: no limit); leaves in
    /// `readable` the fds of the active members that hold a ready leaf. A zero limit only looks.
    pub fn wait(&mut self, limit: Option<Duration>, readable: &mut Vec<RawFd>) -> Woken {
        let ts = limit.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        let mut n = -1;
        if !NO_PWAIT2.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: `ready` holds ready.len() writable events; tsp is NULL or a live
            // timespec; no signal mask (NULL).
            n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.ep.as_raw_fd(),
                    self.ready.as_mut_ptr(),
                    self.ready.len() as libc::c_int,
                    tsp,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            // Before Linux 5.11, or refused by a seccomp filter.
            if n < 0
                && matches!(
                    io::Error::last_os_error().raw_os_error(),
                    Some(libc::ENOSYS | libc::EPERM)
                )
            {
                NO_PWAIT2.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        if NO_PWAIT2.load(std::sync::atomic::Ordering::Relaxed) {
            // Milliseconds, rounded up (a core's timer bound is never shortened).
            let ms = limit.map_or(-1, |d| {
                d.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int
            });
            // SAFETY: as above.
            n = unsafe {
                libc::epoll_wait(
                    self.ep.as_raw_fd(),
                    self.ready.as_mut_ptr(),
                    self.ready.len() as libc::c_int,
                    ms,
                )
            } as libc::c_long;
        }
        readable.clear();
        self.orphans.clear();
        let mut woken = match n {
            0 => Woken::TimedOut,
            n if n < 0 => Woken::Interrupted,
            _ => Woken::Kick,
        };
        for e in &self.ready[..n.max(0) as usize] {
            let data = e.u64;
            if data == self.kick as u64 {
                continue;
            }
            woken = Woken::Leaves;
            let leaf = data as RawFd;
            let mut held = false;
            for m in self.members.iter().filter(|m| m.active) {
                if m.leaves.iter().any(|l| l.fd == leaf) {
                    held = true;
                    if !readable.contains(&m.fd) {
                        readable.push(m.fd);
                    }
                }
            }
            if !held {
                self.orphans.push(leaf);
            }
        }
        woken
    }

    /// The leaves of the active member with fd `fd` (for tests).
    pub fn leaves_of(&self, fd: RawFd) -> Option<&[Leaf]> {
        self.members
            .iter()
            .find(|m| m.active && m.fd == fd)
            .map(|m| &m.leaves[..])
    }

    /// Registered leaves (each once, however many members hold it).
    pub fn registered(&self) -> usize {
        self.registered.len()
    }

    fn register(&mut self, leaf: Leaf) -> io::Result<()> {
        if let Some(k) = self.registered.iter().position(|r| r.fd == leaf.fd) {
            let r = &mut self.registered[k];
            r.holders += 1;
            if r.events | leaf.events != r.events {
                r.events |= leaf.events;
                let (fd, events) = (r.fd, r.events);
                return self.ctl(libc::EPOLL_CTL_MOD, fd, events);
            }
            return Ok(());
        }
        self.ctl(libc::EPOLL_CTL_ADD, leaf.fd, leaf.events)?;
        self.registered.push(Registered {
            fd: leaf.fd,
            events: leaf.events,
            holders: 1,
        });
        Ok(())
    }

    fn unregister(&mut self, fd: RawFd) {
        if let Some(k) = self.registered.iter().position(|r| r.fd == fd) {
            self.registered[k].holders -= 1;
            if self.registered[k].holders == 0 {
                // A leaf closed since was removed by the kernel already (ENOENT): nothing to do.
                let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0);
                self.registered.swap_remove(k);
            }
        }
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32) -> io::Result<()> {
        epoll_ctl(self.ep.as_raw_fd(), op, fd, events)
    }
}

/// One item of an epoll fd, from its fdinfo.
#[derive(Debug, PartialEq, Eq)]
struct Item {
    fd: RawFd,
    events: u32,
    /// The inode of the item's file.
    ino: u64,
    /// The device of the item's file, in the kernel's encoding (major << 20 | minor).
    sdev: u64,
}

/// What one flattening (a sync) learnt: which fds are epoll sets, and which sets hold sets.
#[derive(Default)]
struct Seen {
    epoll: Vec<(RawFd, bool)>,
    wrapper: Vec<(RawFd, bool)>,
    /// [`FlatSet`]'s `anon_dev`.
    anon_dev: Option<u64>,
}

impl Seen {
    fn is_epoll(&mut self, fd: RawFd) -> bool {
        if let Some(&(_, e)) = self.epoll.iter().find(|(f, _)| *f == fd) {
            return e;
        }
        let e = std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .is_ok_and(|p| p.as_os_str() == "anon_inode:[eventpoll]");
        self.epoll.push((fd, e));
        e
    }
}

/// Appends to `out` the leaves of `fd`, registered under `events` by whatever holds it.
fn flatten(
    fd: RawFd,
    events: u32,
    depth: u32,
    seen: &mut Seen,
    out: &mut Vec<Leaf>,
) -> Result<(), Unflattened> {
    let leaf = Leaf {
        fd,
        events: events & READINESS,
    };
    if !seen.is_epoll(fd) {
        out.push(leaf);
        return Ok(());
    }
    let items = match seen.wrapper.iter().find(|(f, _)| *f == fd) {
        // A set already known to hold no sets is a leaf without reading it again (tcp's
        // progress fd, which every member holds, with one item per socket).
        Some((_, false)) => {
            out.push(leaf);
            return Ok(());
        }
        _ => items_of(fd)?,
    };
    let anon = seen.anon_dev;
    let wrapper = items
        .iter()
        .any(|i| anon.is_none_or(|d| d == i.sdev) && seen.is_epoll(i.fd));
    if !seen.wrapper.iter().any(|(f, _)| *f == fd) {
        seen.wrapper.push((fd, wrapper));
    }
    if !wrapper {
        out.push(leaf);
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err(Unflattened::Depth(fd));
    }
    for i in items {
        if i.events & UNFLATTENABLE != 0 {
            return Err(Unflattened::Flags(fd));
        }
        // The set knows the file, /proc the number it was added under. (Anonymous files share
        // one inode: for them this tells only that the number is still anonymous.)
        if file_id(i.fd) != Some((i.sdev, i.ino)) {
            return Err(Unflattened::Stale(i.fd));
        }
        flatten(i.fd, i.events, depth + 1, seen, out)?;
    }
    Ok(())
}

/// The device (in the kernel's encoding) and inode of the file `fd` names.
fn file_id(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: `st` is written by fstat before it is read.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer; the kernel checks the fd.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((kernel_dev(st.st_dev), st.st_ino))
}

/// A userspace `dev_t` in the kernel's internal encoding, as /proc prints it.
fn kernel_dev(dev: libc::dev_t) -> u64 {
    ((libc::major(dev) as u64) << 20) | libc::minor(dev) as u64
}

/// The items of epoll fd `fd`, from `/proc/self/fdinfo/<fd>`.
fn items_of(fd: RawFd) -> Result<Vec<Item>, Unflattened> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .map_err(|_| Unflattened::Proc(fd))?;
    parse_items(&text).ok_or(Unflattened::Proc(fd))
}

/// The `tfd:` lines of an epoll fd's fdinfo: `tfd: <fd> events: <hex> data: <hex> pos:<n>
/// ino:<hex> sdev:<hex>` (fs/eventpoll.c, `ep_show_fdinfo`). None if one is not of that form.
fn parse_items(text: &str) -> Option<Vec<Item>> {
    let mut items = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("tfd:") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let fd = words.next()?.parse::<RawFd>().ok()?;
        let (mut events, mut ino, mut sdev) = (None, None, None);
        while let Some(w) = words.next() {
            if w == "events:" {
                events = u32::from_str_radix(words.next()?, 16).ok();
            } else if let Some(v) = w.strip_prefix("ino:") {
                ino = u64::from_str_radix(v, 16).ok();
            } else if let Some(v) = w.strip_prefix("sdev:") {
                sdev = u64::from_str_radix(v, 16).ok();
            }
        }
        items.push(Item {
            fd,
            events: events?,
            ino: ino?,
            sdev: sdev?,
        });
    }
    Some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fdinfo_lines() {
        let text = "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t2067\n\
                    tfd:        7 events:       19 data:                7  pos:0 ino:813 sdev:10\n\
                    tfd:       12 events: 80000019 data: ffffffffffffffff  pos:0 ino:4c1b sdev:8\n";
        assert_eq!(
            parse_items(text),
            Some(vec![
                Item {
                    fd: 7,
                    events: 0x19,
                    ino: 0x813,
                    sdev: 0x10
                },
                Item {
                    fd: 12,
                    events: 0x8000_0019,
                    ino: 0x4c1b,
                    sdev: 0x8
                },
            ])
        );
        assert_eq!(parse_items("tfd: x events: 19 ino:1 sdev:1\n"), None);
        assert_eq!(parse_items("tfd: 3 events: 19 sdev:1\n"), None);
        assert_eq!(parse_items("tfd: 3 data: 1\n"), None);
    }
}
