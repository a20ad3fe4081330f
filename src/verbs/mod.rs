//! rdma-core completion counters (`ibv_*_comp_cntr`, rdma-core ≥ 65), loaded at run time.
//!
//! - [`abi`]: the structs and constants, mirrored by hand and checked against `verbs.h`;
//! - [`api`]: the function table every rdma-core call goes through, loaded with `dlopen`;
//! - [`device`]: device selection, counters (the engine's hardware [`Store`]) and QP attach;
//! - [`fake`]: a fake device behind the same table, for tests.
//!
//! This layer knows rdma-core, not libfabric policy: `crate::cntr::hw` decides when to use it.
//!
//! [`Store`]: crate::engine::Store

pub mod abi;
pub mod api;
pub mod device;
pub mod fake;

pub use api::{LoadError, VerbsApi, load};
pub use device::{CounterKind, Device, HwCounter, HwError, op_mask_from_bind_flags};
