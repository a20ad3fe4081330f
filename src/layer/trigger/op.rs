//! One data operation as rscntr holds it until it is due (a triggered operation, a deferred
//! request): copied out of the application's structures, which it may reuse once the call
//! returns (only the buffers and the context must stay), and posted to the core endpoint with
//! the core's own tables.

use crate::boundary::ffi::err;
use crate::boundary::testhook::{self, Op as Hook};
use crate::ofi;
use std::ffi::c_void;

/// The core's tables of a trigger-able endpoint.
#[derive(Clone, Copy)]
pub struct CoreOps {
    pub msg: *const ofi::fi_ops_msg,
    pub tagged: *const ofi::fi_ops_tagged,
    pub rma: *const ofi::fi_ops_rma,
    pub atomic: *const ofi::fi_ops_atomic,
}

/// Copies `n` elements from `p` (NULL or `n` valid elements).
///
/// # Safety
/// As stated.
unsafe fn copied<T: Copy>(p: *const T, n: usize) -> Vec<T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

fn ptr_of<T>(v: &[T]) -> *mut T {
    if v.is_empty() {
        std::ptr::null_mut()
    } else {
        v.as_ptr() as *mut T
    }
}

/// Descriptor arrays: NULL stays NULL.
type Descs = Vec<*mut c_void>;

/// One data operation with every array it points to copied; the message structs point into
/// the copies (a Vec's buffer stays put when the Vec moves), which are read only through them.
#[allow(dead_code)]
pub enum Op {
    Send(ofi::fi_msg, Vec<libc::iovec>, Descs),
    Recv(ofi::fi_msg, Vec<libc::iovec>, Descs),
    TSend(ofi::fi_msg_tagged, Vec<libc::iovec>, Descs),
    TRecv(ofi::fi_msg_tagged, Vec<libc::iovec>, Descs),
    Read(
        ofi::fi_msg_rma,
        Vec<libc::iovec>,
        Descs,
        Vec<ofi::fi_rma_iov>,
    ),
    Write(
        ofi::fi_msg_rma,
        Vec<libc::iovec>,
        Descs,
        Vec<ofi::fi_rma_iov>,
    ),
    Atomic(Atomic),
    Fetch(Atomic, Fetch),
    Compare(Atomic, Fetch, Fetch),
}

#[allow(dead_code)]
pub struct Atomic(
    ofi::fi_msg_atomic,
    Vec<ofi::fi_ioc>,
    Descs,
    Vec<ofi::fi_rma_ioc>,
);
/// A result or compare buffer list of a fetch or compare atomic: its iovs copied, its
/// descriptors copied or (deferred work) the application's own array.
pub struct Fetch {
    iov: Vec<ofi::fi_ioc>,
    /// Owns what `desc` points at, when copied.
    _desc_copy: Descs,
    desc: *mut *mut c_void,
}

impl Fetch {
    /// # Safety
    /// `iov`/`desc` NULL or `count` valid elements.
    pub unsafe fn copy(iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize) -> Fetch {
        // SAFETY: caller's contract.
        let (iov, desc_copy) = unsafe { (copied(iov, count), copied(desc, count)) };
        let desc = ptr_of(&desc_copy);
        Fetch {
            iov,
            _desc_copy: desc_copy,
            desc,
        }
    }

    /// The iovs copied, the descriptor array left where the application has it: deferred
    /// work's structures stay the application's until the work completes (fi_trigger(3)), and
    /// the core reads the descriptors only if it needs them, as it would from the
    /// application directly (fabtests' fi_rdm_deferred_wq hands one descriptor where the
    /// array belongs).
    ///
    /// # Safety
    /// `iov` NULL or `count` valid elements; `desc` the application's, live until completion.
    pub unsafe fn in_place(iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize) -> Fetch {
        Fetch {
            // SAFETY: caller's contract.
            iov: unsafe { copied(iov, count) },
            _desc_copy: Vec::new(),
            desc,
        }
    }
}

macro_rules! copy_iov_msg {
    ($msg:expr, $iov:ty) => {{
        let mut m = *$msg;
        let iov: Vec<$iov> = copied(m.msg_iov, m.iov_count);
        let desc: Descs = copied(m.desc, m.iov_count);
        m.msg_iov = ptr_of(&iov);
        m.desc = ptr_of(&desc);
        (m, iov, desc)
    }};
}

impl Op {
    /// # Safety
    /// `msg` is a valid message (its arrays hold `iov_count` elements, `desc` NULL or as many).
    pub unsafe fn msg(msg: &ofi::fi_msg, send: bool) -> Op {
        // SAFETY: caller's contract.
        let (m, iov, desc) = unsafe { copy_iov_msg!(msg, libc::iovec) };
        if send {
            Op::Send(m, iov, desc)
        } else {
            Op::Recv(m, iov, desc)
        }
    }

    /// # Safety
    /// As [`Op::msg`].
    pub unsafe fn tagged(msg: &ofi::fi_msg_tagged, send: bool) -> Op {
        // SAFETY: caller's contract.
        let (m, iov, desc) = unsafe { copy_iov_msg!(msg, libc::iovec) };
        if send {
            Op::TSend(m, iov, desc)
        } else {
            Op::TRecv(m, iov, desc)
        }
    }

    /// # Safety
    /// As [`Op::msg`], and `rma_iov` holds `rma_iov_count` elements.
    pub unsafe fn rma(msg: &ofi::fi_msg_rma, write: bool) -> Op {
        // SAFETY: caller's contract.
        let (mut m, iov, desc) = unsafe { copy_iov_msg!(msg, libc::iovec) };
        // SAFETY: caller's contract.
        let rma: Vec<ofi::fi_rma_iov> = unsafe { copied(m.rma_iov, m.rma_iov_count) };
        m.rma_iov = ptr_of(&rma);
        if write {
            Op::Write(m, iov, desc, rma)
        } else {
            Op::Read(m, iov, desc, rma)
        }
    }

    /// # Safety
    /// As [`Op::rma`].
    pub unsafe fn atomic(msg: &ofi::fi_msg_atomic) -> Atomic {
        // SAFETY: caller's contract.
        let (mut m, iov, desc) = unsafe { copy_iov_msg!(msg, ofi::fi_ioc) };
        // SAFETY: caller's contract.
        let rma: Vec<ofi::fi_rma_ioc> = unsafe { copied(m.rma_iov, m.rma_iov_count) };
        m.rma_iov = ptr_of(&rma);
        Atomic(m, iov, desc, rma)
    }

    /// Replaces the context the core gets; returns the previous one.
    pub fn set_context(&mut self, context: *mut c_void) -> *mut c_void {
        let slot = match self {
            Op::Send(m, ..) | Op::Recv(m, ..) => &mut m.context,
            Op::TSend(m, ..) | Op::TRecv(m, ..) => &mut m.context,
            Op::Read(m, ..) | Op::Write(m, ..) => &mut m.context,
            Op::Atomic(a) | Op::Fetch(a, _) | Op::Compare(a, ..) => &mut a.0.context,
        };
        std::mem::replace(slot, context)
    }

    /// Which endpoint counters the core counts the operation in (bind flags).
    pub fn counted_as(&self) -> u64 {
        (match self {
            Op::Send(..) | Op::TSend(..) => ofi::FI_SEND,
            Op::Recv(..) | Op::TRecv(..) => ofi::FI_RECV,
            Op::Write(..) | Op::Atomic(..) => ofi::FI_WRITE,
            Op::Read(..) | Op::Fetch(..) | Op::Compare(..) => ofi::FI_READ,
        }) as u64
    }

    /// The flags a completion of the operation carries (fi_cq(3)).
    pub fn completion_flags(&self) -> u64 {
        (match self {
            Op::Send(..) => ofi::FI_MSG | ofi::FI_SEND,
            Op::Recv(..) => ofi::FI_MSG | ofi::FI_RECV,
            Op::TSend(..) => ofi::FI_TAGGED | ofi::FI_SEND,
            Op::TRecv(..) => ofi::FI_TAGGED | ofi::FI_RECV,
            Op::Read(..) => ofi::FI_RMA | ofi::FI_READ,
            Op::Write(..) => ofi::FI_RMA | ofi::FI_WRITE,
            Op::Atomic(..) => ofi::FI_ATOMIC | ofi::FI_WRITE,
            Op::Fetch(..) | Op::Compare(..) => ofi::FI_ATOMIC | ofi::FI_READ,
        }) as u64
    }

    /// The application's context of the operation.
    pub fn context(&self) -> *mut c_void {
        match self {
            Op::Send(m, ..) | Op::Recv(m, ..) => m.context,
            Op::TSend(m, ..) | Op::TRecv(m, ..) => m.context,
            Op::Read(m, ..) | Op::Write(m, ..) => m.context,
            Op::Atomic(a) | Op::Fetch(a, _) | Op::Compare(a, ..) => a.0.context,
        }
    }
}

/// Posts `op` to the core's `ep` with the core's tables: the core's return value (a missing
/// op is -FI_ENOSYS).
///
/// # Safety
/// `ep` is an open core endpoint and `core` its tables; `op`'s buffers are live.
pub unsafe fn post(op: &Op, ep: *mut ofi::fid_ep, core: &CoreOps, flags: u64) -> isize {
    const ENOSYS: isize = err::ENOSYS as isize;
    if let Some(e) = testhook::post_again().or_else(|| testhook::fail(Hook::Post)) {
        return e as isize;
    }
    // SAFETY: caller's contract; each table is NULL or the core's.
    unsafe {
        let (msg, tagged, rma, atomic) = (
            core.msg.as_ref(),
            core.tagged.as_ref(),
            core.rma.as_ref(),
            core.atomic.as_ref(),
        );
        match op {
            Op::Send(m, ..) => msg
                .and_then(|t| t.sendmsg)
                .map_or(ENOSYS, |f| f(ep, m, flags)),
            Op::Recv(m, ..) => msg
                .and_then(|t| t.recvmsg)
                .map_or(ENOSYS, |f| f(ep, m, flags)),
            Op::TSend(m, ..) => tagged
                .and_then(|t| t.sendmsg)
                .map_or(ENOSYS, |f| f(ep, m, flags)),
            Op::TRecv(m, ..) => tagged
                .and_then(|t| t.recvmsg)
                .map_or(ENOSYS, |f| f(ep, m, flags)),
            Op::Read(m, ..) => rma
                .and_then(|t| t.readmsg)
                .map_or(ENOSYS, |f| f(ep, m, flags)),
            Op::Write(m, ..) => rma
                .and_then(|t| t.writemsg)
                .map_or(ENOSYS, |f| f(ep, m, flags)),
            Op::Atomic(a) => atomic
                .and_then(|t| t.writemsg)
                .map_or(ENOSYS, |f| f(ep, &a.0, flags)),
            Op::Fetch(a, r) => atomic.and_then(|t| t.readwritemsg).map_or(ENOSYS, |f| {
                f(ep, &a.0, ptr_of(&r.iov), r.desc, r.iov.len(), flags)
            }),
            Op::Compare(a, c, r) => atomic.and_then(|t| t.compwritemsg).map_or(ENOSYS, |f| {
                f(
                    ep,
                    &a.0,
                    ptr_of(&c.iov),
                    c.desc,
                    c.iov.len(),
                    ptr_of(&r.iov),
                    r.desc,
                    r.iov.len(),
                    flags,
                )
            }),
        }
    }
}
