//! The roles' SCRAM-SHA-256 passwords as Kafka's user SCRAM credentials
//! (DescribeUserScramCredentials, AlterUserScramCredentials): read from
//! `pg_authid`, written with `ALTER ROLE … PASSWORD '<verifier>'`, so a
//! credential set over Kafka is the role's Postgres password too (one
//! password store), on the main thread through the control plane. The broker
//! has already decided the caller may do it (docs/security.md).

use kafgres_broker::sasl::scram::ScramCredential;
use pgrx::prelude::*;

const VERIFIERS: &str = "SELECT rolname::text, rolpassword FROM pg_catalog.pg_authid \
     WHERE rolpassword LIKE 'SCRAM-SHA-256$%' ORDER BY rolname";
const PASSWORD_OF: &str = "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1";
const SET_PASSWORD: &str = "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)";
const REMOVE_PASSWORD: &str = "SELECT format('ALTER ROLE %I PASSWORD NULL', $1::text)";

/// (role, iterations) of every role whose password is a SCRAM-SHA-256 verifier.
pub fn scram_verifiers() -> Result<Vec<(String, u32)>, String> {
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(VERIFIERS, None, &[])? {
            let role: Option<String> = row.get(1)?;
            let password: Option<String> = row.get(2)?;
            if let (Some(role), Some(credential)) = (role, password.as_deref().and_then(ScramCredential::from_verifier))
            {
                out.push((role, credential.iterations));
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .map_err(|e| format!("listing the roles' SCRAM verifiers: {e}"))
}

/// Sets (`Some`) or removes (`None`) a role's SCRAM-SHA-256 password;
/// `false` when there is no such role or, removing, no SCRAM password.
pub fn set_scram_verifier(role: &str, verifier: Option<&str>) -> Result<bool, String> {
    Spi::connect_mut(|client| {
        let rows = client.select(PASSWORD_OF, Some(1), &[role.to_owned().into()])?;
        let mut found = None;
        for row in rows {
            found = Some(row.get::<String>(1)?);
        }
        let Some(current) = found else {
            return Ok(false);
        };
        let statement = match verifier {
            Some(verifier) => client
                .select(SET_PASSWORD, Some(1), &[role.to_owned().into(), verifier.to_owned().into()])?
                .first()
                .get_one::<String>()?,
            None if current.as_deref().and_then(ScramCredential::from_verifier).is_none() => return Ok(false),
            None => client.select(REMOVE_PASSWORD, Some(1), &[role.to_owned().into()])?.first().get_one::<String>()?,
        };
        let Some(statement) = statement else {
            return Ok(false);
        };
        client.update(&statement, None, &[])?;
        Ok::<_, pgrx::spi::Error>(true)
    })
    .map_err(|e| format!("altering the password of role {role:?}: {e}"))
}
