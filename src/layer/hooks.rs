//! What binding a counter asks of the layer's capabilities. rscntr's bind of a core endpoint
//! or MR (`bind.rs`) turns an rscntr counter into a [`CntrBind`] and asks each capability
//! that cares, once and in one pass, through [`BindHook`]: remote-access counters
//! (`rma_event/`: a counter bound to an MR, or for remote accesses, is theirs), the bound wait
//! (`wait/`: the core counter that feeds the counter, opened with what its waiters sleep on,
//! and the core's bind of it), triggered operations (`trigger/`: an endpoint's counters, for
//! the counts a deferred operation owes). The first that ends the bind ends it; then
//! `bind.rs` notes the binding. Below the capabilities, which implement the trait; it imports
//! none of them.

use crate::cntr::AnyCntr;
use crate::ofi;
use std::ffi::c_int;

/// The core's own `bind` op.
pub type CoreBindFn = unsafe extern "C" fn(*mut ofi::fid, *mut ofi::fid, u64) -> c_int;

/// A counter being bound to a core endpoint or MR.
pub struct CntrBind<'a> {
    /// The core endpoint or MR (a readable fid), and its class.
    pub fid: *mut ofi::fid,
    pub class: usize,
    /// The rscntr counter, of this domain, and its fid.
    pub cntr: &'static dyn AnyCntr,
    pub cntr_fid: *mut ofi::fid,
    /// The application's bind flags.
    pub flags: u64,
    /// The core provider's name, for log lines.
    pub core: &'a str,
    /// The core's own bind of `fid`.
    pub core_bind: CoreBindFn,
}

/// What a capability answers to a counter's bind.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Its part is done (or it has none): ask the next one.
    Next,
    /// The bind fails with this error; no one after is asked.
    Fail(c_int),
    /// The binding is this capability's alone and made: no one after is asked, and nothing of
    /// the core's makes the counter wait for an FI_ENABLE.
    Taken,
}

/// A capability that takes part in a counter's bind.
pub trait BindHook {
    fn bind_cntr(&self, bind: &CntrBind<'_>) -> Step;
}

impl CntrBind<'_> {
    pub fn is_mr(&self) -> bool {
        self.class == ofi::FI_CLASS_MR as usize
    }
}

/// The libfabric bind flags in words, for log lines.
pub fn describe_flags(flags: u64) -> String {
    let names = [
        (ofi::FI_SEND as u64, "FI_SEND"),
        (ofi::FI_RECV as u64, "FI_RECV"),
        (ofi::FI_READ as u64, "FI_READ"),
        (ofi::FI_WRITE as u64, "FI_WRITE"),
        (ofi::FI_REMOTE_READ as u64, "FI_REMOTE_READ"),
        (ofi::FI_REMOTE_WRITE as u64, "FI_REMOTE_WRITE"),
    ];
    let words: Vec<&str> = names
        .iter()
        .filter(|(b, _)| flags & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if words.is_empty() {
        String::new()
    } else {
        format!(" ({})", words.join("|"))
    }
}
