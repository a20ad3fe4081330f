//! How a bound counter sleeps: on what its core itself blocks on, never by polling it on a
//! timer. A capability of the layer, below the interposition (`layer/*.rs`), which lends it
//! what the domain knows of its core ([`CoreWaits`]); it imports nothing of the layer's other
//! rooms.
//!
//! - `blocker.rs`: how each core is waited on ([`Plan`]) and what a waiter sleeps on (the
//!   blockers: a core fd, the core counter's own wait);
//! - `feed.rs`: a bound counter's core counter (a `Feed`), opened at the first bind with its
//!   bound wait, taking in what the core counted, armed for `fi_trywait`;
//! - `reads.rs`: how often a read drives the core's progress.
//!
//! Over shm, which has nothing to block on, waiters sleep on the doorbell (`layer/doorbell/`,
//! the room below this one).

mod blocker;
mod feed;
mod reads;

pub use blocker::{
    CntrOpenFn, CntrWaitBlocker, CoreFabric, CoreWaits, CqOpenFn, FdBlocker, Plan, core_counting,
    epoll_add_shared, epoll_set, plan_for,
};
