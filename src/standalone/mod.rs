//! The home of counters without a core (`FI_RSCNTR_CORE=none`): rscntr's own fabric, domain and
//! EQ, which serve counters only, without endpoints.
//!
//! - `domain.rs`: the domain, home of its counters, and where the extension ops are opened;
//! - `eq.rs`: a minimal event queue;
//! - `fabric.rs`: the fabric, which opens both and arms fds in `fi_trywait`.

mod domain;
mod eq;
mod fabric;

pub use domain::Domain;
pub use fabric::open as fabric_open;
