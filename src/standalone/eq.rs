//! A minimal event queue: applications (and fabtests) open one per fabric. rscntr itself
//! produces no events yet (it has no endpoints), so the queue carries what `fi_eq_write` puts in.
//!
//! With FI_WAIT_FD the eventfd is readable exactly while the queue is non-empty. Like the domain,
//! it knows its fabric only as a [`Parent`].

use crate::boundary::ffi::{self, Children, FidObject, Parent, err};
use crate::engine::EventFd;
use crate::{fi_warn, ofi};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Queue depth when the application leaves `fi_eq_attr.size` at 0.
const DEFAULT_SIZE: usize = 1024;

#[repr(C)]
pub struct Eq {
    fid: ofi::fid_eq,
    /// The fabric's children, which count this EQ (the fabric outlives it).
    fabric: *const Children,
    wait_obj: ofi::fi_wait_obj,
    writable: bool,
    capacity: usize,
    queue: Mutex<VecDeque<(u32, Vec<u8>)>>,
    not_empty: Condvar,
    fd: Option<EventFd>,
}

static EQ_FI_OPS: ofi::fi_ops = ffi::fi_ops(eq_close, eq_control, ffi::no_ops_open);
static EQ_OPS: ofi::fi_ops_eq = ofi::fi_ops_eq {
    size: std::mem::size_of::<ofi::fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

// SAFETY: repr(C) with fid_eq first; every Eq is built by `eq_open` with FI_CLASS_EQ and
// EQ_FI_OPS.
unsafe impl FidObject for Eq {
    const FCLASS: u32 = ofi::FI_CLASS_EQ;
    const NAME: &'static str = "EQ";
    fn fi_ops() -> *const ofi::fi_ops {
        &EQ_FI_OPS
    }
}

/// `fi_eq_open` on a fabric of type `P`.
pub unsafe extern "C" fn eq_open<P: Parent>(
    fabric: *mut ofi::fid_fabric,
    attr: *mut ofi::fi_eq_attr,
    eq: *mut *mut ofi::fid_eq,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: fid_fabric begins with struct fid.
        let fabric = match unsafe { ffi::object::<P>(fabric.cast()) } {
            Ok(f) => f,
            Err(e) => return e,
        };
        // SAFETY: NULL or the caller's attr.
        let Some(attr) = (unsafe { attr.as_ref() }) else {
            fi_warn!(Eq, "NULL EQ attr");
            return err::EINVAL;
        };
        if attr.flags & !(ofi::FI_WRITE as u64) != 0 {
            fi_warn!(Eq, "unsupported EQ flags {:#x}", attr.flags);
            return err::EBADFLAGS;
        }
        let fd = match attr.wait_obj {
            ofi::fi_wait_obj_FI_WAIT_NONE | ofi::fi_wait_obj_FI_WAIT_UNSPEC => None,
            ofi::fi_wait_obj_FI_WAIT_FD => match EventFd::new() {
                Ok(fd) => Some(fd),
                Err(e) => {
                    fi_warn!(Eq, "cannot create the EQ's eventfd: {e}");
                    return -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as i32);
                }
            },
            other => {
                fi_warn!(Eq, "EQ wait object {other} is not supported (NONE, UNSPEC, FD are)");
                return err::ENOSYS;
            }
        };
        let obj = Box::new(Eq {
            fid: ofi::fid_eq {
                fid: ffi::fid_header(ofi::FI_CLASS_EQ, context, &EQ_FI_OPS),
                ops: &EQ_OPS as *const _ as *mut _,
            },
            fabric: fabric.children(),
            wait_obj: attr.wait_obj,
            writable: attr.flags & ofi::FI_WRITE as u64 != 0,
            capacity: if attr.size == 0 { DEFAULT_SIZE } else { attr.size },
            queue: Mutex::new(VecDeque::new()),
            not_empty: Condvar::new(),
            fd,
        });
        let fid = ffi::into_fid(obj);
        // SAFETY: NULL or the caller's out pointer.
        match unsafe { ffi::write_out(eq, fid.cast(), "EQ") } {
            Ok(()) => {
                fabric.children().add();
                0
            }
            Err(e) => {
                // SAFETY: just made by into_fid, never reached C.
                drop(unsafe { ffi::release(&*(fid as *const Eq)) });
                e
            }
        }
    }
}

/// # Safety
/// `fid` is NULL or a readable fid.
unsafe fn get<'a>(fid: *mut ofi::fid_eq) -> Result<&'a Eq, c_int> {
    // SAFETY: fid_eq begins with struct fid; the caller's contract covers the rest.
    unsafe { ffi::object::<Eq>(fid.cast()) }
}

unsafe extern "C" fn eq_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let eq = match unsafe { ffi::object::<Eq>(fid) } {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY: the fabric outlives its EQs (it counts them as children).
        unsafe { &*eq.fabric }.remove();
        // SAFETY: the caller gives the fid up with fi_close.
        drop(unsafe { ffi::release(eq) });
        0
    }
}

unsafe extern "C" fn eq_control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let eq = match unsafe { ffi::object::<Eq>(fid) } {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY (both arms): NULL or the caller's out pointer of the documented type.
        ffi::status(match command as u32 {
            ofi::FI_GETWAIT => match &eq.fd {
                Some(fd) => unsafe { ffi::write_out(arg.cast::<c_int>(), fd.as_raw_fd(), "wait") },
                None => Err(err::ENODATA),
            },
            ofi::FI_GETWAITOBJ => unsafe { ffi::write_out(arg.cast(), eq.wait_obj, "wait object") },
            _ => Err(err::ENOSYS),
        })
    }
}

impl Eq {
    /// Copies the head entry out; removes it unless `peek`.
    fn pop_into(
        &self,
        q: &mut VecDeque<(u32, Vec<u8>)>,
        event: *mut u32,
        buf: *mut c_void,
        len: usize,
        peek: bool,
    ) -> isize {
        let Some((ev, data)) = q.front() else {
            return err::EAGAIN as isize;
        };
        if data.len() > len || (buf.is_null() && !data.is_empty()) {
            return err::ETOOSMALL as isize;
        }
        // SAFETY: `buf` holds `len` >= data.len() bytes and `event` is NULL or writable
        // (fi_eq_read contract).
        unsafe {
            if !event.is_null() {
                *event = *ev;
            }
            std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast(), data.len());
        }
        let n = data.len() as isize;
        if !peek {
            q.pop_front();
            if q.is_empty()
                && let Some(fd) = &self.fd
            {
                fd.drain();
            }
        }
        n
    }
}

unsafe extern "C" fn eq_read(
    eq: *mut ofi::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let eq = match unsafe { get(eq) } {
            Ok(e) => e,
            Err(e) => return e as isize,
        };
        let mut q = eq.queue.lock();
        eq.pop_into(&mut q, event, buf, len, flags & ofi::FI_PEEK as u64 != 0)
    }
}

unsafe extern "C" fn eq_sread(
    eq: *mut ofi::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let eq = match unsafe { get(eq) } {
            Ok(e) => e,
            Err(e) => return e as isize,
        };
        if eq.wait_obj == ofi::fi_wait_obj_FI_WAIT_NONE {
            fi_warn!(Eq, "fi_eq_sread on an EQ opened with FI_WAIT_NONE");
            return err::EINVAL as isize;
        }
        let deadline = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        let mut q = eq.queue.lock();
        while q.is_empty() {
            match deadline {
                Some(d) => {
                    if eq.not_empty.wait_until(&mut q, d).timed_out() && q.is_empty() {
                        return err::EAGAIN as isize;
                    }
                }
                None => eq.not_empty.wait(&mut q),
            }
        }
        eq.pop_into(&mut q, event, buf, len, flags & ofi::FI_PEEK as u64 != 0)
    }
}

/// rscntr queues no error entries, so there is never one to read.
unsafe extern "C" fn eq_readerr(
    eq: *mut ofi::fid_eq,
    _buf: *mut ofi::fi_eq_err_entry,
    _flags: u64,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        match unsafe { get(eq) } {
            Ok(_) => err::EAGAIN as isize,
            Err(e) => e as isize,
        }
    }
}

unsafe extern "C" fn eq_write(
    eq: *mut ofi::fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    crate::ffi_boundary! {
        // SAFETY: libfabric passes the fid it got from us.
        let eq = match unsafe { get(eq) } {
            Ok(e) => e,
            Err(e) => return e as isize,
        };
        if !eq.writable {
            fi_warn!(Eq, "fi_eq_write on an EQ opened without FI_WRITE");
            return err::EINVAL as isize;
        }
        if buf.is_null() && len != 0 {
            return err::EINVAL as isize;
        }
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller passes `len` readable bytes at `buf`.
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        };
        let mut q = eq.queue.lock();
        if q.len() >= eq.capacity {
            return err::EAGAIN as isize;
        }
        q.push_back((event, data));
        if q.len() == 1
            && let Some(fd) = &eq.fd
        {
            fd.signal();
        }
        eq.not_empty.notify_all();
        len as isize
    }
}

unsafe extern "C" fn eq_strerror(
    _eq: *mut ofi::fid_eq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    crate::ffi_boundary! {
        // SAFETY: fi_strerror returns a static C string for any code.
        let s = unsafe { ofi::fi_strerror(prov_errno.abs()) };
        if !buf.is_null() && len > 0 && !s.is_null() {
            // SAFETY: `buf` holds `len` bytes; strncpy writes at most len-1 plus our NUL.
            unsafe {
                libc::strncpy(buf, s, len - 1);
                *buf.add(len - 1) = 0;
            }
        }
        s
    }
}

/// `fi_trywait` on an EQ: -FI_EAGAIN while entries are queued, else the fd will become readable
/// on the next write.
///
/// # Safety
/// `fid` is a readable fid.
pub unsafe fn trywait(fid: *mut ofi::fid) -> c_int {
    // SAFETY: caller's contract.
    let eq = match unsafe { ffi::object::<Eq>(fid) } {
        Ok(e) => e,
        Err(e) => return e,
    };
    if eq.fd.is_none() {
        fi_warn!(Eq, "fi_trywait on an EQ without FI_WAIT_FD");
        return err::EINVAL;
    }
    if eq.queue.lock().is_empty() {
        0
    } else {
        err::EAGAIN
    }
}
