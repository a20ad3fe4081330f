//! The counter fid over either backing, in a home it knows only through [`CntrHome`], fed once
//! bound by a core it knows only as a [`Feed`]:
//!
//! - `attr.rs`: what of `fi_cntr_attr` rscntr accepts;
//! - `hw.rs`: the `FI_RSCNTR_HW` policy: detection, per-counter fallback, errno mapping;
//! - `backing.rs`: the software and hardware engines behind a counter;
//! - `home.rs`: the domain a counter lives in (the trait both homes implement, the `cntr_cnt`
//!   slots);
//! - `feed.rs`: the extension point a layered home fills once a counter is bound;
//! - `peer.rs`: the `fid_peer_cntr` a core counts into;
//! - `fid.rs`: the counter object, and what the rest of rscntr asks of one ([`AnyCntr`]);
//! - `ops.rs`: its ops tables and `fi_ops_cntr`, and how a fid is recognised as a counter;
//! - `open.rs`: opening one.

mod attr;
mod backing;
mod feed;
mod fid;
mod home;
pub mod hw;
mod open;
mod ops;
mod peer;

pub use backing::Backend;
pub use feed::{Armed, Feed, FeedRequest, Tally};
pub use fid::AnyCntr;
pub use home::{CntrHome, Slots};
pub use open::open_in;
pub use ops::{as_cntr, lookup, trywait};
