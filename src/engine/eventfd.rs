//! A non-blocking Linux eventfd: the file descriptor an FI_WAIT_FD counter hands out.
//!
//! Under `--cfg loom` (`tests/loom_wait.rs`) an [`EventFd`] is a model instead: the kernel's
//! counter as a loom atomic, so the checker sees every signal and drain.

#[cfg(loom)]
pub use model::{EventFd, signal_raw};
#[cfg(not(loom))]
pub use real::{EventFd, signal_raw};

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Sleeps in the kernel until `fd` or `kick` is readable, or `limit` has passed (None: no
/// limit); a signal interrupts it too. What a blocker that waits on a core's fd does, with the
/// eventfd that interrupts it as `kick` (a negative fd is ignored, as ppoll does).
pub fn sleep_until_readable(fd: RawFd, kick: RawFd, limit: Option<Duration>) {
    poll_readable(fd, kick, limit);
}

/// Sleeps in the kernel until one of `fds` or `kick` is readable, or `limit` has passed (None:
/// no limit): what a room's leader does when its members sleep on different fds. Leaves in
/// `readable` those of `fds` that were readable.
pub fn sleep_until_any_readable(
    fds: impl IntoIterator<Item = RawFd>,
    kick: RawFd,
    limit: Option<Duration>,
    readable: &mut Vec<RawFd>,
) {
    let mut watch: Vec<libc::pollfd> = fds.into_iter().map(pollin).collect();
    let polled = watch.len();
    watch.push(pollin(kick));
    ppoll_for(&mut watch, limit);
    readable.clear();
    readable.extend(
        watch[..polled]
            .iter()
            .filter(|p| p.revents != 0)
            .map(|p| p.fd),
    );
}

/// As [`sleep_until_readable`]; true when `fd` (not `kick`) was readable at the end.
pub fn poll_readable(fd: RawFd, kick: RawFd, limit: Option<Duration>) -> bool {
    poll_which(fd, kick, limit).0
}

/// As [`sleep_until_readable`]; says whether the sleep ended by `fd` or `kick` being
/// readable (true, true...) or by `limit` (false, false).
pub fn poll_which(fd: RawFd, kick: RawFd, limit: Option<Duration>) -> (bool, bool) {
    let mut fds = [pollin(fd), pollin(kick)];
    let n = ppoll_for(&mut fds, limit);
    (n > 0 && fds[0].revents != 0, n > 0 && fds[1].revents != 0)
}

/// A new epoll set (close-on-exec) that holds `fd` for reading: what an FD counter of a layered
/// domain hands out (its eventfd), and what a room's flattened set starts from (its kick).
pub fn epoll_set(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: no memory arguments; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    epoll_ctl(
        ep.as_raw_fd(),
        libc::EPOLL_CTL_ADD,
        fd,
        libc::EPOLLIN as u32,
    )?;
    Ok(ep)
}

/// `epoll_ctl(ep, op, fd)` under `events`, with `fd` itself as the event's data (what
/// `epoll_wait` reports it by).
pub fn epoll_ctl(ep: RawFd, op: libc::c_int, fd: RawFd, events: u32) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events,
        u64: fd as u64,
    };
    // SAFETY: `ev` lives across the call; the kernel checks the fds.
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A pollfd asking whether `fd` is readable.
fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `ppoll` on `fds` for at most `limit` (None: no limit), no signal mask; what ppoll returned.
fn ppoll_for(fds: &mut [libc::pollfd], limit: Option<Duration>) -> libc::c_int {
    let ts = limit.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` holds fds.len() live pollfds; tsp is NULL or points at a live timespec.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    }
}

#[cfg(not(loom))]
mod real {

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    #[derive(Debug)]
    pub struct EventFd(OwnedFd);

    impl EventFd {
        pub fn new() -> io::Result<Self> {
            // SAFETY: eventfd has no memory arguments; the result is checked before use.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        /// Makes the fd readable (adds 1 to the eventfd's count).
        pub fn signal(&self) {
            signal_raw(self.0.as_raw_fd());
        }

        /// Consumes a pending signal, if any, so the fd is no longer readable.
        pub fn drain(&self) {
            let mut buf: u64 = 0;
            // SAFETY: reads at most 8 bytes into a live u64; EAGAIN (nothing pending) is fine.
            unsafe { libc::read(self.0.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
        }
    }

    impl AsRawFd for EventFd {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_raw_fd()
        }
    }

    /// [`EventFd::signal`] through the raw fd of an eventfd its owner keeps open while the fd is
    /// known to the caller (a sleeper's kick, registered for the time it sleeps).
    pub fn signal_raw(fd: RawFd) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd (the callers' contract). A full
        // count (EAGAIN) already means readable, so the result needs no handling.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

#[cfg(loom)]
mod model {
    use crate::engine::sync::AtomicU64;
    use std::io;
    use std::os::fd::{AsRawFd, RawFd};
    use std::sync::atomic::Ordering::SeqCst;

    /// The eventfd's 64-bit count; readable while non-zero.
    #[derive(Debug)]
    pub struct EventFd(AtomicU64);

    impl EventFd {
        pub fn new() -> io::Result<Self> {
            Ok(EventFd(AtomicU64::new(0)))
        }
        pub fn signal(&self) {
            self.0.fetch_add(1, SeqCst);
        }
        pub fn drain(&self) {
            self.0.swap(0, SeqCst);
        }
        pub fn is_readable(&self) -> bool {
            self.0.load(SeqCst) != 0
        }
    }

    /// Under loom there are no raw fds (see `AsRawFd` below): nothing to signal.
    pub fn signal_raw(_fd: RawFd) {}

    impl AsRawFd for EventFd {
        fn as_raw_fd(&self) -> RawFd {
            -1
        }
    }
}
