//! Aliases of trigger-able endpoints (`fi_ep_alias`, `fi_control(FI_ALIAS)`): an endpoint
//! object of rscntr's whose operations run on the core endpoint with the alias's operation
//! flags, so that `FI_TRANSMIT | FI_TRIGGER` makes every `fi_send`/`fi_write`/… through it a
//! triggered operation whose context is the `fi_triggered_context` (fabtests'
//! `fi_rdm_rma_trigger`). rscntr makes the alias itself on every core: the cores here either
//! have no FI_ALIAS (shm, tcp, rxm) or would trigger on their own counters (sockets).
//!
//! The operations named for the alias's direction (FI_TRANSMIT: sends, writes, reads,
//! atomics; FI_RECV: receives) are built into their `*msg` form with the alias's flags and go
//! through the trigger-able endpoint's tables; the others are the core's own, on the core
//! endpoint.

use super::endpoint::TriggerEp;
use crate::boundary::ffi::{err, iov_len};
use crate::{fi_warn, ofi};
use std::ffi::{c_int, c_void};

const FI_INJECT: u64 = ofi::FI_INJECT as u64;
const FI_REMOTE_CQ_DATA: u64 = ofi::FI_REMOTE_CQ_DATA as u64;
const DIRECTIONS: u64 = (ofi::FI_TRANSMIT | ofi::FI_RECV) as u64;

#[repr(C)]
struct AliasEp {
    ep: ofi::fid_ep,
    fi_ops: ofi::fi_ops,
    ep_ops: ofi::fi_ops_ep,
    cm: ofi::fi_ops_cm,
    msg: ofi::fi_ops_msg,
    tagged: ofi::fi_ops_tagged,
    rma: ofi::fi_ops_rma,
    atomic: ofi::fi_ops_atomic,
    parent: *const TriggerEp,
    /// The operation flags of transmit operations (None: the core endpoint's own).
    tx: Option<u64>,
    rx: Option<u64>,
}

impl AliasEp {
    /// # Safety
    /// `ep` is an alias made by [`open`].
    unsafe fn of<'a>(ep: *mut ofi::fid_ep) -> &'a AliasEp {
        // SAFETY: fid_ep is the first field (caller's contract).
        unsafe { &*ep.cast::<AliasEp>() }
    }

    fn parent(&self) -> &TriggerEp {
        // SAFETY: the endpoint outlives its aliases (its close refuses while they are open).
        unsafe { &*self.parent }
    }

    fn core_ep(&self) -> *mut ofi::fid_ep {
        self.parent().ep
    }
}

/// The endpoint an alias of rscntr's aliases.
///
/// # Safety
/// `ep` is a readable endpoint fid.
pub unsafe fn parent_of<'a>(ep: *mut ofi::fid_ep) -> Option<&'a TriggerEp> {
    // SAFETY: caller's contract.
    let close = unsafe { (*(*ep).fid.ops).close }.map(|f| f as *const ());
    if close != Some(alias_close as *const ()) {
        return None;
    }
    // SAFETY: an alias made by `open`, whose parent outlives it.
    Some(unsafe { &*AliasEp::of(ep).parent })
}

/// FI_ALIAS on a trigger-able endpoint: makes the alias.
///
/// # Safety
/// `parent` is a patched trigger-able endpoint; `arg` is NULL or the application's
/// `struct fi_alias`.
pub unsafe fn open(parent: &TriggerEp, arg: *mut c_void) -> c_int {
    // SAFETY: caller's contract.
    let Some(alias) = (unsafe { arg.cast::<ofi::fi_alias>().as_ref() }) else {
        fi_warn!(EpCtrl, "FI_ALIAS without a struct fi_alias");
        return err::EINVAL;
    };
    if alias.fid.is_null() {
        fi_warn!(EpCtrl, "FI_ALIAS with a NULL fid out pointer");
        return err::EINVAL;
    }
    let flags = alias.flags;
    if flags & DIRECTIONS == 0 {
        fi_warn!(
            EpCtrl,
            "FI_ALIAS flags {flags:#x} name neither FI_TRANSMIT nor FI_RECV"
        );
        return err::EINVAL;
    }
    let op_flags = flags & !DIRECTIONS;
    let of = |dir: u32| (flags & dir as u64 != 0).then_some(op_flags);
    // SAFETY: the core endpoint is open; its fid is readable.
    let core = unsafe { &*parent.ep };
    let a = Box::new(AliasEp {
        ep: ofi::fid_ep {
            fid: ofi::fid {
                fclass: ofi::FI_CLASS_EP as usize,
                context: core.fid.context,
                ops: std::ptr::null_mut(),
            },
            ops: std::ptr::null_mut(),
            cm: std::ptr::null_mut(),
            msg: std::ptr::null_mut(),
            rma: std::ptr::null_mut(),
            tagged: std::ptr::null_mut(),
            atomic: std::ptr::null_mut(),
            collective: std::ptr::null_mut(),
        },
        fi_ops: ofi::fi_ops {
            size: std::mem::size_of::<ofi::fi_ops>(),
            close: Some(alias_close),
            bind: Some(alias_bind),
            control: Some(alias_control),
            ops_open: Some(alias_ops_open),
            tostr: None,
            ops_set: None,
        },
        ep_ops: ofi::fi_ops_ep {
            size: std::mem::size_of::<ofi::fi_ops_ep>(),
            cancel: Some(alias_cancel),
            getopt: Some(alias_getopt),
            setopt: Some(alias_setopt),
            tx_ctx: None,
            rx_ctx: None,
            rx_size_left: None,
            tx_size_left: None,
        },
        cm: ofi::fi_ops_cm {
            size: std::mem::size_of::<ofi::fi_ops_cm>(),
            getname: Some(alias_getname),
            ..Default::default()
        },
        msg: MSG,
        tagged: TAGGED,
        rma: RMA,
        atomic: ATOMIC,
        parent,
        tx: of(ofi::FI_TRANSMIT),
        rx: of(ofi::FI_RECV),
    });
    let a = Box::into_raw(a);
    // SAFETY: just allocated; the tables are its own fields.
    unsafe {
        let r = &mut *a;
        r.ep.fid.ops = &mut r.fi_ops;
        r.ep.ops = &mut r.ep_ops;
        r.ep.cm = &mut r.cm;
        r.ep.msg = &mut r.msg;
        r.ep.tagged = &mut r.tagged;
        r.ep.rma = &mut r.rma;
        r.ep.atomic = &mut r.atomic;
        *alias.fid = &mut r.ep.fid;
    }
    parent
        .aliases
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    crate::fi_info!(EpCtrl, "opened an alias endpoint with flags {flags:#x}");
    0
}

unsafe extern "C" fn alias_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only aliases reach this op; the application gives the alias up.
        let a = unsafe { Box::from_raw(fid.cast::<AliasEp>()) };
        a.parent().aliases.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        0
    }
}

unsafe extern "C" fn alias_bind(_: *mut ofi::fid, _: *mut ofi::fid, _: u64) -> c_int {
    fi_warn!(
        EpCtrl,
        "bind on an alias endpoint: bind to the endpoint it aliases"
    );
    err::ENOSYS
}

unsafe extern "C" fn alias_control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only aliases reach this op.
        let a = unsafe { AliasEp::of(fid.cast()) };
        match command as u32 {
            // SAFETY: the parent is a trigger-able endpoint; `arg` the application's.
            ofi::FI_ALIAS => unsafe { open(a.parent(), arg) },
            ofi::FI_GETOPSFLAG | ofi::FI_SETOPSFLAG => {
                fi_warn!(EpCtrl, "op flags of an alias endpoint are fixed when it is made");
                err::ENOSYS
            }
            // SAFETY: the core endpoint's own control, on the core endpoint.
            _ => unsafe { ((*(*a.core_ep()).fid.ops).control.unwrap())(a.core_ep().cast(), command, arg) },
        }
    }
}

unsafe extern "C" fn alias_ops_open(
    _: *mut ofi::fid,
    _: *const std::ffi::c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

unsafe extern "C" fn alias_cancel(fid: *mut ofi::fid, context: *mut c_void) -> isize {
    crate::ffi_boundary! {
        // SAFETY: only aliases reach this op; fi_cancel of the endpoint it aliases.
        unsafe {
            let core = AliasEp::of(fid.cast()).core_ep();
            (*(*core).ops).cancel.map_or(err::ENOSYS as isize, |f| f(core.cast(), context))
        }
    }
}

unsafe extern "C" fn alias_getopt(
    fid: *mut ofi::fid,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: only aliases reach this op; the core endpoint's own.
    unsafe {
        let core = AliasEp::of(fid.cast()).core_ep();
        (*(*core).ops)
            .getopt
            .map_or(err::ENOSYS, |f| f(core.cast(), level, name, val, len))
    }
}

unsafe extern "C" fn alias_setopt(
    fid: *mut ofi::fid,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: only aliases reach this op; the core endpoint's own.
    unsafe {
        let core = AliasEp::of(fid.cast()).core_ep();
        (*(*core).ops)
            .setopt
            .map_or(err::ENOSYS, |f| f(core.cast(), level, name, val, len))
    }
}

unsafe extern "C" fn alias_getname(
    fid: *mut ofi::fid,
    addr: *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: only aliases reach this op; the core endpoint's own.
    unsafe {
        let core = AliasEp::of(fid.cast()).core_ep();
        (*(*core).cm)
            .getname
            .map_or(err::ENOSYS, |f| f(core.cast(), addr, len))
    }
}

fn iov1(buf: *const c_void, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: buf as *mut c_void,
        iov_len: len,
    }
}

/// The alias's operation: in its `*msg` form with the alias's flags (plus `extra`) if the
/// alias names the direction (`$dir`), else the core endpoint's own `$plain` op.
macro_rules! alias_op {
    (fn $name:ident($($arg:ident: $ty:ty),*) $dir:ident, $table:ident.$plain:ident,
     |$a:ident, $ep:ident, $flags:ident| $built:expr) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(ep: *mut ofi::fid_ep, $($arg: $ty),*) -> isize {
            crate::ffi_boundary! {
                // SAFETY: only aliases reach these ops.
                let $a = unsafe { AliasEp::of(ep) };
                let $ep = $a.core_ep();
                match $a.$dir {
                    // SAFETY: the core endpoint's own op (its tables are the trigger-able
                    // endpoint's, whose plain entries are the core's).
                    None => unsafe {
                        (*$ep).$table.as_ref().and_then(|t| t.$plain)
                            .map_or(err::ENOSYS as isize, |f| f($ep, $($arg),*))
                    },
                    // SAFETY: the application's arguments, rebuilt as a message.
                    Some($flags) => unsafe { $built },
                }
            }
        }
    };
}

/// Calls the endpoint's `$table.$slot` (`*msg` form) with `msg` and `flags`.
macro_rules! via_msg {
    ($ep:expr, $table:ident.$slot:ident, $($args:expr),*) => {
        (*$ep).$table.as_ref().and_then(|t| t.$slot)
            .map_or(err::ENOSYS as isize, |f| f($ep, $($args),*))
    };
}

fn msg(
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    addr: u64,
    context: *mut c_void,
    data: u64,
) -> ofi::fi_msg {
    ofi::fi_msg {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr,
        context,
        data,
    }
}

#[allow(clippy::too_many_arguments)]
fn tmsg(
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    addr: u64,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
    data: u64,
) -> ofi::fi_msg_tagged {
    ofi::fi_msg_tagged {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr,
        tag,
        ignore,
        context,
        data,
    }
}

#[allow(clippy::too_many_arguments)]
fn rmsg(
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    addr: u64,
    rma: &ofi::fi_rma_iov,
    context: *mut c_void,
    data: u64,
) -> ofi::fi_msg_rma {
    ofi::fi_msg_rma {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr,
        rma_iov: rma,
        rma_iov_count: 1,
        context,
        data,
    }
}

fn rma_iov(addr: u64, len: usize, key: u64) -> ofi::fi_rma_iov {
    ofi::fi_rma_iov { addr, len, key }
}

// ---- msg ---------------------------------------------------------------------------------------
alias_op!(fn m_recv(buf: *mut c_void, len: usize, desc: *mut c_void, src: u64, ctx: *mut c_void) rx, msg.recv,
    |a, ep, fl| { let (iov, mut d) = (iov1(buf, len), desc); via_msg!(ep, msg.recvmsg, &msg(&iov, &mut d, 1, src, ctx, 0), fl) });
alias_op!(fn m_recvv(iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, src: u64, ctx: *mut c_void) rx, msg.recvv,
    |a, ep, fl| via_msg!(ep, msg.recvmsg, &msg(iov, desc, count, src, ctx, 0), fl));
alias_op!(fn m_recvmsg(m: *const ofi::fi_msg, flags: u64) rx, msg.recvmsg,
    |a, ep, fl| via_msg!(ep, msg.recvmsg, m, fl | flags));
alias_op!(fn m_send(buf: *const c_void, len: usize, desc: *mut c_void, dest: u64, ctx: *mut c_void) tx, msg.send,
    |a, ep, fl| { let (iov, mut d) = (iov1(buf, len), desc); via_msg!(ep, msg.sendmsg, &msg(&iov, &mut d, 1, dest, ctx, 0), fl) });
alias_op!(fn m_sendv(iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, dest: u64, ctx: *mut c_void) tx, msg.sendv,
    |a, ep, fl| via_msg!(ep, msg.sendmsg, &msg(iov, desc, count, dest, ctx, 0), fl));
alias_op!(fn m_sendmsg(m: *const ofi::fi_msg, flags: u64) tx, msg.sendmsg,
    |a, ep, fl| via_msg!(ep, msg.sendmsg, m, fl | flags));
alias_op!(fn m_inject(buf: *const c_void, len: usize, dest: u64) tx, msg.inject,
    |a, ep, fl| { let iov = iov1(buf, len); via_msg!(ep, msg.sendmsg, &msg(&iov, std::ptr::null_mut(), 1, dest, std::ptr::null_mut(), 0), fl | FI_INJECT) });
alias_op!(fn m_senddata(buf: *const c_void, len: usize, desc: *mut c_void, data: u64, dest: u64, ctx: *mut c_void) tx, msg.senddata,
    |a, ep, fl| { let (iov, mut d) = (iov1(buf, len), desc); via_msg!(ep, msg.sendmsg, &msg(&iov, &mut d, 1, dest, ctx, data), fl | FI_REMOTE_CQ_DATA) });
alias_op!(fn m_injectdata(buf: *const c_void, len: usize, data: u64, dest: u64) tx, msg.injectdata,
    |a, ep, fl| { let iov = iov1(buf, len); via_msg!(ep, msg.sendmsg, &msg(&iov, std::ptr::null_mut(), 1, dest, std::ptr::null_mut(), data), fl | FI_INJECT | FI_REMOTE_CQ_DATA) });

const MSG: ofi::fi_ops_msg = ofi::fi_ops_msg {
    size: std::mem::size_of::<ofi::fi_ops_msg>(),
    recv: Some(m_recv),
    recvv: Some(m_recvv),
    recvmsg: Some(m_recvmsg),
    send: Some(m_send),
    sendv: Some(m_sendv),
    sendmsg: Some(m_sendmsg),
    inject: Some(m_inject),
    senddata: Some(m_senddata),
    injectdata: Some(m_injectdata),
};

// ---- tagged ------------------------------------------------------------------------------------
alias_op!(fn t_recv(buf: *mut c_void, len: usize, desc: *mut c_void, src: u64, tag: u64, ignore: u64, ctx: *mut c_void) rx, tagged.recv,
    |a, ep, fl| { let (iov, mut d) = (iov1(buf, len), desc); via_msg!(ep, tagged.recvmsg, &tmsg(&iov, &mut d, 1, src, tag, ignore, ctx, 0), fl) });
alias_op!(fn t_recvv(iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, src: u64, tag: u64, ignore: u64, ctx: *mut c_void) rx, tagged.recvv,
    |a, ep, fl| via_msg!(ep, tagged.recvmsg, &tmsg(iov, desc, count, src, tag, ignore, ctx, 0), fl));
alias_op!(fn t_recvmsg(m: *const ofi::fi_msg_tagged, flags: u64) rx, tagged.recvmsg,
    |a, ep, fl| via_msg!(ep, tagged.recvmsg, m, fl | flags));
alias_op!(fn t_send(buf: *const c_void, len: usize, desc: *mut c_void, dest: u64, tag: u64, ctx: *mut c_void) tx, tagged.send,
    |a, ep, fl| { let (iov, mut d) = (iov1(buf, len), desc); via_msg!(ep, tagged.sendmsg, &tmsg(&iov, &mut d, 1, dest, tag, 0, ctx, 0), fl) });
alias_op!(fn t_sendv(iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, dest: u64, tag: u64, ctx: *mut c_void) tx, tagged.sendv,
    |a, ep, fl| via_msg!(ep, tagged.sendmsg, &tmsg(iov, desc, count, dest, tag, 0, ctx, 0), fl));
alias_op!(fn t_sendmsg(m: *const ofi::fi_msg_tagged, flags: u64) tx, tagged.sendmsg,
    |a, ep, fl| via_msg!(ep, tagged.sendmsg, m, fl | flags));
alias_op!(fn t_inject(buf: *const c_void, len: usize, dest: u64, tag: u64) tx, tagged.inject,
    |a, ep, fl| { let iov = iov1(buf, len); via_msg!(ep, tagged.sendmsg, &tmsg(&iov, std::ptr::null_mut(), 1, dest, tag, 0, std::ptr::null_mut(), 0), fl | FI_INJECT) });
alias_op!(fn t_senddata(buf: *const c_void, len: usize, desc: *mut c_void, data: u64, dest: u64, tag: u64, ctx: *mut c_void) tx, tagged.senddata,
    |a, ep, fl| { let (iov, mut d) = (iov1(buf, len), desc); via_msg!(ep, tagged.sendmsg, &tmsg(&iov, &mut d, 1, dest, tag, 0, ctx, data), fl | FI_REMOTE_CQ_DATA) });
alias_op!(fn t_injectdata(buf: *const c_void, len: usize, data: u64, dest: u64, tag: u64) tx, tagged.injectdata,
    |a, ep, fl| { let iov = iov1(buf, len); via_msg!(ep, tagged.sendmsg, &tmsg(&iov, std::ptr::null_mut(), 1, dest, tag, 0, std::ptr::null_mut(), data), fl | FI_INJECT | FI_REMOTE_CQ_DATA) });

const TAGGED: ofi::fi_ops_tagged = ofi::fi_ops_tagged {
    size: std::mem::size_of::<ofi::fi_ops_tagged>(),
    recv: Some(t_recv),
    recvv: Some(t_recvv),
    recvmsg: Some(t_recvmsg),
    send: Some(t_send),
    sendv: Some(t_sendv),
    sendmsg: Some(t_sendmsg),
    inject: Some(t_inject),
    senddata: Some(t_senddata),
    injectdata: Some(t_injectdata),
};

// ---- rma ---------------------------------------------------------------------------------------
alias_op!(fn r_read(buf: *mut c_void, len: usize, desc: *mut c_void, src: u64, addr: u64, key: u64, ctx: *mut c_void) tx, rma.read,
    |a, ep, fl| { let (iov, mut d, r) = (iov1(buf, len), desc, rma_iov(addr, len, key)); via_msg!(ep, rma.readmsg, &rmsg(&iov, &mut d, 1, src, &r, ctx, 0), fl) });
alias_op!(fn r_readv(iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, src: u64, addr: u64, key: u64, ctx: *mut c_void) tx, rma.readv,
    |a, ep, fl| { let r = rma_iov(addr, iov_len(iov, count), key); via_msg!(ep, rma.readmsg, &rmsg(iov, desc, count, src, &r, ctx, 0), fl) });
alias_op!(fn r_readmsg(m: *const ofi::fi_msg_rma, flags: u64) tx, rma.readmsg,
    |a, ep, fl| via_msg!(ep, rma.readmsg, m, fl | flags));
alias_op!(fn r_write(buf: *const c_void, len: usize, desc: *mut c_void, dest: u64, addr: u64, key: u64, ctx: *mut c_void) tx, rma.write,
    |a, ep, fl| { let (iov, mut d, r) = (iov1(buf, len), desc, rma_iov(addr, len, key)); via_msg!(ep, rma.writemsg, &rmsg(&iov, &mut d, 1, dest, &r, ctx, 0), fl) });
alias_op!(fn r_writev(iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, dest: u64, addr: u64, key: u64, ctx: *mut c_void) tx, rma.writev,
    |a, ep, fl| { let r = rma_iov(addr, iov_len(iov, count), key); via_msg!(ep, rma.writemsg, &rmsg(iov, desc, count, dest, &r, ctx, 0), fl) });
alias_op!(fn r_writemsg(m: *const ofi::fi_msg_rma, flags: u64) tx, rma.writemsg,
    |a, ep, fl| via_msg!(ep, rma.writemsg, m, fl | flags));
alias_op!(fn r_inject(buf: *const c_void, len: usize, dest: u64, addr: u64, key: u64) tx, rma.inject,
    |a, ep, fl| { let (iov, r) = (iov1(buf, len), rma_iov(addr, len, key)); via_msg!(ep, rma.writemsg, &rmsg(&iov, std::ptr::null_mut(), 1, dest, &r, std::ptr::null_mut(), 0), fl | FI_INJECT) });
alias_op!(fn r_writedata(buf: *const c_void, len: usize, desc: *mut c_void, data: u64, dest: u64, addr: u64, key: u64, ctx: *mut c_void) tx, rma.writedata,
    |a, ep, fl| { let (iov, mut d, r) = (iov1(buf, len), desc, rma_iov(addr, len, key)); via_msg!(ep, rma.writemsg, &rmsg(&iov, &mut d, 1, dest, &r, ctx, data), fl | FI_REMOTE_CQ_DATA) });
alias_op!(fn r_injectdata(buf: *const c_void, len: usize, data: u64, dest: u64, addr: u64, key: u64) tx, rma.injectdata,
    |a, ep, fl| { let (iov, r) = (iov1(buf, len), rma_iov(addr, len, key)); via_msg!(ep, rma.writemsg, &rmsg(&iov, std::ptr::null_mut(), 1, dest, &r, std::ptr::null_mut(), data), fl | FI_INJECT | FI_REMOTE_CQ_DATA) });

const RMA: ofi::fi_ops_rma = ofi::fi_ops_rma {
    size: std::mem::size_of::<ofi::fi_ops_rma>(),
    read: Some(r_read),
    readv: Some(r_readv),
    readmsg: Some(r_readmsg),
    write: Some(r_write),
    writev: Some(r_writev),
    writemsg: Some(r_writemsg),
    inject: Some(r_inject),
    writedata: Some(r_writedata),
    injectdata: Some(r_injectdata),
};

// ---- atomic ------------------------------------------------------------------------------------
#[allow(clippy::too_many_arguments)]
fn amsg(
    iov: *const ofi::fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    addr: u64,
    rma: &ofi::fi_rma_ioc,
    datatype: ofi::fi_datatype,
    op: ofi::fi_op,
    context: *mut c_void,
) -> ofi::fi_msg_atomic {
    ofi::fi_msg_atomic {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr,
        rma_iov: rma,
        rma_iov_count: 1,
        datatype,
        op,
        context,
        data: 0,
    }
}

fn ioc(buf: *const c_void, count: usize) -> ofi::fi_ioc {
    ofi::fi_ioc {
        addr: buf as *mut c_void,
        count,
    }
}

fn rma_ioc(addr: u64, count: usize, key: u64) -> ofi::fi_rma_ioc {
    ofi::fi_rma_ioc { addr, count, key }
}

alias_op!(fn a_write(buf: *const c_void, count: usize, desc: *mut c_void, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op, ctx: *mut c_void) tx, atomic.write,
    |a, ep, fl| { let (v, mut d, r) = (ioc(buf, count), desc, rma_ioc(addr, count, key)); via_msg!(ep, atomic.writemsg, &amsg(&v, &mut d, 1, dest, &r, dt, op, ctx), fl) });
alias_op!(fn a_writev(iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op, ctx: *mut c_void) tx, atomic.writev,
    |a, ep, fl| { let r = rma_ioc(addr, ioc_count(iov, count), key); via_msg!(ep, atomic.writemsg, &amsg(iov, desc, count, dest, &r, dt, op, ctx), fl) });
alias_op!(fn a_writemsg(m: *const ofi::fi_msg_atomic, flags: u64) tx, atomic.writemsg,
    |a, ep, fl| via_msg!(ep, atomic.writemsg, m, fl | flags));
alias_op!(fn a_inject(buf: *const c_void, count: usize, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op) tx, atomic.inject,
    |a, ep, fl| { let (v, r) = (ioc(buf, count), rma_ioc(addr, count, key)); via_msg!(ep, atomic.writemsg, &amsg(&v, std::ptr::null_mut(), 1, dest, &r, dt, op, std::ptr::null_mut()), fl | FI_INJECT) });
alias_op!(fn a_readwrite(buf: *const c_void, count: usize, desc: *mut c_void, res: *mut c_void, rdesc: *mut c_void, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op, ctx: *mut c_void) tx, atomic.readwrite,
|a, ep, fl| {
    let (v, mut d, r, mut rv, mut rd) = (ioc(buf, count), desc, rma_ioc(addr, count, key), ioc(res, count), rdesc);
    via_msg!(ep, atomic.readwritemsg, &amsg(&v, &mut d, 1, dest, &r, dt, op, ctx), &mut rv, &mut rd, 1, fl)
});
alias_op!(fn a_readwritev(iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize, res: *mut ofi::fi_ioc, rdesc: *mut *mut c_void, rcount: usize, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op, ctx: *mut c_void) tx, atomic.readwritev,
    |a, ep, fl| { let r = rma_ioc(addr, ioc_count(iov, count), key); via_msg!(ep, atomic.readwritemsg, &amsg(iov, desc, count, dest, &r, dt, op, ctx), res, rdesc, rcount, fl) });
alias_op!(fn a_readwritemsg(m: *const ofi::fi_msg_atomic, res: *mut ofi::fi_ioc, rdesc: *mut *mut c_void, rcount: usize, flags: u64) tx, atomic.readwritemsg,
    |a, ep, fl| via_msg!(ep, atomic.readwritemsg, m, res, rdesc, rcount, fl | flags));
alias_op!(fn a_compwrite(buf: *const c_void, count: usize, desc: *mut c_void, cmp: *const c_void, cdesc: *mut c_void, res: *mut c_void, rdesc: *mut c_void, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op, ctx: *mut c_void) tx, atomic.compwrite,
|a, ep, fl| {
    let (v, mut d, r) = (ioc(buf, count), desc, rma_ioc(addr, count, key));
    let (cv, mut cd, mut rv, mut rd) = (ioc(cmp, count), cdesc, ioc(res, count), rdesc);
    via_msg!(ep, atomic.compwritemsg, &amsg(&v, &mut d, 1, dest, &r, dt, op, ctx), &cv, &mut cd, 1, &mut rv, &mut rd, 1, fl)
});
alias_op!(fn a_compwritev(iov: *const ofi::fi_ioc, desc: *mut *mut c_void, count: usize, cmp: *const ofi::fi_ioc, cdesc: *mut *mut c_void, ccount: usize, res: *mut ofi::fi_ioc, rdesc: *mut *mut c_void, rcount: usize, dest: u64, addr: u64, key: u64, dt: ofi::fi_datatype, op: ofi::fi_op, ctx: *mut c_void) tx, atomic.compwritev,
    |a, ep, fl| { let r = rma_ioc(addr, ioc_count(iov, count), key); via_msg!(ep, atomic.compwritemsg, &amsg(iov, desc, count, dest, &r, dt, op, ctx), cmp, cdesc, ccount, res, rdesc, rcount, fl) });
alias_op!(fn a_compwritemsg(m: *const ofi::fi_msg_atomic, cmp: *const ofi::fi_ioc, cdesc: *mut *mut c_void, ccount: usize, res: *mut ofi::fi_ioc, rdesc: *mut *mut c_void, rcount: usize, flags: u64) tx, atomic.compwritemsg,
    |a, ep, fl| via_msg!(ep, atomic.compwritemsg, m, cmp, cdesc, ccount, res, rdesc, rcount, fl | flags));

/// The elements of an fi_ioc array (the remote count of a `*v` atomic).
///
/// # Safety
/// `iov` holds `count` elements (or `count` is 0).
unsafe fn ioc_count(iov: *const ofi::fi_ioc, count: usize) -> usize {
    if iov.is_null() || count == 0 {
        return 0;
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(iov, count) }
        .iter()
        .map(|v| v.count)
        .sum()
}

macro_rules! valid_op {
    ($name:ident, $slot:ident) => {
        unsafe extern "C" fn $name(
            ep: *mut ofi::fid_ep,
            dt: ofi::fi_datatype,
            op: ofi::fi_op,
            count: *mut usize,
        ) -> c_int {
            // SAFETY: only aliases reach this op; the core endpoint's own.
            unsafe {
                let core = AliasEp::of(ep).core_ep();
                (*core)
                    .atomic
                    .as_ref()
                    .and_then(|t| t.$slot)
                    .map_or(err::ENOSYS, |f| f(core, dt, op, count))
            }
        }
    };
}
valid_op!(a_writevalid, writevalid);
valid_op!(a_readwritevalid, readwritevalid);
valid_op!(a_compwritevalid, compwritevalid);

const ATOMIC: ofi::fi_ops_atomic = ofi::fi_ops_atomic {
    size: std::mem::size_of::<ofi::fi_ops_atomic>(),
    write: Some(a_write),
    writev: Some(a_writev),
    writemsg: Some(a_writemsg),
    inject: Some(a_inject),
    readwrite: Some(a_readwrite),
    readwritev: Some(a_readwritev),
    readwritemsg: Some(a_readwritemsg),
    compwrite: Some(a_compwrite),
    compwritev: Some(a_compwritev),
    compwritemsg: Some(a_compwritemsg),
    writevalid: Some(a_writevalid),
    readwritevalid: Some(a_readwritevalid),
    compwritevalid: Some(a_compwritevalid),
};
