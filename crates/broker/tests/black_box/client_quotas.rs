//! Issue 14: DescribeClientQuotas / AlterClientQuotas (KIP-546), the APIs `kafka-configs.sh
//! --bootstrap-server ... --entity-type users|clients` uses. A quota set through the API is
//! written where `kafka-configs.sh --zookeeper` writes it (`/config/clients/<c>`, Kafka's
//! JSON) with a change notification, and the broker enforces it at once; describe filters as
//! Kafka's ZooKeeper broker does (exact / default / any, strict); refusals are
//! INVALID_REQUEST with a message and write nothing.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use broker::MetadataStore;
use bytes::Bytes;
use client::Connection;
use common::*;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use znodes::zk_client::KafkaZkClient;

const INVALID_REQUEST: i16 = 42;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn entity(parts: &[(&str, Option<&str>)]) -> Vec<EntityData> {
    parts
        .iter()
        .map(|(t, n)| {
            EntityData::default()
                .with_entity_type(s(t))
                .with_entity_name(n.map(s))
        })
        .collect()
}

fn set(key: &str, value: f64) -> OpData {
    OpData::default().with_key(s(key)).with_value(value)
}

fn remove(key: &str) -> OpData {
    OpData::default().with_key(s(key)).with_remove(true)
}

async fn alter(
    conn: &mut Connection,
    entries: Vec<(Vec<EntityData>, Vec<OpData>)>,
    validate_only: bool,
) -> Vec<(i16, String)> {
    let request = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(
            entries
                .into_iter()
                .map(|(e, ops)| EntryData::default().with_entity(e).with_ops(ops))
                .collect(),
        );
    let response = conn.send(request).await.unwrap();
    response
        .entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_deref().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// (user, client id) → quotas of each entry describe returns.
type Described = BTreeMap<(Option<String>, Option<String>), BTreeMap<String, f64>>;

async fn describe(
    conn: &mut Connection,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<Described, (i16, String)> {
    let request = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            components
                .iter()
                .map(|(t, m, n)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(*m)
                        .with_match(n.map(s))
                })
                .collect(),
        );
    let response = conn.send(request).await.unwrap();
    if response.error_code != 0 {
        return Err((
            response.error_code,
            response.error_message.as_deref().unwrap_or("").to_owned(),
        ));
    }
    let mut out = Described::new();
    for entry in response.entries.unwrap_or_default() {
        let (mut user, mut client) = (None, None);
        for e in &entry.entity {
            let name = e.entity_name.as_deref().unwrap_or("<default>").to_owned();
            match e.entity_type.as_str() {
                "user" => user = Some(name),
                "client-id" => client = Some(name),
                other => panic!("entity type {other}"),
            }
        }
        let values = entry
            .values
            .iter()
            .map(|v| (v.key.to_string(), v.value))
            .collect();
        out.insert((user, client), values);
    }
    Ok(out)
}

fn key(user: Option<&str>, client: Option<&str>) -> (Option<String>, Option<String>) {
    (user.map(str::to_owned), client.map(str::to_owned))
}

/// One produce of `records` to `topic`-0; (error code, throttle_time_ms).
async fn produce(conn: &mut Connection, topic: &str, records: &Bytes) -> (i16, i32) {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records.clone())),
            ])]);
    let response = conn.send(request).await.unwrap();
    (
        response.responses[0].partition_responses[0].error_code,
        response.throttle_time_ms,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_client_quotas_through_the_admin_apis() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = ["quota.window.num=2", "quota.window.size.seconds=1"];
    let (broker, store) = start_broker_and_store(dir.path(), &overrides).await;
    eventually("controller", || broker.is_controller()).await;
    let addr = broker.local_addr().to_string();
    let mut admin = Connection::connect(&addr, "admin").await.unwrap();
    let MetadataStore::Embedded(embedded) = &store else {
        unreachable!("the tests' broker runs on the embedded store")
    };
    let (zk_client, events) = embedded.connect(Default::default());
    let zk = KafkaZkClient::new(zk_client, events);
    // A user whose node holds another config already (as SCRAM credentials would).
    zk.set_entity_config(
        "users/alice",
        &BTreeMap::from([("SCRAM-SHA-256".to_owned(), "[iterations=4096]".to_owned())]),
    )
    .await
    .unwrap();

    // Refusals: each INVALID_REQUEST with a message, nothing written.
    let refused = alter(
        &mut admin,
        vec![
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("controller_mutation_rate", 50.0)],
            ),
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("no_such_quota", 1.0)],
            ),
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("producer_byte_rate", 1.5)],
            ),
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("producer_byte_rate", 0.0)],
            ),
            (entity(&[]), vec![set("producer_byte_rate", 10.0)]),
            (
                entity(&[("ip", Some("127.0.0.1"))]),
                vec![set("connection_creation_rate", 10.0)],
            ),
            (
                entity(&[("group", Some("g"))]),
                vec![set("producer_byte_rate", 10.0)],
            ),
            (
                entity(&[("user", Some(""))]),
                vec![set("producer_byte_rate", 10.0)],
            ),
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("request_percentage", 0.0)],
            ),
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("request_percentage", f64::NAN)],
            ),
        ],
        false,
    )
    .await;
    for (i, (code, message)) in refused.iter().enumerate() {
        assert_eq!(*code, INVALID_REQUEST, "entry {i}: {message}");
        assert!(!message.is_empty(), "entry {i} has no message");
    }
    assert!(refused[0].1.contains("not enforced"), "{}", refused[0].1);
    assert_eq!(refused[1].1, "Invalid configuration key no_such_quota");
    assert_eq!(
        zk.get_entity_config("clients/app").await.unwrap(),
        BTreeMap::new()
    );

    // validate_only writes nothing.
    let validated = alter(
        &mut admin,
        vec![(
            entity(&[("client-id", Some("app"))]),
            vec![set("producer_byte_rate", 100_000.0)],
        )],
        true,
    )
    .await;
    assert_eq!(validated, vec![(0, String::new())]);
    assert_eq!(
        zk.get_entity_config("clients/app").await.unwrap(),
        BTreeMap::new()
    );

    // Real alterations: a client, a user (keeping its other config), the default user's
    // clients, and a user's client with a name that needs sanitizing.
    let altered = alter(
        &mut admin,
        vec![
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("producer_byte_rate", 100_000.0)],
            ),
            (
                entity(&[("user", Some("alice"))]),
                vec![
                    set("consumer_byte_rate", 2_000_000.0),
                    set("request_percentage", 12.5),
                ],
            ),
            (
                entity(&[("user", None), ("client-id", None)]),
                vec![
                    set("producer_byte_rate", 9_000_000.0),
                    set("consumer_byte_rate", 8_000_000.0),
                ],
            ),
            (
                entity(&[("user", Some("bob smith")), ("client-id", Some("etl*"))]),
                vec![set("producer_byte_rate", 3_000_000.0)],
            ),
        ],
        false,
    )
    .await;
    assert_eq!(altered, vec![(0, String::new()); 4]);
    // Where kafka-configs.sh --zookeeper writes them, in Kafka's form.
    assert_eq!(
        zk.get_entity_config("clients/app").await.unwrap(),
        BTreeMap::from([("producer_byte_rate".to_owned(), "100000".to_owned())])
    );
    let alice = zk.get_entity_config("users/alice").await.unwrap();
    assert_eq!(
        alice.get("consumer_byte_rate").map(String::as_str),
        Some("2000000")
    );
    assert_eq!(
        alice.get("SCRAM-SHA-256").map(String::as_str),
        Some("[iterations=4096]")
    );
    assert_eq!(
        alice.get("request_percentage").map(String::as_str),
        Some("12.5")
    );
    assert!(!zk
        .get_entity_config("users/bob%20smith/clients/etl%2A")
        .await
        .unwrap()
        .is_empty());
    let (_, path) = zk
        .get_config_changes(false)
        .await
        .unwrap()
        .into_iter()
        .last()
        .expect("a change notification");
    assert!(!path.is_empty());

    // Describe: everything (no components, not strict).
    let all = describe(&mut admin, &[], false).await.unwrap();
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(
        all[&key(None, Some("app"))],
        BTreeMap::from([("producer_byte_rate".to_owned(), 100_000.0)])
    );
    // Only quota keys are described, not the user's other config.
    assert_eq!(
        all[&key(Some("alice"), None)],
        BTreeMap::from([
            ("consumer_byte_rate".to_owned(), 2_000_000.0),
            ("request_percentage".to_owned(), 12.5)
        ])
    );
    assert!(all.contains_key(&key(Some("bob smith"), Some("etl*"))));
    // Exact client id, strict: that entity only.
    let app = describe(&mut admin, &[("client-id", 0, Some("app"))], true)
        .await
        .unwrap();
    assert_eq!(
        app.keys().collect::<Vec<_>>(),
        vec![&key(None, Some("app"))]
    );
    // Default user, any client: the <default>/<default> entity.
    let defaults = describe(
        &mut admin,
        &[("user", 1, None), ("client-id", 2, None)],
        true,
    )
    .await
    .unwrap();
    assert_eq!(
        defaults.keys().collect::<Vec<_>>(),
        vec![&key(Some("<default>"), Some("<default>"))]
    );
    // Any user, not strict: every entity with a user.
    let users = describe(&mut admin, &[("user", 2, None)], false)
        .await
        .unwrap();
    assert_eq!(users.len(), 3, "{users:?}");
    // Strict with no components: no entity has no type.
    assert!(describe(&mut admin, &[], true).await.unwrap().is_empty());
    // Refused filters.
    let duplicate = describe(&mut admin, &[("user", 2, None), ("user", 1, None)], false).await;
    assert_eq!(duplicate.unwrap_err().0, INVALID_REQUEST);
    let mixed = describe(&mut admin, &[("user", 2, None), ("ip", 2, None)], false).await;
    assert_eq!(mixed.unwrap_err().0, INVALID_REQUEST);
    let custom = describe(&mut admin, &[("group", 2, None)], false).await;
    assert_eq!(custom.unwrap_err().0, 35, "UNSUPPORTED_VERSION, as Kafka");

    // The quota set through the API holds at once: client "app" gets throttled.
    let created = admin
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("q"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let records = one_record_batch(100_000, b'q');
    let mut app_conn = Connection::connect(&addr, "app").await.unwrap();
    let started = Instant::now();
    let mut throttled = false;
    while started.elapsed() < Duration::from_secs(20) {
        let (error, throttle) = produce(&mut app_conn, "q", &records).await;
        if error != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        if throttle > 0 {
            throttled = true;
            break;
        }
    }
    assert!(throttled, "client app was never throttled at 100 kB/s");

    // Removing the quota: describe no longer lists the entity.
    let removed = alter(
        &mut admin,
        vec![(
            entity(&[("client-id", Some("app"))]),
            vec![remove("producer_byte_rate")],
        )],
        false,
    )
    .await;
    assert_eq!(removed, vec![(0, String::new())]);
    let app = describe(&mut admin, &[("client-id", 0, Some("app"))], true)
        .await
        .unwrap();
    assert!(app.is_empty(), "{app:?}");
}
