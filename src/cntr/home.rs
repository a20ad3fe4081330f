//! What a counter knows of the domain it lives in: the [`CntrHome`] trait, and the [`Slots`]
//! every home keeps for the `cntr_cnt` limit. rscntr's own domain (`crate::standalone`) is a
//! home by its slots alone; a layered one (`crate::layer`) adds the core.

use crate::boundary::ffi::{Children, err};
use crate::fi_warn;
use std::ffi::c_int;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counters a domain can have open at once (`domain_attr->cntr_cnt`), enforced by
/// [`Slots::claim_slot`].
pub const MAX_CNTRS: usize = 4096;

/// Where counters live: a domain, standalone or layered over a core. It outlives its counters
/// (a domain refuses to close while it has children).
pub trait CntrHome: Sync + 'static {
    /// The domain's counter slots.
    fn slots(&self) -> &Slots;
    /// True when a core provider counts for this home's counters once they are bound.
    fn over_core(&self) -> bool {
        false
    }
    /// The fd `FI_GETWAIT` hands out for an FD counter whose own fd is `eventfd`, when the
    /// home wants another one (a layered domain: an epoll set that will also hold the core's
    /// fd); made when the counter opens.
    fn wait_fd(&self, eventfd: RawFd) -> std::io::Result<Option<OwnedFd>> {
        let _ = eventfd;
        Ok(None)
    }
    /// What moves a counter bound to nothing besides the application's own calls, driven from
    /// its fi_cntr_read and between the checks of its fi_cntr_wait (a layered domain's
    /// deferred operations, whose completions are counted when rscntr reads the core's CQs).
    fn drive_unbound(&self) {}
    /// True while [`CntrHome::drive_unbound`] has something to drive: a waiter then pulls
    /// now and then rather than sleep until the counter's own ops wake it.
    fn drives_unbound(&self) -> bool {
        false
    }
}

/// Slots alone are a home whose counters no core counts for: rscntr's own domain's.
impl CntrHome for Slots {
    fn slots(&self) -> &Slots {
        self
    }
}

/// A domain's bookkeeping of its counters: the `cntr_cnt` limit and the open children that keep
/// it from closing.
#[derive(Debug, Default)]
pub struct Slots {
    pub children: Children,
    claimed: AtomicUsize,
}

impl Slots {
    /// Claims one of the domain's `cntr_cnt` counter slots. The guard gives it back unless
    /// [`SlotGuard::keep`] is called, so a failure or a panic half-way through opening a
    /// counter cannot leave the domain with a child it can never close.
    pub fn claim_slot(&self) -> Result<SlotGuard<'_>, c_int> {
        let claimed = self.claimed.fetch_add(1, Ordering::AcqRel);
        if claimed >= MAX_CNTRS {
            self.claimed.fetch_sub(1, Ordering::AcqRel);
            fi_warn!(
                Domain,
                "domain already has cntr_cnt = {} counters open",
                MAX_CNTRS
            );
            return Err(err::ENOSPC);
        }
        self.children.add();
        Ok(SlotGuard(Some(self)))
    }

    pub fn release_slot(&self) {
        self.claimed.fetch_sub(1, Ordering::AcqRel);
        self.children.remove();
    }
}

/// A claimed counter slot, released on drop unless kept (see [`Slots::claim_slot`]).
pub struct SlotGuard<'a>(Option<&'a Slots>);

impl SlotGuard<'_> {
    /// The counter opened: the slot now belongs to it (released by its close).
    pub fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if let Some(slots) = self.0 {
            slots.release_slot();
        }
    }
}
