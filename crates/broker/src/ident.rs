//! User name maps in the format of PostgreSQL's `pg_ident.conf`: how a name
//! proven outside the role catalog (a client certificate's subject, a bearer
//! token's subject) becomes a PostgreSQL role.
//!
//! Each line is `MAPNAME SYSTEM-USERNAME PG-USERNAME`. A system user name
//! that starts with `/` is a regular expression, and `\1` in the role name is
//! replaced by its first capture group, as PostgreSQL 15 does. The broker
//! reads the very file PostgreSQL uses (its `ident_file` setting), so one
//! map serves `cert` authentication for psql and Kafka clients alike.
//!
//! Two questions are asked of a map, as the two protocols differ:
//! * [`IdentMaps::role_for`]: the role a client *is* (a certificate names no
//!   role of its own): the first line of the map that matches gives it, the
//!   order of lines being the order of rules, as in Kafka's
//!   `ssl.principal.mapping.rules`;
//! * [`IdentMaps::allows`]: whether a client that *asks* for a role (an
//!   OAUTHBEARER authorization id) may be it: any line of the map that
//!   matches and names that role, as PostgreSQL's `check_usermap`.
//!
//! Parsing never panics; a file with a bad line is refused as a whole
//! ([`IdentError`]), and the host keeps the maps it had, as PostgreSQL keeps
//! its old `pg_ident.conf` when a reload finds an error.

use regex::Regex;

/// Why a map file was refused, with the line it stopped at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentError {
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
}

/// Why no role came out of a map.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("no user name map {0:?} in the ident file")]
    UnknownMap(String),
    #[error("user name map {map:?} has no line for {system_user:?}")]
    NoMatch { map: String, system_user: String },
    #[error("user name map {map:?} does not let {system_user:?} log in as role {role:?}")]
    NotAllowed { map: String, system_user: String, role: String },
    #[error("line {line} of the ident file asks for \\1, but its regular expression has no capture group")]
    NoCaptureGroup { line: usize },
}

#[derive(Debug, Clone)]
enum SystemUser {
    Exact(String),
    Pattern(Regex),
}

#[derive(Debug, Clone)]
struct Line {
    /// 1-based, for messages.
    number: usize,
    map: String,
    system_user: SystemUser,
    role: String,
}

/// Every map of one ident file, in file order.
#[derive(Debug, Clone, Default)]
pub struct IdentMaps {
    lines: Vec<Line>,
}

impl IdentMaps {
    /// No maps at all (no ident file, or an empty one).
    pub fn empty() -> IdentMaps {
        IdentMaps::default()
    }

    /// Parses the text of a `pg_ident.conf`.
    pub fn parse(text: &str) -> Result<IdentMaps, IdentError> {
        let mut lines = Vec::new();
        let mut pending: Option<(usize, String)> = None;
        for (index, raw) in text.lines().enumerate() {
            // A backslash at the end continues the line, as PostgreSQL 15 allows.
            let (number, mut joined) = match pending.take() {
                Some((first, mut so_far)) => {
                    so_far.push_str(raw);
                    (first, so_far)
                }
                None => (index + 1, raw.to_owned()),
            };
            if joined.ends_with('\\') && !in_comment(&joined) {
                joined.pop();
                pending = Some((number, joined));
                continue;
            }
            let tokens = tokens(&joined).map_err(|what| IdentError::Line { line: number, what })?;
            match tokens.as_slice() {
                [] => {}
                [map, system_user, role] => {
                    let system_user = match system_user.strip_prefix('/') {
                        Some(pattern) if !system_user.quoted => {
                            SystemUser::Pattern(Regex::new(pattern).map_err(|e| IdentError::Line {
                                line: number,
                                what: format!("invalid regular expression {pattern:?}: {e}"),
                            })?)
                        }
                        _ => SystemUser::Exact(system_user.text.clone()),
                    };
                    lines.push(Line { number, map: map.text.clone(), system_user, role: role.text.clone() });
                }
                _ => {
                    return Err(IdentError::Line {
                        line: number,
                        what: format!(
                            "expected a map name, a system user name and a role name, found {} field(s)",
                            tokens.len()
                        ),
                    })
                }
            }
        }
        if let Some((number, _)) = pending {
            return Err(IdentError::Line { line: number, what: "the file ends inside a continued line".into() });
        }
        Ok(IdentMaps { lines })
    }

    /// Whether the file defines `map`.
    pub fn has_map(&self, map: &str) -> bool {
        self.lines.iter().any(|l| l.map == map)
    }

    /// The role `system_user` is under `map`: the first line that matches.
    pub fn role_for(&self, map: &str, system_user: &str) -> Result<String, MapError> {
        if !self.has_map(map) {
            return Err(MapError::UnknownMap(map.to_owned()));
        }
        for line in self.lines.iter().filter(|l| l.map == map) {
            if let Some(role) = line.apply(system_user)? {
                return Ok(role);
            }
        }
        Err(MapError::NoMatch { map: map.to_owned(), system_user: system_user.to_owned() })
    }

    /// Whether `system_user` may log in as `role` under `map`.
    pub fn allows(&self, map: &str, system_user: &str, role: &str) -> Result<(), MapError> {
        if !self.has_map(map) {
            return Err(MapError::UnknownMap(map.to_owned()));
        }
        for line in self.lines.iter().filter(|l| l.map == map) {
            if line.apply(system_user)?.as_deref() == Some(role) {
                return Ok(());
            }
        }
        Err(MapError::NotAllowed { map: map.to_owned(), system_user: system_user.to_owned(), role: role.to_owned() })
    }
}

impl Line {
    /// The role this line gives `system_user`, if it matches.
    fn apply(&self, system_user: &str) -> Result<Option<String>, MapError> {
        match &self.system_user {
            SystemUser::Exact(name) => Ok((name == system_user).then(|| self.role.clone())),
            SystemUser::Pattern(pattern) => {
                let Some(captures) = pattern.captures(system_user) else { return Ok(None) };
                if !self.role.contains("\\1") {
                    return Ok(Some(self.role.clone()));
                }
                let first = captures.get(1).ok_or(MapError::NoCaptureGroup { line: self.number })?;
                // PostgreSQL replaces the first \1 only.
                Ok(Some(self.role.replacen("\\1", first.as_str(), 1)))
            }
        }
    }
}

struct Token {
    text: String,
    /// Written in double quotes: a quoted `/…` is a plain name.
    quoted: bool,
}

impl std::ops::Deref for Token {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

fn in_comment(line: &str) -> bool {
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return true,
            _ => {}
        }
    }
    false
}

/// The fields of one line: whitespace separates, `#` starts a comment,
/// double quotes keep spaces and `#` (and `""` is a quote inside them).
fn tokens(line: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(out),
            _ => {}
        }
        let mut text = String::new();
        let mut quoted = false;
        let mut in_quotes = false;
        while let Some(&c) = chars.peek() {
            if in_quotes {
                chars.next();
                if c == '"' {
                    if chars.peek() == Some(&'"') {
                        chars.next();
                        text.push('"');
                    } else {
                        in_quotes = false;
                    }
                } else {
                    text.push(c);
                }
            } else if c.is_whitespace() || c == '#' {
                break;
            } else if c == '"' {
                chars.next();
                in_quotes = true;
                quoted = true;
            } else {
                chars.next();
                text.push(c);
            }
        }
        if in_quotes {
            return Err("unterminated quoted string".into());
        }
        out.push(Token { text, quoted });
    }
}

/// Which name of a client certificate is its holder's (PostgreSQL's
/// `clientname` option of `cert` authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CertificateName {
    /// The subject's common name (`clientname=CN`, the default).
    #[default]
    CommonName,
    /// The whole subject in RFC 2253 form (`clientname=DN`).
    DistinguishedName,
}

/// Postgres's NAMEDATALEN - 1: a longer name cannot be a role.
pub const ROLE_NAME_BYTES_MAX: usize = 63;

/// How names proven outside the role catalog become roles: a client
/// certificate's subject and a bearer token's subject. A reload replaces
/// the whole set ([`SharedIdentityRules`]); a connection keeps the rules it
/// was accepted under.
#[derive(Debug, Default)]
pub struct IdentityRules {
    pub certificate_name: CertificateName,
    /// The map a certificate's name goes through; `None`: the name is the role.
    pub certificate_map: Option<String>,
    /// SASL/OAUTHBEARER's token validation; `None`: the mechanism is off.
    pub oauth: Option<std::sync::Arc<crate::oauth::TokenValidator>>,
    /// The map a token's subject goes through; `None`: the subject is the role.
    pub oauth_map: Option<String>,
    /// The maps of the ident file.
    pub maps: IdentMaps,
}

impl IdentityRules {
    /// The role a verified client certificate (DER) logs in as, or why none.
    pub fn certificate_role(&self, certificate: &[u8]) -> Result<String, String> {
        let name = match self.certificate_name {
            CertificateName::CommonName => crate::tls::subject::common_name(certificate),
            CertificateName::DistinguishedName => crate::tls::subject::distinguished_name(certificate),
        }
        .map_err(|e| e.to_string())?;
        let role = match &self.certificate_map {
            Some(map) => self.maps.role_for(map, &name).map_err(|e| e.to_string())?,
            None => name,
        };
        role_name(role)
    }

    /// The role a validated token's `subject` logs in as; `requested` is
    /// the authorization id the client asked for, if any. Without a map a
    /// requested role must be the subject itself (Kafka's rule); with one,
    /// the map must let the subject be it (PostgreSQL's).
    pub fn token_role(&self, subject: &str, requested: Option<&str>) -> Result<String, String> {
        let role = match (&self.oauth_map, requested) {
            (Some(map), Some(role)) => self.maps.allows(map, subject, role).map(|()| role.to_owned()),
            (Some(map), None) => self.maps.role_for(map, subject),
            (None, Some(role)) if role != subject => {
                return Err(format!(
                    "Client requested an authorization id ({role}) that is different from the token's principal \
                     name ({subject})"
                ))
            }
            (None, _) => Ok(subject.to_owned()),
        }
        .map_err(|e| e.to_string())?;
        role_name(role)
    }
}

/// `name` if it can be a role's name.
fn role_name(name: String) -> Result<String, String> {
    if name.is_empty() || name.len() > ROLE_NAME_BYTES_MAX || name.contains('\0') {
        return Err(format!(
            "{:?} cannot be a role name (1 to {ROLE_NAME_BYTES_MAX} bytes, no NUL)",
            name.chars().take(80).collect::<String>()
        ));
    }
    Ok(name)
}

/// The identity rules in force, replaced whole by a reload.
#[derive(Debug, Default)]
pub struct SharedIdentityRules(std::sync::RwLock<std::sync::Arc<IdentityRules>>);

impl SharedIdentityRules {
    pub fn new(rules: std::sync::Arc<IdentityRules>) -> SharedIdentityRules {
        SharedIdentityRules(std::sync::RwLock::new(rules))
    }

    pub fn get(&self) -> std::sync::Arc<IdentityRules> {
        std::sync::Arc::clone(&self.0.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn set(&self, rules: std::sync::Arc<IdentityRules>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = rules;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
# MAPNAME       SYSTEM-USERNAME              PG-USERNAME
certs           alice.example.com            alice
certs           /^(.*)@example\.com$         \1
certs           "CN=bob,O=Example Org"       bob
certs           /^ops-                       ops_admin
tokens          0oa1b2c3                     billing_app
tokens          0oa1b2c3                     billing_ro   # one subject, two roles
"#;

    #[test]
    fn the_first_matching_line_gives_the_role() {
        let maps = IdentMaps::parse(FILE).unwrap();
        assert_eq!(maps.role_for("certs", "alice.example.com").unwrap(), "alice");
        assert_eq!(maps.role_for("certs", "carol@example.com").unwrap(), "carol");
        assert_eq!(maps.role_for("certs", "CN=bob,O=Example Org").unwrap(), "bob");
        assert_eq!(maps.role_for("certs", "ops-7").unwrap(), "ops_admin");
        assert_eq!(maps.role_for("tokens", "0oa1b2c3").unwrap(), "billing_app");
    }

    #[test]
    fn names_match_exactly_and_patterns_as_written() {
        let maps = IdentMaps::parse(FILE).unwrap();
        for name in ["Alice.example.com", "alice.example.com ", "carol@example.org", "xops-7", ""] {
            assert!(matches!(maps.role_for("certs", name), Err(MapError::NoMatch { .. })), "{name:?}");
        }
        assert_eq!(maps.role_for("nope", "alice.example.com"), Err(MapError::UnknownMap("nope".into())));
    }

    #[test]
    fn a_requested_role_needs_a_line_that_names_it() {
        let maps = IdentMaps::parse(FILE).unwrap();
        assert_eq!(maps.allows("tokens", "0oa1b2c3", "billing_ro"), Ok(()));
        assert_eq!(maps.allows("tokens", "0oa1b2c3", "billing_app"), Ok(()));
        assert!(matches!(maps.allows("tokens", "0oa1b2c3", "postgres"), Err(MapError::NotAllowed { .. })));
        assert_eq!(maps.allows("certs", "dave@example.com", "dave"), Ok(()));
        assert!(maps.allows("certs", "dave@example.com", "alice").is_err());
    }

    #[test]
    fn a_backreference_without_a_group_is_an_error_at_use() {
        let maps = IdentMaps::parse("m /^x \\1\n").unwrap();
        assert_eq!(maps.role_for("m", "xy"), Err(MapError::NoCaptureGroup { line: 1 }));
    }

    #[test]
    fn quotes_continuations_and_comments() {
        let maps =
            IdentMaps::parse("m \"/not a regex\" \"role \"\"q\"\"\" # c\nm \\\n  long_name \\\n  long_role\n").unwrap();
        assert_eq!(maps.role_for("m", "/not a regex").unwrap(), "role \"q\"");
        assert_eq!(maps.role_for("m", "long_name").unwrap(), "long_role");
        assert!(IdentMaps::parse("# only a comment\n\n   \n").unwrap().lines.is_empty());
    }

    #[test]
    fn a_token_subject_becomes_a_role_as_kafka_or_as_the_map_says() {
        let plain = IdentityRules::default();
        assert_eq!(plain.token_role("app", None).unwrap(), "app");
        assert_eq!(plain.token_role("app", Some("app")).unwrap(), "app");
        assert!(plain.token_role("app", Some("postgres")).unwrap_err().contains("authorization id (postgres)"));
        assert!(plain.token_role(&"x".repeat(64), None).is_err(), "too long for a role");
        let mapped = IdentityRules {
            oauth_map: Some("tokens".into()),
            maps: IdentMaps::parse(FILE).unwrap(),
            ..IdentityRules::default()
        };
        assert_eq!(mapped.token_role("0oa1b2c3", None).unwrap(), "billing_app");
        assert_eq!(mapped.token_role("0oa1b2c3", Some("billing_ro")).unwrap(), "billing_ro");
        assert!(mapped.token_role("0oa1b2c3", Some("postgres")).is_err());
        assert!(mapped.token_role("someone", None).is_err());
    }

    #[test]
    fn bad_files_are_refused_with_their_line() {
        assert!(matches!(IdentMaps::parse("m a\n"), Err(IdentError::Line { line: 1, .. })));
        assert!(matches!(IdentMaps::parse("\nm a b c\n"), Err(IdentError::Line { line: 2, .. })));
        assert!(matches!(IdentMaps::parse("m /( r\n"), Err(IdentError::Line { line: 1, .. })));
        assert!(matches!(IdentMaps::parse("m \"a b\n"), Err(IdentError::Line { line: 1, .. })));
        assert!(matches!(IdentMaps::parse("m a \\\n"), Err(IdentError::Line { line: 1, .. })));
        // Arbitrary bytes never panic.
        for text in ["\u{0}\u{1}\"", "\"\"\"", "#\\", "a b \"c", "\\\\\\"] {
            let _ = IdentMaps::parse(text);
        }
    }
}
