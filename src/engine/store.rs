//! Where a counter's two values live: [`Atomics`] in host memory, or a store a device updates
//! behind rscntr's back (the verbs layer's hardware counter implements [`Store`] too).

use super::sync::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

/// An errno from a store whose operations can fail (a device call); never from [`Atomics`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreError(pub i32);

/// The value and error count of one counter.
///
/// The engine calls these on every `fi_cntr_*` op, so implementations are expected to be
/// cheap; `read`/`read_err` have no error channel (neither has `fi_cntr_read`), so a store whose
/// reads can fail returns its last good value and reports the failure itself.
pub trait Store: Send + Sync + 'static {
    /// True if the values can change without a call through the [`Counter`](super::Counter)
    /// (a device counting completions). Waiters on such a store must poll: nobody will wake
    /// them when the device moves the value. Known at compile time, so the software path
    /// carries no trace of the polling machinery.
    const POLLED: bool;
    fn read(&self) -> u64;
    fn read_err(&self) -> u64;
    fn add(&self, v: u64) -> Result<(), StoreError>;
    fn add_err(&self, v: u64) -> Result<(), StoreError>;
    fn set(&self, v: u64) -> Result<(), StoreError>;
    fn set_err(&self, v: u64) -> Result<(), StoreError>;
}

/// Keeps the hot value on its own cache line, away from the waiter bookkeeping.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// The software store: two atomics. Every op is one atomic instruction, visible to every thread
/// when it returns; values wrap modulo 2^64.
#[derive(Debug, Default)]
pub struct Atomics {
    value: Padded<AtomicU64>,
    errors: AtomicU64,
}

impl Store for Atomics {
    const POLLED: bool = false;
    #[inline]
    fn read(&self) -> u64 {
        self.value.0.load(SeqCst)
    }
    #[inline]
    fn read_err(&self) -> u64 {
        self.errors.load(SeqCst)
    }
    #[inline]
    fn add(&self, v: u64) -> Result<(), StoreError> {
        self.value.0.fetch_add(v, SeqCst);
        Ok(())
    }
    #[inline]
    fn add_err(&self, v: u64) -> Result<(), StoreError> {
        self.errors.fetch_add(v, SeqCst);
        Ok(())
    }
    #[inline]
    fn set(&self, v: u64) -> Result<(), StoreError> {
        // swap, not store: a SeqCst RMW orders like fetch_add for the wake protocol.
        self.value.0.swap(v, SeqCst);
        Ok(())
    }
    #[inline]
    fn set_err(&self, v: u64) -> Result<(), StoreError> {
        self.errors.swap(v, SeqCst);
        Ok(())
    }
}
