//! The storage engine tested through its public API, mostly on the
//! in-memory storage so that power losses can be simulated exactly.
//! (One test binary for all of them: each binary costs a link on a slow
//! machine.) The kill -9 test against the real file system is `tests/kill9.rs`.

mod appends;
mod common;

mod crash_images;
mod epochs;
mod faults;
mod model;
mod producers;
mod recovery;
mod replica;
mod reservations;
mod retention;
mod truncation;
