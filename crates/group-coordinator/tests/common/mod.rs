//! A test harness around `CoordinatorCore`: a manual clock, tokens, and the answers and
//! membership events the core produced, so each test reads as a sequence of client actions.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use group_coordinator::consumer_protocol::{encode_assignment, encode_subscription};
use group_coordinator::{
    ClientInfo, CoordinatorCore, GroupConfig, MembershipEvent, Output, Token, TopicMetadata,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

pub const GROUP: &str = "g";
pub const SESSION_MS: i32 = 10_000;
pub const REBALANCE_MS: i32 = 30_000;

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

pub fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

pub fn topic(name: &str, id: u128, partitions: i32) -> TopicMetadata {
    TopicMetadata {
        name: name.parse().unwrap(),
        topic_id: uuid::Uuid::from_u128(id),
        partitions,
    }
}

pub struct Harness {
    pub core: CoordinatorCore,
    pub now: u64,
    next_token: Token,
    pub joins: BTreeMap<Token, JoinGroupResponse>,
    pub syncs: BTreeMap<Token, SyncGroupResponse>,
    pub events: Vec<MembershipEvent>,
    /// `group/topic-partition` of every expired offset.
    pub expired: Vec<String>,
    /// Every group the periodic cleanup forgot (its metadata gets a tombstone).
    pub expired_groups: Vec<String>,
    /// Group metadata the core asked to store, in order.
    pub stored: Vec<(String, group_coordinator::GroupMetadataSnapshot)>,
}

impl Harness {
    pub fn new(config: GroupConfig) -> Self {
        Harness {
            core: CoordinatorCore::new(config),
            now: 1_000_000,
            next_token: 0,
            joins: BTreeMap::new(),
            syncs: BTreeMap::new(),
            events: Vec::new(),
            expired: Vec::new(),
            expired_groups: Vec::new(),
            stored: Vec::new(),
        }
    }

    pub fn client(&self) -> ClientInfo {
        ClientInfo {
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    /// Gathers what the core produced (call after using `core` directly).
    pub fn collect(&mut self) {
        for output in self.core.take_outputs() {
            match output {
                Output::JoinGroup { token, response } => {
                    assert!(
                        self.joins.insert(token, response).is_none(),
                        "answered twice"
                    );
                }
                Output::SyncGroup { token, response } => {
                    assert!(
                        self.syncs.insert(token, response).is_none(),
                        "answered twice"
                    );
                }
                Output::Membership(event) => self.events.push(event),
                Output::GroupMetadata { group_id, value } => self.stored.push((group_id, value)),
                Output::OffsetsExpired {
                    group_id,
                    partitions,
                } => {
                    self.expired
                        .extend(partitions.into_iter().map(|tp| format!("{group_id}/{tp}")));
                }
                Output::ConsumerGroupRecords { .. } => {}
                Output::GroupExpired {
                    group_id,
                    partitions,
                } => {
                    self.expired
                        .extend(partitions.into_iter().map(|tp| format!("{group_id}/{tp}")));
                    self.expired_groups.push(group_id);
                }
            }
        }
    }

    /// Moves the clock and fires due timers.
    pub fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.core.tick(self.now);
        self.collect();
    }

    pub fn join_request(
        member_id: &str,
        instance: Option<&str>,
        topics: &[&str],
    ) -> JoinGroupRequest {
        let topics: BTreeSet<String> = topics.iter().map(|t| t.to_string()).collect();
        JoinGroupRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_session_timeout_ms(SESSION_MS)
            .with_rebalance_timeout_ms(REBALANCE_MS)
            .with_member_id(s(member_id))
            .with_group_instance_id(instance.map(s))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(encode_subscription(&topics))])
    }

    pub fn join_with(&mut self, request: JoinGroupRequest, version: i16) -> Token {
        self.next_token += 1;
        let token = self.next_token;
        let client = self.client();
        self.core
            .join_group(self.now, token, version, &request, &client);
        self.collect();
        token
    }

    pub fn join(&mut self, member_id: &str, topics: &[&str]) -> Token {
        self.join_with(Self::join_request(member_id, None, topics), 7)
    }

    /// A dynamic member's full v4+ entry: MEMBER_ID_REQUIRED, then the rejoin (parked).
    pub fn new_member(&mut self, topics: &[&str]) -> (String, Token) {
        let first = self.join("", topics);
        let answer = self.joins.remove(&first).expect("answered at once");
        assert_eq!(answer.error_code, 79, "MEMBER_ID_REQUIRED");
        let member_id = answer.member_id.as_str().to_owned();
        let token = self.join(&member_id, topics);
        (member_id, token)
    }

    pub fn join_answer(&mut self, token: Token) -> Option<JoinGroupResponse> {
        self.joins.remove(&token)
    }

    pub fn sync(
        &mut self,
        member_id: &str,
        generation: i32,
        assignments: &[(&str, BTreeMap<String, Vec<i32>>)],
    ) -> Token {
        self.next_token += 1;
        let token = self.next_token;
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_generation_id(generation)
            .with_member_id(s(member_id))
            .with_assignments(
                assignments
                    .iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(s(m))
                            .with_assignment(encode_assignment(a))
                    })
                    .collect(),
            );
        self.core.sync_group(self.now, token, 5, &request);
        self.collect();
        token
    }

    pub fn sync_answer(&mut self, token: Token) -> Option<SyncGroupResponse> {
        self.syncs.remove(&token)
    }

    pub fn heartbeat(&mut self, member_id: &str, generation: i32) -> i16 {
        self.heartbeat_static(member_id, None, generation)
    }

    pub fn heartbeat_static(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> i16 {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_generation_id(generation)
            .with_member_id(s(member_id))
            .with_group_instance_id(instance.map(s));
        let response = self.core.heartbeat(self.now, &request);
        self.collect();
        response.error_code
    }

    pub fn state(&self) -> String {
        self.core
            .group_states()
            .get(GROUP)
            .map_or("none".to_owned(), |(_, state)| state.clone())
    }
}

/// Decodes a SyncGroup assignment into `topic[p,p]` text.
pub fn render_assignment(bytes: &Bytes) -> String {
    let parts = group_coordinator::consumer_protocol::assigned_partitions(bytes)
        .expect("consumer assignment");
    parts
        .iter()
        .map(|(t, ps)| {
            let ps: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
            format!("{t}[{}]", ps.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn parts(topic: &str, ps: &[i32]) -> BTreeMap<String, Vec<i32>> {
    [(topic.to_owned(), ps.to_vec())].into()
}
