//! Where the counters of a layered domain live: the domain's counter slots and the core domain
//! that counts for them once they are bound.

use super::doorbell::answers::DomainAnswers;
use super::doorbell::bell::BellBlocker;
use super::doorbell::peers::DomainPeers;
use super::progress::{self, DrivenDomain};
use super::rma_event::RmaEvents;
use super::trigger::Deferred;
use super::wait::{CntrOpenFn, CoreFabric, CoreWaits, CqOpenFn, FdBlocker, Plan, epoll_set};
use crate::cntr::{CntrHome, Slots};
use crate::engine::progress::Driven;
use crate::ofi;
use parking_lot::Mutex;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

/// The home of a layered domain's counters, and the core side of the domain.
pub struct CoreHome {
    pub slots: Slots,
    pub domain: *mut ofi::fid_domain,
    /// The core's own cntr_open: the domain's ops table now leads to rscntr's.
    pub cntr_open: CntrOpenFn,
    /// The domain is FI_THREAD_SAFE, so rscntr's watcher thread may drive the core's progress
    /// while the application sleeps in poll(). Under weaker threading models the application
    /// promised the core serialized calls, and only its own calls (fi_cntr_read/wait, CQ
    /// reads) drive progress; an armed fd then fires on the changes those calls bring in.
    pub watcher_may_progress: bool,
    /// The core fabric's ops for wait sets, and how this core is waited on.
    pub fabric: CoreFabric,
    pub plan: Plan,
    /// How the core counts into a bound rscntr counter (see `wait::core_counting`).
    pub counting: crate::boundary::versions::Counting,
    /// The core's own cq_open (for the progress-fd CQ of [`Plan::ProgressFd`]).
    pub cq_open: CqOpenFn,
    /// The domain's progress-fd blocker, shared by its counters, made at the first bind.
    pub progress: Mutex<Option<Arc<FdBlocker>>>,
    /// The domain's doorbell over shm (`doorbell/bell.rs`), made at the first use.
    pub bell: Mutex<Option<Arc<BellBlocker>>>,
    /// The peers the domain's endpoints have mapped over shm (`doorbell/peers.rs`): rung by
    /// whoever completes work toward them, whether this domain waits or not.
    pub peers: Arc<DomainPeers>,
    /// What the domain's progress answers its peers over shm (`doorbell/answers.rs`), whether this
    /// domain waits or not.
    pub answers: Arc<DomainAnswers>,
    /// A counter or CQ with a wait object was opened in the domain: its endpoints enabled from
    /// now on publish a doorbell and ring their peers' (`doorbell/ring.rs`).
    pub waits_seen: std::sync::atomic::AtomicBool,
    /// An endpoint was enabled over shm before the domain waited (see `CoreWaits::unbelled`).
    pub unbelled: std::sync::atomic::AtomicBool,
    /// An FD counter's epoll set holds the core's fd plainly (see `CoreBlocker::hold_in`).
    pub fd_held_plainly: std::sync::atomic::AtomicBool,
    /// Where the threads waiting on the domain's bound counters meet, one leading for all
    /// (`engine::Room`), when the plan sleeps on fds.
    pub room: Arc<crate::engine::Room>,
    /// Deferred data operations and the CQ filters they need (`trigger/deferred.rs`).
    pub deferred: Deferred,
    /// The domain's remote-access counters, when rscntr provides them (`rma_event/`: the
    /// domain was opened for FI_RMA_EVENT over a core without working ones).
    pub rma: Option<RmaEvents>,
    /// The domain was opened for automatic progress the core lacks: rscntr's progress thread
    /// drives its CQs, all read through filters (`progress/`).
    pub auto_progress: bool,
    /// The regions of the shm endpoints closed in the domain, kept mapped until it closes
    /// (`shm_endpoints.rs`).
    pub closed_regions: super::shm_endpoints::ClosedRegions,
}

// SAFETY: the raw pointers (the core domain, its fabric) are set when the domain opens and never
// change; rscntr calls the core through them from whichever thread binds, waits or polls a
// counter, as it did when they were fields of every counter's home; the rest is Sync.
unsafe impl Sync for CoreHome {}
// SAFETY: as above.
unsafe impl Send for CoreHome {}

impl CntrHome for CoreHome {
    fn slots(&self) -> &Slots {
        &self.slots
    }
    fn over_core(&self) -> bool {
        true
    }
    fn wait_fd(&self, eventfd: RawFd) -> std::io::Result<Option<OwnedFd>> {
        epoll_set(eventfd).map(Some)
    }
    fn drive_unbound(&self) {
        // Deferred completions count into their completion counters, which are usually bound
        // to nothing (MPICH's triggered broadcasts wait on theirs): a reader reads the CQs
        // rather than wait for the watcher's next pass.
        if self.deferred.outstanding() != 0 {
            self.deferred.fill_all();
        }
    }
    fn drives_unbound(&self) -> bool {
        self.deferred.outstanding() != 0
    }
}

/// rscntr's progress thread drives the domain (`progress/`).
impl Driven for CoreHome {
    fn drive(&self) -> bool {
        progress::drive(self)
    }
    fn idle_fd(&self) -> Option<RawFd> {
        progress::idle_fd(self)
    }
    fn arm_idle(&self) -> bool {
        progress::arm_idle(self)
    }
}

impl DrivenDomain for CoreHome {
    fn deferred(&self) -> &Deferred {
        &self.deferred
    }
    fn waits(&self) -> CoreWaits<'_> {
        CoreHome::waits(self)
    }
}

impl CoreHome {
    /// What the domain knows of waiting on its core, for its counters' bound waits.
    pub fn waits(&self) -> CoreWaits<'_> {
        CoreWaits {
            domain: self.domain,
            cntr_open: self.cntr_open,
            cq_open: self.cq_open,
            fabric: self.fabric,
            plan: self.plan,
            counting: self.counting,
            watcher_may_progress: self.watcher_may_progress,
            progress: &self.progress,
            room: &self.room,
            closing: &self.deferred.closing,
            bell: &self.bell,
            peers: &self.peers,
            answers: &self.answers,
            unbelled: &self.unbelled,
            fd_held_plainly: &self.fd_held_plainly,
        }
    }

    /// A counter or CQ of the domain was opened with `wait_obj`: one with a wait object makes
    /// the domain one that waits (see `waits_seen`).
    pub fn note_wait_obj(&self, wait_obj: ofi::fi_wait_obj) {
        if self.plan == Plan::Bell && wait_obj != ofi::fi_wait_obj_FI_WAIT_NONE {
            self.waits_seen
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Closes the progress-fd CQ, before the core domain closes (the counters that used it
    /// are closed: the domain has no children).
    pub fn release_progress(&self) {
        self.progress.lock().take();
    }
}
