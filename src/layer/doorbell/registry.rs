//! Records found by the fid they patch, lock-free: for ops that are called through another
//! patch's table (rscntr's triggered operations over an endpoint's ringing tables), where the
//! fid's table pointer no longer leads to the record.
//! Open addressing over a fixed table of atomics: a lookup is a hash and a few loads.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::atomic::{AtomicPtr, AtomicUsize};

const SIZE: usize = 4096;
/// A slot whose record was removed: skipped by lookups, reused by insertions.
const FREED: usize = 1;

/// Up to [`SIZE`] records of `T` by fid address.
pub struct Registry<T> {
    keys: [AtomicUsize; SIZE],
    records: [AtomicPtr<T>; SIZE],
}

impl<T> Registry<T> {
    pub const SIZE: usize = SIZE;

    pub const fn new() -> Self {
        Registry {
            keys: [const { AtomicUsize::new(0) }; SIZE],
            records: [const { AtomicPtr::new(std::ptr::null_mut()) }; SIZE],
        }
    }

    fn slot_of(key: usize) -> usize {
        (key >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52 & (SIZE - 1)
    }

    /// Registers `rec` for `key` (a fid's address); false when the table is full.
    pub fn insert(&self, key: usize, rec: *mut T) -> bool {
        let start = Self::slot_of(key);
        for i in 0..SIZE {
            let k = (start + i) & (SIZE - 1);
            let was = self.keys[k].load(Acquire);
            if (was == 0 || was == FREED)
                && self.keys[k]
                    .compare_exchange(was, key, AcqRel, Acquire)
                    .is_ok()
            {
                self.records[k].store(rec, Release);
                return true;
            }
        }
        false
    }

    /// The record registered for `key` (NULL if none).
    #[inline]
    pub fn get(&self, key: usize) -> *const T {
        let start = Self::slot_of(key);
        for i in 0..SIZE {
            let k = (start + i) & (SIZE - 1);
            match self.keys[k].load(Acquire) {
                0 => break,
                found if found == key => return self.records[k].load(Acquire),
                _ => {}
            }
        }
        std::ptr::null()
    }

    /// Removes `rec`, registered for `key` (not there: nothing).
    pub fn remove(&self, key: usize, rec: *mut T) {
        let start = Self::slot_of(key);
        for i in 0..SIZE {
            let k = (start + i) & (SIZE - 1);
            match self.keys[k].load(Acquire) {
                0 => return,
                found if found == key && self.records[k].load(Acquire) == rec => {
                    self.records[k].store(std::ptr::null_mut(), Release);
                    self.keys[k].store(FREED, Release);
                    return;
                }
                _ => {}
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn records_are_found_by_key_until_removed_and_slots_are_reused() {
        let reg: Box<Registry<u32>> = Box::new(Registry::new());
        let mut a = 1u32;
        let mut b = 2u32;
        let (pa, pb) = (&mut a as *mut u32, &mut b as *mut u32);
        // Two keys of one slot (the hash ignores the low 4 bits).
        assert!(reg.insert(0x1000, pa));
        assert!(reg.insert(0x1001, pb));
        assert_eq!(reg.get(0x1000), pa.cast_const());
        assert_eq!(reg.get(0x1001), pb.cast_const());
        assert!(reg.get(0x2000).is_null());
        reg.remove(0x1000, pb);
        assert_eq!(reg.get(0x1000), pa.cast_const(), "another record: kept");
        reg.remove(0x1000, pa);
        assert!(reg.get(0x1000).is_null());
        assert_eq!(reg.get(0x1001), pb.cast_const(), "found past a freed slot");
        assert!(reg.insert(0x1002, pa));
        assert_eq!(reg.get(0x1002), pa.cast_const());
    }
}
