//! Remote-access counters (FI_RMA_EVENT) over cores that have none (`ofi_rxm`) or whose own
//! count nothing (tcp: it counts remote writes per endpoint, never per MR). A counter bound to
//! an MR with FI_REMOTE_WRITE / FI_REMOTE_READ must count the remote writes, reads and atomics
//! that target that MR, and only those. The target's core tells nothing about them, so the
//! initiator does, in remote CQ data (a protocol between two rscntr instances):
//!
//! - a remote write carries its notification itself: rscntr posts it as a write with remote CQ
//!   data ([`encode`]: a mark, the access, the target MR's key folded to 16 bits, and the
//!   application's own remote CQ data, which has 4 bytes: `cq_data_size` is 4 here). One
//!   message, and the data is in place before the target sees its completion;
//! - a read or an atomic is followed, on the same endpoint (one ordered connection to the
//!   peer), by a write of nothing with the notification (`initiator.rs`);
//! - at the target, the CQs of the domain's endpoints are read through rscntr's filter
//!   (`trigger/cq_filter.rs`), which takes each notification out ([`RmaEvents::take`]), counts it in the
//!   counters bound to the MR whose key it names, and hands a write's own remote CQ data to
//!   the application with its entry.
//!
//! A counter bound to an MR here is fed by [`NotifyFeed`]: reading or waiting on it reads the
//! domain's CQs; waiters sleep on what the core wakes for remote writes, through a counter of
//! rscntr's bound with FI_REMOTE_WRITE to every endpoint of the domain that remote accesses may
//! target (the arrivals counter; `layer/domain.rs`, `may_be_accessed`).
//!
//! Two live MRs of one domain whose keys fold alike cannot both be counted: the second is
//! refused (-FI_EKEYREJECTED) rather than miscounted. Keys below 65536 never collide.

use crate::boundary::ffi::err;
use crate::cntr::{AnyCntr, Armed, Feed, Tally};
use crate::engine::Wake;
use crate::layer::hooks::{BindHook, CntrBind, Step, describe_flags};
use crate::layer::trigger::{CqFilter, Notifications};
use crate::layer::wait::CntrWaitBlocker;
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Cores whose remote-access counters rscntr provides itself: tcp (counts nothing per MR),
/// `ofi_rxm` (has none), shm (counts per endpoint only: its MRs refuse a counter's bind).
pub fn emulated(core: &str) -> bool {
    core == "tcp" || core == "shm" || core.ends_with(";ofi_rxm")
}

/// The remote CQ data an application keeps on these cores (its `cq_data_size`).
pub const APP_DATA_SIZE: usize = 4;
const APP_MASK: u64 = (1 << (8 * APP_DATA_SIZE)) - 1;
/// The mark of a notification: the top 12 bits. An application's own data has 4 bytes, so
/// nothing else that reaches a CQ here carries it.
const MARK: u64 = 0xA5C;

/// What a notification counts, and whether it brings the application's own CQ data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A remote write (or atomic) without the application's remote CQ data.
    Write = 1,
    /// A remote write with the application's remote CQ data: its entry stays.
    WriteData = 2,
    /// A remote read.
    Read = 3,
    /// A fetching or comparing atomic: it modifies the MR and reads it.
    ReadWrite = 4,
}

/// A key folded to 16 bits.
pub fn fold(key: u64) -> u16 {
    (key ^ (key >> 16) ^ (key >> 32) ^ (key >> 48)) as u16
}

/// The remote CQ data of a notification.
pub fn encode(kind: Kind, key: u64, app: u64) -> u64 {
    (MARK << 52) | ((kind as u64) << 48) | ((fold(key) as u64) << 32) | (app & APP_MASK)
}

/// A notification's kind, folded key and application data; None for anything else.
pub fn decode(data: u64) -> Option<(Kind, u16, u64)> {
    if data >> 52 != MARK {
        return None;
    }
    let kind = match (data >> 48) & 0xF {
        1 => Kind::Write,
        2 => Kind::WriteData,
        3 => Kind::Read,
        4 => Kind::ReadWrite,
        _ => return None,
    };
    Some((kind, (data >> 32) as u16, data & APP_MASK))
}

/// One registered MR of the domain and the counters bound to it.
struct Mr {
    fid: usize,
    key: u64,
    cntrs: Vec<(*const dyn AnyCntr, u64)>,
}

#[derive(Default)]
struct EpCounters {
    by_ep: HashMap<usize, Vec<(*const dyn AnyCntr, u64)>>,
    by_filter: HashMap<usize, Vec<usize>>,
}

impl EpCounters {
    /// Would endpoint `ep` receiving through `filter` share it with another endpoint that
    /// counts remote accesses (or counts them itself beside another)? Notifications name no
    /// endpoint, so such a share cannot be told apart.
    fn ambiguous(&self, filter: usize, ep: usize) -> bool {
        let eps = self.by_filter.get(&filter).map_or(&[][..], |v| &v[..]);
        let counting = |e: &usize| self.by_ep.get(e).is_some_and(|c| !c.is_empty());
        eps.iter()
            .any(|e| *e != ep && (counting(e) || counting(&ep)))
    }
}

/// The remote-access counters of one domain.
#[derive(Default)]
pub struct RmaEvents {
    /// The domain's live MRs by folded key.
    mrs: Mutex<HashMap<u16, Vec<Mr>>>,
    /// The filters of the CQs bound to the domain's endpoints (where notifications arrive).
    filters: Mutex<Vec<usize>>,
    /// Counters bound to endpoints for remote accesses (any MR of the endpoint's), and the
    /// endpoints whose receive CQ each filter reads: a notification that arrives through a
    /// filter counts in the counters of its endpoint.
    eps: Mutex<EpCounters>,
    /// The arrivals counter (see the module doc), opened with the domain's first endpoint.
    pub arrivals: Mutex<Option<*mut ofi::fid_cntr>>,
    /// Its feed, once bound.
    arrivals_feed: OnceLock<usize>,
    /// What waiters sleep in: the arrivals counter's own wait, which the core's count of a
    /// remote write ends in whichever thread runs the core's progress (the core's progress
    /// thread, another thread's read), not only the fd a waiter sleeps on, which such a thread
    /// may have drained (a wait on the fd alone missed wakeups, in Sandia OpenSHMEM's barrier
    /// over tcp;ofi_rxm, where rxm's atomic progress thread runs). An interrupt adds to the
    /// arrivals counter, whose value nothing else reads.
    blocker: CntrWaitBlocker,
    bias: AtomicU64,
}

// SAFETY: the raw pointers are the domain's counters (bound ones cannot close), its filters and
// its arrivals counter, which live until the domain closes; all behind locks.
unsafe impl Send for RmaEvents {}
// SAFETY: as above.
unsafe impl Sync for RmaEvents {}

impl RmaEvents {
    /// An MR registered: refused when its key folds like a counted MR's.
    pub fn registered(&self, fid: *mut ofi::fid_mr, key: u64) -> Result<(), c_int> {
        let mut mrs = self.mrs.lock();
        let same = mrs.entry(fold(key)).or_default();
        if same.iter().any(|m| m.key != key && !m.cntrs.is_empty()) {
            fi_warn!(
                Domain,
                "MR key {key:#x} folds like the key of an MR with remote-access counters \
                (16 bits, see the README): refused rather than miscounted"
            );
            return Err(-(ofi::FI_EKEYREJECTED as c_int));
        }
        same.push(Mr {
            fid: fid as usize,
            key,
            cntrs: Vec::new(),
        });
        Ok(())
    }

    /// A counter bound to an MR for FI_REMOTE_WRITE and/or FI_REMOTE_READ.
    pub fn bound(&self, fid: *mut ofi::fid_mr, c: *const dyn AnyCntr, flags: u64) -> c_int {
        // SAFETY: an open MR.
        let key = unsafe { (*fid).key };
        let mut mrs = self.mrs.lock();
        let Some(same) = mrs.get_mut(&fold(key)) else {
            fi_warn!(Domain, "MR {key:#x} unknown to rscntr");
            return err::EINVAL;
        };
        if same.iter().any(|m| m.key != key) {
            fi_warn!(
                Domain,
                "MR key {key:#x} folds like the key of another MR of the domain (16 bits, \
                see the README): its remote accesses cannot be told apart, so no counter"
            );
            return -(ofi::FI_EKEYREJECTED as c_int);
        }
        match same.iter_mut().find(|m| m.fid == fid as usize) {
            Some(m) => {
                m.cntrs.push((c, flags));
                0
            }
            None => err::EINVAL,
        }
    }

    /// An MR closed.
    pub fn unregistered(&self, fid: *mut ofi::fid_mr, key: u64) {
        let mut mrs = self.mrs.lock();
        if let Some(same) = mrs.get_mut(&fold(key)) {
            same.retain(|m| m.fid != fid as usize);
            if same.is_empty() {
                mrs.remove(&fold(key));
            }
        }
    }

    /// A CQ bound to endpoint `ep` of the domain, for `flags` (FI_RECV: remote accesses to
    /// the endpoint arrive there).
    pub fn add_filter(&self, ep: *mut ofi::fid_ep, f: *mut CqFilter, flags: u64) -> c_int {
        {
            let mut filters = self.filters.lock();
            if !filters.contains(&(f as usize)) {
                filters.push(f as usize);
            }
        }
        let dirs = (ofi::FI_TRANSMIT | ofi::FI_RECV) as u64;
        if flags & dirs != 0 && flags & ofi::FI_RECV as u64 == 0 {
            return 0;
        }
        let mut eps = self.eps.lock();
        if eps.ambiguous(f as usize, ep as usize) {
            fi_warn!(
                EpCtrl,
                "an endpoint with remote-access counters shares its receive CQ with another                 endpoint: rscntr could not tell whose remote accesses arrive (give each its own CQ)"
            );
            return err::EINVAL;
        }
        let list = eps.by_filter.entry(f as usize).or_default();
        if !list.contains(&(ep as usize)) {
            list.push(ep as usize);
        }
        0
    }

    /// A counter bound to endpoint `ep` for FI_REMOTE_WRITE and/or FI_REMOTE_READ.
    pub fn ep_bound(&self, ep: *mut ofi::fid, c: *const dyn AnyCntr, flags: u64) -> c_int {
        let mut eps = self.eps.lock();
        let shared = eps
            .by_filter
            .iter()
            .any(|(_, list)| list.contains(&(ep as usize)) && list.len() > 1);
        if shared {
            fi_warn!(
                EpCtrl,
                "the endpoint shares its receive CQ with another endpoint: rscntr could not                 tell whose remote accesses arrive (give each its own CQ)"
            );
            return err::EINVAL;
        }
        eps.by_ep.entry(ep as usize).or_default().push((c, flags));
        0
    }

    /// An endpoint of the domain closed.
    pub fn ep_closed(&self, ep: *mut ofi::fid) {
        let mut eps = self.eps.lock();
        eps.by_ep.remove(&(ep as usize));
        for list in eps.by_filter.values_mut() {
            list.retain(|e| *e != ep as usize);
        }
    }

    /// The arrivals counter and its feed, once it is bound to an endpoint.
    ///
    /// # Safety
    /// `arrivals` is the arrivals counter, open until the domain closes.
    pub unsafe fn set_arrivals(&self, arrivals: *mut ofi::fid_cntr, feed: &dyn Feed) {
        let mut first = false;
        self.arrivals_feed.get_or_init(|| {
            first = true;
            Box::into_raw(Box::new(feed as *const dyn Feed)) as usize
        });
        if first {
            // SAFETY: the arrivals counter and this record live until the domain closes,
            // after every counter whose waits use the blocker.
            unsafe { self.blocker.watch_counter(arrivals, &self.bias) };
        }
    }

    fn arrivals_feed(&self) -> Option<&dyn Feed> {
        let p = *self.arrivals_feed.get()? as *const *const dyn Feed;
        // SAFETY: the arrivals counter's feed lives until the domain closes, after every
        // counter bound to one of its MRs (the domain refuses to close before).
        Some(unsafe { &**p })
    }

    /// Drives the progress of every endpoint of the domain that remote accesses may target
    /// once, through the arrivals counter's core counter (bound to each of them), when all of
    /// them are enabled (util cores crash progressing an endpoint that is not). For an
    /// initiator whose notification waits for a target of its own domain (`initiator.rs`,
    /// `RmaEp::retry`): a target is such an endpoint.
    pub fn drive(&self) {
        if let Some(a) = self.arrivals_feed()
            && a.live()
        {
            a.sync(&Nothing, false);
        }
    }

    /// Reads the domain's CQs to the end (see [`CqFilter::drain`]): notifications are
    /// counted as the filters take them out. False when the domain has none.
    fn fill(&self) -> bool {
        // Held across the reads: counting a notification takes the other locks only.
        let filters = self.filters.lock();
        for &f in filters.iter() {
            // SAFETY: the domain's filters live until it closes.
            unsafe { (*(f as *const CqFilter)).drain() };
        }
        !filters.is_empty()
    }
}

impl Drop for RmaEvents {
    fn drop(&mut self) {
        if let Some(p) = self.arrivals_feed.get() {
            // SAFETY: made by set_arrivals_feed.
            drop(unsafe { Box::from_raw(*p as *mut *const dyn Feed) });
        }
    }
}

impl Notifications for RmaEvents {
    fn take(&self, filter: usize, flags: u64, data: &mut u64) -> Option<bool> {
        if flags & ofi::FI_REMOTE_CQ_DATA as u64 == 0 {
            return None;
        }
        let (kind, folded, app) = decode(*data)?;
        // fi_mr(3): FI_REMOTE_WRITE counts every remote write or atomic that modifies the MR;
        // FI_REMOTE_READ (fi_endpoint(3)) remote reads, to which fetching atomics belong too.
        let want = match kind {
            Kind::Write | Kind::WriteData => ofi::FI_REMOTE_WRITE as u64,
            Kind::Read => ofi::FI_REMOTE_READ as u64,
            Kind::ReadWrite => (ofi::FI_REMOTE_WRITE | ofi::FI_REMOTE_READ) as u64,
        };
        let count = |cntrs: &[(*const dyn AnyCntr, u64)]| {
            for (c, f) in cntrs {
                if f & want != 0 {
                    // SAFETY: a bound counter cannot close before its MR or endpoint.
                    let _ = unsafe { &**c }.add(1);
                }
            }
        };
        if let Some(same) = self.mrs.lock().get(&folded) {
            for m in same {
                count(&m.cntrs);
            }
        }
        let eps = self.eps.lock();
        for ep in eps.by_filter.get(&filter).into_iter().flatten() {
            if let Some(cntrs) = eps.by_ep.get(ep) {
                count(cntrs);
            }
        }
        *data = app;
        Some(kind == Kind::WriteData)
    }
}

/// What the counter of a domain's arrivals would count: nothing of interest.
struct Nothing;

impl Tally for Nothing {
    fn count(&self, _: u64) {}
    fn count_err(&self, _: u64) {}
    fn value(&self) -> u64 {
        0
    }
}

/// The feed of a counter bound to MRs of a domain whose remote accesses rscntr counts.
pub struct NotifyFeed {
    events: *const RmaEvents,
}

// SAFETY: the domain's record, which outlives its counters.
unsafe impl Send for NotifyFeed {}
// SAFETY: as above.
unsafe impl Sync for NotifyFeed {}

impl NotifyFeed {
    pub fn new(events: &RmaEvents) -> NotifyFeed {
        NotifyFeed { events }
    }

    fn events(&self) -> &RmaEvents {
        // SAFETY: see the Send impl.
        unsafe { &*self.events }
    }
}

/// Before the domain has an endpoint, nothing arrives; a waiter looks again this often.
const NO_ENDPOINT_YET: Duration = Duration::from_millis(1);

impl Feed for NotifyFeed {
    fn core_cntr(&self) -> *mut ofi::fid_cntr {
        std::ptr::null_mut()
    }
    fn sync(&self, _tally: &dyn Tally, _errors_too: bool) {
        let ev = self.events();
        // Reading the CQs drives the core's progress; without any, the arrivals counter does.
        if !ev.fill()
            && let Some(a) = ev.arrivals_feed()
        {
            a.sync(&Nothing, false);
        }
    }
    fn live(&self) -> bool {
        true
    }
    fn may_progress(&self) -> bool {
        self.events()
            .arrivals_feed()
            .is_some_and(|a| a.may_progress())
    }
    fn wake(&self) -> Wake<'_> {
        match self.events().arrivals_feed() {
            Some(a) if a.live() => Wake::Block(&self.events().blocker),
            _ => Wake::After(NO_ENDPOINT_YET),
        }
    }
    fn arm(&self, _tally: &dyn Tally) -> Armed {
        // The counter's fd fires on rscntr's own add, which only a CQ read brings: the fd
        // watcher reads on the application's behalf (the domain is thread safe).
        Armed::Relay
    }
    fn bound(&self, _enabled: bool, _late: bool) {}
    fn unbound(&self, _enabled: bool) {}
    fn binding_enabled(&self) {}
    fn close(&self) -> Result<(), c_int> {
        Ok(())
    }
    fn remote_only(&self) -> bool {
        true
    }
}

/// A counter's bind in a domain whose remote accesses rscntr counts (`hooks.rs`): to an MR,
/// rscntr's alone (taken); to an endpoint, refused for remote accesses (the endpoint's core
/// would count rscntr's notifications as remote writes), else the usual bind (next). A counter
/// fed by remote accesses binds to MRs only, and one fed by an endpoint's core to endpoints
/// only.
impl BindHook for RmaEvents {
    fn bind_cntr(&self, bind: &CntrBind<'_>) -> Step {
        let c = bind.cntr;
        let remote = (ofi::FI_REMOTE_READ | ofi::FI_REMOTE_WRITE) as u64;
        let existing = c.feed_or_open(&mut |_| Err(err::ENOENT)).ok();
        let arrivals = *self.arrivals.lock() == Some(bind.cntr_fid.cast());
        if !bind.is_mr() && (arrivals || bind.flags & remote == 0) {
            if existing.is_some_and(|f| f.remote_only()) {
                fi_warn!(
                    EpCtrl,
                    "this counter counts remote accesses: bind another one for the \
                    endpoint's own completions"
                );
                return Step::Fail(err::EINVAL);
            }
            return Step::Next;
        }
        if !bind.is_mr() && bind.flags & !remote != 0 {
            fi_warn!(
                EpCtrl,
                "a remote-access counter over {} counts remote accesses only: bind it \
                with FI_REMOTE_WRITE/FI_REMOTE_READ alone, and another counter for the rest",
                bind.core
            );
            return Step::Fail(err::EINVAL);
        }
        if existing.is_some_and(|f| !f.remote_only()) {
            fi_warn!(
                EpCtrl,
                "this counter counts an endpoint's completions: bind another one to the MR"
            );
            return Step::Fail(err::EINVAL);
        }
        let feed = c.feed_or_open(&mut |_| Ok(Box::new(NotifyFeed::new(self)) as Box<dyn Feed>));
        if let Err(e) = feed {
            return Step::Fail(e);
        }
        let flags = if bind.flags & remote == 0 {
            remote
        } else {
            bind.flags & remote
        };
        let ret = if bind.is_mr() {
            self.bound(bind.fid.cast(), c as *const dyn AnyCntr, flags)
        } else {
            self.ep_bound(bind.fid, c as *const dyn AnyCntr, flags)
        };
        if ret != 0 {
            return Step::Fail(ret);
        }
        crate::fi_info!(
            EpCtrl,
            "bound an rscntr counter to {} over {}, remote accesses counted by \
            rscntr (flags {:#x}{})",
            if bind.is_mr() { "an MR" } else { "an endpoint" },
            bind.core,
            flags,
            describe_flags(flags)
        );
        Step::Taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_round_trip_and_nothing_else_decodes() {
        for key in [0u64, 1, 0xC0DE, 0xFFFF, 1 << 40, u64::MAX] {
            for (kind, app) in [
                (Kind::Write, 0),
                (Kind::WriteData, 0xDEAD_BEEF),
                (Kind::Read, 0),
                (Kind::ReadWrite, 0),
            ] {
                let d = encode(kind, key, app);
                assert_eq!(decode(d), Some((kind, fold(key), app)));
            }
        }
        // An application's data has 4 bytes: it never carries the mark.
        assert_eq!(decode(0xFFFF_FFFF), None);
        assert_eq!(decode(0), None);
        // Small keys keep their identity.
        assert_eq!(fold(0xC0DE), 0xC0DE);
        assert_ne!(fold(1), fold(2));
    }
}
