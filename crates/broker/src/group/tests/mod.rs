//! Unit tests of the coordinator with a hand-advanced clock. `H` keeps the
//! coordinator, the time and every effect not yet looked at.

mod admin;
mod consumer_protocol;
mod deadlines;
mod join;
mod offsets;
mod rebalance;
mod static_members;
mod sync_heartbeat;

use bytes::{BufMut, Bytes, BytesMut};
use kafgres_wire::error_code;

use super::types::*;
use super::{GroupConfig, GroupCoordinator};

pub(super) const GROUP: &str = "g";
pub(super) const SESSION_MS: i32 = 10_000;
pub(super) const REBALANCE_MS: i32 = 60_000;
pub(super) const DELAY_MS: i64 = 3_000;

/// A ConsumerProtocolSubscription v0: version, topics, null user data.
pub(super) fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    b.freeze()
}

pub(super) fn protocol(name: &str, topics: &[&str]) -> Protocol {
    Protocol { name: name.to_string(), metadata: subscription(topics) }
}

pub(super) fn join_request(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        api_version: 5,
        group_id: GROUP.to_string(),
        member_id: member_id.to_string(),
        group_instance_id: None,
        protocol_type: "consumer".to_string(),
        protocols: vec![protocol("range", &["t"])],
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
    }
}

pub(super) fn static_join_request(instance_id: &str) -> JoinGroupRequest {
    JoinGroupRequest { group_instance_id: Some(instance_id.to_string()), ..join_request("") }
}

pub(super) fn sync_request(member_id: &str, generation_id: i32, assignments: &[(&str, &str)]) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: GROUP.to_string(),
        generation_id,
        member_id: member_id.to_string(),
        group_instance_id: None,
        protocol_type: Some("consumer".to_string()),
        protocol_name: Some("range".to_string()),
        assignments: assignments.iter().map(|(m, a)| (m.to_string(), Bytes::copy_from_slice(a.as_bytes()))).collect(),
    }
}

pub(super) fn unwrap_now<T: std::fmt::Debug>(reply: Reply<T>) -> T {
    match reply {
        Reply::Now(response) => response,
        Reply::Parked(ticket) => panic!("expected an answer, got parked ticket {ticket}"),
    }
}

pub(super) fn unwrap_parked<T: std::fmt::Debug>(reply: Reply<T>) -> Ticket {
    match reply {
        Reply::Parked(ticket) => ticket,
        Reply::Now(response) => panic!("expected a parked request, got {response:?}"),
    }
}

/// The coordinator under test, its clock and the effects not yet examined.
pub(super) struct H {
    pub c: GroupCoordinator,
    pub now: i64,
    pub effects: Vec<Effect>,
}

impl H {
    pub fn new() -> H {
        H::with_config(GroupConfig::default())
    }

    pub fn with_config(config: GroupConfig) -> H {
        H { c: GroupCoordinator::with_sequential_member_ids(config), now: 1_000_000, effects: Vec::new() }
    }

    pub fn state(&self) -> Option<GroupState> {
        self.c.group_state(GROUP)
    }

    /// Moves the clock and runs whatever fell due.
    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
        let effects = self.c.on_deadline(self.now);
        self.effects.extend(effects);
    }

    pub fn join(&mut self, request: JoinGroupRequest) -> Reply<JoinGroupResponse> {
        let (reply, effects) = self.c.join_group(self.now, request);
        self.effects.extend(effects);
        reply
    }

    pub fn sync(&mut self, request: SyncGroupRequest) -> Reply<SyncGroupResponse> {
        let (reply, effects) = self.c.sync_group(self.now, request);
        self.effects.extend(effects);
        reply
    }

    pub fn heartbeat(&mut self, member_id: &str, generation_id: i32) -> i16 {
        self.heartbeat_static(member_id, None, generation_id)
    }

    pub fn heartbeat_static(&mut self, member_id: &str, instance_id: Option<&str>, generation_id: i32) -> i16 {
        let request = HeartbeatRequest {
            group_id: GROUP.to_string(),
            generation_id,
            member_id: member_id.to_string(),
            group_instance_id: instance_id.map(str::to_string),
        };
        let (code, effects) = self.c.heartbeat(self.now, request);
        self.effects.extend(effects);
        code
    }

    pub fn leave(&mut self, members: &[(&str, Option<&str>)]) -> LeaveGroupResponse {
        let request = LeaveGroupRequest {
            group_id: GROUP.to_string(),
            members: members
                .iter()
                .map(|(m, i)| LeavingMember { member_id: m.to_string(), group_instance_id: i.map(str::to_string) })
                .collect(),
        };
        let (response, effects) = self.c.leave_group(self.now, request);
        self.effects.extend(effects);
        response
    }

    /// The answer a parked JoinGroup received, taken out of the effects.
    pub fn join_answer(&mut self, ticket: Ticket) -> Option<JoinGroupResponse> {
        let index =
            self.effects.iter().position(|e| matches!(e, Effect::CompleteJoin { ticket: t, .. } if *t == ticket))?;
        match self.effects.remove(index) {
            Effect::CompleteJoin { response, .. } => Some(response),
            _ => None,
        }
    }

    /// The answer a parked SyncGroup received, taken out of the effects.
    pub fn sync_answer(&mut self, ticket: Ticket) -> Option<SyncGroupResponse> {
        let index =
            self.effects.iter().position(|e| matches!(e, Effect::CompleteSync { ticket: t, .. } if *t == ticket))?;
        match self.effects.remove(index) {
            Effect::CompleteSync { response, .. } => Some(response),
            _ => None,
        }
    }

    /// Advances the clock by the initial delay until every ticket is answered.
    pub fn await_joins(&mut self, tickets: &[Ticket]) -> Vec<JoinGroupResponse> {
        for _ in 0..20 {
            let answered = tickets.iter().all(|&t| {
                self.effects.iter().any(|e| matches!(e, Effect::CompleteJoin { ticket, .. } if *ticket == t))
            });
            if answered {
                return tickets.iter().map(|&t| self.join_answer(t).expect("answered")).collect();
            }
            self.advance(DELAY_MS);
        }
        panic!("joins {tickets:?} never answered; effects: {:?}", self.effects);
    }

    /// A dynamic member's first JoinGroup (v5): MEMBER_ID_REQUIRED, then the
    /// rejoin with the id. Returns the id and the rejoin's reply.
    pub fn join_new(&mut self, request: JoinGroupRequest) -> (String, Reply<JoinGroupResponse>) {
        let first = unwrap_now(self.join(request.clone()));
        assert_eq!(first.error_code, error_code::MEMBER_ID_REQUIRED);
        let member_id = first.member_id.clone();
        let reply = self.join(JoinGroupRequest { member_id: member_id.clone(), ..request });
        (member_id, reply)
    }

    /// Forms a Stable group of `n` dynamic members (the first leads), each
    /// assigned "a<i>". Returns the member ids and the generation.
    pub fn stable_group(&mut self, n: usize) -> (Vec<String>, i32) {
        let mut members = Vec::new();
        let mut tickets = Vec::new();
        for _ in 0..n {
            let (member_id, reply) = self.join_new(join_request(""));
            members.push(member_id);
            tickets.push(unwrap_parked(reply));
        }
        let answers = self.await_joins(&tickets);
        let generation_id = answers[0].generation_id;
        let assignments: Vec<(String, String)> =
            members.iter().enumerate().map(|(i, m)| (m.clone(), format!("a{i}"))).collect();
        let refs: Vec<(&str, &str)> = assignments.iter().map(|(m, a)| (m.as_str(), a.as_str())).collect();
        let leader_sync = unwrap_now(self.sync(sync_request(&members[0], generation_id, &refs)));
        assert_eq!(leader_sync.error_code, error_code::NONE);
        for member_id in &members[1..] {
            let answer = unwrap_now(self.sync(sync_request(member_id, generation_id, &[])));
            assert_eq!(answer.error_code, error_code::NONE);
        }
        assert_eq!(self.state(), Some(GroupState::Stable));
        (members, generation_id)
    }
}
