//! `gregor configs` as a user runs it, the binary against a live `gregor server`:
//! - client quotas (kafka-configs.sh's `--entity-type clients|users`, combined and default
//!   entities): a quota set this way throttles the client it names (the Produce answer's
//!   `throttle_time_ms`) while another client on the same broker is not throttled;
//! - topics and brokers (`--entity-type topics|brokers`, the shorthands, `--all`,
//!   `--add-config-file`): kafka-configs.sh 2.8's output lines and refusals, and a refused
//!   change leaves the configs as they were.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use client::Connection;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{produce_request, CreateTopicsRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// A `gregor server` child process on free ports with a temporary data dir, killed (and the
/// dir removed) when dropped.
struct Server {
    child: Child,
    bootstrap: String,
    data: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_server() -> Server {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let data = std::env::temp_dir().join(format!(
        "gregor-configs-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&data).unwrap();
    let port = free_port();
    let admin_port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_gregor"))
        .arg("server")
        .args([
            "--override",
            &format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
        ])
        .args([
            "--override",
            &format!("admin.listener=127.0.0.1:{admin_port}"),
        ])
        .args(["--data-dir", data.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gregor server");
    let server = Server {
        child,
        bootstrap: format!("127.0.0.1:{port}"),
        data,
    };
    let start = Instant::now();
    while TcpStream::connect(&server.bootstrap).is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "server not up");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

impl Server {
    fn configs(&self, args: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_gregor"))
            .args(["configs", "--bootstrap-server", &self.bootstrap])
            .args(args.split_whitespace())
            .output()
            .expect("run gregor configs")
    }

    /// `--describe` output once it equals `expected` (a quota change reaches the store
    /// before the answer, but keep the check robust).
    fn describe_until(&self, args: &str, expected: &str) {
        let start = Instant::now();
        loop {
            let output = self.configs(&format!("--describe {args}"));
            let got = String::from_utf8_lossy(&output.stdout).into_owned();
            if output.status.success() && got == expected {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "describe {args}: {got:?} (stderr {:?}), expected {expected:?}",
                String::from_utf8_lossy(&output.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn one_record_batch(value_bytes: usize) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(vec![b'q'; value_bytes])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// One Produce of a 100 kB batch: (error code, throttle_time_ms).
async fn produce(conn: &mut Connection, topic: &str) -> (i16, i32) {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(one_record_batch(100_000))),
            ])]);
    let response = conn.send(request).await.unwrap();
    (
        response.responses[0].partition_responses[0].error_code,
        response.throttle_time_ms,
    )
}

#[test]
fn client_quotas_set_describe_delete_and_throttle() {
    let server = start_server();

    // Alter: a client id, a user's client, the default client, kafka-configs.sh's lines.
    let out = server.configs("--alter --entity-type clients --entity-name throttled --add-config producer_byte_rate=1024,consumer_byte_rate=2048");
    assert_eq!(
        ok(&out),
        "Completed updating config for client throttled.\n"
    );
    let out = server.configs("--alter --entity-type users --entity-name alice --entity-type clients --entity-name app --add-config producer_byte_rate=4096");
    assert_eq!(ok(&out), "Completed updating config for user alice.\n");
    let out = server.configs(
        "--alter --entity-type clients --entity-default --add-config consumer_byte_rate=1e7",
    );
    assert_eq!(
        ok(&out),
        "Completed updating default config for clients in the cluster.\n"
    );

    // The request-time quota, on the default user.
    let out = server.configs(
        "--alter --entity-type users --entity-default --add-config request_percentage=200",
    );
    assert_eq!(
        ok(&out),
        "Completed updating default config for users in the cluster.\n"
    );
    server.describe_until(
        "--entity-type users --entity-default",
        "Quota configs for the default user-principal are request_percentage=200.0\n",
    );
    server.describe_until(
        "--entity-type clients --entity-name throttled",
        "Quota configs for client-id 'throttled' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n",
    );
    server.describe_until(
        "--entity-type users --entity-name alice --entity-type clients --entity-name app",
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=4096.0\n",
    );
    // Clients in the other order pair the same way.
    server.describe_until(
        "--entity-type clients --entity-name app --entity-type users --entity-name alice",
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=4096.0\n",
    );
    server.describe_until(
        "--entity-type clients --entity-default",
        "Quota configs for the default client-id are consumer_byte_rate=1.0E7\n",
    );
    // All clients (strict: alice's client is a user+client entity, not listed).
    let out = ok(&server.configs("--describe --entity-type clients"));
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "Quota configs for client-id 'throttled' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0",
            "Quota configs for the default client-id are consumer_byte_rate=1.0E7",
        ]
    );

    // Refusals change nothing: deleting a key the entity does not have, the broker's refusal.
    let out = server.configs(
        "--alter --entity-type clients --entity-name throttled --delete-config request_percentage",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Invalid config(s): request_percentage\n"
    );
    let out = server.configs(
        "--alter --entity-type clients --entity-name throttled --add-config producer_byte_rate=0.5",
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "InvalidRequestException: Configuration producer_byte_rate must be a LONG value"
        ),
        "{stderr}"
    );
    server.describe_until(
        "--entity-type clients --entity-name throttled",
        "Quota configs for client-id 'throttled' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n",
    );

    // The quota set this way throttles that client id and not another one.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut admin = Connection::connect(&server.bootstrap, "admin")
            .await
            .unwrap();
        let created = admin
            .send(
                CreateTopicsRequest::default()
                    .with_timeout_ms(10_000)
                    .with_topics(vec![CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("quota")))
                        .with_num_partitions(1)
                        .with_replication_factor(1)]),
            )
            .await
            .unwrap();
        assert_eq!(created.topics[0].error_code, 0);
        let mut free = Connection::connect(&server.bootstrap, "free")
            .await
            .unwrap();
        let start = Instant::now();
        loop {
            let (error, throttle) = produce(&mut free, "quota").await;
            assert_eq!(throttle, 0, "the client without a quota was throttled");
            if error == 0 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "error {error}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // 100 kB over the rate's minimum span (10 s of the 11 windows) is ~10 kB/s against a
        // quota of 1024 B/s: throttled from the first produce.
        let mut throttled = Connection::connect(&server.bootstrap, "throttled")
            .await
            .unwrap();
        let (error, throttle) = produce(&mut throttled, "quota").await;
        assert_eq!(error, 0);
        assert!(throttle > 0, "the quota'd client was not throttled");
        for _ in 0..3 {
            assert_eq!(produce(&mut free, "quota").await, (0, 0));
        }
    });

    // Deleted: describe no longer lists it (the other key stays), and the client is free.
    let out = server.configs(
        "--alter --entity-type clients --entity-name throttled --delete-config producer_byte_rate",
    );
    assert_eq!(
        ok(&out),
        "Completed updating config for client throttled.\n"
    );
    server.describe_until(
        "--entity-type clients --entity-name throttled",
        "Quota configs for client-id 'throttled' are consumer_byte_rate=2048.0\n",
    );
}

/// `out` failed with exit code 1, printing `stderr` (which must contain `expected`).
fn refused(out: &Output, expected: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout {:?}, stderr {stderr:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains(expected), "{stderr:?} lacks {expected:?}");
    stderr
}

/// The lines of `out` after its first (the header), sorted (Kafka lists configs in hash
/// order).
fn sorted_entries(out: &str) -> Vec<String> {
    let mut lines: Vec<String> = out.lines().skip(1).map(str::to_owned).collect();
    lines.sort_unstable();
    lines
}

/// Creates `topic` (1 partition), retrying while the broker is still starting (no
/// controller yet); TOPIC_ALREADY_EXISTS after a retry means an earlier attempt landed.
fn create_topic(server: &Server, topic: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut admin = Connection::connect(&server.bootstrap, "admin")
            .await
            .unwrap();
        let start = Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let created = admin
                .send(
                    CreateTopicsRequest::default()
                        .with_timeout_ms(10_000)
                        .with_topics(vec![CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                            .with_num_partitions(1)
                            .with_replication_factor(1)]),
                )
                .await
                .unwrap();
            let error = created.topics[0].error_code;
            if error == 0 || (error == 36 && attempts > 1) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "create {topic}: error {error} ({:?})",
                created.topics[0].error_message
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

#[test]
fn topic_configs_add_describe_delete_as_kafka_configs() {
    let server = start_server();
    create_topic(&server, "cfg");
    // No overrides yet: the header alone, for the long form and the shorthand.
    server.describe_until(
        "--entity-type topics --entity-name cfg",
        "Dynamic configs for topic cfg are:\n",
    );
    server.describe_until("--topic cfg", "Dynamic configs for topic cfg are:\n");

    // Added with a bracketed list value (IncrementalAlterConfigs SET).
    let out = server.configs(
        "--alter --entity-type topics --entity-name cfg --add-config min.insync.replicas=1,cleanup.policy=[compact,delete]",
    );
    assert_eq!(ok(&out), "Completed updating config for topic cfg.\n");
    let out = ok(&server.configs("--describe --entity-type topics --entity-name cfg"));
    assert_eq!(
        out.lines().next(),
        Some("Dynamic configs for topic cfg are:")
    );
    assert_eq!(
        sorted_entries(&out),
        vec![
            "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
            "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=1, DEFAULT_CONFIG:min.insync.replicas=1}",
        ]
    );
    // --all lists every config, the defaults with their broker-level synonym.
    let out = ok(&server.configs("--describe --topic cfg --all"));
    assert_eq!(out.lines().next(), Some("All configs for topic cfg are:"));
    let all = sorted_entries(&out);
    assert!(
        all.iter().any(|l| l == "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}"),
        "{all:?}"
    );
    assert!(
        all.iter().any(|l| l == "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"),
        "{all:?}"
    );
    assert!(all.len() > 10, "{all:?}");

    // From a properties file (--add-config-file), next to what is set.
    let file = server.data.join("add.properties");
    std::fs::write(&file, "# retention for cfg\nretention.bytes = 1048576\n").unwrap();
    let out = server.configs(&format!(
        "--alter --topic cfg --add-config-file {}",
        file.display()
    ));
    assert_eq!(ok(&out), "Completed updating config for topic cfg.\n");

    // Deleted (IncrementalAlterConfigs DELETE): the others stay.
    let out = server.configs("--alter --topic cfg --delete-config min.insync.replicas");
    assert_eq!(ok(&out), "Completed updating config for topic cfg.\n");
    let expected = vec![
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.bytes=1048576, DEFAULT_CONFIG:log.retention.bytes=-1}",
    ];
    assert_eq!(
        sorted_entries(&ok(&server.configs("--describe --topic cfg"))),
        expected
    );

    // Refusals (exit 1, Kafka's message), each leaving the configs as they were: deleting a
    // key the topic does not set, an unknown config, a bad value, a missing topic, no name.
    refused(
        &server.configs("--alter --topic cfg --delete-config min.insync.replicas,segment.ms"),
        "Invalid config(s): min.insync.replicas,segment.ms\n",
    );
    let stderr = refused(
        &server.configs("--alter --topic cfg --add-config no.such.config=1"),
        "InvalidConfigurationException: ",
    );
    assert!(stderr.contains("no.such.config"), "{stderr}");
    assert!(
        stderr.starts_with("Error while executing config command with args '--bootstrap-server "),
        "{stderr}"
    );
    refused(
        &server.configs("--alter --topic cfg --add-config retention.bytes=lots"),
        "InvalidConfigurationException: ",
    );
    assert_eq!(
        sorted_entries(&ok(&server.configs("--describe --topic cfg"))),
        expected
    );
    let out = server.configs("--describe --topic nosuch");
    refused(&out, "UnknownTopicOrPartitionException: ");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Dynamic configs for topic nosuch are:\n"
    );
    refused(
        &server.configs("--alter --topic nosuch --add-config retention.ms=1"),
        "UnknownTopicOrPartitionException: ",
    );
    refused(
        &server.configs("--alter --entity-type topics --add-config retention.ms=1"),
        "an entity name must be specified with --alter of topics\n",
    );
    refused(
        &server.configs("--alter --topic cfg --add-config retention.ms"),
        "Invalid entity config: all configs to be added must be in the format \"key=val\".\n",
    );
    refused(
        &server.configs("--alter --topic cfg"),
        "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter\n",
    );

    // Every topic, without a name.
    create_topic(&server, "other");
    server.describe_until(
        "--entity-type topics",
        &format!(
            "Dynamic configs for topic cfg are:\n{}\nDynamic configs for topic other are:\n",
            expected.join("\n")
        ),
    );
}

#[test]
fn broker_configs_add_describe_delete_as_kafka_configs() {
    let server = start_server();
    // Broker 0 (the default broker.id) has no dynamic configs yet.
    server.describe_until(
        "--entity-type brokers --entity-name 0",
        "Dynamic configs for broker 0 are:\n",
    );
    server.describe_until(
        "--broker-defaults",
        "Default configs for brokers in the cluster are:\n",
    );

    let out = server.configs(
        "--alter --entity-type brokers --entity-name 0 --add-config follower.replication.throttled.rate=10000000",
    );
    assert_eq!(ok(&out), "Completed updating config for broker 0.\n");
    let out = server.configs(
        "--alter --entity-type brokers --entity-default --add-config leader.replication.throttled.rate=5000000,follower.replication.throttled.rate=7000000",
    );
    assert_eq!(
        ok(&out),
        "Completed updating default config for brokers in the cluster.\n"
    );
    // AlterConfigs replaces the whole set: adding one keeps the other.
    let out = server
        .configs("--alter --broker 0 --add-config leader.replication.throttled.rate=20000000");
    assert_eq!(ok(&out), "Completed updating config for broker 0.\n");

    let broker = "Dynamic configs for broker 0 are:\n  \
        leader.replication.throttled.rate=20000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=20000000, DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=5000000}\n  \
        follower.replication.throttled.rate=10000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=10000000, DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=7000000}\n";
    server.describe_until("--broker 0", broker);
    let default = "Default configs for brokers in the cluster are:\n  \
        follower.replication.throttled.rate=7000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=7000000}\n  \
        leader.replication.throttled.rate=5000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=5000000}\n";
    server.describe_until("--entity-type brokers --entity-default", default);
    // Every broker, then the default.
    server.describe_until("--entity-type brokers", &format!("{broker}{default}"));
    // --all adds the static configs, with their sources.
    let out = ok(&server.configs("--describe --broker 0 --all"));
    assert_eq!(out.lines().next(), Some("All configs for broker 0 are:"));
    let all = sorted_entries(&out);
    assert!(
        all.iter()
            .any(|l| l.starts_with("  broker.id=0 sensitive=false synonyms={")),
        "{all:?}"
    );
    assert!(
        all.iter().any(|l| l.starts_with("  leader.replication.throttled.rate=20000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:")),
        "{all:?}"
    );

    // Refusals change nothing: a static config (Kafka's message, from the broker), a bad
    // value, deleting a key the broker does not set, a non-numeric id, another broker's id.
    let stderr = refused(
        &server.configs("--alter --broker 0 --add-config log.dirs=/tmp/elsewhere"),
        "InvalidRequestException: Invalid config value for resource ConfigResource(type=BROKER, name='0'): Cannot update these configs dynamically: Set(log.dirs)\n",
    );
    assert!(
        stderr.starts_with("Error while executing config command with args"),
        "{stderr}"
    );
    refused(
        &server.configs("--alter --broker-defaults --add-config leader.replication.throttled.rate=-5"),
        "InvalidRequestException: Invalid config value for resource ConfigResource(type=BROKER, name=''): Invalid value -5 for configuration leader.replication.throttled.rate: Value must be at least 0\n",
    );
    refused(
        &server.configs("--alter --broker 0 --delete-config num.io.threads"),
        "Invalid config(s): num.io.threads\n",
    );
    refused(
        &server.configs("--describe --entity-type brokers --entity-name zero"),
        "The entity name for brokers must be a valid integer broker id, but it is: zero\n",
    );
    refused(
        &server.configs("--alter --broker 7 --add-config leader.replication.throttled.rate=1"),
        "InvalidRequestException: Unexpected broker id, expected 0 or empty string, but received 7\n",
    );
    refused(
        &server.configs("--alter --entity-type brokers --add-config leader.replication.throttled.rate=1"),
        "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips\n",
    );
    server.describe_until("--broker 0", broker);
    server.describe_until("--broker-defaults", default);

    // Deleted: this broker's value goes, the default's stays.
    let out = server.configs("--alter --broker 0 --delete-config leader.replication.throttled.rate,follower.replication.throttled.rate");
    assert_eq!(ok(&out), "Completed updating config for broker 0.\n");
    server.describe_until("--broker 0", "Dynamic configs for broker 0 are:\n");
    let out = ok(&server.configs("--describe --broker 0 --all"));
    assert!(
        out.contains("  leader.replication.throttled.rate=5000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=5000000}\n"),
        "{out}"
    );
}
