//! What backs a counter: the engine's software counter or a hardware one (an rdma-core
//! completion counter, chosen by `hw.rs`), and how errors of a device update are reported.

use super::feed::Tally;
use super::hw;
use crate::engine::{Atomics, Counter, Store, StoreError};
use crate::fi_warn;
use crate::verbs::HwCounter;
use std::ffi::c_int;
use std::sync::Arc;

/// Which implementation backs a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Software,
    Hardware,
}

/// The software engine lives inside the fid; the hardware one is shared with the fd watcher.
pub type SwEngine = Counter<Atomics>;
pub type HwEngine = Arc<Counter<HwCounter>>;

/// What a counter fid needs from its engine.
pub trait Backing: Sized + Send + Sync + 'static {
    type Store: Store;
    const BACKEND: Backend;
    fn counter(&self) -> &Counter<Self::Store>;
    /// Releases device resources before close; an error makes fi_close fail, the counter
    /// staying open.
    fn teardown(&self) -> Result<(), c_int>;
}

impl Backing for SwEngine {
    type Store = Atomics;
    const BACKEND: Backend = Backend::Software;
    #[inline]
    fn counter(&self) -> &Counter<Atomics> {
        self
    }
    fn teardown(&self) -> Result<(), c_int> {
        Ok(())
    }
}

impl Backing for HwEngine {
    type Store = HwCounter;
    const BACKEND: Backend = Backend::Hardware;
    #[inline]
    fn counter(&self) -> &Counter<HwCounter> {
        self
    }
    fn teardown(&self) -> Result<(), c_int> {
        // Off the watcher first (waiting out a poll in progress), so nothing reads the device
        // counter while or after it is destroyed.
        let armed = self.unwatch();
        match self.store().destroy() {
            Ok(()) => Ok(()),
            Err(e) => {
                self.rewatch(armed);
                fi_warn!(Cntr, "cannot close the hardware counter: {e}");
                Err(hw::fi_errno(e.errno))
            }
        }
    }
}

/// A failed device update: logged, as -FI_E*. Software stores never fail.
#[cold]
pub fn store_error(op: &str, e: StoreError) -> c_int {
    fi_warn!(
        Cntr,
        "{op} on a hardware counter failed: {}",
        std::io::Error::from_raw_os_error(e.0)
    );
    hw::fi_errno(e.0)
}

/// A device update that failed while taking in the core's counts: logged, not returned (the
/// application's call was a read).
pub fn note(r: Result<(), StoreError>) {
    if let Err(e) = r {
        store_error("counting a core completion", e);
    }
}

/// What a core counted goes straight into the engine, less what rscntr's own operations owe
/// ([`Counter::owe`]).
impl<S: Store> Tally for Counter<S> {
    fn count(&self, n: u64) {
        note(self.add_counted(n));
    }
    fn count_err(&self, n: u64) {
        note(self.add_err(n));
    }
    fn value(&self) -> u64 {
        self.read()
    }
}
