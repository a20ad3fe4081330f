//! Remote-access counters (FI_RMA_EVENT) where the core has none that count (tcp,
//! `ofi_rxm`): notifications in remote CQ data, counted at the target as its CQ filter takes
//! them out, sent by the initiator's rma and atomic tables. A capability of the layer, on top
//! of the bound waits (`wait/`) and the deferred operations and CQ filters (`trigger/`), below
//! the interposition (`layer/*.rs`).
//!
//! - `target.rs`: the protocol, the domain's record of its MRs and their counters, what the
//!   CQ filter takes out, the feed of a counter bound to an MR;
//! - `initiator.rs`: the rma and atomic tables that send the notifications.

pub mod initiator;
pub mod target;

pub use initiator::RmaEp;
pub use target::{APP_DATA_SIZE, RmaEvents, emulated};
