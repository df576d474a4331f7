//! How Kafgres's own clients log in to the broker: the cluster's internal
//! secret (`kafgres.cluster.internal_secret`, superusers only) and the role
//! a login acts for. The broker side is `kafgres_broker::sasl::internal`.

use kafgres_client::InternalLogin;
use pgrx::pg_sys;

/// The secret, read with SPI (call inside a transaction, as a superuser:
/// the workers, or a SECURITY DEFINER function).
pub fn read_secret() -> Result<String, String> {
    crate::catalog_sql::read_one::<String>("SELECT internal_secret FROM kafgres.cluster")
        .map_err(|e| format!("reading kafgres.cluster.internal_secret: {e}"))?
        .ok_or_else(|| "kafgres.cluster is empty".to_owned())
}

/// The role a SQL function acts for: its caller's, as `SET ROLE` left it,
/// not the function owner's that SECURITY DEFINER runs it as. Never empty
/// (an empty role would be the internal superuser): a role that cannot be
/// named (dropped under the session) is an error.
pub fn calling_role() -> Result<String, String> {
    // SAFETY: on a backend's main thread in a transaction; GetOuterUserId
    // reads a backend-local variable, and GetUserNameFromId (noerr = true)
    // returns a palloc'd copy or NULL, which is only read here.
    let name = unsafe {
        let name = pg_sys::GetUserNameFromId(pg_sys::GetOuterUserId(), true);
        if name.is_null() {
            return Err("the calling role no longer exists".to_owned());
        }
        std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
    };
    if name.is_empty() {
        return Err("the calling role has an empty name".to_owned());
    }
    Ok(name)
}

/// A login as the internal superuser (the SQL bridge).
pub fn superuser(secret: String) -> InternalLogin {
    InternalLogin { secret, role: String::new() }
}
