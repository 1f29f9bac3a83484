//! `gregor configs` for client quotas as a user runs it (kafka-configs.sh's
//! `--entity-type clients|users`, combined and default entities): the binary against a live
//! `gregor server`, and a quota set this way throttles the client it names (the Produce
//! answer's `throttle_time_ms`) while another client on the same broker is not throttled.

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
    let data = std::env::temp_dir().join(format!("gregor-configs-test-{}", std::process::id()));
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
