//! How a bound counter sleeps: on what its core itself blocks on, never by polling it on a
//! timer. A capability of the layer, below the interposition (`layer/*.rs`), which lends it
//! what the domain knows of its core ([`CoreWaits`]); it imports nothing of the layer's other
//! rooms.
//!
//! - `blocker.rs`: how each core is waited on ([`Plan`]) and what a waiter sleeps on (the
//!   blockers: a core fd, the core counter's own wait);
//! - `feed.rs`: a bound counter's core counter (a `Feed`), opened at the first bind with its
//!   bound wait, taking in what the core counted, armed for `fi_trywait`;
//! - `reads.rs`: how often a read drives the core's progress;
//! - `bell.rs`, `bell_files.rs`, `peer_bell.rs`, `peers.rs`, `ring.rs`, `answers.rs`,
//!   `ring_cq.rs`: the doorbell over shm, which has nothing to block on: a waiter's domain
//!   publishes a bell (`bell.rs`, made of `bell_files.rs`), every rscntr endpoint over shm rings
//!   its peers' after operations toward them (`peer_bell.rs`, `peers.rs`, `ring.rs`), and a domain's progress rings the peers that asked it
//!   what only that progress answers (`answers.rs`; around CQ reads, `ring_cq.rs`);
//! - `registry.rs`: records found by fid where another patch's table is in front.

pub mod answers;
pub mod bell;
mod bell_files;
mod blocker;
mod feed;
mod peer_bell;
pub mod peers;
mod reads;
mod registry;
pub mod ring;
pub mod ring_cq;

pub use blocker::{
    CntrOpenFn, CntrWaitBlocker, CoreFabric, CoreWaits, CqOpenFn, FdBlocker, Plan, core_counting,
    epoll_add_shared, epoll_set, plan_for,
};
