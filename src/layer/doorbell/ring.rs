//! The sending half of the doorbell over shm (`bell.rs`, `peers.rs`): every rscntr endpoint over
//! shm rings the peers it completes operations toward, whether its own domain waits or not (a
//! producer that only polls its CQ is exactly the peer of one that sleeps).
//!
//! Such an endpoint's msg, tagged, rma and atomic tables are copies of the ones it had at
//! FI_ENABLE (the core's, or rscntr's own for triggered operations and remote-access events)
//! in which every operation that reaches a peer (sends, injects, writes, reads, atomics) calls
//! the entry it replaced, then, when that accepted the operation, rings the destination's
//! bell if it is armed: one lookup in a table by `fi_addr` and one fence and one load while
//! nobody is armed. Receives and the atomic `*valid` queries are the entries it had. Toward a
//! peer without a bell (plain shm, another pid namespace, an rscntr endpoint of a domain that
//! never waits) the lookup finds that once and, from then on, costs one load and a compare.
//! The decision is per peer, at the first operation toward its address: a peer publishes its
//! bell before its endpoint is enabled, so before anyone can know the address. An operation
//! that only the peer's progress completes ([`answered_len`], reads and fetching atomics, and
//! every write and atomic of an endpoint whose default flags ask for `FI_DELIVERY_COMPLETE`, as
//! Sandia OpenSHMEM's do), from an endpoint of a domain that waits, also asks the peer to ring
//! when it has answered (`answers.rs`): the answer is made inside the peer's own calls, which
//! send nothing here. It asks before it rings: a peer the ring wakes rings only the askers it
//! counted before its progress call.

use super::answers::DomainAnswers;
use super::bell::BellBlocker;
use super::peers::{DomainPeers, Looked, PeerBell, PeerTable};
use super::registry::Registry;
use crate::boundary::ffi::{
    DataTables, copy_table, iov_len, ours_where_the_core_has, point_data_tables,
};
use crate::ofi;
use std::ffi::c_void;
use std::sync::Arc;

/// An endpoint's ringing tables (its table pointers point into this record, so an op finds
/// it from its `ep`), the tables they wrap, and the peers it rings.
#[repr(C)]
pub struct RingEp {
    msg: ofi::fi_ops_msg,
    tagged: ofi::fi_ops_tagged,
    rma: ofi::fi_ops_rma,
    atomic: ofi::fi_ops_atomic,
    inner_msg: ofi::fi_ops_msg,
    inner_tagged: ofi::fi_ops_tagged,
    inner_rma: ofi::fi_ops_rma,
    inner_atomic: ofi::fi_ops_atomic,
    /// The core AV the endpoint is bound to (addresses are looked up there once each).
    av: std::sync::atomic::AtomicPtr<ofi::fid_av>,
    /// Its AV's peers, found at the first operation.
    peers: std::sync::OnceLock<Arc<PeerTable>>,
    /// The domain's own bell, when it waits (a peer without one makes its waits fall back).
    bell: Option<Arc<BellBlocker>>,
    /// The peers of the endpoint's domain, where the AV's table lives.
    domain: Arc<DomainPeers>,
    /// The endpoint, as registered (see [`RingEp::patch_below`]).
    ep: usize,
    /// The feeds of the counters bound to the endpoint at its FI_ENABLE (low, high halves):
    /// what a peer's ring for answers to its operations wakes (see `answers.rs`).
    hints: [std::sync::atomic::AtomicU64; 2],
    /// The endpoint's default flags and its domain's progress.
    posting: Posting,
}

/// The domain's progress, for [`Posting`]'s `land`.
pub type Land = Arc<dyn Fn() + Send + Sync>;

/// What an endpoint's ringing tables know of how it posts.
pub struct Posting {
    /// The endpoint's default transmit flags (its info's `tx_attr->op_flags`), which the core
    /// applies to every operation but the `*msg` ones: with `FI_DELIVERY_COMPLETE` among them
    /// (Sandia OpenSHMEM sets it) a write or atomic completes only when the target answers.
    pub tx_op_flags: u64,
    /// Runs the domain's progress once (`progress::drive_unless_busy`): after an inject toward
    /// an endpoint of this same domain (see [`RingEp::after`]).
    pub land: Land,
}

impl RingEp {
    /// Gives an enabled endpoint ringing tables over the ones it has. The record lives until
    /// [`RingEp::free`], after the core closed the endpoint.
    ///
    /// # Safety
    /// `ep` is an open, enabled endpoint; `av` the core AV bound to it; no other thread uses
    /// the endpoint's tables yet (FI_ENABLE has not returned to the application).
    pub unsafe fn patch(
        ep: *mut ofi::fid_ep,
        av: *mut ofi::fid_av,
        bell: Option<Arc<BellBlocker>>,
        domain: Arc<DomainPeers>,
        posting: Posting,
    ) -> *mut RingEp {
        // SAFETY: caller's contract.
        let mut rec = unsafe { RingEp::over(ep, av, bell, domain, 0, posting) };
        install::<false>(&mut rec);
        let rec = Box::into_raw(rec);
        // SAFETY: caller's contract; the record lives until freed after the endpoint closed.
        unsafe { point_data_tables(ep, RingEp::tables(rec)) };
        rec
    }

    /// Gives an endpoint just opened ringing tables under the ones rscntr installs next (those
    /// of triggered operations and remote-access events, which find their own record through
    /// the endpoint's table pointers and call these as the core's): these find theirs in a
    /// registry by endpoint. The AV comes later ([`RingEp::set_av`]). None when the registry is
    /// full.
    ///
    /// # Safety
    /// `ep` is an open core endpoint nobody else uses yet.
    pub unsafe fn patch_below(
        ep: *mut ofi::fid_ep,
        bell: Option<Arc<BellBlocker>>,
        domain: Arc<DomainPeers>,
        posting: Posting,
    ) -> Option<*mut RingEp> {
        // SAFETY: caller's contract.
        let mut rec =
            unsafe { RingEp::over(ep, std::ptr::null_mut(), bell, domain, ep as usize, posting) };
        install::<true>(&mut rec);
        let rec = Box::into_raw(rec);
        if !BELOW.insert(ep as usize, rec) {
            crate::fi_info!(
                EpCtrl,
                "more than {} ringing endpoints under other tables: this one does not ring",
                Registry::<RingEp>::SIZE
            );
            // SAFETY: just made, never handed out.
            drop(unsafe { Box::from_raw(rec) });
            return None;
        }
        // SAFETY: caller's contract; the record lives until freed after the endpoint closed.
        unsafe { point_data_tables(ep, RingEp::tables(rec)) };
        Some(rec)
    }

    /// The record's tables, for the endpoint to point at.
    ///
    /// # Safety
    /// `rec` is a live record.
    unsafe fn tables(rec: *mut RingEp) -> DataTables {
        // SAFETY: addresses of fields of a live record (caller's contract), nothing read.
        unsafe {
            DataTables {
                msg: &raw mut (*rec).msg,
                tagged: &raw mut (*rec).tagged,
                rma: &raw mut (*rec).rma,
                atomic: &raw mut (*rec).atomic,
            }
        }
    }

    /// A record whose tables, and the tables they call, are copies of `ep`'s.
    ///
    /// # Safety
    /// `ep` is an open endpoint whose table pointers are NULL or valid.
    unsafe fn over(
        ep: *mut ofi::fid_ep,
        av: *mut ofi::fid_av,
        bell: Option<Arc<BellBlocker>>,
        domain: Arc<DomainPeers>,
        registered: usize,
        posting: Posting,
    ) -> Box<RingEp> {
        // SAFETY: caller's contract.
        let (m, t, r, a) = unsafe {
            let e = &*ep;
            (
                copy_table(e.msg),
                copy_table(e.tagged),
                copy_table(e.rma),
                copy_table(e.atomic),
            )
        };
        Box::new(RingEp {
            msg: m,
            tagged: t,
            rma: r,
            atomic: a,
            inner_msg: m,
            inner_tagged: t,
            inner_rma: r,
            inner_atomic: a,
            av: std::sync::atomic::AtomicPtr::new(av),
            peers: std::sync::OnceLock::new(),
            bell,
            domain,
            ep: registered,
            hints: Default::default(),
            posting,
        })
    }

    /// The feeds of the counters bound to the endpoint at its FI_ENABLE.
    fn set_hints(&self, hints: u128) {
        for (half, bits) in self.hints.iter().zip([hints as u64, (hints >> 64) as u64]) {
            half.store(bits, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn hints(&self) -> u128 {
        let [lo, hi] = self
            .hints
            .each_ref()
            .map(|h| h.load(std::sync::atomic::Ordering::Relaxed));
        u128::from(lo) | u128::from(hi) << 64
    }

    /// The core AV the endpoint is bound to, where its peers are looked up.
    pub fn set_av(&self, av: *mut ofi::fid_av) {
        self.av.store(av, std::sync::atomic::Ordering::Release);
    }

    /// The peers reached through the endpoint's AV (one table per AV, see `peers.rs`).
    fn peers(&self) -> &PeerTable {
        self.peers.get_or_init(|| {
            self.domain
                .table_of(self.av.load(std::sync::atomic::Ordering::Acquire) as usize)
        })
    }

    /// Frees the record once the core closed its endpoint.
    ///
    /// # Safety
    /// `r` came from [`RingEp::patch`]; nothing uses it any more.
    pub unsafe fn free(r: *mut RingEp) {
        // SAFETY: caller's contract.
        let rec = unsafe { Box::from_raw(r) };
        if rec.ep != 0 {
            BELOW.remove(rec.ep, r);
        }
        drop(rec);
    }

    /// After an operation toward `dest`: the core accepted it, or refused it for now
    /// (-FI_EAGAIN: the peer's queue is full, or shm's first contact with the peer waits for
    /// the peer's progress to answer; a sleeping peer must wake for both).
    ///
    /// `answered`: whether the operation completes here only when the peer's progress answers
    /// it, given the endpoint's default transmit flags (asked only when this domain waits and
    /// the core accepted it, see [`answered_len`]): then the peer is asked to ring the answer
    /// (`answers.rs`).
    ///
    /// `injected`: an inject, which shm counts when it is posted whatever the flags, while its
    /// bytes land when the target endpoint's progress runs. Toward an endpoint of this same
    /// domain (a PE putting to itself, as Sandia OpenSHMEM's teams of one PE do) from an
    /// endpoint whose operations complete at delivery, this domain's progress runs once before
    /// the call returns, so that the bytes are in place when the count is: a quiet that follows
    /// returns after the data, as it promises.
    #[inline]
    fn after(
        &self,
        ret: isize,
        dest: ofi::fi_addr_t,
        answered: impl FnOnce(u64) -> bool,
        injected: bool,
    ) {
        if (ret != 0 && ret != crate::boundary::ffi::err::EAGAIN as isize) || dest == FI_ADDR_UNSPEC
        {
            return;
        }
        let asks = |peer: Option<&PeerBell>| {
            if let Some(bell) = &self.bell
                && ret == 0
                && answered(self.posting.tx_op_flags)
            {
                self.ask(bell, peer);
            }
        };
        match self.peers().get(dest, || self.lookup(dest), &self.domain) {
            Looked::Bell(p) => {
                // Asked first: a peer the ring wakes may answer at once, and rings only
                // askers it counted before its progress call (`answers.rs`).
                asks(Some(p));
                p.ring_if_armed();
                if injected
                    && ret == 0
                    && self.posting.tx_op_flags & ofi::FI_DELIVERY_COMPLETE as u64 != 0
                    && self.domain.is_own(p)
                {
                    (self.posting.land)();
                }
            }
            Looked::NoBell => {
                if let Some(bell) = &self.bell {
                    bell.fall_back("a peer without a doorbell");
                }
            }
            Looked::Ringer(p) => asks(p),
        }
    }

    /// Asks `peer` (None: an rscntr peer without an answers page) to ring this domain when its
    /// progress has answered; where it cannot, this domain's waits re-check, logged once.
    #[cold]
    fn ask(&self, bell: &BellBlocker, peer: Option<&PeerBell>) {
        bell.wants_answers(self.hints());
        if !peer.is_some_and(|p| p.ask(bell.asker_key())) && !bell.falls_back() {
            bell.fall_back(super::answers::NOT_LISTED);
        }
    }

    /// The shm address of `dest` in the core AV.
    #[cold]
    fn lookup(&self, dest: ofi::fi_addr_t) -> Option<Vec<u8>> {
        let av = self.av.load(std::sync::atomic::Ordering::Acquire);
        if av.is_null() {
            return None;
        }
        let mut buf = vec![0u8; 256];
        let mut len = buf.len();
        // SAFETY: the core AV bound to the endpoint (it cannot close while bound); buf and len
        // live across the call.
        let ret = unsafe {
            let ops = &*(*av).ops;
            ops.lookup?(av, dest, buf.as_mut_ptr().cast(), &mut len)
        };
        if ret != 0 || len > buf.len() {
            return None;
        }
        buf.truncate(len);
        Some(buf)
    }
}

/// shm's `SMR_INJECT_SIZE` (the same from 1.17 to 2.5): a send or write longer than this
/// completes at its initiator when the target's progress has copied it.
const SHM_INJECT_SIZE: usize = 4096;

/// Whether a send or write of `len` bytes with `flags` completes only when the target answers.
#[inline]
fn answered_len(len: usize, flags: u64) -> bool {
    len > SHM_INJECT_SIZE || flags & ofi::FI_DELIVERY_COMPLETE as u64 != 0
}

/// Whether a vectored send or write of `count` iovecs with `flags` completes only when the
/// target answers.
fn iov_answered(iov: Iov, count: usize, flags: u64) -> bool {
    // SAFETY: the application's iovec array of `count` entries, which the core just accepted.
    answered_len(unsafe { iov_len(iov, count) }, flags)
}

/// Whether an atomic that returns nothing, with `flags`, completes only when the target answers.
fn atomic_answered(flags: u64) -> bool {
    flags & ofi::FI_DELIVERY_COMPLETE as u64 != 0
}

/// Puts the ringing entries (finding their record by table pointer, or by registry when
/// `BELOW`) where the tables have the op.
fn install<const BELOW: bool>(rec: &mut RingEp) {
    ours_where_the_core_has!(
        rec.msg.send => m_send::<BELOW>, rec.msg.sendv => m_sendv::<BELOW>,
        rec.msg.sendmsg => m_sendmsg::<BELOW>, rec.msg.inject => m_inject::<BELOW>,
        rec.msg.senddata => m_senddata::<BELOW>, rec.msg.injectdata => m_injectdata::<BELOW>,
        rec.tagged.send => t_send::<BELOW>, rec.tagged.sendv => t_sendv::<BELOW>,
        rec.tagged.sendmsg => t_sendmsg::<BELOW>, rec.tagged.inject => t_inject::<BELOW>,
        rec.tagged.senddata => t_senddata::<BELOW>,
        rec.tagged.injectdata => t_injectdata::<BELOW>,
        rec.rma.read => r_read::<BELOW>, rec.rma.readv => r_readv::<BELOW>,
        rec.rma.readmsg => r_readmsg::<BELOW>, rec.rma.write => r_write::<BELOW>,
        rec.rma.writev => r_writev::<BELOW>, rec.rma.writemsg => r_writemsg::<BELOW>,
        rec.rma.inject => r_inject::<BELOW>, rec.rma.writedata => r_writedata::<BELOW>,
        rec.rma.injectdata => r_injectdata::<BELOW>,
        rec.atomic.write => a_write::<BELOW>, rec.atomic.writev => a_writev::<BELOW>,
        rec.atomic.writemsg => a_writemsg::<BELOW>, rec.atomic.inject => a_inject::<BELOW>,
        rec.atomic.readwrite => a_readwrite::<BELOW>,
        rec.atomic.readwritev => a_readwritev::<BELOW>,
        rec.atomic.readwritemsg => a_readwritemsg::<BELOW>,
        rec.atomic.compwrite => a_compwrite::<BELOW>,
        rec.atomic.compwritev => a_compwritev::<BELOW>,
        rec.atomic.compwritemsg => a_compwritemsg::<BELOW>,
    );
}

/// The records of endpoints whose ringing tables went under rscntr's own (see
/// [`RingEp::patch_below`]).
static BELOW: Registry<RingEp> = Registry::new();

/// The record registered for `ep` (NULL if none).
#[inline]
fn registered(ep: *mut ofi::fid_ep) -> *const RingEp {
    BELOW.get(ep as usize)
}

/// The record of an endpoint whose `$table` pointer is ours.
///
/// # Safety
/// `ep` is an endpoint patched by [`RingEp::patch`].
macro_rules! rec_of {
    ($ep:expr, $table:ident) => {{
        // SAFETY: the endpoint's table pointer points at this field of its record.
        unsafe {
            &*((*$ep).$table as *const u8)
                .sub(std::mem::offset_of!(RingEp, $table))
                .cast::<RingEp>()
        }
    }};
}

/// A ringing entry: calls the wrapped one, then rings `$dest`. A trailing `inject` marks an
/// inject (see [`RingEp::after`]).
macro_rules! ringing {
    ($name:ident, $table:ident, $inner:ident . $slot:ident, ($($a:ident : $t:ty),*), $dest:expr, $answered:expr, inject) => {
        ringing!(@ $name, $table, $inner.$slot, ($($a: $t),*), $dest, $answered, true);
    };
    ($name:ident, $table:ident, $inner:ident . $slot:ident, ($($a:ident : $t:ty),*), $dest:expr, $answered:expr) => {
        ringing!(@ $name, $table, $inner.$slot, ($($a: $t),*), $dest, $answered, false);
    };
    (@ $name:ident, $table:ident, $inner:ident . $slot:ident, ($($a:ident : $t:ty),*), $dest:expr, $answered:expr, $injected:expr) => {
        unsafe extern "C" fn $name<const BELOW: bool>(ep: *mut ofi::fid_ep, $($a: $t),*) -> isize {
            crate::ffi_boundary! {
                let rec = if BELOW {
                    // SAFETY: registered by patch_below until freed after the core closed `ep`.
                    match unsafe { registered(ep).as_ref() } {
                        Some(r) => r,
                        None => return crate::boundary::ffi::err::EINVAL as isize,
                    }
                } else {
                    rec_of!(ep, $table)
                };
                let Some(f) = rec.$inner.$slot else { return crate::boundary::ffi::err::ENOSYS as isize };
                // SAFETY: the entry this one replaced, with the application's arguments.
                let ret = unsafe { f(ep, $($a),*) };
                rec.after(ret, $dest, $answered, $injected);
                ret
            }
        }
    };
}

/// `FI_ADDR_UNSPEC` (all ones; bindgen leaves the macro out).
const FI_ADDR_UNSPEC: ofi::fi_addr_t = u64::MAX;

type P = *mut c_void;
type CP = *const c_void;
type Addr = ofi::fi_addr_t;
type Dt = ofi::fi_datatype;
type Op = ofi::fi_op;
type Iov = *const libc::iovec;
type Ioc = *const ofi::fi_ioc;
type Descs = *mut *mut c_void;

/// Whether a `*msg` send or write completes only when the target answers.
macro_rules! msg_answered {
    ($m:expr, $flags:expr) => {
        // SAFETY: the application's message (the core accepted it, so it is valid).
        unsafe { $m.as_ref() }.is_some_and(|m| {
            // SAFETY: its iovec array, as valid as the message.
            answered_len(unsafe { iov_len(m.msg_iov, m.iov_count) }, $flags)
        })
    };
}

/// The destination of a `*msg` operation.
macro_rules! msg_addr {
    ($m:expr) => {
        // SAFETY: the application's message (the core accepted it, so it is valid).
        unsafe { $m.as_ref() }.map_or(FI_ADDR_UNSPEC, |m| m.addr)
    };
}

ringing!(m_send, msg, inner_msg.send, (buf: CP, len: usize, desc: P, dest: Addr, ctx: P), dest, |d| answered_len(len, d));
ringing!(m_sendv, msg, inner_msg.sendv, (iov: Iov, desc: Descs, count: usize, dest: Addr, ctx: P), dest, |d| iov_answered(iov, count, d));
ringing!(m_sendmsg, msg, inner_msg.sendmsg, (m: *const ofi::fi_msg, flags: u64), msg_addr!(m), |_| msg_answered!(m, flags));
ringing!(m_inject, msg, inner_msg.inject, (buf: CP, len: usize, dest: Addr), dest, |_| false, inject);
ringing!(m_senddata, msg, inner_msg.senddata, (buf: CP, len: usize, desc: P, data: u64, dest: Addr, ctx: P), dest, |d| answered_len(len, d));
ringing!(m_injectdata, msg, inner_msg.injectdata, (buf: CP, len: usize, data: u64, dest: Addr), dest, |_| false, inject);

ringing!(t_send, tagged, inner_tagged.send, (buf: CP, len: usize, desc: P, dest: Addr, tag: u64, ctx: P), dest, |d| answered_len(len, d));
ringing!(t_sendv, tagged, inner_tagged.sendv, (iov: Iov, desc: Descs, count: usize, dest: Addr, tag: u64, ctx: P), dest, |d| iov_answered(iov, count, d));
ringing!(t_sendmsg, tagged, inner_tagged.sendmsg, (m: *const ofi::fi_msg_tagged, flags: u64), msg_addr!(m), |_| msg_answered!(m, flags));
ringing!(t_inject, tagged, inner_tagged.inject, (buf: CP, len: usize, dest: Addr, tag: u64), dest, |_| false, inject);
ringing!(t_senddata, tagged, inner_tagged.senddata, (buf: CP, len: usize, desc: P, data: u64, dest: Addr, tag: u64, ctx: P), dest, |d| answered_len(len, d));
ringing!(t_injectdata, tagged, inner_tagged.injectdata, (buf: CP, len: usize, data: u64, dest: Addr, tag: u64), dest, |_| false, inject);

ringing!(r_read, rma, inner_rma.read, (buf: P, len: usize, desc: P, src: Addr, addr: u64, key: u64, ctx: P), src, |_| true);
ringing!(r_readv, rma, inner_rma.readv, (iov: Iov, desc: Descs, count: usize, src: Addr, addr: u64, key: u64, ctx: P), src, |_| true);
ringing!(r_readmsg, rma, inner_rma.readmsg, (m: *const ofi::fi_msg_rma, flags: u64), msg_addr!(m), |_| true);
ringing!(r_write, rma, inner_rma.write, (buf: CP, len: usize, desc: P, dest: Addr, addr: u64, key: u64, ctx: P), dest, |d| answered_len(len, d));
ringing!(r_writev, rma, inner_rma.writev, (iov: Iov, desc: Descs, count: usize, dest: Addr, addr: u64, key: u64, ctx: P), dest, |d| iov_answered(iov, count, d));
ringing!(r_writemsg, rma, inner_rma.writemsg, (m: *const ofi::fi_msg_rma, flags: u64), msg_addr!(m), |_| msg_answered!(m, flags));
ringing!(r_inject, rma, inner_rma.inject, (buf: CP, len: usize, dest: Addr, addr: u64, key: u64), dest, |_| false, inject);
ringing!(r_writedata, rma, inner_rma.writedata, (buf: CP, len: usize, desc: P, data: u64, dest: Addr, addr: u64, key: u64, ctx: P), dest, |d| answered_len(len, d));
ringing!(r_injectdata, rma, inner_rma.injectdata, (buf: CP, len: usize, data: u64, dest: Addr, addr: u64, key: u64), dest, |_| false, inject);

ringing!(a_write, atomic, inner_atomic.write, (buf: CP, count: usize, desc: P, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op, ctx: P), dest, atomic_answered);
ringing!(a_writev, atomic, inner_atomic.writev, (iov: Ioc, desc: Descs, count: usize, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op, ctx: P), dest, atomic_answered);
ringing!(a_writemsg, atomic, inner_atomic.writemsg, (m: *const ofi::fi_msg_atomic, flags: u64), msg_addr!(m), |_| atomic_answered(flags));
ringing!(a_inject, atomic, inner_atomic.inject, (buf: CP, count: usize, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op), dest, |_| false, inject);
ringing!(a_readwrite, atomic, inner_atomic.readwrite, (buf: CP, count: usize, desc: P, result: P, result_desc: P, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op, ctx: P), dest, |_| true);
ringing!(a_readwritev, atomic, inner_atomic.readwritev, (iov: Ioc, desc: Descs, count: usize, resultv: *mut ofi::fi_ioc, result_desc: Descs, result_count: usize, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op, ctx: P), dest, |_| true);
ringing!(a_readwritemsg, atomic, inner_atomic.readwritemsg, (m: *const ofi::fi_msg_atomic, resultv: *mut ofi::fi_ioc, result_desc: Descs, result_count: usize, flags: u64), msg_addr!(m), |_| true);
ringing!(a_compwrite, atomic, inner_atomic.compwrite, (buf: CP, count: usize, desc: P, compare: CP, compare_desc: P, result: P, result_desc: P, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op, ctx: P), dest, |_| true);
ringing!(a_compwritev, atomic, inner_atomic.compwritev, (iov: Ioc, desc: Descs, count: usize, comparev: Ioc, compare_desc: Descs, compare_count: usize, resultv: *mut ofi::fi_ioc, result_desc: Descs, result_count: usize, dest: Addr, addr: u64, key: u64, dt: Dt, op: Op, ctx: P), dest, |_| true);
ringing!(a_compwritemsg, atomic, inner_atomic.compwritemsg, (m: *const ofi::fi_msg_atomic, comparev: Ioc, compare_desc: Descs, compare_count: usize, resultv: *mut ofi::fi_ioc, result_desc: Descs, result_count: usize, flags: u64), msg_addr!(m), |_| true);

/// An endpoint's part in the doorbell: the name its bell is published under (removed when
/// dropped) and its ringing tables (freed when dropped, after the core closed the endpoint).
pub struct EpBell {
    name: Option<super::bell::NameFile>,
    ring: *mut RingEp,
}

// SAFETY: the record is only read through the endpoint's tables and freed once.
unsafe impl Send for EpBell {}
// SAFETY: as above.
unsafe impl Sync for EpBell {}

impl EpBell {
    /// Before the core enables `ep` of a domain that waits: publishes the domain's bell under
    /// the endpoint's shm address, so that peers find it as soon as they can reach the
    /// endpoint, with the `hints` of the counters bound to it (see `BellBlocker::publish`).
    ///
    /// # Safety
    /// `ep` is an open core endpoint of the domain whose bell is `bell`.
    pub unsafe fn publish(
        ep: *mut ofi::fid_ep,
        bell: &BellBlocker,
        hints: u128,
    ) -> Option<super::bell::NameFile> {
        // SAFETY: caller's contract.
        let name = unsafe { ep_name(ep) }?;
        bell.publish(&name, hints).ok()
    }

    /// Before the core enables `ep` of a domain that never waits: a name file that says the
    /// endpoint rings its peers and has no bell (a peer that sends to it then knows its own
    /// waits can count on rings from it; plain shm has no such file).
    ///
    /// The record names the domain's answers page (`answers.rs`).
    ///
    /// # Safety
    /// `ep` is an open core endpoint.
    pub unsafe fn publish_ringer(
        ep: *mut ofi::fid_ep,
        answers: &DomainAnswers,
    ) -> Option<super::bell::NameFile> {
        // SAFETY: caller's contract.
        let name = unsafe { ep_name(ep) }?;
        super::bell::NameFile::create(&name, super::bell_files::NO_PAGE, answers.fd(), 0)
            .inspect_err(|e| {
                crate::fi_info!(EpCtrl, "cannot publish the endpoint's ringer record: {e}")
            })
            .ok()
    }

    /// After the core enabled `ep`: its ringing tables (`bell`: the domain's, when it waits;
    /// `hints`: the feeds of the counters bound to it).
    ///
    /// # Safety
    /// As [`RingEp::patch`].
    pub unsafe fn ring(
        ep: *mut ofi::fid_ep,
        av: *mut ofi::fid_av,
        bell: Option<Arc<BellBlocker>>,
        domain: Arc<DomainPeers>,
        name: Option<super::bell::NameFile>,
        hints: u128,
        posting: Posting,
    ) -> EpBell {
        // SAFETY: caller's contract.
        let ring = unsafe { RingEp::patch(ep, av, bell, domain, posting) };
        // SAFETY: made just now, freed with the EpBell.
        unsafe { (*ring).set_hints(hints) };
        EpBell { name, ring }
    }

    /// At an endpoint's open, under the tables rscntr installs next (see
    /// [`RingEp::patch_below`]); published at its FI_ENABLE ([`EpBell::published`]).
    ///
    /// # Safety
    /// As [`RingEp::patch_below`].
    pub unsafe fn below(
        ep: *mut ofi::fid_ep,
        bell: Option<Arc<BellBlocker>>,
        domain: Arc<DomainPeers>,
        posting: Posting,
    ) -> Option<EpBell> {
        // SAFETY: caller's contract.
        let ring = unsafe { RingEp::patch_below(ep, bell, domain, posting) }?;
        Some(EpBell { name: None, ring })
    }

    /// The ringing record (for its AV).
    pub fn record(&self) -> &RingEp {
        // SAFETY: live as long as self.
        unsafe { &*self.ring }
    }

    /// Publishes the domain's bell under `ep`'s address (an endpoint given ringing tables at
    /// its open), if the domain had one then (true), or says that it rings (false).
    ///
    /// # Safety
    /// `ep` is the endpoint, about to be enabled.
    pub unsafe fn published(
        &mut self,
        ep: *mut ofi::fid_ep,
        hints: u128,
        answers: &DomainAnswers,
    ) -> bool {
        self.record().set_hints(hints);
        let Some(bell) = self.record().bell.clone() else {
            // SAFETY: caller's contract.
            self.name = unsafe { EpBell::publish_ringer(ep, answers) };
            return false;
        };
        // SAFETY: caller's contract.
        self.name = unsafe { EpBell::publish(ep, &bell, hints) };
        self.name.is_some()
    }

    /// Whether the endpoint's ringing tables went under rscntr's own at its open.
    pub fn has_bell(&self) -> bool {
        self.record().bell.is_some()
    }
}

impl Drop for EpBell {
    fn drop(&mut self) {
        // SAFETY: dropped with the endpoint's record, after the core closed it.
        unsafe { RingEp::free(self.ring) };
    }
}

/// The endpoint's own address (the core's `fi_getname`).
///
/// # Safety
/// `ep` is an open core endpoint.
pub unsafe fn ep_name(ep: *mut ofi::fid_ep) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let mut len = buf.len();
    // SAFETY: caller's contract; buf and len live across the call.
    let ret = unsafe {
        let cm = (*ep).cm.as_ref()?;
        cm.getname?(&mut (*ep).fid, buf.as_mut_ptr().cast(), &mut len)
    };
    if ret != 0 || len > buf.len() {
        return None;
    }
    buf.truncate(len);
    Some(buf)
}
