//! The `fid_peer_cntr` a counter hands a core provider (libfabric's peer API): the core calls
//! `owner_ops->inc/incerr` on every completion it would have counted itself.

use super::backing::{Backing, note};
use crate::boundary::ffi;
use crate::boundary::peer_sys;
use crate::ofi;
use std::ffi::c_int;

#[repr(C)]
pub struct PeerCntr {
    fid: peer_sys::fid_peer_cntr,
}

static PEER_FI_OPS: ofi::fi_ops = ffi::fi_ops(peer_close, ffi::no_control, ffi::no_ops_open);

impl PeerCntr {
    /// A peer fid whose owner ops count into an engine of kind `B` (see [`owner_ops`]), not
    /// yet pointing at one (see [`PeerCntr::point_at`]).
    pub fn new(owner_ops: &'static peer_sys::fi_ops_cntr_owner) -> Self {
        PeerCntr {
            fid: peer_sys::fid_peer_cntr {
                fid: ffi::fid_header(ofi::FI_CLASS_PEER_CNTR, std::ptr::null_mut(), &PEER_FI_OPS),
                owner_ops: owner_ops as *const _ as *mut _,
            },
        }
    }

    /// The core finds its way back to the counter's engine through the peer fid's context:
    /// `engine` must be where the counter keeps it, for as long as the core may count.
    pub fn point_at<B: Backing>(&mut self, engine: &B) {
        self.fid.fid.context = (engine as *const B).cast_mut().cast();
    }

    /// The fid to hand the core.
    pub fn as_fid(&self) -> *mut peer_sys::fid_peer_cntr {
        &self.fid as *const _ as *mut _
    }
}

/// The owner ops of a peer fid over an engine of kind `B`.
pub const fn owner_ops<B: Backing>() -> peer_sys::fi_ops_cntr_owner {
    peer_sys::fi_ops_cntr_owner {
        size: std::mem::size_of::<peer_sys::fi_ops_cntr_owner>(),
        inc: Some(peer_inc::<B>),
        incerr: Some(peer_incerr::<B>),
    }
}

/// The core calls this for every completion it counts into an rscntr counter.
unsafe extern "C" fn peer_inc<B: Backing>(peer: *mut peer_sys::fid_peer_cntr) {
    crate::ffi_boundary! {
        // SAFETY: the core passes back the peer fid we gave it; its context is our engine.
        if let Some(e) = unsafe { peer.as_ref() }.and_then(|p| unsafe { (p.fid.context as *const B).as_ref() }) {
            // Counted as the core counts, less what rscntr's own operations owe (`owe`).
            note(e.counter().add_counted(1));
        }
    }
}

unsafe extern "C" fn peer_incerr<B: Backing>(peer: *mut peer_sys::fid_peer_cntr) {
    crate::ffi_boundary! {
        // SAFETY: as in peer_inc.
        if let Some(e) = unsafe { peer.as_ref() }.and_then(|p| unsafe { (p.fid.context as *const B).as_ref() }) {
            note(e.counter().add_err(1));
        }
    }
}

/// The core never owns our peer fid; closing it is a no-op.
unsafe extern "C" fn peer_close(_: *mut ofi::fid) -> c_int {
    0
}
