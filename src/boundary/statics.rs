//! Process-wide state that rscntr releases in the provider's `cleanup` (`prov.rs`), which
//! libfabric calls just before it unloads the DSO (`fi_fini`, at exit or on the
//! application's call). A `OnceLock` could never give its contents back: once `dlclose`
//! unmaps the statics, whatever they pointed to on the heap is lost for good (valgrind
//! rightly reports it as "definitely lost"). Handing out `Arc`s keeps a caller racing the
//! cleanup safe: its clone lives on until it is done.

use parking_lot::RwLock;
use std::sync::Arc;

pub struct Released<T>(RwLock<Option<Arc<T>>>);

impl<T> Released<T> {
    pub const fn new() -> Self {
        Released(RwLock::new(None))
    }

    /// The value, made by `init` on first use (or first use after [`Released::release`]).
    /// `init` runs under the write lock, so exactly once; it must not use this same static.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> Arc<T> {
        if let Some(v) = self.0.read().as_ref() {
            return v.clone();
        }
        let mut slot = self.0.write();
        slot.get_or_insert_with(|| Arc::new(init())).clone()
    }

    /// Sets the value unless one is there already.
    pub fn set_if_unset(&self, value: T) {
        self.0.write().get_or_insert_with(|| Arc::new(value));
    }

    /// Drops the static's reference (the value goes once the last clone does).
    pub fn release(&self) {
        self.0.write().take();
    }
}
