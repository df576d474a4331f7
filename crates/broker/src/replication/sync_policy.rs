//! Which standbys an `acks=all` produce waits for: PostgreSQL's
//! `synchronous_standby_names`, read the way Postgres reads it, so the one
//! setting an operator already uses for commits also covers topic data.
//!
//! Grammar (PostgreSQL 15, `syncrep_gram.y` and `syncrep_scanner.l`):
//! `list` | `N (list)` | `FIRST N (list)` | `ANY N (list)`; a list is names
//! separated by commas; a name is an identifier (a letter, `_` or a byte
//! ≥ 0x80, then those, digits and `$`), a number, a `"quoted"` string (`""`
//! for a quote) or `*` (every standby). A plain list means `FIRST 1`.
//! Keywords are case-insensitive, and names are matched case-insensitively
//! against a standby's name (its walreceiver's `application_name`, which a
//! Kafgres follower reports as its rack id).

/// How the named standbys satisfy a produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMethod {
    /// The `num` connected standbys earliest in the list.
    Priority,
    /// Any `num` of the listed standbys.
    Quorum,
}

/// A parsed `synchronous_standby_names`; `None` from [`SyncPolicy::parse`]
/// means no standby is synchronous (the empty setting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPolicy {
    pub method: SyncMethod,
    pub num: usize,
    /// Names in priority order, lower-cased; `*` matches every standby.
    pub names: Vec<String>,
}

impl SyncPolicy {
    /// Parses the setting; `Ok(None)` for an empty one.
    pub fn parse(setting: &str) -> Result<Option<SyncPolicy>, String> {
        let tokens = tokenize(setting)?;
        if tokens.is_empty() {
            return Ok(None);
        }
        let mut p = Parser { tokens: &tokens, at: 0 };
        let policy = match (p.peek(), p.peek_at(1)) {
            (Some(Token::Any), _) => {
                p.at += 1;
                let num = p.number()?;
                SyncPolicy { method: SyncMethod::Quorum, num, names: p.parenthesized_list()? }
            }
            (Some(Token::First), _) => {
                p.at += 1;
                let num = p.number()?;
                SyncPolicy { method: SyncMethod::Priority, num, names: p.parenthesized_list()? }
            }
            (Some(Token::Name(n)), Some(Token::Open)) if n.chars().all(|c| c.is_ascii_digit()) => {
                let num = p.number()?;
                SyncPolicy { method: SyncMethod::Priority, num, names: p.parenthesized_list()? }
            }
            _ => SyncPolicy { method: SyncMethod::Priority, num: 1, names: p.list()? },
        };
        if p.at != tokens.len() {
            return Err(format!("unexpected text after the standby list in {setting:?}"));
        }
        if policy.num == 0 {
            return Err("the number of synchronous standbys must be greater than zero".into());
        }
        Ok(Some(policy))
    }

    /// The position of `standby` in the list (its priority, 0 first), if named.
    pub fn priority(&self, standby: &str) -> Option<usize> {
        let standby = standby.to_lowercase();
        self.names.iter().position(|n| n == "*" || *n == standby)
    }

    /// The offset up to which `num` standbys hold a partition, given each
    /// candidate's `(name, acknowledged offset)`, or `None` when fewer than
    /// `num` named standbys are connected (the produce waits, as a commit does).
    pub fn replicated_offset<'a>(&self, standbys: impl IntoIterator<Item = (&'a str, i64)>) -> Option<i64> {
        let mut candidates: Vec<(usize, i64)> =
            standbys.into_iter().filter_map(|(name, offset)| self.priority(name).map(|p| (p, offset))).collect();
        if candidates.len() < self.num {
            return None;
        }
        match self.method {
            // The `num` highest-priority connected standbys must all hold it.
            SyncMethod::Priority => {
                candidates.sort_by_key(|(priority, _)| *priority);
                candidates.iter().take(self.num).map(|(_, offset)| *offset).min()
            }
            // Any `num` of them: the `num`-th highest offset.
            SyncMethod::Quorum => {
                candidates.sort_by_key(|(_, offset)| std::cmp::Reverse(*offset));
                candidates.get(self.num - 1).map(|(_, offset)| *offset)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Name(String),
    Any,
    First,
    Open,
    Close,
    Comma,
}

fn tokenize(setting: &str) -> Result<Vec<Token>, String> {
    let bytes = setting.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let ident_start = |b: u8| b.is_ascii_alphabetic() || b == b'_' || b >= 0x80;
    let ident_cont = |b: u8| ident_start(b) || b.is_ascii_digit() || b == b'$';
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => i += 1,
            b'(' => {
                tokens.push(Token::Open);
                i += 1
            }
            b')' => {
                tokens.push(Token::Close);
                i += 1
            }
            b',' => {
                tokens.push(Token::Comma);
                i += 1
            }
            b'*' => {
                tokens.push(Token::Name("*".into()));
                i += 1
            }
            b'"' => {
                let mut name = Vec::new();
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err("unterminated quoted identifier".into()),
                        Some(b'"') if bytes.get(i + 1) == Some(&b'"') => {
                            name.push(b'"');
                            i += 2;
                        }
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            name.push(c);
                            i += 1;
                        }
                    }
                }
                tokens.push(Token::Name(String::from_utf8_lossy(&name).to_lowercase()));
            }
            b if b.is_ascii_digit() => {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                tokens.push(Token::Name(setting[start..i].to_string()));
            }
            b if ident_start(b) => {
                let start = i;
                while i < bytes.len() && ident_cont(bytes[i]) {
                    i += 1;
                }
                let word = String::from_utf8_lossy(&bytes[start..i]).into_owned();
                tokens.push(match word.to_ascii_lowercase().as_str() {
                    "any" => Token::Any,
                    "first" => Token::First,
                    _ => Token::Name(word.to_lowercase()),
                });
            }
            other => return Err(format!("syntax error at {:?}", other as char)),
        }
    }
    Ok(tokens)
}

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn peek_at(&self, ahead: usize) -> Option<&Token> {
        self.tokens.get(self.at + ahead)
    }

    fn expect(&mut self, token: Token) -> Result<(), String> {
        if self.peek() == Some(&token) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected {token:?} in synchronous_standby_names"))
        }
    }

    fn number(&mut self) -> Result<usize, String> {
        match self.peek() {
            Some(Token::Name(n)) if n.chars().all(|c| c.is_ascii_digit()) => {
                let n = n.parse().map_err(|_| format!("{n} synchronous standbys is too many"))?;
                self.at += 1;
                Ok(n)
            }
            _ => Err("expected the number of synchronous standbys".into()),
        }
    }

    fn name(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(Token::Name(n)) => {
                let n = n.clone();
                self.at += 1;
                Ok(n)
            }
            _ => Err("expected a standby name".into()),
        }
    }

    fn list(&mut self) -> Result<Vec<String>, String> {
        let mut names = vec![self.name()?];
        while self.peek() == Some(&Token::Comma) {
            self.at += 1;
            names.push(self.name()?);
        }
        Ok(names)
    }

    fn parenthesized_list(&mut self) -> Result<Vec<String>, String> {
        self.expect(Token::Open)?;
        let names = self.list()?;
        self.expect(Token::Close)?;
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(s: &str) -> SyncPolicy {
        SyncPolicy::parse(s).expect("parses").expect("not empty")
    }

    #[test]
    fn parses_every_form_postgres_accepts() {
        assert_eq!(SyncPolicy::parse("").expect("parses"), None);
        assert_eq!(SyncPolicy::parse("   ").expect("parses"), None);
        assert_eq!(policy("s1"), SyncPolicy { method: SyncMethod::Priority, num: 1, names: vec!["s1".into()] });
        assert_eq!(policy("s1, S2").names, ["s1", "s2"]);
        assert_eq!(
            policy("2 (a, b, c)"),
            SyncPolicy { method: SyncMethod::Priority, num: 2, names: vec!["a".into(), "b".into(), "c".into()] }
        );
        assert_eq!(policy("FIRST 2 (a,b)").method, SyncMethod::Priority);
        assert_eq!(
            policy("any 1 (a, *)"),
            SyncPolicy { method: SyncMethod::Quorum, num: 1, names: vec!["a".into(), "*".into()] }
        );
        assert_eq!(policy(r#""Mixed Case", "with""quote""#).names, ["mixed case", "with\"quote"]);
        assert_eq!(policy(r#"any 1 ("any")"#).names, ["any"], "a quoted keyword is a name");
        assert_eq!(policy("standby_1$x").names, ["standby_1$x"]);
        assert_eq!(policy("42").names, ["42"], "a number alone is a name");
    }

    #[test]
    fn refuses_what_postgres_refuses() {
        for bad in ["ANY 0 (a)", "FIRST (a)", "ANY 1 a", "a,", "(a)", "a b", "\"open", "a;b", "ANY 1 (a) b"] {
            assert!(SyncPolicy::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn priority_waits_for_the_first_connected_standbys_by_position() {
        let p = policy("FIRST 1 (a, b)");
        assert_eq!(p.replicated_offset([("b", 10), ("a", 7)]), Some(7), "a outranks b");
        assert_eq!(p.replicated_offset([("b", 10)]), Some(10), "b stands in while a is away");
        assert_eq!(p.replicated_offset([("c", 10)]), None, "c is not named");
        assert_eq!(p.replicated_offset([]), None);
        let two = policy("2 (a, b, c)");
        assert_eq!(two.replicated_offset([("c", 9), ("a", 7), ("b", 12)]), Some(7));
        assert_eq!(two.replicated_offset([("c", 9), ("b", 12)]), Some(9));
    }

    #[test]
    fn quorum_waits_for_any_n() {
        let p = policy("ANY 2 (a, b, c)");
        assert_eq!(p.replicated_offset([("a", 5), ("b", 9), ("c", 7)]), Some(7));
        assert_eq!(p.replicated_offset([("a", 5)]), None);
        assert_eq!(policy("ANY 1 (*)").replicated_offset([("Whoever", 3)]), Some(3));
    }
}
