//! The ACL authorizer (issue 13): CreateAcls/DescribeAcls/DeleteAcls over a SASL listener,
//! ACLs stored in Kafka's znodes with Kafka's JSON and change notifications, ACL znodes
//! written by hand (as Kafka's tools write them) honoured, and the checks the handlers make.

use crate::common;

use std::time::{Duration, Instant};

use broker::MetadataStore;
use client::{Connection, ConnectionOptions, SaslCredentials};
use common::*;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const NONE: i16 = 0;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;

// Codes of Kafka's ResourceType, PatternType, AclOperation, AclPermissionType.
const ANY: i8 = 1;
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const ALLOW: i8 = 3;

fn overrides() -> Vec<String> {
    vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SASL://127.0.0.1:0".to_string(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT".into(),
        "inter.broker.listener.name=PLAINTEXT".into(),
        "listener.name.sasl.sasl.enabled.mechanisms=PLAIN".into(),
        r#"listener.name.sasl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_admin="admin-secret";"#.into(),
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer".into(),
        // The brokers' own connections are PLAINTEXT (User:ANONYMOUS), as with Kafka.
        "super.users=User:admin;User:ANONYMOUS".into(),
    ]
}

async fn connect(addr: std::net::SocketAddr, user: &str) -> Connection {
    let options = ConnectionOptions {
        sasl: Some(SaslCredentials {
            mechanism: "PLAIN".into(),
            username: user.into(),
            password: format!("{user}-secret"),
        }),
        ..ConnectionOptions::default()
    };
    Connection::connect_with(&addr.to_string(), options)
        .await
        .unwrap()
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn creation(rt: i8, name: &str, pt: i8, principal: &str, op: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pt)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(ALLOW)
}

fn describe_filter(rt: i8, name: Option<&str>, pt: i8) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(rt)
        .with_resource_name_filter(name.map(s))
        .with_pattern_type_filter(pt)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

/// (type, name, pattern type, principal, operation) of every binding DescribeAcls answers.
fn bindings(response: &DescribeAclsResponse) -> Vec<(i8, String, i8, String, i8)> {
    let mut out = Vec::new();
    for r in &response.resources {
        for a in &r.acls {
            out.push((
                r.resource_type,
                r.resource_name.to_string(),
                r.pattern_type,
                a.principal.to_string(),
                a.operation,
            ));
        }
    }
    out.sort();
    out
}

async fn store_client(store: &MetadataStore) -> znodes::KafkaZkClient {
    let MetadataStore::Embedded(embedded) = store else {
        unreachable!("the tests use the embedded store")
    };
    let (client, events) = embedded.connect(metastore::SessionOptions::default());
    znodes::KafkaZkClient::new(client, events)
}

async fn get(zk: &znodes::KafkaZkClient, path: &str) -> Option<String> {
    zk.client()
        .get_data(path, false)
        .await
        .ok()
        .map(|(d, _)| String::from_utf8(d).unwrap())
}

#[tokio::test]
async fn acl_apis_store_kafkas_znodes_and_refuse_without_cluster_alter() {
    let dir = tempfile::tempdir().unwrap();
    let all = overrides();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let (broker, store) = start_broker_and_store(dir.path(), &all).await;
    let zk = store_client(&store).await;
    let sasl = broker.listener_addr("SASL").unwrap();
    let mut admin = connect(sasl, "admin").await;
    let mut alice = connect(sasl, "alice").await;

    // alice has no ALTER on the cluster: refused, nothing stored.
    let refused = alice
        .send(CreateAclsRequest::default().with_creations(vec![creation(
            TOPIC,
            "a",
            LITERAL,
            "User:alice",
            WRITE,
        )]))
        .await
        .unwrap();
    assert_eq!(refused.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(get(&zk, "/kafka-acl/Topic/a").await, None);
    let refused = alice.send(describe_filter(ANY, None, ANY)).await.unwrap();
    assert_eq!(refused.error_code, CLUSTER_AUTHORIZATION_FAILED);

    // The super user creates; an invalid binding fails alone.
    let created = admin
        .send(CreateAclsRequest::default().with_creations(vec![
            creation(TOPIC, "a", LITERAL, "User:alice", READ),
            creation(TOPIC, "pay", PREFIXED, "User:alice", WRITE),
            creation(CLUSTER, "not-the-cluster", LITERAL, "User:alice", READ),
            creation(TOPIC, "b", LITERAL, "alice-without-type", READ),
        ]))
        .await
        .unwrap();
    let codes: Vec<i16> = created.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![NONE, NONE, INVALID_REQUEST, INVALID_REQUEST]);
    assert_eq!(
        get(&zk, "/kafka-acl/Topic/a").await.unwrap(),
        r#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}"#
    );
    assert_eq!(
        get(&zk, "/kafka-acl-extended/prefixed/Topic/pay")
            .await
            .unwrap(),
        r#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Write","host":"*"}]}"#
    );
    assert_eq!(get(&zk, "/kafka-acl/Cluster/not-the-cluster").await, None);
    assert_eq!(get(&zk, "/kafka-acl/Topic/b").await, None);
    let literal_changes = zk
        .client()
        .get_children("/kafka-acl-changes", false)
        .await
        .unwrap();
    assert_eq!(literal_changes.len(), 1, "{literal_changes:?}");
    assert_eq!(
        get(&zk, &format!("/kafka-acl-changes/{}", literal_changes[0]))
            .await
            .unwrap(),
        "TOPIC:a"
    );
    let extended = zk
        .client()
        .get_children("/kafka-acl-extended-changes", false)
        .await
        .unwrap();
    assert_eq!(
        get(&zk, &format!("/kafka-acl-extended-changes/{}", extended[0]))
            .await
            .unwrap(),
        r#"{"version":1,"resourceType":"TOPIC","name":"pay","patternType":"PREFIXED"}"#
    );

    // Filters: MATCH finds the prefixed pattern for a name it covers; LITERAL does not.
    let matched = admin
        .send(describe_filter(TOPIC, Some("payments"), MATCH))
        .await
        .unwrap();
    assert_eq!(
        bindings(&matched),
        vec![(TOPIC, "pay".into(), PREFIXED, "User:alice".into(), WRITE)]
    );
    let literal = admin
        .send(describe_filter(TOPIC, Some("payments"), LITERAL))
        .await
        .unwrap();
    assert!(bindings(&literal).is_empty());

    // An ACL written into the store by hand, as Kafka's tools write it, with its
    // notification: the broker picks it up.
    zk.client()
        .create_recursive(
            "/kafka-acl/Group/g",
            br#"{"version": 1, "acls": [ { "host":"*", "permissionType": "Allow","operation": "Read","principal": "User:alice"}]}"#,
            metastore::CreateMode::Persistent,
        )
        .await
        .unwrap();
    zk.client()
        .create(
            "/kafka-acl-changes/acl_changes_",
            b"Group:g",
            metastore::CreateMode::PersistentSequential,
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let groups = admin.send(describe_filter(GROUP, None, ANY)).await.unwrap();
        if bindings(&groups) == vec![(GROUP, "g".into(), LITERAL, "User:alice".into(), READ)] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "hand-written ACL not picked up: {groups:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // DeleteAcls with an ANY pattern filter on topic a: the literal one goes, znode too.
    let deleted = admin
        .send(
            DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                .with_resource_type_filter(TOPIC)
                .with_resource_name_filter(Some(s("a")))
                .with_pattern_type_filter(ANY)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(ANY)
                .with_permission_type(ANY)]),
        )
        .await
        .unwrap();
    assert_eq!(deleted.filter_results[0].error_code, NONE);
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1);
    assert_eq!(get(&zk, "/kafka-acl/Topic/a").await, None);
    // alice may not delete.
    let refused = alice
        .send(
            DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                .with_resource_type_filter(ANY)
                .with_pattern_type_filter(ANY)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(ANY)
                .with_permission_type(ANY)]),
        )
        .await
        .unwrap();
    assert_eq!(
        refused.filter_results[0].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert!(get(&zk, "/kafka-acl-extended/prefixed/Topic/pay")
        .await
        .is_some());
    let everything = admin.send(describe_filter(ANY, None, ANY)).await.unwrap();
    assert_eq!(bindings(&everything).len(), 2, "{everything:?}");
    zk.close().await;
    broker.shutdown().await;
}

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const DENY: i8 = 2;
const CREATE: i8 = 5;

fn produce_request(topic: &str) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(one_record_batch(10, b'x'))),
            ])])
}

fn fetch_request(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}

async fn produce_code(conn: &mut Connection, topic: &str) -> i16 {
    let r = conn.send_version(produce_request(topic), 9).await.unwrap();
    r.responses[0].partition_responses[0].error_code
}

async fn fetch_code(conn: &mut Connection, topic: &str) -> (i16, usize) {
    let r = conn.send_version(fetch_request(topic), 12).await.unwrap();
    let p = &r.responses[0].partitions[0];
    (p.error_code, p.records.as_ref().map_or(0, |b| b.len()))
}

async fn create_topic(conn: &mut Connection, topic: &str) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    // NOT_CONTROLLER until this broker has won the election.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let code = conn.send(request.clone()).await.unwrap().topics[0].error_code;
        if code != 41 || Instant::now() > deadline {
            return code;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn add_acls(conn: &mut Connection, creations: Vec<AclCreation>) {
    let r = conn
        .send(CreateAclsRequest::default().with_creations(creations))
        .await
        .unwrap();
    for result in r.results {
        assert_eq!(result.error_code, NONE, "{:?}", result.error_message);
    }
}

fn metadata_names(r: &MetadataResponse) -> Vec<(String, i16)> {
    let mut out: Vec<(String, i16)> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn handlers_check_kafkas_operations() {
    let dir = tempfile::tempdir().unwrap();
    let all = overrides();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let broker = start_broker(dir.path(), &all).await;
    let sasl = broker.listener_addr("SASL").unwrap();
    let mut admin = connect(sasl, "admin").await;
    let mut alice = connect(sasl, "alice").await;
    for topic in ["a", "b", "payments"] {
        assert_eq!(create_topic(&mut admin, topic).await, NONE);
    }
    // Wait until a takes writes, then write one record as the super user.
    let deadline = Instant::now() + Duration::from_secs(30);
    while produce_code(&mut admin, "a").await != NONE {
        assert!(Instant::now() < deadline, "a never got a leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // No ACL for alice at all: nothing is allowed (allow.everyone.if.no.acl.found=false).
    assert_eq!(
        fetch_code(&mut alice, "a").await.0,
        TOPIC_AUTHORIZATION_FAILED
    );
    let everything = alice
        .send(MetadataRequest::default().with_topics(None))
        .await
        .unwrap();
    assert!(metadata_names(&everything).is_empty(), "{everything:?}");

    add_acls(
        &mut admin,
        vec![
            creation(TOPIC, "a", LITERAL, "User:alice", READ),
            creation(GROUP, "g", LITERAL, "User:alice", READ),
            creation(TOPIC, "pay", PREFIXED, "User:alice", WRITE),
        ],
    )
    .await;
    // READ on a: reads it (DESCRIBE is implied: Metadata lists it), cannot write it.
    let (code, bytes) = fetch_code(&mut alice, "a").await;
    assert_eq!(code, NONE);
    assert!(bytes > 0, "the record written by admin");
    assert_eq!(
        produce_code(&mut alice, "a").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    let everything = alice
        .send(MetadataRequest::default().with_topics(None))
        .await
        .unwrap();
    assert_eq!(
        metadata_names(&everything),
        vec![("a".to_string(), NONE), ("payments".to_string(), NONE)],
        "b is hidden; payments is describable through the prefixed WRITE"
    );
    // KIP-430: alice may READ and DESCRIBE a (bits 3 and 8), and nothing on the cluster.
    let ops = alice
        .send_version(
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(name("a")))]))
                .with_include_topic_authorized_operations(true)
                .with_include_cluster_authorized_operations(true),
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        ops.topics[0].topic_authorized_operations,
        (1 << 3) | (1 << 8)
    );
    assert_eq!(ops.cluster_authorized_operations, 0);
    let named = alice
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("b"))),
        ])))
        .await
        .unwrap();
    assert_eq!(
        metadata_names(&named),
        vec![("b".to_string(), TOPIC_AUTHORIZATION_FAILED)]
    );
    // Prefixed WRITE: payments takes writes, b does not.
    assert_eq!(produce_code(&mut alice, "payments").await, NONE);
    assert_eq!(
        produce_code(&mut alice, "b").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    // No CREATE anywhere: CreateTopics and auto-creation are refused, nothing is created.
    assert_eq!(
        create_topic(&mut alice, "c").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    let auto = alice
        .send(
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(name("pay-new")))]))
                .with_allow_auto_topic_creation(true),
        )
        .await
        .unwrap();
    assert_eq!(
        metadata_names(&auto),
        vec![("pay-new".to_string(), TOPIC_AUTHORIZATION_FAILED)]
    );
    let listed = admin
        .send(MetadataRequest::default().with_topics(None))
        .await
        .unwrap();
    assert_eq!(
        metadata_names(&listed)
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        vec!["a", "b", "payments"]
    );
    // Groups: READ on g commits offsets of a; group h is refused; topic b in g is refused.
    let commit = |group: &str, topic: &str| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(1),
                    ]),
            ])
    };
    let codes = |r: OffsetCommitResponse| -> Vec<i16> {
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect()
    };
    // The first FindCoordinator creates the offsets topic: COORDINATOR_NOT_AVAILABLE until it
    // has a leader (clients retry it), as Kafka.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let fc = alice
            .send_version(FindCoordinatorRequest::default().with_key(s("g")), 3)
            .await
            .unwrap();
        if fc.error_code == NONE {
            break;
        }
        assert_eq!(fc.error_code, 15, "{fc:?}");
        assert!(Instant::now() < deadline, "no coordinator for g: {fc:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fc = alice
        .send_version(FindCoordinatorRequest::default().with_key(s("h")), 3)
        .await
        .unwrap();
    assert_eq!(fc.error_code, GROUP_AUTHORIZATION_FAILED);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = codes(alice.send_version(commit("g", "a"), 7).await.unwrap());
        if got == vec![NONE] {
            break;
        }
        // The coordinator may still be loading.
        assert!(Instant::now() < deadline, "commit to g: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        codes(alice.send_version(commit("h", "a"), 7).await.unwrap()),
        vec![GROUP_AUTHORIZATION_FAILED]
    );
    assert_eq!(
        codes(alice.send_version(commit("g", "b"), 7).await.unwrap()),
        vec![TOPIC_AUTHORIZATION_FAILED]
    );
    // DENY wins over ALLOW, at once on this broker.
    add_acls(
        &mut admin,
        vec![creation(TOPIC, "a", LITERAL, "User:alice", READ).with_permission_type(DENY)],
    )
    .await;
    assert_eq!(
        fetch_code(&mut alice, "a").await.0,
        TOPIC_AUTHORIZATION_FAILED
    );
    // The control plane needs CLUSTER_ACTION: refused before anything else.
    let forged = alice
        .send(UpdateMetadataRequest::default().with_controller_epoch(1_000))
        .await
        .unwrap();
    assert_eq!(forged.error_code, CLUSTER_AUTHORIZATION_FAILED);
    // CREATE on the cluster lets alice create any topic.
    add_acls(
        &mut admin,
        vec![creation(
            CLUSTER,
            "kafka-cluster",
            LITERAL,
            "User:alice",
            CREATE,
        )],
    )
    .await;
    assert_eq!(create_topic(&mut alice, "c").await, NONE);
    broker.shutdown().await;
}

/// Two brokers on one store (a dev-cluster): followers replicate under the authorizer (their
/// PLAINTEXT principal is a super user), and an ACL created through one broker takes effect
/// on the other through the change notification.
#[tokio::test]
async fn acl_changes_reach_every_broker_of_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1, 2] {
        let mut all = overrides();
        all.push(format!("broker.id={id}"));
        all.push(format!(
            "log.dirs={}",
            dir.path().join(format!("broker-{id}")).display()
        ));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        brokers.push(start_on(store.clone(), dir.path(), &all).await);
    }
    let mut admin1 = connect(brokers[0].listener_addr("SASL").unwrap(), "admin").await;
    let mut alice2 = connect(brokers[1].listener_addr("SASL").unwrap(), "alice").await;
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name("shared"))
            .with_num_partitions(1)
            .with_replication_factor(2)]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Any broker may answer NOT_CONTROLLER; ask both.
        let mut created = false;
        for b in &brokers {
            let mut c = connect(b.listener_addr("SASL").unwrap(), "admin").await;
            let code = c.send(request.clone()).await.unwrap().topics[0].error_code;
            created |= code == NONE || code == 36;
        }
        if created {
            break;
        }
        assert!(Instant::now() < deadline, "topic never created");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Both replicas in sync: the follower's fetches pass CLUSTER_ACTION.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let md = admin1
            .send(MetadataRequest::default().with_topics(None))
            .await
            .unwrap();
        let isr = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "shared"))
            .and_then(|t| t.partitions.first())
            .map_or(0, |p| p.isr_nodes.len());
        if isr == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follower never joined the ISR: {md:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hidden = alice2
        .send(MetadataRequest::default().with_topics(None))
        .await
        .unwrap();
    assert!(metadata_names(&hidden).is_empty(), "{hidden:?}");
    add_acls(
        &mut admin1,
        vec![creation(TOPIC, "shared", LITERAL, "User:alice", READ)],
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let md = alice2
            .send(MetadataRequest::default().with_topics(None))
            .await
            .unwrap();
        if metadata_names(&md) == vec![("shared".to_string(), NONE)] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 2 never applied the ACL: {md:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for b in brokers {
        b.shutdown().await;
    }
}
