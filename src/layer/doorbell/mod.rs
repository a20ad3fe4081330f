//! The doorbell: how a waiter over shm sleeps in the kernel and who wakes it. shm has nothing a
//! waiter could block on (its progress is the application's calls), so rscntr gives each
//! waiting domain a bell of its own and has every rscntr endpoint over shm ring the bells of
//! the peers it completes work toward. A capability of the layer, below the bound waits
//! (`wait/` sleeps on it as on any other blocker); it imports nothing of the layer's other
//! rooms.
//!
//! - `bell.rs`: a waiting domain's bell (its armed word, its waiters' slots, the fall-back when
//!   a peer cannot ring), made of `bell_files.rs` (the sealed pages and the name files that
//!   publish them);
//! - `peer_bell.rs`, `peers.rs`: a peer's bell mapped and rung; the tables that find peers by
//!   address, and a domain's peers;
//! - `ring.rs`: an endpoint's rings after the operations it posts toward its peers;
//! - `answers.rs`, `ring_cq.rs`: what only a target's progress answers (a read's data, a
//!   fetching atomic's result, a delivery-complete send) rings the peers that asked for it,
//!   around the target's CQ reads;
//! - `registry.rs`: records found by fid where another patch's table is in front.
//!
//! docs/design.md, "Sleeping over shm: the doorbell", has the protocols.

pub mod answers;
pub mod bell;
mod bell_files;
mod peer_bell;
pub mod peers;
mod registry;
pub mod ring;
pub mod ring_cq;
