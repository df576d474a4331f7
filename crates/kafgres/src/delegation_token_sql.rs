//! The SQL behind delegation tokens (`kafgres.delegation_tokens`, KIP-48):
//! one row per token, without its HMAC (the secret derives it), loaded at
//! startup, written by the broker before it hands a token out or answers a
//! renewal, and deleted when the token expires. Call inside `run_in_transaction`.

use kafgres_broker::delegation::TokenRecord;
use pgrx::spi::Spi;

const LOAD: &str = "SELECT token_id, owner, requester, renewers, \
     (extract(epoch FROM issued_at) * 1000)::bigint, (extract(epoch FROM expires_at) * 1000)::bigint, \
     (extract(epoch FROM max_at) * 1000)::bigint \
     FROM kafgres.delegation_tokens ORDER BY token_id";
const STORE: &str = "INSERT INTO kafgres.delegation_tokens AS t \
     (token_id, owner, requester, renewers, issued_at, expires_at, max_at) \
     VALUES ($1, $2, $3, $4::text[], 'epoch'::timestamptz + $5 * interval '1 ms', \
     'epoch'::timestamptz + $6 * interval '1 ms', 'epoch'::timestamptz + $7 * interval '1 ms') \
     ON CONFLICT (token_id) DO UPDATE SET renewers = excluded.renewers, expires_at = excluded.expires_at, \
     max_at = excluded.max_at";
const DELETE: &str = "DELETE FROM kafgres.delegation_tokens WHERE token_id = $1";

/// Every stored token.
pub fn load_delegation_tokens() -> Result<Vec<TokenRecord>, String> {
    Spi::connect(|client| {
        let mut tokens = Vec::new();
        for row in client.select(LOAD, None, &[])? {
            tokens.push(TokenRecord {
                token_id: row.get(1)?.unwrap_or_default(),
                owner: row.get(2)?.unwrap_or_default(),
                requester: row.get(3)?.unwrap_or_default(),
                renewers: row.get::<Vec<String>>(4)?.unwrap_or_default(),
                issue_ms: row.get(5)?.unwrap_or_default(),
                expiry_ms: row.get(6)?.unwrap_or_default(),
                max_ms: row.get(7)?.unwrap_or_default(),
            });
        }
        Ok::<_, pgrx::spi::Error>(tokens)
    })
    .map_err(|e| format!("loading kafgres.delegation_tokens: {e}"))
}

/// Stores a token, new or renewed.
pub fn store_delegation_token(token: &TokenRecord) -> Result<(), String> {
    Spi::connect_mut(|client| {
        client.update(
            STORE,
            None,
            &[
                token.token_id.clone().into(),
                token.owner.clone().into(),
                token.requester.clone().into(),
                token.renewers.clone().into(),
                token.issue_ms.into(),
                token.expiry_ms.into(),
                token.max_ms.into(),
            ],
        )?;
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("storing delegation token {}: {e}", token.token_id))
}

/// Deletes a token (gone already is fine).
pub fn delete_delegation_token(token_id: &str) -> Result<(), String> {
    Spi::connect_mut(|client| {
        client.update(DELETE, None, &[token_id.into()])?;
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("deleting delegation token {token_id}: {e}"))
}
