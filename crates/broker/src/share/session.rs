//! Share sessions (KIP-932): like fetch sessions, one per (group, member),
//! holding the partitions the member fetches so that later requests only
//! name what changes. Epoch 0 opens a session (replacing an older one of the
//! member), -1 closes it, anything else must be the session's next epoch.
//! Pure: no time, no I/O.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;

use kafgres_wire::error_code;
use uuid::Uuid;

pub const INITIAL_EPOCH: i32 = 0;
/// Partitions one share session may hold (a limit on what a client can make
/// the broker keep; Kafka has none): past it, INVALID_REQUEST.
pub const SESSION_PARTITIONS_MAX: usize = 20_000;
pub const FINAL_EPOCH: i32 = -1;

/// A partition of a session: (topic id, partition index).
pub type SessionPartition = (Uuid, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSession {
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    pub partitions: BTreeSet<SessionPartition>,
    /// The connection that opened it (its peer address): when that
    /// connection closes, the session goes, as Kafka evicts it.
    pub connection: Option<SocketAddr>,
}

/// Which API is using the session: ShareAcknowledge may not open one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionUse {
    Fetch,
    Acknowledge,
}

/// What a ShareFetch or ShareAcknowledge asks of its member's session.
#[derive(Debug, Clone, Copy)]
pub struct SessionRequest<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    pub epoch: i32,
    /// Partitions to fetch from now on (a ShareFetch's topics).
    pub added: &'a [SessionPartition],
    pub forgotten: &'a [SessionPartition],
    pub using: SessionUse,
    /// The connection the request came on.
    pub connection: Option<SocketAddr>,
}

/// What a request did to its member's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionOutcome {
    /// The session is open; fetch from these partitions.
    Open { partitions: BTreeSet<SessionPartition>, replaced_an_older_one: bool },
    /// The session was closed by this request (epoch -1).
    Closed,
}

#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: HashMap<(String, String), ShareSession>,
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSessions {
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Applies a request's epoch and partition changes to the member's
    /// session. Errors are Kafka's top-level codes.
    pub fn update(&mut self, r: &SessionRequest<'_>, sessions_max: usize) -> Result<SessionOutcome, i16> {
        let SessionRequest { group_id, member_id, epoch, added, forgotten, using, connection } = *r;
        let key = (group_id.to_owned(), member_id.to_owned());
        match epoch {
            INITIAL_EPOCH => {
                if using == SessionUse::Acknowledge {
                    return Err(error_code::INVALID_SHARE_SESSION_EPOCH);
                }
                let replaced = self.sessions.contains_key(&key);
                if !replaced && self.sessions.len() >= sessions_max {
                    return Err(error_code::SHARE_SESSION_LIMIT_REACHED);
                }
                let partitions: BTreeSet<SessionPartition> = added.iter().copied().collect();
                if partitions.len() > SESSION_PARTITIONS_MAX {
                    return Err(error_code::INVALID_REQUEST);
                }
                let session =
                    ShareSession { next_epoch: next(INITIAL_EPOCH), partitions: partitions.clone(), connection };
                self.sessions.insert(key, session);
                Ok(SessionOutcome::Open { partitions, replaced_an_older_one: replaced })
            }
            FINAL_EPOCH => {
                if self.sessions.remove(&key).is_none() {
                    return Err(error_code::SHARE_SESSION_NOT_FOUND);
                }
                Ok(SessionOutcome::Closed)
            }
            _ => {
                let session = self.sessions.get_mut(&key).ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
                if session.next_epoch != epoch {
                    return Err(error_code::INVALID_SHARE_SESSION_EPOCH);
                }
                let mut partitions = session.partitions.clone();
                partitions.extend(added.iter().copied());
                for p in forgotten {
                    partitions.remove(p);
                }
                if partitions.len() > SESSION_PARTITIONS_MAX {
                    return Err(error_code::INVALID_REQUEST);
                }
                session.next_epoch = next(epoch);
                session.partitions = partitions;
                Ok(SessionOutcome::Open { partitions: session.partitions.clone(), replaced_an_older_one: false })
            }
        }
    }

    /// Drops the sessions a closed connection opened; returns their (group, member).
    pub fn remove_connection(&mut self, connection: SocketAddr) -> Vec<(String, String)> {
        let gone: Vec<(String, String)> =
            self.sessions.iter().filter(|(_, s)| s.connection == Some(connection)).map(|(k, _)| k.clone()).collect();
        for key in &gone {
            self.sessions.remove(key);
        }
        gone
    }

    /// Drops every session of a deleted group.
    pub fn remove_group(&mut self, group_id: &str) {
        self.sessions.retain(|(group, _), _| group != group_id);
    }

    /// Drops every session of a member that left its group.
    pub fn remove_member(&mut self, group_id: &str, member_id: &str) -> bool {
        self.sessions.remove(&(group_id.to_owned(), member_id.to_owned())).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        member: &'a str,
        epoch: i32,
        added: &'a [SessionPartition],
        forgotten: &'a [SessionPartition],
        using: SessionUse,
    ) -> SessionRequest<'a> {
        SessionRequest { group_id: "g", member_id: member, epoch, added, forgotten, using, connection: None }
    }

    const P: SessionPartition = (Uuid::nil(), 0);
    const Q: SessionPartition = (Uuid::nil(), 1);

    #[test]
    fn a_session_opens_advances_and_closes() {
        let mut s = ShareSessions::default();
        let opened = s.update(&request("m", 0, &[P], &[], SessionUse::Fetch), 10).expect("open");
        assert!(matches!(opened, SessionOutcome::Open { ref partitions, .. } if partitions.len() == 1));
        let next = s.update(&request("m", 1, &[Q], &[P], SessionUse::Fetch), 10).expect("epoch 1");
        assert!(matches!(next, SessionOutcome::Open { ref partitions, .. } if *partitions == [Q].into()));
        assert_eq!(
            s.update(&request("m", 1, &[], &[], SessionUse::Fetch), 10),
            Err(error_code::INVALID_SHARE_SESSION_EPOCH)
        );
        assert_eq!(s.update(&request("m", 2, &[], &[], SessionUse::Acknowledge), 10).map(|_| ()), Ok(()));
        assert_eq!(s.update(&request("m", -1, &[], &[], SessionUse::Fetch), 10), Ok(SessionOutcome::Closed));
        assert_eq!(
            s.update(&request("m", 3, &[], &[], SessionUse::Fetch), 10),
            Err(error_code::SHARE_SESSION_NOT_FOUND)
        );
        assert_eq!(
            s.update(&request("m", -1, &[], &[], SessionUse::Fetch), 10),
            Err(error_code::SHARE_SESSION_NOT_FOUND)
        );
    }

    #[test]
    fn acknowledge_cannot_open_and_the_cache_is_bounded() {
        let mut s = ShareSessions::default();
        assert_eq!(
            s.update(&request("m", 0, &[], &[], SessionUse::Acknowledge), 10),
            Err(error_code::INVALID_SHARE_SESSION_EPOCH)
        );
        s.update(&request("a", 0, &[], &[], SessionUse::Fetch), 1).expect("first");
        assert_eq!(
            s.update(&request("b", 0, &[], &[], SessionUse::Fetch), 1),
            Err(error_code::SHARE_SESSION_LIMIT_REACHED)
        );
        // The member's own session is replaced, not counted twice.
        let again = s.update(&request("a", 0, &[], &[], SessionUse::Fetch), 1).expect("replace");
        assert!(matches!(again, SessionOutcome::Open { replaced_an_older_one: true, .. }));
    }
}
