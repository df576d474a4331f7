//! SCRAM-SHA-256, the server side (RFC 5802, RFC 7677), as Kafka clients
//! speak it: no channel binding, Kafka's `=2C`/`=3D` username escaping.
//! Pure: no I/O, no clock; the caller supplies the credential and the nonce.
//!
//! The credential is the verifier PostgreSQL keeps in `pg_authid.rolpassword`
//! (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`), which holds
//! exactly what a SCRAM server needs: the password itself is never known here.
//!
//! The exchange:
//! ```text
//! client-first  n,,n=<user>,r=<client nonce>
//! server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>
//! client-final  c=biws,r=<nonce>,p=<ClientProof>
//! server-final  v=<ServerSignature>
//! ```
//! An unknown user is answered with a mock credential (salt and iterations
//! derived from the user name and a secret, as PostgreSQL does), so the
//! server-first message does not reveal whether the user exists; the
//! exchange then fails at the proof, like a wrong password.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The mechanism name in SaslHandshake.
pub const MECHANISM: &str = "SCRAM-SHA-256";
/// Largest SCRAM message accepted from a client; real ones are under 200
/// bytes (Kafka's own limit, `sasl.server.max.receive.size`, is on the frame).
pub const MESSAGE_BYTES_MAX: usize = 4096;
/// Iterations of a mock credential: PostgreSQL's default (`scram_iterations`).
pub const MOCK_ITERATIONS: u32 = 4096;
/// Salt length of a mock credential: PostgreSQL's (`SCRAM_DEFAULT_SALT_LEN`).
const MOCK_SALT_BYTES: usize = 16;
const KEY_BYTES: usize = 32;
const VERIFIER_PREFIX: &str = "SCRAM-SHA-256$";

type HmacSha256 = Hmac<Sha256>;

/// What a SCRAM-SHA-256 server needs to know about a user.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: [u8; KEY_BYTES],
    pub server_key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys are password-equivalent for a SCRAM server: never logged.
        f.debug_struct("ScramCredential").field("iterations", &self.iterations).finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// Parses a PostgreSQL SCRAM-SHA-256 verifier. `None` for anything else
    /// (an md5 hash, a plain-text password, a malformed verifier).
    pub fn from_verifier(verifier: &str) -> Option<ScramCredential> {
        let rest = verifier.strip_prefix(VERIFIER_PREFIX)?;
        let (params, keys) = rest.split_once('$')?;
        let (iterations, salt) = params.split_once(':')?;
        let (stored_key, server_key) = keys.split_once(':')?;
        let iterations: u32 = iterations.parse().ok().filter(|i| *i > 0)?;
        let salt = BASE64.decode(salt).ok().filter(|s| !s.is_empty())?;
        Some(ScramCredential {
            salt,
            iterations,
            stored_key: BASE64.decode(stored_key).ok()?.try_into().ok()?,
            server_key: BASE64.decode(server_key).ok()?.try_into().ok()?,
        })
    }

    /// The credential a client computed (AlterUserScramCredentials sends the
    /// salt, the iteration count and the salted password, never the
    /// password): StoredKey and ServerKey derived as RFC 5802 does. `None`
    /// when the salted password is not a SHA-256 digest's length or the salt
    /// is empty (PostgreSQL's verifier needs one).
    pub fn from_salted_password(salt: &[u8], iterations: u32, salted_password: &[u8]) -> Option<ScramCredential> {
        if salted_password.len() != KEY_BYTES || salt.is_empty() || iterations == 0 {
            return None;
        }
        Some(ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: Sha256::digest(hmac(salted_password, b"Client Key")).into(),
            server_key: hmac(salted_password, b"Server Key"),
        })
    }

    /// The verifier PostgreSQL stores for this credential (`ALTER ROLE …
    /// PASSWORD` takes it as is): the inverse of [`ScramCredential::from_verifier`].
    pub fn to_verifier(&self) -> String {
        format!(
            "{VERIFIER_PREFIX}{}:{}${}:{}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(self.stored_key),
            BASE64.encode(self.server_key)
        )
    }

    /// The credential of a role as `pg_authid` describes it, or `None` when
    /// the role may not log in with SCRAM: `rolcanlogin` false, password
    /// expired (`rolvaliduntil` passed), no password, or not a SCRAM verifier.
    pub fn from_role(rolpassword: Option<&str>, can_login: bool, password_valid: bool) -> Option<ScramCredential> {
        if !can_login || !password_valid {
            return None;
        }
        ScramCredential::from_verifier(rolpassword?)
    }

    /// Whether `password` is the one this verifier was made from (SASL/PLAIN
    /// checked against the SCRAM verifier: no second password store). The
    /// cost is the verifier's iterations of HMAC, as at `CREATE ROLE`.
    pub fn matches_password(&self, password: &[u8]) -> bool {
        let salted = salted_password(password, &self.salt, self.iterations);
        let stored: [u8; KEY_BYTES] = Sha256::digest(hmac(&salted, b"Client Key")).into();
        constant_time_eq(&stored, &self.stored_key)
    }

    /// A credential for a user that does not exist (or may not log in): the
    /// same salt and iterations at every attempt for a given name, and keys
    /// no password matches in practice (the exchange fails regardless).
    pub fn mock(secret: &[u8], username: &str) -> ScramCredential {
        let derive = |label: &[u8]| -> [u8; KEY_BYTES] {
            let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
            mac.update(label);
            mac.update(username.as_bytes());
            mac.finalize().into_bytes().into()
        };
        ScramCredential {
            salt: derive(b"kafgres scram mock salt\0")[..MOCK_SALT_BYTES].to_vec(),
            iterations: MOCK_ITERATIONS,
            stored_key: derive(b"kafgres scram mock stored key\0"),
            server_key: derive(b"kafgres scram mock server key\0"),
        }
    }
}

/// Why an exchange failed. The client is told only that authentication
/// failed (as Kafka does); the reason goes to the server log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScramError {
    #[error("a SCRAM message of {0} bytes (at most {MESSAGE_BYTES_MAX})")]
    Oversize(usize),
    #[error("malformed client-first message: {0}")]
    BadClientFirst(&'static str),
    #[error("malformed client-final message: {0}")]
    BadClientFinal(&'static str),
    #[error("channel binding requested; only 'n' (none) is supported")]
    ChannelBinding,
    #[error("unsupported mandatory extension")]
    MandatoryExtension,
    /// Kafka's words (for the log; the client is told only that the login failed).
    #[error("Token Authentication failed: Invalid tokenId : {0}")]
    UnknownToken(String),
    #[error("authorization id {authzid:?} differs from the user name {username:?}")]
    AuthorizationId { authzid: String, username: String },
    #[error("the channel binding in the final message does not match the first")]
    ChannelBindingMismatch,
    #[error("the final message's nonce is not the one this server issued")]
    WrongNonce,
    #[error("no such role, or it may not log in with a SCRAM-SHA-256 password (user {0:?})")]
    UnknownUser(String),
    #[error("wrong password (user {0:?})")]
    WrongProof(String),
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name, unescaped.
    pub username: String,
    /// `n,,` or `n,a=<authzid>,`: echoed base64-encoded in the final message.
    gs2_header: String,
    client_nonce: String,
    /// The message without its GS2 header (part of the AuthMessage).
    bare: String,
    /// The `tokenauth=true` extension (KIP-48): the user name is a
    /// delegation token's id, the password its HMAC.
    pub token_auth: bool,
}

impl ClientFirst {
    pub fn parse(message: &[u8]) -> Result<ClientFirst, ScramError> {
        if message.len() > MESSAGE_BYTES_MAX {
            return Err(ScramError::Oversize(message.len()));
        }
        let text = std::str::from_utf8(message).map_err(|_| ScramError::BadClientFirst("not UTF-8"))?;
        let (flag, rest) = text.split_once(',').ok_or(ScramError::BadClientFirst("no GS2 header"))?;
        match flag {
            "n" => {}
            "y" => return Err(ScramError::ChannelBinding),
            f if f.starts_with("p=") => return Err(ScramError::ChannelBinding),
            _ => return Err(ScramError::BadClientFirst("bad channel-binding flag")),
        }
        let (authzid, bare) = rest.split_once(',').ok_or(ScramError::BadClientFirst("no GS2 header"))?;
        let authzid = match authzid {
            "" => None,
            a => Some(
                a.strip_prefix("a=")
                    .ok_or(ScramError::BadClientFirst("bad authorization id"))
                    .and_then(|n| unescape_saslname(n).ok_or(ScramError::BadClientFirst("bad authorization id")))?,
            ),
        };
        let gs2_header = text[..text.len() - bare.len()].to_owned();
        let mut attributes = bare.split(',');
        let user = attributes.next().unwrap_or_default();
        if user.starts_with("m=") {
            return Err(ScramError::MandatoryExtension);
        }
        let username = user
            .strip_prefix("n=")
            .and_then(unescape_saslname)
            .filter(|u| !u.is_empty() && !u.contains('\0'))
            .ok_or(ScramError::BadClientFirst("bad user name"))?;
        let client_nonce = attributes
            .next()
            .and_then(|n| n.strip_prefix("r="))
            .filter(|n| is_valid_nonce(n))
            .ok_or(ScramError::BadClientFirst("bad nonce"))?
            .to_owned();
        // Optional extensions (Kafka's `key=value` pairs, KIP-86/KIP-48):
        // ignored, except `tokenauth` (a delegation token's login).
        let mut token_auth = false;
        for extension in attributes {
            let (key, value) = extension.split_once('=').ok_or(ScramError::BadClientFirst("bad extension"))?;
            if key.is_empty() {
                return Err(ScramError::BadClientFirst("bad extension"));
            }
            if key == "tokenauth" {
                token_auth = value.eq_ignore_ascii_case("true");
            }
        }
        if let Some(authzid) = authzid {
            if authzid != username {
                return Err(ScramError::AuthorizationId { authzid, username });
            }
        }
        Ok(ClientFirst { username, gs2_header, client_nonce, bare: bare.to_owned(), token_auth })
    }
}

/// One exchange after the client-first message: what the server sent and
/// what it needs to check the client's proof.
#[derive(Debug, Clone)]
pub struct ServerExchange {
    client: ClientFirst,
    nonce: String,
    server_first: String,
    credential: ScramCredential,
    /// False when `credential` is a mock one: the exchange fails at the end.
    known_user: bool,
}

/// A successful exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The server-final message to send.
    pub server_final: String,
    /// The authenticated user name (the PostgreSQL role).
    pub principal: String,
}

impl ServerExchange {
    /// Starts an exchange with the user's credential (`None`: no such user,
    /// answered with a mock one derived from `mock_secret`) and a fresh
    /// server nonce (printable, no comma).
    pub fn start(
        client: ClientFirst,
        credential: Option<ScramCredential>,
        mock_secret: &[u8],
        server_nonce: &str,
    ) -> ServerExchange {
        let known_user = credential.is_some();
        let credential = credential.unwrap_or_else(|| ScramCredential::mock(mock_secret, &client.username));
        let nonce = format!("{}{server_nonce}", client.client_nonce);
        let server_first = format!("r={nonce},s={},i={}", BASE64.encode(&credential.salt), credential.iterations);
        ServerExchange { client, nonce, server_first, credential, known_user }
    }

    pub fn server_first(&self) -> &str {
        &self.server_first
    }

    pub fn username(&self) -> &str {
        &self.client.username
    }

    /// Checks the client-final message and returns the server-final one.
    pub fn finish(&self, message: &[u8]) -> Result<Authenticated, ScramError> {
        if message.len() > MESSAGE_BYTES_MAX {
            return Err(ScramError::Oversize(message.len()));
        }
        let text = std::str::from_utf8(message).map_err(|_| ScramError::BadClientFinal("not UTF-8"))?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(ScramError::BadClientFinal("no proof"))?;
        let proof = BASE64.decode(proof).map_err(|_| ScramError::BadClientFinal("proof is not base64"))?;
        let mut attributes = without_proof.split(',');
        let binding = attributes
            .next()
            .and_then(|c| c.strip_prefix("c="))
            .ok_or(ScramError::BadClientFinal("no channel binding"))?;
        let binding =
            BASE64.decode(binding).map_err(|_| ScramError::BadClientFinal("channel binding is not base64"))?;
        let nonce =
            attributes.next().and_then(|r| r.strip_prefix("r=")).ok_or(ScramError::BadClientFinal("no nonce"))?;
        for extension in attributes {
            if !extension.contains('=') {
                return Err(ScramError::BadClientFinal("bad extension"));
            }
        }
        if binding != self.client.gs2_header.as_bytes() {
            return Err(ScramError::ChannelBindingMismatch);
        }
        // Kafka checks `endsWith`, not equality (since 3.8.1): librdkafka
        // before 2.6.1 sends the client nonce twice (`r=<client><client><server>`),
        // Debian's kcat among them. The proof still covers the server nonce.
        if !nonce.ends_with(&self.nonce) {
            return Err(ScramError::WrongNonce);
        }
        if proof.len() != KEY_BYTES {
            return Err(ScramError::BadClientFinal("proof of the wrong length"));
        }
        let auth_message = format!("{},{},{without_proof}", self.client.bare, self.server_first);
        let client_signature = hmac(&self.credential.stored_key, auth_message.as_bytes());
        let mut client_key = [0u8; KEY_BYTES];
        for (i, byte) in client_key.iter_mut().enumerate() {
            *byte = proof[i] ^ client_signature[i];
        }
        let stored_key: [u8; KEY_BYTES] = Sha256::digest(client_key).into();
        let proof_matches = constant_time_eq(&stored_key, &self.credential.stored_key);
        if !self.known_user {
            return Err(ScramError::UnknownUser(self.client.username.clone()));
        }
        if !proof_matches {
            return Err(ScramError::WrongProof(self.client.username.clone()));
        }
        let server_signature = hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(Authenticated {
            server_final: format!("v={}", BASE64.encode(server_signature)),
            principal: self.client.username.clone(),
        })
    }
}

/// Kafka's (and RFC 5802's) saslname: `=2C` is `,` and `=3D` is `=`; any
/// other `=` or a bare `,` is malformed.
pub fn unescape_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find(['=', ',']) {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3)?;
        match escape {
            "=2C" => out.push(','),
            "=3D" => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// RFC 5802: printable ASCII except ','; not empty.
fn is_valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty() && nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// Hi() of RFC 5802 (PBKDF2-HMAC-SHA-256 with one output block).
pub(crate) fn salted_password(password: &[u8], salt: &[u8], iterations: u32) -> [u8; KEY_BYTES] {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac(password, &block);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password, &u);
        for (o, x) in out.iter_mut().zip(u) {
            *o ^= x;
        }
    }
    out
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; KEY_BYTES] {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// Compares without an early exit, so the time taken says nothing about
/// how much of a guess was right (only a length difference shows).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
