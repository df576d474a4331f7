//! A standby's name: the `application_name` its walreceiver connects to the
//! primary with, which is what `synchronous_standby_names` and
//! `pg_stat_replication` name. A standby's follower fetches under the same
//! name, so one setting on the primary makes both the WAL and the topic data
//! synchronous to the same standbys.
//!
//! The walreceiver takes `application_name` from `primary_conninfo` (in
//! libpq's `key=value` form or as a `postgresql://` URI), else
//! `cluster_name`, else `walreceiver` (PostgreSQL 15's libpqwalreceiver).

/// The name a standby's walreceiver uses.
pub fn standby_name(primary_conninfo: &str, cluster_name: &str) -> String {
    if let Some(name) = conninfo_value(primary_conninfo, "application_name").filter(|n| !n.is_empty()) {
        return name;
    }
    if !cluster_name.is_empty() {
        return cluster_name.to_owned();
    }
    "walreceiver".to_owned()
}

/// The value of `key` in a libpq connection string, if given.
pub fn conninfo_value(conninfo: &str, key: &str) -> Option<String> {
    let trimmed = conninfo.trim_start();
    if trimmed.starts_with("postgresql://") || trimmed.starts_with("postgres://") {
        return uri_parameter(trimmed, key);
    }
    keyword_pairs(conninfo).into_iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// `key = value` pairs, values unquoted (backslash escapes) or in single
/// quotes (backslash escapes `\'` and `\\`), as libpq reads them.
fn keyword_pairs(conninfo: &str) -> Vec<(String, String)> {
    let chars: Vec<char> = conninfo.chars().collect();
    let mut pairs = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let key_start = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[key_start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() || chars[i] != '=' {
            // Malformed: libpq refuses it, and so would the walreceiver.
            break;
        }
        i += 1;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i]);
                i += 1;
            }
            i += 1;
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i]);
                i += 1;
            }
        }
        pairs.push((key, value));
    }
    pairs
}

fn uri_parameter(uri: &str, key: &str) -> Option<String> {
    let (_, query) = uri.split_once('?')?;
    query.split('&').filter_map(|pair| pair.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| percent_decode(v))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_basebackup_conninfo_names_the_standby_by_cluster_name_or_default() {
        // What `pg_basebackup -R` writes: no application_name.
        let written = "user=postgres passfile='/root/.pgpass' channel_binding=prefer host=127.0.0.1 port=5433 \
                       sslmode=prefer sslcompression=0 sslsni=1 target_session_attrs=any";
        assert_eq!(standby_name(written, "kafgres_standby"), "kafgres_standby");
        assert_eq!(standby_name(written, ""), "walreceiver");
        assert_eq!(standby_name("", ""), "walreceiver");
    }

    #[test]
    fn application_name_wins_in_every_quoting() {
        assert_eq!(standby_name("host=h application_name=s1", "c"), "s1");
        assert_eq!(standby_name("host=h application_name = 's 2' port=1", "c"), "s 2");
        assert_eq!(standby_name(r"application_name='it\'s'", "c"), "it's");
        assert_eq!(standby_name(r"application_name=a\ b", "c"), "a b");
        // An empty one falls back, as libpq's fallback_application_name does.
        assert_eq!(standby_name("application_name='' host=h", "c"), "c");
        assert_eq!(standby_name("postgresql://u@h:5433/db?application_name=uri%5Fname&sslmode=off", "c"), "uri_name");
        assert_eq!(standby_name("postgres://h/db", "c"), "c");
    }

    #[test]
    fn malformed_strings_do_not_panic() {
        for text in ["=", "a", "a=", "a='unterminated", "a=\\", "postgresql://h?application_name=%", "? = ="] {
            let _ = standby_name(text, "c");
        }
        assert_eq!(conninfo_value("a=1 b='2' a=3", "a").as_deref(), Some("3"));
    }
}
