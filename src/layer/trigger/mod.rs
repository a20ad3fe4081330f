//! Counter-driven work: triggered operations on FI_TRIGGER endpoints, the domain's deferred
//! work queue, and the data operation rscntr holds until it is due. A capability of the layer,
//! below the interposition (`layer/*.rs`), which it knows only through [`WorkHome`]; it
//! imports nothing of the layer's other rooms.
//!
//! - `op.rs`: one data operation as rscntr holds it, and its post to the core;
//! - `endpoint.rs`: a trigger-able endpoint's tables and its queued triggered operations;
//! - `alias.rs`: aliases of trigger-able endpoints (`fi_ep_alias`);
//! - `work.rs`: the deferred work queue (`FI_QUEUE_WORK`, `FI_CANCEL_WORK`, `FI_FLUSH_WORK`);
//! - `deferred.rs`: deferred data operations posted to the core (their records in
//!   `outstanding.rs`), and the domain's CQ filters: `cq_filter.rs` takes rscntr's entries out
//!   of a CQ, `cq_ops.rs` is the CQ's table while it is filtered.

pub mod alias;
pub mod cq_filter;
pub mod cq_ops;
pub mod deferred;
pub mod endpoint;
pub mod op;
pub mod outstanding;
pub mod work;

pub use cq_filter::{CqFilter, Notifications};
pub use deferred::Deferred;
pub use endpoint::TriggerEp;
pub use work::WorkHome;
