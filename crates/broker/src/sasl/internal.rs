//! `KAFGRES-INTERNAL`: how Kafgres's own clients (the SQL functions' link,
//! the SQL bridge) authenticate to the broker, whatever
//! `kafgres.authentication` says.
//!
//! The secret is `kafgres.cluster.internal_secret`: random, readable only
//! by superusers, carried to standbys by the WAL. The token is
//! `<secret> NUL <role>`: an empty role is the internal superuser (the
//! bridge, delivering records SQL already checked); a role name makes the
//! connection that role for the authorizer (the link, acting for the SQL
//! function's caller). Not listed among the mechanisms a handshake answers,
//! and refused when the broker has no secret.

use super::scram::constant_time_eq;
use crate::acl::Identity;

pub const MECHANISM: &str = "KAFGRES-INTERNAL";

/// The role of the internal superuser in logs and `kafgres.connections`.
pub const INTERNAL_ROLE: &str = "kafgres (internal)";

/// What a token asks for, once its secret matched.
#[derive(Debug, PartialEq, Eq)]
pub enum InternalLogin {
    /// The internal superuser.
    Superuser,
    /// Acting for this role.
    Role(String),
}

/// Checks a token against `secret`; the reason of a refusal is for the log.
pub fn verify(secret: &str, token: &[u8]) -> Result<InternalLogin, &'static str> {
    let Some(split) = token.iter().position(|&b| b == 0) else {
        return Err("an internal token without its NUL separator");
    };
    let (given, role) = (&token[..split], &token[split + 1..]);
    if !constant_time_eq(given, secret.as_bytes()) {
        return Err("a wrong internal secret");
    }
    match std::str::from_utf8(role) {
        Ok("") => Ok(InternalLogin::Superuser),
        Ok(role) if role.len() <= 63 => Ok(InternalLogin::Role(role.to_owned())),
        Ok(_) => Err("an internal token naming a role longer than a Postgres name"),
        Err(_) => Err("an internal token naming a role that is not UTF-8"),
    }
}

/// The internal superuser's identity.
pub fn superuser() -> Identity {
    Identity { role: INTERNAL_ROLE.to_owned(), superuser: true, ..Identity::default() }
}

/// The token a client sends.
pub fn token(secret: &str, role: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(secret.len() + 1 + role.len());
    out.extend_from_slice(secret.as_bytes());
    out.push(0);
    out.extend_from_slice(role.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked() {
        let secret = "0123456789abcdef";
        assert_eq!(verify(secret, &token(secret, "")), Ok(InternalLogin::Superuser));
        assert_eq!(verify(secret, &token(secret, "app")), Ok(InternalLogin::Role("app".into())));
        assert!(verify(secret, &token("0123456789abcdeX", "")).is_err());
        assert!(verify(secret, &token("0123", "")).is_err());
        assert!(verify(secret, secret.as_bytes()).is_err(), "no separator");
        assert!(verify(secret, &token(secret, &"r".repeat(64))).is_err());
    }
}
