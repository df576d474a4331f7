//! How certificate and bearer-token subjects become roles, as the settings
//! say: `kafgres.ssl_client_name`, `kafgres.ssl_ident_map`, the
//! `kafgres.oauthbearer_*` settings, and PostgreSQL's own `pg_ident.conf`
//! (the file its `ident_file` setting names), read on the worker's main
//! thread at start and at each reload.
//!
//! A side path never stops the broker: a map file with an error, or a key
//! set that cannot be read, is a warning; at a reload the part that failed
//! keeps what was in force (as PostgreSQL keeps its old `pg_ident.conf`),
//! at start it stays off (no maps, no OAUTHBEARER).

use std::sync::Arc;

use kafgres_broker::ident::{CertificateName, IdentMaps, IdentityRules};
use kafgres_broker::oauth::{OAuthSettings, TokenValidator};
use pgrx::prelude::*;

use crate::gucs;

/// The rules the settings give now; `previous` (at a reload) supplies what
/// cannot be read.
pub fn identity_rules(previous: Option<&IdentityRules>) -> IdentityRules {
    let maps = ident_maps().unwrap_or_else(|e| {
        warning!(
            "kafgres: {e}; {}",
            if previous.is_some() { "the maps read before stay" } else { "no map is in force" }
        );
        previous.map(|p| p.maps.clone()).unwrap_or_default()
    });
    let certificate_map = optional(&gucs::SSL_IDENT_MAP);
    let oauth_map = optional(&gucs::OAUTHBEARER_IDENT_MAP);
    for (setting, map) in [("kafgres.ssl_ident_map", &certificate_map), ("kafgres.oauthbearer_ident_map", &oauth_map)] {
        if let Some(map) = map.as_deref().filter(|m| !maps.has_map(m)) {
            warning!("kafgres: {setting} = '{map}', but pg_ident.conf has no map {map:?}: such logins will fail");
        }
    }
    IdentityRules {
        certificate_name: match gucs::SSL_CLIENT_NAME.get() {
            gucs::SslClientNameGuc::Cn => CertificateName::CommonName,
            gucs::SslClientNameGuc::Dn => CertificateName::DistinguishedName,
        },
        certificate_map,
        oauth: token_validator(previous.and_then(|p| p.oauth.as_ref())),
        oauth_map,
        maps,
    }
}

/// A reload: connections accepted from now on use the new rules.
pub fn reload_identities(broker: &kafgres_broker::Broker) {
    let previous = broker.context().identities.get();
    broker.reload_identities(identity_rules(Some(&previous)));
}

fn optional(setting: &pgrx::GucSetting<Option<std::ffi::CString>>) -> Option<String> {
    Some(gucs::string_or(setting, "")).filter(|s| !s.is_empty())
}

/// PostgreSQL's `pg_ident.conf`, parsed.
fn ident_maps() -> Result<IdentMaps, String> {
    let Some(path) = gucs::postgres_setting(c"ident_file").filter(|p| !p.is_empty()) else {
        return Ok(IdentMaps::empty());
    };
    let path = gucs::data_dir_path(&path);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(IdentMaps::empty()),
        Err(e) => return Err(format!("the ident file {} cannot be read: {e}", path.display())),
    };
    IdentMaps::parse(&text).map_err(|e| format!("the ident file {}: {e}", path.display()))
}

/// OAUTHBEARER's validator, or `None` (off). Unchanged settings keep the
/// validator in force (it reads its key file again by itself when the file
/// changes); a new key file that cannot be used keeps the old validator.
fn token_validator(previous: Option<&Arc<TokenValidator>>) -> Option<Arc<TokenValidator>> {
    let jwks_file = optional(&gucs::OAUTHBEARER_JWKS_FILE)?;
    let settings = OAuthSettings {
        jwks_file: gucs::data_dir_path(&jwks_file),
        expected_issuer: optional(&gucs::OAUTHBEARER_EXPECTED_ISSUER),
        expected_audience: gucs::string_or(&gucs::OAUTHBEARER_EXPECTED_AUDIENCE, "")
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect(),
        sub_claim_name: gucs::string_or(&gucs::OAUTHBEARER_SUB_CLAIM_NAME, "sub"),
        scope_claim_name: gucs::string_or(&gucs::OAUTHBEARER_SCOPE_CLAIM_NAME, "scope"),
        clock_skew_s: gucs::OAUTHBEARER_CLOCK_SKEW_S.get().max(0) as u64,
    };
    if let Some(previous) = previous.filter(|p| *p.settings() == settings) {
        return Some(Arc::clone(previous));
    }
    match TokenValidator::new(settings) {
        Ok(validator) => Some(Arc::new(validator)),
        Err(e) => {
            let kept = if previous.is_some() { "the settings in force before stay" } else { "OAUTHBEARER is off" };
            warning!("kafgres: SASL/OAUTHBEARER cannot validate tokens: {e}; {kept}");
            previous.cloned()
        }
    }
}
