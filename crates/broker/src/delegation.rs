//! Delegation tokens (KIP-48): short-lived credentials a role obtains for a
//! job it hands work to, which then logs in with SCRAM as that role without
//! its password.
//!
//! Kafka's semantics (its `DelegationTokenControlManager` and
//! `DelegationTokenCache`):
//! - a token is an id (a random base64 UUID, as Kafka's `Uuid.toString`), an
//!   owner, the requester, renewers, and issue, expiry and maximum
//!   timestamps; its HMAC is `HmacSHA512(secret, id)`, with the secret
//!   `kafgres.delegation_token_secret_key`, and is its password;
//! - creation: `max = now + min(request's lifetime if > 0, max lifetime)`,
//!   `expiry = min(now + expiry time, max)`;
//! - renewal (the owner, the requester is not enough, or a renewer):
//!   `expiry = min(now + min(period if > 0, expiry time), max)`;
//! - expiry: a negative period removes the token at once, else
//!   `expiry = min(now + period, max)`;
//! - a token is expired once `expiry < now` (or `max < now`): renewal and
//!   expiry answer DELEGATION_TOKEN_EXPIRED, and it is removed.
//!
//! Kafka removes expired tokens every `delegation.token.expiry.check.interval.ms`
//! and accepts logins with them until then; here [`run_expiry`] sleeps until
//! the next expiry (woken when one changes) and removes it then, and a login
//! with an expired token fails even before it is removed.
//!
//! Storage: each token is a row of `kafgres.delegation_tokens` (through
//! [`Catalog`]), without its HMAC, which the secret derives; the catalog is
//! written before the cache changes, so a token a client was given survives
//! a restart and a failover. The cache holds, per token, its HMAC and the
//! SCRAM credential derived from it (a random salt, 4096 iterations, as
//! Kafka's `ScramFormatter.generateCredential` at the mechanism's minimum),
//! so a login costs no key derivation on the server.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha512;
use tokio::sync::Notify;

use crate::catalog::{Catalog, CatalogError};
use crate::sasl::scram::ScramCredential;

/// Kafka's `delegation.token.max.lifetime.ms` default: 7 days.
pub const MAX_LIFETIME_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;
/// Kafka's `delegation.token.expiry.time.ms` default: 1 day.
pub const EXPIRY_TIME_MS_DEFAULT: i64 = 24 * 3600 * 1000;
/// Iterations of a token's SCRAM credential: SCRAM-SHA-256's minimum, which
/// Kafka uses for tokens.
pub const CREDENTIAL_ITERATIONS: u32 = 4096;
/// Bytes of a token's HMAC (SHA-512).
pub const HMAC_BYTES: usize = 64;

/// The principal type of every Kafgres principal (a role).
pub const USER_TYPE: &str = "User";

/// The settings of delegation tokens (static: Kafka reads them at start).
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSettings {
    /// `kafgres.delegation_token_secret_key` (Kafka's
    /// `delegation.token.secret.key`); `None`: tokens are off
    /// (DELEGATION_TOKEN_AUTH_DISABLED).
    pub secret_key: Option<String>,
    /// `kafgres.delegation_token_max_lifetime_ms`.
    pub max_lifetime_ms: i64,
    /// `kafgres.delegation_token_expiry_time_ms`: the default renewal period.
    pub expiry_time_ms: i64,
}

impl Default for TokenSettings {
    fn default() -> TokenSettings {
        TokenSettings {
            secret_key: None,
            max_lifetime_ms: MAX_LIFETIME_MS_DEFAULT,
            expiry_time_ms: EXPIRY_TIME_MS_DEFAULT,
        }
    }
}

impl std::fmt::Debug for TokenSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret makes every token's password: never logged.
        f.debug_struct("TokenSettings")
            .field("secret_key", &self.secret_key.as_ref().map(|_| "<set>"))
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("expiry_time_ms", &self.expiry_time_ms)
            .finish()
    }
}

/// One token as stored (`kafgres.delegation_tokens`): everything but its
/// HMAC. Principals are role names (principal type `User`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub token_id: String,
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    pub expiry_ms: i64,
    pub max_ms: i64,
}

impl TokenRecord {
    /// Kafka's `TokenInformation.ownerOrRenewer`: the owner, the requester
    /// or a renewer.
    pub fn owner_or_renewer(&self, role: &str) -> bool {
        self.owner == role || self.requester == role || self.renewers.iter().any(|r| r == role)
    }

    /// Kafka's `allowedToRenew`: the owner or a renewer.
    pub fn may_renew(&self, role: &str) -> bool {
        self.owner == role || self.renewers.iter().any(|r| r == role)
    }

    /// Whether the token is expired at `now_ms` (Kafka: strictly past).
    pub fn expired(&self, now_ms: i64) -> bool {
        self.max_ms < now_ms || self.expiry_ms < now_ms
    }

    /// When it becomes expired: the first millisecond past its expiry.
    fn expires_at_ms(&self) -> i64 {
        self.expiry_ms.min(self.max_ms).saturating_add(1)
    }
}

/// Why a renewal or an expiry was refused, as Kafka's error codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    #[error("delegation tokens are off (no kafgres.delegation_token_secret_key)")]
    Disabled,
    #[error("no token has this HMAC")]
    NotFound,
    #[error("the token is expired")]
    Expired,
    #[error("only the token's owner and renewers may renew or expire it")]
    OwnerMismatch,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl TokenError {
    pub fn code(&self) -> i16 {
        use kafgres_wire::error_code;
        match self {
            TokenError::Disabled => error_code::DELEGATION_TOKEN_AUTH_DISABLED,
            TokenError::NotFound => error_code::DELEGATION_TOKEN_NOT_FOUND,
            TokenError::Expired => error_code::DELEGATION_TOKEN_EXPIRED,
            TokenError::OwnerMismatch => error_code::DELEGATION_TOKEN_OWNER_MISMATCH,
            TokenError::Catalog(_) => error_code::UNKNOWN_SERVER_ERROR,
        }
    }
}

/// A new token's timestamps: `(max, expiry)` (Kafka's creation rule).
pub fn creation_times(settings: &TokenSettings, requested_max_lifetime_ms: i64, now_ms: i64) -> (i64, i64) {
    let lifetime = match requested_max_lifetime_ms {
        l if l > 0 => l.min(settings.max_lifetime_ms),
        _ => settings.max_lifetime_ms,
    };
    let max = now_ms.saturating_add(lifetime);
    (max, max.min(now_ms.saturating_add(settings.expiry_time_ms)))
}

/// The checks renewal and expiry share, in Kafka's order.
pub fn check_renewable(token: Option<&TokenRecord>, who: &str, now_ms: i64) -> Result<(), TokenError> {
    let token = token.ok_or(TokenError::NotFound)?;
    if token.expired(now_ms) {
        return Err(TokenError::Expired);
    }
    if !token.may_renew(who) {
        return Err(TokenError::OwnerMismatch);
    }
    Ok(())
}

/// A renewed token's expiry (Kafka's renewal rule).
pub fn renewed_expiry(settings: &TokenSettings, token: &TokenRecord, renew_period_ms: i64, now_ms: i64) -> i64 {
    let period = match renew_period_ms {
        p if p > 0 => p.min(settings.expiry_time_ms),
        _ => settings.expiry_time_ms,
    };
    token.max_ms.min(now_ms.saturating_add(period))
}

/// `HmacSHA512(secret, token id)`, as Kafka computes a token's HMAC.
pub fn token_hmac(secret: &str, token_id: &str) -> [u8; HMAC_BYTES] {
    let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(token_id.as_bytes());
    mac.finalize().into_bytes().into()
}

/// A fresh token id: a random UUID as Kafka prints one (URL-safe base64 of
/// its 16 bytes, never starting with `-`).
pub fn new_token_id() -> String {
    loop {
        let id = URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// The SCRAM credential a token logs in with: its password is the HMAC in
/// base64 (what clients put in their JAAS `password`), salted at random.
pub fn token_credential(hmac: &[u8]) -> ScramCredential {
    let password = BASE64.encode(hmac);
    let salt = uuid::Uuid::new_v4().as_bytes().to_vec();
    let salted = crate::sasl::scram::salted_password(password.as_bytes(), &salt, CREDENTIAL_ITERATIONS);
    ScramCredential::from_salted_password(&salt, CREDENTIAL_ITERATIONS, &salted)
        .expect("a SHA-256 salted password with a salt and iterations")
}

/// What a token login needs: the credential, who it logs in as, and when
/// the token expires.
#[derive(Debug, Clone)]
pub struct TokenLogin {
    pub credential: ScramCredential,
    pub owner: String,
    pub expiry_ms: i64,
}

#[derive(Debug, Clone)]
struct Cached {
    record: TokenRecord,
    hmac: [u8; HMAC_BYTES],
    credential: ScramCredential,
}

#[derive(Debug, Default)]
struct Cache {
    by_id: BTreeMap<String, Cached>,
    by_hmac: HashMap<[u8; HMAC_BYTES], String>,
}

impl Cache {
    fn insert(&mut self, cached: Cached) {
        self.by_hmac.insert(cached.hmac, cached.record.token_id.clone());
        self.by_id.insert(cached.record.token_id.clone(), cached);
    }

    fn remove(&mut self, token_id: &str) -> Option<Cached> {
        let cached = self.by_id.remove(token_id)?;
        self.by_hmac.remove(&cached.hmac);
        Some(cached)
    }

    fn by_hmac(&self, hmac: &[u8]) -> Option<&Cached> {
        let hmac: &[u8; HMAC_BYTES] = hmac.try_into().ok()?;
        self.by_hmac.get(hmac).and_then(|id| self.by_id.get(id))
    }
}

/// The broker's delegation tokens: the stored ones, cached for logins, and
/// the operations of the token APIs (catalog first, then the cache).
pub struct DelegationTokens {
    settings: TokenSettings,
    catalog: Arc<dyn Catalog>,
    cache: Mutex<Cache>,
    /// Serializes the changes (each awaits the catalog between its check
    /// and its update of the cache).
    writes: tokio::sync::Mutex<()>,
    /// Woken when an expiry may have moved earlier: [`run_expiry`] sleeps
    /// again until the new next one.
    expiry_moved: Arc<Notify>,
}

impl std::fmt::Debug for DelegationTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationTokens").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl DelegationTokens {
    /// The tokens `records` holds (loaded at start). Without a secret they
    /// are kept in the catalog but none can be used.
    pub fn new(settings: TokenSettings, catalog: Arc<dyn Catalog>, records: Vec<TokenRecord>) -> DelegationTokens {
        let mut cache = Cache::default();
        match &settings.secret_key {
            Some(secret) => {
                for record in records {
                    let hmac = token_hmac(secret, &record.token_id);
                    cache.insert(Cached { credential: token_credential(&hmac), hmac, record });
                }
            }
            None if !records.is_empty() => log::warn!(
                "{} delegation token(s) stored, but kafgres.delegation_token_secret_key is not set: none can be \
                 used until it is set (to the secret they were made with)",
                records.len()
            ),
            None => {}
        }
        DelegationTokens {
            settings,
            catalog,
            cache: Mutex::new(cache),
            writes: tokio::sync::Mutex::new(()),
            expiry_moved: Arc::new(Notify::new()),
        }
    }

    pub fn settings(&self) -> &TokenSettings {
        &self.settings
    }

    /// Whether tokens are on (a secret is set).
    pub fn enabled(&self) -> bool {
        self.settings.secret_key.is_some()
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates a token for `owner`, asked for by `requester`; returns it and
    /// its HMAC once stored.
    pub async fn create(
        &self,
        owner: &str,
        requester: &str,
        renewers: Vec<String>,
        requested_max_lifetime_ms: i64,
        now_ms: i64,
    ) -> Result<(TokenRecord, Vec<u8>), TokenError> {
        let secret = self.settings.secret_key.as_deref().ok_or(TokenError::Disabled)?;
        let (max_ms, expiry_ms) = creation_times(&self.settings, requested_max_lifetime_ms, now_ms);
        let record = TokenRecord {
            token_id: new_token_id(),
            owner: owner.to_owned(),
            requester: requester.to_owned(),
            renewers,
            issue_ms: now_ms,
            expiry_ms,
            max_ms,
        };
        let hmac = token_hmac(secret, &record.token_id);
        // Thousands of HMACs: off the connection threads.
        let credential = tokio::task::spawn_blocking(move || token_credential(&hmac))
            .await
            .map_err(|e| CatalogError::Failed(format!("deriving the token's credential: {e}")))?;
        let _writing = self.writes.lock().await;
        self.catalog.store_delegation_token(record.clone()).await?;
        self.cache().insert(Cached { record: record.clone(), hmac, credential });
        self.expiry_moved.notify_one();
        Ok((record, hmac.to_vec()))
    }

    /// Renews the token of `hmac` for `who`; returns its new expiry.
    pub async fn renew(&self, hmac: &[u8], who: &str, renew_period_ms: i64, now_ms: i64) -> Result<i64, TokenError> {
        if !self.enabled() {
            return Err(TokenError::Disabled);
        }
        let _writing = self.writes.lock().await;
        let mut record = self.checked(hmac, who, now_ms)?;
        record.expiry_ms = renewed_expiry(&self.settings, &record, renew_period_ms, now_ms);
        self.update(record).await
    }

    /// Expires the token of `hmac` for `who`: at once (removed) when
    /// `period_ms` is negative, else in `period_ms`. Returns the expiry
    /// Kafka answers (the period itself when removed at once).
    pub async fn expire(&self, hmac: &[u8], who: &str, period_ms: i64, now_ms: i64) -> Result<i64, TokenError> {
        if !self.enabled() {
            return Err(TokenError::Disabled);
        }
        let _writing = self.writes.lock().await;
        let mut record = self.checked(hmac, who, now_ms)?;
        if period_ms < 0 {
            self.catalog.delete_delegation_token(record.token_id.clone()).await?;
            self.cache().remove(&record.token_id);
            log::info!("delegation token {} of role {:?} expired by {who:?}", record.token_id, record.owner);
            return Ok(period_ms);
        }
        record.expiry_ms = record.max_ms.min(now_ms.saturating_add(period_ms));
        self.update(record).await
    }

    fn checked(&self, hmac: &[u8], who: &str, now_ms: i64) -> Result<TokenRecord, TokenError> {
        let cache = self.cache();
        let token = cache.by_hmac(hmac).map(|c| &c.record);
        check_renewable(token, who, now_ms)?;
        token.cloned().ok_or(TokenError::NotFound)
    }

    async fn update(&self, record: TokenRecord) -> Result<i64, TokenError> {
        self.catalog.store_delegation_token(record.clone()).await?;
        let expiry_ms = record.expiry_ms;
        if let Some(cached) = self.cache().by_id.get_mut(&record.token_id) {
            cached.record = record;
        }
        self.expiry_moved.notify_one();
        Ok(expiry_ms)
    }

    /// The tokens `eligible` keeps, with their HMACs, by token id.
    pub fn describe(&self, mut eligible: impl FnMut(&TokenRecord) -> bool) -> Vec<(TokenRecord, Vec<u8>)> {
        self.cache()
            .by_id
            .values()
            .filter(|c| eligible(&c.record))
            .map(|c| (c.record.clone(), c.hmac.to_vec()))
            .collect()
    }

    /// Every token, by id (for the tests and the host's views).
    pub fn tokens(&self) -> Vec<TokenRecord> {
        self.cache().by_id.values().map(|c| c.record.clone()).collect()
    }

    /// What a SCRAM login with `tokenauth=true` and user name `token_id`
    /// needs; `None` for an unknown or expired token.
    pub fn login(&self, token_id: &str, now_ms: i64) -> Option<TokenLogin> {
        let cache = self.cache();
        let cached = cache.by_id.get(token_id).filter(|c| !c.record.expired(now_ms))?;
        Some(TokenLogin {
            credential: cached.credential.clone(),
            owner: cached.record.owner.clone(),
            expiry_ms: cached.record.expiry_ms.min(cached.record.max_ms),
        })
    }

    /// Removes the tokens expired at `now_ms` (catalog first); returns how
    /// many. One that cannot be deleted now is tried again at the next run.
    pub async fn remove_expired(&self, now_ms: i64) -> usize {
        let _writing = self.writes.lock().await;
        let expired: Vec<TokenRecord> =
            self.cache().by_id.values().filter(|c| c.record.expired(now_ms)).map(|c| c.record.clone()).collect();
        let mut removed = 0;
        for record in expired {
            match self.catalog.delete_delegation_token(record.token_id.clone()).await {
                Ok(()) => {
                    self.cache().remove(&record.token_id);
                    log::info!("delegation token {} of role {:?} expired", record.token_id, record.owner);
                    removed += 1;
                }
                Err(e) => log::warn!("delegation token {} expired but could not be removed: {e}", record.token_id),
            }
        }
        removed
    }

    /// Replaces the tokens with those stored (a reload: a row an operator
    /// deleted revokes its token; a standby learns the primary's new ones).
    /// A token kept keeps its credential. Returns (added, removed).
    ///
    /// Takes no write lock: the host calls it from the thread that also
    /// applies the catalog writes, so a change in flight lands after it.
    pub fn replace(&self, records: Vec<TokenRecord>) -> (usize, usize) {
        let Some(secret) = self.settings.secret_key.as_deref() else { return (0, 0) };
        let known: std::collections::BTreeSet<String> = self.cache().by_id.keys().cloned().collect();
        // The new tokens' credentials outside the lock (key derivations).
        let fresh: Vec<Cached> = records
            .iter()
            .filter(|r| !known.contains(&r.token_id))
            .map(|record| {
                let hmac = token_hmac(secret, &record.token_id);
                Cached { credential: token_credential(&hmac), hmac, record: record.clone() }
            })
            .collect();
        let mut cache = self.cache();
        let stored: std::collections::BTreeSet<&str> = records.iter().map(|r| r.token_id.as_str()).collect();
        let gone: Vec<String> = cache.by_id.keys().filter(|id| !stored.contains(id.as_str())).cloned().collect();
        for id in &gone {
            cache.remove(id);
        }
        for record in records {
            if let Some(cached) = cache.by_id.get_mut(&record.token_id) {
                cached.record = record;
            }
        }
        let added = fresh.len();
        for cached in fresh {
            cache.insert(cached);
        }
        drop(cache);
        self.expiry_moved.notify_one();
        (added, gone.len())
    }

    /// When the next token becomes expired (ms since the epoch).
    fn next_expiry_ms(&self) -> Option<i64> {
        self.cache().by_id.values().map(|c| c.record.expires_at_ms()).min()
    }
}

/// How long a failed removal waits before it is tried again.
const RETRY_DELAY: Duration = Duration::from_secs(10);

/// Removes tokens as they expire: sleeps until the next expiry, or until a
/// change may have moved it, and never polls. Ends with the service.
pub async fn run_expiry(tokens: Weak<DelegationTokens>) {
    loop {
        let Some((next, moved)) = tokens.upgrade().map(|t| (t.next_expiry_ms(), Arc::clone(&t.expiry_moved))) else {
            return;
        };
        let Some(at_ms) = next else {
            moved.notified().await;
            continue;
        };
        let wait = Duration::from_millis(at_ms.saturating_sub(crate::now_ms()).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {
                let Some(tokens) = tokens.upgrade() else { return };
                let now = crate::now_ms();
                let due = tokens.cache().by_id.values().filter(|c| c.record.expired(now)).count();
                if tokens.remove_expired(now).await < due {
                    // The catalog refused: not a tight loop on a failing database.
                    tokio::time::sleep(RETRY_DELAY).await;
                }
            }
            _ = moved.notified() => {}
        }
    }
}

/// A user principal's name in Kafka's form (`User:<role>`), the resource
/// name of Kafka's USER ACLs (CREATE_TOKENS, DESCRIBE_TOKENS).
pub fn user_principal(role: &str) -> String {
    format!("{USER_TYPE}:{role}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::MemoryCatalog;

    fn settings() -> TokenSettings {
        TokenSettings { secret_key: Some("s3cret".into()), max_lifetime_ms: 1_000, expiry_time_ms: 100 }
    }

    fn record(expiry_ms: i64, max_ms: i64) -> TokenRecord {
        TokenRecord {
            token_id: "t".into(),
            owner: "alice".into(),
            requester: "admin".into(),
            renewers: vec!["bob".into()],
            issue_ms: 0,
            expiry_ms,
            max_ms,
        }
    }

    #[test]
    fn creation_takes_the_smaller_lifetime_and_expiry() {
        let s = settings();
        assert_eq!(creation_times(&s, -1, 10), (1_010, 110));
        assert_eq!(creation_times(&s, 0, 10), (1_010, 110));
        assert_eq!(creation_times(&s, 50, 10), (60, 60), "a short lifetime caps the expiry");
        assert_eq!(creation_times(&s, 5_000, 10), (1_010, 110), "at most the setting");
    }

    #[test]
    fn renewal_is_the_owners_or_a_renewers_until_expiry() {
        let s = settings();
        let token = record(100, 1_000);
        assert_eq!(check_renewable(None, "alice", 0), Err(TokenError::NotFound));
        assert_eq!(check_renewable(Some(&token), "alice", 100), Ok(()), "not expired at its expiry");
        assert_eq!(check_renewable(Some(&token), "alice", 101), Err(TokenError::Expired));
        assert_eq!(check_renewable(Some(&token), "bob", 50), Ok(()));
        assert_eq!(check_renewable(Some(&token), "admin", 50), Err(TokenError::OwnerMismatch), "the requester may not");
        assert_eq!(check_renewable(Some(&token), "eve", 50), Err(TokenError::OwnerMismatch));
        assert_eq!(renewed_expiry(&s, &token, -1, 50), 150);
        assert_eq!(renewed_expiry(&s, &token, 10, 50), 60);
        assert_eq!(renewed_expiry(&s, &token, 10_000, 50), 150, "at most the expiry time");
        assert_eq!(renewed_expiry(&s, &token, 10_000, 990), 1_000, "never past the max");
        assert!(token.owner_or_renewer("admin") && token.owner_or_renewer("bob") && !token.owner_or_renewer("eve"));
    }

    #[test]
    fn refusals_are_kafkas_error_codes() {
        use kafgres_wire::error_code;
        let codes = [TokenError::Disabled, TokenError::NotFound, TokenError::OwnerMismatch, TokenError::Expired]
            .map(|e| e.code());
        assert_eq!(codes, [61, 62, 63, 66]);
        assert_eq!(codes[3], error_code::DELEGATION_TOKEN_EXPIRED);
        assert_eq!(TokenError::Catalog(CatalogError::Failed("x".into())).code(), error_code::UNKNOWN_SERVER_ERROR);
    }

    #[test]
    fn the_hmac_is_kafkas_hmac_sha512_of_the_id() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let hmac = token_hmac("Jefe", "what do ya want for nothing?");
        let hex: String = hmac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a3\
             4d4a6b4b636e070a38bce737"
        );
        let id = new_token_id();
        assert_eq!(id.len(), 22);
        assert!(!id.starts_with('-'));
    }

    #[test]
    fn a_tokens_credential_is_checked_with_its_base64_hmac() {
        let hmac = token_hmac("s3cret", "id");
        let credential = token_credential(&hmac);
        assert_eq!(credential.iterations, CREDENTIAL_ITERATIONS);
        assert!(credential.matches_password(BASE64.encode(hmac).as_bytes()));
        assert!(!credential.matches_password(b"wrong"));
    }

    #[tokio::test]
    async fn changes_go_to_the_catalog_before_the_cache() {
        let catalog = Arc::new(MemoryCatalog::default());
        let tokens = DelegationTokens::new(settings(), catalog.clone(), Vec::new());
        let (token, hmac) = tokens.create("alice", "alice", vec!["bob".into()], -1, 1_000).await.expect("created");
        assert_eq!(catalog.delegation_tokens(), vec![token.clone()]);
        assert_eq!(tokens.renew(&hmac, "bob", 50, 1_010).await, Ok(1_060));
        assert_eq!(catalog.delegation_tokens()[0].expiry_ms, 1_060);
        assert!(tokens.login(&token.token_id, 1_060).is_some());
        assert!(tokens.login(&token.token_id, 1_061).is_none(), "expired");
        assert_eq!(tokens.remove_expired(1_061).await, 1);
        assert!(catalog.delegation_tokens().is_empty());
        assert_eq!(tokens.renew(&hmac, "bob", 50, 1_062).await, Err(TokenError::NotFound));

        // A restart loads them again, with the same HMACs.
        let (token, hmac) = tokens.create("alice", "alice", Vec::new(), -1, 2_000).await.expect("created");
        let reloaded = DelegationTokens::new(settings(), catalog.clone(), catalog.delegation_tokens());
        assert_eq!(reloaded.describe(|_| true), vec![(token.clone(), hmac.clone())]);
        assert_eq!(reloaded.expire(&hmac, "alice", -1, 2_001).await, Ok(-1));
        assert!(catalog.delegation_tokens().is_empty());
        assert!(reloaded.tokens().is_empty());
    }

    #[tokio::test]
    async fn a_reload_takes_the_stored_tokens() {
        let catalog = Arc::new(MemoryCatalog::default());
        let tokens = DelegationTokens::new(settings(), catalog.clone(), Vec::new());
        let (kept, _) = tokens.create("alice", "alice", Vec::new(), -1, 1_000).await.expect("created");
        let (revoked, _) = tokens.create("bob", "bob", Vec::new(), -1, 1_000).await.expect("created");
        let before = tokens.login(&kept.token_id, 1_000).expect("valid").credential;
        // An operator deletes bob's row and moves alice's expiry; another server stored one more.
        let mut stored = kept.clone();
        stored.expiry_ms = 1_050;
        let mut other = kept.clone();
        other.token_id = "made-elsewhere".into();
        assert_eq!(tokens.replace(vec![stored.clone(), other.clone()]), (1, 1));
        assert!(tokens.login(&revoked.token_id, 1_000).is_none(), "revoked");
        let login = tokens.login(&kept.token_id, 1_000).expect("kept");
        assert_eq!((login.expiry_ms, login.credential), (1_050, before), "same credential, new expiry");
        assert!(tokens.login("made-elsewhere", 1_000).is_some());
        let hmac = token_hmac("s3cret", "made-elsewhere");
        assert_eq!(tokens.renew(&hmac, "alice", -1, 1_000).await, Ok(1_100));
    }
}
