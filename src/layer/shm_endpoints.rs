//! shm's endpoints, opened and closed while rscntr's own threads drive the domain's progress:
//! two things shm's progress and enable do to the endpoints of one process, made safe.
//!
//! **An endpoint bound to the AV is enabled at once.** When shm's progress maps a new peer
//! (`smr_progress_connreq` → `smr_map_to_region`), it updates every endpoint bound to the AV
//! (`smr_map_to_endpoint` on each endpoint's region); an endpoint bound but not yet enabled has
//! no region yet, and the progress reads through a NULL one (SIGSEGV). Over shm alone only the
//! application's threads drive progress; over rscntr its progress thread does too, at any time
//! (Sandia OpenSHMEM's `many-ctx`: its PE creates 32 contexts while the peer's first atomics
//! arrive). So rscntr binds the AV to the core endpoint only at FI_ENABLE, and binds and enables
//! under the domain's `closing` lock, which every drive of rscntr's takes for reading.
//!
//! **A closed endpoint's region stays mapped.** shm maps the region of a peer endpoint of the
//! same process by pointer once that peer has sent to it (`smr_map_to_region` finds the name in
//! its list of local endpoints), and keeps the pointer in the AV's peer map after the peer
//! closed: `smr_ep_close` unmaps the region (`smr_free`) and nothing clears the map's entry. The
//! next endpoint enabled on that AV visits every peer of the map (`smr_exchange_all_peers` →
//! `smr_map_to_endpoint`) and reads the unmapped region: SIGSEGV over shm alone too, on
//! libfabric 1.22 through 2.5.1 (1.17's shm passes). That is what an OpenSHMEM context does: it
//! puts or adds to its own PE, whose endpoint is in the same domain, and is destroyed while
//! other threads create theirs (SOS's `gettid_register`; `prov_test/local_peer_close.c`).
//!
//! So before the core closes an enabled shm endpoint, rscntr opens its region's file
//! (`/dev/shm/<the endpoint's name>`) and finds the region's mappings in `/proc/self/maps` by the
//! file's device and inode; after the close it maps the same file at the same addresses again,
//! with `MAP_FIXED_NOREPLACE`, so never over anything else. The stale pointer then reads the
//! closed endpoint's last state, which nothing progresses and no peer addresses again (shm never
//! reuses a name). The file is unlinked by then: its memory goes with the mappings, which shm's
//! AV close unmaps (`smr_map_cleanup` unmaps the peers it no longer finds among the process's
//! endpoints) or, failing that, the domain's close. The close and its remap run under the
//! domain's `closing` lock too, so an enable never runs in the window between them.

use super::doorbell::ring::ep_name;
use crate::{fi_info, fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Is `core` shm, whose endpoints rscntr enables and closes as this module says?
pub fn is_shm(core: &str) -> bool {
    core.eq_ignore_ascii_case("shm")
}

/// A domain's kept regions.
#[derive(Default)]
pub struct ClosedRegions {
    /// Each mapping kept: where, and of which file.
    kept: Mutex<Vec<Kept>>,
}

/// An endpoint about to close: its region's file, open, and where the region is mapped.
pub struct Closing {
    file: OwnedFd,
    file_id: FileId,
    /// Address, length and file offset of each mapping of the file.
    maps: Vec<(usize, usize, u64)>,
}

/// A file's device (major, minor) and inode, as /proc/self/maps shows them.
#[derive(Clone, Copy, PartialEq, Debug)]
struct FileId(u32, u32, u64);

struct Kept {
    addr: usize,
    len: usize,
    file_id: FileId,
}

impl ClosedRegions {
    /// Before the core closes `ep`, an enabled shm endpoint: its region's file and mappings, or
    /// None (said in the log) when they cannot be found.
    ///
    /// # Safety
    /// `ep` is an open, enabled core endpoint.
    pub unsafe fn before_close(&self, ep: *mut ofi::fid_ep) -> Option<Closing> {
        // SAFETY: caller's contract.
        let name = unsafe { ep_name(ep) }?;
        let name = name.split(|&c| c == 0).next().unwrap_or(&[]);
        let name = String::from_utf8_lossy(name);
        // shm's file name is its address without the "fi_shm://" part (`smr_no_prefix`).
        let file_name = name.rsplit("://").next().unwrap_or(&name);
        if file_name.is_empty() || file_name.contains('/') {
            return None;
        }
        let path = CString::new(format!("/dev/shm/{file_name}")).ok()?;
        // SAFETY: a NUL-terminated path; the fd returned is ours.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            fi_info!(
                EpCtrl,
                "the region of closing shm endpoint {name} is not /dev/shm/{file_name} ({}): not kept",
                std::io::Error::last_os_error()
            );
            return None;
        }
        // SAFETY: just opened, owned by nothing else.
        let file = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open fd and a stat to fill.
        if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
            return None;
        }
        let file_id = FileId(
            libc::major(st.st_dev),
            libc::minor(st.st_dev),
            st.st_ino as u64,
        );
        let maps = mappings_of(&std::fs::read_to_string("/proc/self/maps").ok()?, file_id);
        if maps.is_empty() {
            fi_info!(EpCtrl, "/dev/shm/{file_name} is not mapped here: not kept");
            return None;
        }
        Some(Closing {
            file,
            file_id,
            maps,
        })
    }

    /// After the core closed the endpoint of `closing`: its region's file mapped again where it
    /// was.
    pub fn after_close(&self, closing: Closing) {
        for (addr, len, offset) in closing.maps {
            // SAFETY: a shared mapping of an open file, at an address MAP_FIXED_NOREPLACE keeps
            // from replacing anything mapped there now.
            let p = unsafe {
                libc::mmap(
                    addr as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
                    closing.file.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED || p as usize != addr {
                let why = std::io::Error::last_os_error();
                if p != libc::MAP_FAILED {
                    // SAFETY: the mapping just made, elsewhere; nothing uses it.
                    unsafe { libc::munmap(p, len) };
                }
                fi_warn!(
                    EpCtrl,
                    "could not map the region of a closed shm endpoint again at {addr:#x} ({why}): \
                     the next endpoint enabled on its AV may read unmapped memory"
                );
                continue;
            }
            self.kept.lock().push(Kept {
                addr,
                len,
                file_id: closing.file_id,
            });
            fi_info!(
                EpCtrl,
                "kept the {len}-byte region of a closed shm endpoint mapped at {addr:#x} until its \
                 domain closes (shm's AV keeps a pointer to it)"
            );
        }
    }
}

impl Drop for ClosedRegions {
    fn drop(&mut self) {
        let kept = self.kept.get_mut();
        if kept.is_empty() {
            return;
        }
        // shm's AV close unmaps the regions of the peers it still lists but no longer finds
        // among the process's endpoints (`smr_map_cleanup` → `smr_unmap_region`), kept ones
        // included: only a mapping still of the kept file is unmapped here, never what may
        // have been mapped at its address since.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        for k in kept.iter() {
            if !mappings_of(&maps, k.file_id)
                .iter()
                .any(|&(a, l, _)| a == k.addr && l == k.len)
            {
                continue;
            }
            // SAFETY: mapped by after_close and still of its file; the domain and its AVs are
            // closed, nothing points into it any more.
            unsafe { libc::munmap(k.addr as *mut libc::c_void, k.len) };
        }
    }
}

/// The mappings in `maps` (the text of /proc/self/maps) of the file `id`: address, length and
/// file offset of each.
fn mappings_of(maps: &str, id: FileId) -> Vec<(usize, usize, u64)> {
    let FileId(major, minor, ino) = id;
    let mut found = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(offset), Some(dev), Some(inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if inode.parse::<u64>().ok() != Some(ino) {
            continue;
        }
        let Some((maj, min)) = dev.split_once(':') else {
            continue;
        };
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        if hex(maj) != Some(major as u64) || hex(min) != Some(minor as u64) {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        if let (Some(start), Some(end), Some(offset)) = (hex(start), hex(end), hex(offset))
            && end > start
        {
            found.push((start as usize, (end - start) as usize, offset));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::{FileId, mappings_of};

    #[test]
    fn finds_the_mappings_of_one_file() {
        let maps = "\
7f0000000000-7f0000100000 rw-s 00000000 00:1a 4242 /dev/shm/1234_0 (deleted)
7f0000100000-7f0000200000 rw-s 00000000 00:1a 4243 /dev/shm/1234_1
7f0000300000-7f0000301000 rw-s 00002000 00:1a 4242 /dev/shm/1234_0
7f0000400000-7f0000401000 rw-s 00000000 08:01 4242 /usr/lib/other
garbage
";
        assert_eq!(
            mappings_of(maps, FileId(0, 0x1a, 4242)),
            vec![
                (0x7f0000000000, 0x100000, 0),
                (0x7f0000300000, 0x1000, 0x2000)
            ]
        );
        assert!(mappings_of(maps, FileId(0, 0x1a, 9)).is_empty());
        assert!(mappings_of(maps, FileId(8, 1, 4242)).len() == 1);
    }
}
