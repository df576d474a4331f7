//! The `kafgres` PostgreSQL extension: it hosts the broker, it does not
//! re-implement it.
//!
//! - [`gucs`]: every `kafgres.*` setting, registered in `_PG_init` and read
//!   only on the worker's main thread;
//! - [`worker`]: the background worker. Its main thread is the control plane
//!   (SPI, signals, postmaster death, a WaitEventSet); it starts the data plane
//!   (`kafgres-broker` on a tokio runtime whose threads block every signal and
//!   never call Postgres) and serves its requests through bounded channels;
//! - [`control`]: the messages between the planes and the data plane's
//!   `Catalog` implementation that sends them;
//! - [`catalog_sql`]: the SQL the control plane runs, as plans prepared once
//!   and kept;
//! - [`wake`]: shared memory holding the worker's pid, so that `CREATE
//!   EXTENSION` can wake a worker that was waiting for the schema.
//!
//! The schema itself is `sql/schema.sql`.

use pgrx::prelude::*;

pub mod catalog_sql;
pub mod control;
pub mod decoding;
pub mod gucs;
pub mod logging;
pub mod sql_api;
pub mod wake;
pub mod worker;

::pgrx::pg_module_magic!();

pgrx::extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);

extension_sql!(
    r#"
-- Wake a broker worker that started before the schema existed; it starts
-- serving as soon as this transaction commits.
SELECT kafgres._wake_broker();
"#,
    name = "wake_broker_on_install",
    finalize
);

#[allow(non_snake_case)]
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::register();
    if unsafe { !pg_sys::process_shared_preload_libraries_in_progress } {
        // Loaded by CREATE EXTENSION in a backend without preloading: the SQL
        // objects work, but no broker can be started from here.
        return;
    }
    wake::init_shared_memory();
    worker::register();
}
