//! A test-only global allocator that measures what one closure allocates on the current thread,
//! and refuses (so the test binary aborts with "memory allocation of N bytes failed" rather than
//! swapping) any single allocation above [`ALLOCATION_BYTES_HARD_MAX`] while measuring.
//!
//! It is installed for the whole unit-test binary of this crate but is a plain pass-through to
//! the system allocator on every thread that is not inside [`measure`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Nothing a correct guard lets through should come near this in a test (bodies are small).
pub(super) const ALLOCATION_BYTES_HARD_MAX: usize = 64 << 20;

#[global_allocator]
static ALLOCATOR: MeasuringAllocator = MeasuringAllocator;

/// What a closure allocated (bytes asked for, including reallocations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Allocations {
    pub(super) count: usize,
    pub(super) total_bytes: usize,
    pub(super) largest_bytes: usize,
}

thread_local! {
    // Const-initialised and without destructors, so reading them never allocates.
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
    static TOTAL_BYTES: Cell<usize> = const { Cell::new(0) };
    static LARGEST_BYTES: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f`, returning its result and what it allocated on this thread.
pub(super) fn measure<T>(f: impl FnOnce() -> T) -> (T, Allocations) {
    COUNT.set(0);
    TOTAL_BYTES.set(0);
    LARGEST_BYTES.set(0);
    MEASURING.set(true);
    let result = f();
    MEASURING.set(false);
    let allocations =
        Allocations { count: COUNT.get(), total_bytes: TOTAL_BYTES.get(), largest_bytes: LARGEST_BYTES.get() };
    (result, allocations)
}

/// Records one request; false if it must be refused.
fn note(size: usize) -> bool {
    let measuring = MEASURING.try_with(Cell::get).unwrap_or(false);
    if !measuring {
        return true;
    }
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    let _ = TOTAL_BYTES.try_with(|c| c.set(c.get().saturating_add(size)));
    let _ = LARGEST_BYTES.try_with(|c| c.set(c.get().max(size)));
    size <= ALLOCATION_BYTES_HARD_MAX
}

struct MeasuringAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments, or returns null (which
// `GlobalAlloc` allows for a failed allocation) without touching memory.
unsafe impl GlobalAlloc for MeasuringAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !note(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
