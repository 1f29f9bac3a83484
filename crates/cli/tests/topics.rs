//! `gregor topics` as a user runs it: the binary against a live `gregor server` on free
//! ports with a temporary data dir, plus the checks that need no broker.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A directory under the system temp dir, removed on drop (no extra dev-dependency).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("gregor-topics-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn gregor() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gregor"))
}

fn topics(args: &[&str]) -> Output {
    gregor()
        .arg("topics")
        .args(args)
        .output()
        .expect("run gregor topics")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn usage_errors_need_no_broker_and_exit_1() {
    let output = topics(&["--list"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("--bootstrap-server must be specified\n"),
        "{}",
        stderr(&output)
    );

    let output = topics(&["--bootstrap-server", "127.0.0.1:1", "--create"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("Missing required argument \"[topic]\""));
    assert!(stdout(&output).is_empty());
}

#[test]
fn validate_name_needs_no_broker() {
    let ok = topics(&["--validate-name", "orders"]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(stdout(&ok), "");

    let warned = topics(&["--validate-name", "orders.v1"]);
    assert_eq!(warned.status.code(), Some(0));
    assert!(stdout(&warned).starts_with("WARNING: Due to limitations in metric names"));

    let bad = topics(&["--validate-name", "a/b"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stdout(&bad)
            .starts_with("Error while executing topic command : Topic name \"a/b\" is illegal"),
        "{}",
        stdout(&bad)
    );
}

#[test]
fn an_unreachable_bootstrap_server_is_an_error_not_a_hang() {
    let port = free_port();
    let output = topics(&["--bootstrap-server", &format!("127.0.0.1:{port}"), "--list"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).starts_with("Error while executing topic command : "));
}

#[test]
fn command_config_for_tls_without_a_ca_is_refused() {
    let dir = TempDir::new();
    let path = dir.path().join("admin.properties");
    std::fs::write(&path, "security.protocol=SSL\n").unwrap();
    let output = topics(&[
        "--bootstrap-server",
        "127.0.0.1:1",
        "--list",
        "--command-config",
        path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("ssl.ca.location=<PEM file>"),
        "{}",
        stdout(&output)
    );
}

// ---------------------------------------------------------------------------------------
// Against a live broker.
// ---------------------------------------------------------------------------------------

/// A `gregor server` child process, killed when dropped.
struct Server {
    child: Child,
    bootstrap: String,
    _data: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let data = TempDir::new();
    let port = free_port();
    let admin_port = free_port();
    let child = gregor()
        .arg("server")
        .args([
            "--override",
            &format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
        ])
        .args([
            "--override",
            &format!("admin.listener=127.0.0.1:{admin_port}"),
        ])
        .args(["--data-dir", data.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gregor server");
    let server = Server {
        child,
        bootstrap: format!("127.0.0.1:{port}"),
        _data: data,
    };
    wait_until(Duration::from_secs(30), || {
        TcpStream::connect(&server.bootstrap).is_ok()
    });
    server
}

fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Server {
    fn topics(&self, args: &[&str]) -> Output {
        let mut all = vec!["--bootstrap-server", self.bootstrap.as_str()];
        all.extend_from_slice(args);
        topics(&all)
    }

    /// `--describe` output once `topic` shows `partitions` partitions, each with a leader
    /// (creation and partition additions reach the broker's metadata asynchronously).
    fn describe_when_online(&self, topic: &str, partitions: usize) -> String {
        let mut last = String::new();
        let count = format!("\tPartitionCount: {partitions}\t");
        wait_until(Duration::from_secs(20), || {
            let output = self.topics(&["--describe", "--topic", topic]);
            last = stdout(&output);
            output.status.success()
                && last.contains(&count)
                && last.matches("\tPartition: ").count() == partitions
                && !last.contains("Leader: none")
        });
        last
    }
}

fn has_server_subcommand() -> bool {
    gregor()
        .args(["server", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[test]
fn topic_lifecycle_against_a_live_server() {
    if !has_server_subcommand() {
        eprintln!("skipping: this build has no `gregor server`");
        return;
    }
    let server = start_server();

    let created = server.topics(&[
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
    ]);
    assert_eq!(
        stdout(&created),
        "Created topic orders.\n",
        "{}",
        stderr(&created)
    );
    assert!(created.status.success());

    let again = server.topics(&[
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
    ]);
    assert_eq!(again.status.code(), Some(1));
    let text = stdout(&again);
    assert!(
        text.starts_with("Error while executing topic command : "),
        "{text}"
    );
    assert!(text.contains("already exists"), "{text}");
    let quiet = server.topics(&["--create", "--topic", "orders", "--if-not-exists"]);
    assert!(quiet.status.success(), "{}", stdout(&quiet));
    assert_eq!(stdout(&quiet), "");

    // Creation reaches the broker's metadata asynchronously (Kafka's CLI returns after phase
    // 1 too), so --list shows the topic once the controller's UpdateMetadata has arrived.
    wait_until(Duration::from_secs(20), || {
        stdout(&server.topics(&["--list"]))
            .lines()
            .any(|line| line == "orders")
    });

    let described = server.describe_when_online("orders", 3);
    let mut lines = described.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("Topic: orders\tTopicId: "), "{header}");
    assert!(
        header.ends_with("\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: "),
        "{header}"
    );
    let partitions: Vec<&str> = lines.collect();
    assert_eq!(
        partitions,
        [
            "\tTopic: orders\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
            "\tTopic: orders\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0",
            "\tTopic: orders\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0",
        ]
    );

    let altered = server.topics(&["--alter", "--topic", "orders", "--partitions", "5"]);
    assert!(altered.status.success(), "{}", stdout(&altered));
    let described = server.describe_when_online("orders", 5);
    assert!(
        described.contains("\tPartition: 4\tLeader: 0\tReplicas: 0\tIsr: 0"),
        "{described}"
    );
    let shrink = server.topics(&["--alter", "--topic", "orders", "--partitions", "2"]);
    assert_eq!(shrink.status.code(), Some(1));
    assert!(stdout(&shrink).starts_with("Error while executing topic command : "));

    let with_config = server.topics(&[
        "--create",
        "--topic",
        "audit",
        "--config",
        "retention.ms=600001",
    ]);
    assert!(with_config.status.success(), "{}", stdout(&with_config));
    let described = server.describe_when_online("audit", 1);
    assert!(
        described
            .lines()
            .next()
            .unwrap()
            .ends_with("\tConfigs: retention.ms=600001"),
        "{described}"
    );
    let overrides = server.topics(&["--describe", "--topics-with-overrides"]);
    let overridden: Vec<String> = stdout(&overrides)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    assert_eq!(overridden, ["Topic: audit"]);

    let deleted = server.topics(&["--delete", "--topic", "orders"]);
    assert!(deleted.status.success(), "{}", stdout(&deleted));
    assert_eq!(stdout(&deleted), "", "Kafka 2.8 prints nothing on delete");
    wait_until(Duration::from_secs(20), || {
        !stdout(&server.topics(&["--list"]))
            .lines()
            .any(|line| line == "orders")
    });

    let missing = server.topics(&["--delete", "--topic", "orders"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stdout(&missing),
        "Error while executing topic command : Topic 'orders' does not exist as expected\n"
    );
    let noop = server.topics(&["--delete", "--topic", "orders", "--if-exists"]);
    assert!(noop.status.success());
}

#[test]
fn create_with_assignment_and_alter_with_a_full_assignment() {
    if !has_server_subcommand() {
        eprintln!("skipping: this build has no `gregor server`");
        return;
    }
    let server = start_server();
    let created = server.topics(&[
        "--create",
        "--topic",
        "my_topic",
        "--replica-assignment",
        "0,0",
    ]);
    assert_eq!(
        stdout(&created),
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.\nCreated topic my_topic.\n"
    );
    server.describe_when_online("my_topic", 2);
    // All four partitions listed: only the two new entries are used, and stderr says so.
    let altered = server.topics(&[
        "--alter",
        "--topic",
        "my_topic",
        "--partitions",
        "4",
        "--replica-assignment",
        "0,0,0,0",
    ]);
    assert!(
        altered.status.success(),
        "{}{}",
        stdout(&altered),
        stderr(&altered)
    );
    assert!(stderr(&altered).contains("the first 2 entries of --replica-assignment are ignored"));
    let described = server.describe_when_online("my_topic", 4);
    assert_eq!(described.lines().count(), 5, "{described}");
}

#[test]
fn alter_over_a_regex_applies_to_each_match_and_reports_each_failure() {
    if !has_server_subcommand() {
        eprintln!("skipping: this build has no `gregor server`");
        return;
    }
    let server = start_server();
    for (topic, partitions) in [("metrics-a", "1"), ("metrics-b", "6"), ("other", "1")] {
        let created = server.topics(&["--create", "--topic", topic, "--partitions", partitions]);
        assert!(created.status.success(), "{}", stdout(&created));
    }
    server.describe_when_online("metrics-b", 6);

    // metrics-b already has 6 partitions: its increase to 3 fails, metrics-a's succeeds.
    let altered = server.topics(&["--alter", "--topic", "metrics-.*", "--partitions", "3"]);
    assert_eq!(altered.status.code(), Some(1));
    let text = stdout(&altered);
    let errors: Vec<&str> = text.lines().collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(
        errors[0].starts_with("Error while executing topic command : "),
        "{text}"
    );
    assert!(errors[0].ends_with("(topic 'metrics-b')"), "{text}");
    server.describe_when_online("metrics-a", 3);
    server.describe_when_online("other", 1);

    let listed = server.topics(&["--list", "--topic", "metrics-.*"]);
    assert_eq!(stdout(&listed), "metrics-a\nmetrics-b\n");
    let none = server.topics(&["--list", "--topic", "nothing-.*"]);
    assert_eq!(
        stdout(&none),
        "\n",
        "Kafka prints one empty line for no match"
    );

    let under = server.topics(&["--describe", "--under-replicated-partitions"]);
    assert!(under.status.success());
    assert_eq!(
        stdout(&under),
        "",
        "a single broker has no under-replicated partitions"
    );
}

/// A `gregor dev-cluster` child process (N brokers on consecutive ports), killed when dropped.
fn start_dev_cluster(brokers: usize) -> Server {
    let data = TempDir::new();
    let base = consecutive_free_ports(brokers);
    let admin_port = free_port();
    let child = gregor()
        .arg("dev-cluster")
        .args([
            "--brokers",
            &brokers.to_string(),
            "--port",
            &base.to_string(),
        ])
        .args([
            "--override",
            &format!("admin.listener=127.0.0.1:{admin_port}"),
        ])
        .args(["--data-dir", data.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gregor dev-cluster");
    // Bootstrap from the last broker, which is usually not the controller, so admin
    // requests must be routed to the controller.
    let server = Server {
        child,
        bootstrap: format!("127.0.0.1:{}", base + brokers as u16 - 1),
        _data: data,
    };
    wait_until(Duration::from_secs(30), || {
        (0..brokers as u16).all(|i| TcpStream::connect(("127.0.0.1", base + i)).is_ok())
    });
    server
}

fn consecutive_free_ports(count: usize) -> u16 {
    for _ in 0..50 {
        let base = free_port();
        if base > u16::MAX - count as u16 {
            continue;
        }
        let all_free =
            (0..count as u16).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no {count} consecutive free ports");
}

#[test]
fn describe_on_a_five_broker_dev_cluster() {
    if !has_server_subcommand() {
        eprintln!("skipping: this build has no `gregor dev-cluster`");
        return;
    }
    let cluster = start_dev_cluster(5);
    let created = cluster.topics(&[
        "--create",
        "--topic",
        "spread",
        "--partitions",
        "10",
        "--replication-factor",
        "3",
    ]);
    assert_eq!(
        stdout(&created),
        "Created topic spread.\n",
        "{}",
        stderr(&created)
    );

    let described = cluster.describe_when_online("spread", 10);
    let mut lines = described.lines();
    let header = lines.next().unwrap();
    assert!(
        header.ends_with("\tPartitionCount: 10\tReplicationFactor: 3\tConfigs: "),
        "{header}"
    );
    let mut leaders = std::collections::BTreeSet::new();
    for (partition, line) in lines.enumerate() {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields[2], format!("Partition: {partition}"), "{line}");
        let leader = fields[3].strip_prefix("Leader: ").unwrap();
        let replicas: Vec<&str> = fields[4]
            .strip_prefix("Replicas: ")
            .unwrap()
            .split(',')
            .collect();
        let mut isr: Vec<&str> = fields[5]
            .strip_prefix("Isr: ")
            .unwrap()
            .split(',')
            .collect();
        assert_eq!(replicas.len(), 3, "{line}");
        let mut distinct = replicas.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            3,
            "replicas of a partition are distinct brokers: {line}"
        );
        assert!(
            replicas
                .iter()
                .all(|id| ["0", "1", "2", "3", "4"].contains(id)),
            "{line}"
        );
        assert_eq!(leader, replicas[0], "the preferred replica leads: {line}");
        isr.sort();
        assert_eq!(isr, distinct, "every replica is in sync: {line}");
        leaders.insert(leader.to_string());
    }
    assert_eq!(
        leaders.len(),
        5,
        "leadership is spread over all five brokers: {described}"
    );

    let unavailable = cluster.topics(&["--describe", "--unavailable-partitions"]);
    assert_eq!(stdout(&unavailable), "");

    let altered = cluster.topics(&["--alter", "--topic", "spread", "--partitions", "12"]);
    assert!(altered.status.success(), "{}", stdout(&altered));
    cluster.describe_when_online("spread", 12);

    let deleted = cluster.topics(&["--delete", "--topic", "spread"]);
    assert!(deleted.status.success(), "{}", stdout(&deleted));
    wait_until(Duration::from_secs(20), || {
        !stdout(&cluster.topics(&["--list"]))
            .lines()
            .any(|line| line == "spread")
    });
}

#[test]
fn describe_by_topic_id_and_log_dirs_against_a_live_server() {
    if !has_server_subcommand() {
        eprintln!("skipping: this build has no `gregor server`");
        return;
    }
    let server = start_server();
    let created = server.topics(&["--create", "--topic", "byid", "--partitions", "2"]);
    assert!(created.status.success(), "{}", stdout(&created));
    let by_name = server.describe_when_online("byid", 2);
    let header = by_name.lines().next().unwrap();
    let id = header
        .split('\t')
        .find_map(|f| f.strip_prefix("TopicId: "))
        .unwrap_or_else(|| panic!("no TopicId in {header}"))
        .to_owned();

    // Kafka 3.x's --topic-id: the same description, found by id (Metadata v12).
    let by_id = server.topics(&["--describe", "--topic-id", &id]);
    assert!(by_id.status.success(), "{}", stdout(&by_id));
    assert_eq!(stdout(&by_id), by_name);
    // The same id written as a UUID with dashes names the same topic.
    let bytes = *id
        .parse::<model::TopicId>()
        .expect("Kafka's form")
        .as_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let dashed = format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    );
    let by_dashed = server.topics(&["--describe", "--topic-id", &dashed]);
    assert!(by_dashed.status.success(), "{}", stdout(&by_dashed));
    assert_eq!(stdout(&by_dashed), by_name);
    let unknown = server.topics(&["--describe", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAQ"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        stdout(&unknown),
        "Error while executing topic command : TopicId 'AAAAAAAAAAAAAAAAAAAAAQ' does not exist as expected\n"
    );
    let quiet = server.topics(&[
        "--describe",
        "--topic-id",
        "AAAAAAAAAAAAAAAAAAAAAQ",
        "--if-exists",
    ]);
    assert!(quiet.status.success());
    assert_eq!(stdout(&quiet), "");
    let bad = server.topics(&["--describe", "--topic-id", "not-an-id"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stdout(&bad).contains("Invalid topic id 'not-an-id'"),
        "{}",
        stdout(&bad)
    );

    // kafka-log-dirs.sh --describe: two lines, then the JSON.
    let log_dirs = gregor()
        .args([
            "log-dirs",
            "--describe",
            "--bootstrap-server",
            &server.bootstrap,
        ])
        .args(["--topic-list", "byid"])
        .output()
        .unwrap();
    assert!(log_dirs.status.success(), "{}", stderr(&log_dirs));
    let text = stdout(&log_dirs);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("Querying brokers for log directories information")
    );
    assert_eq!(
        lines.next(),
        Some("Received log directory information from brokers 0")
    );
    let json: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(json["version"], 1);
    let broker = &json["brokers"][0];
    assert_eq!(broker["broker"], 0);
    let dir = &broker["logDirs"][0];
    assert!(
        std::path::Path::new(dir["logDir"].as_str().unwrap()).is_absolute(),
        "{dir}"
    );
    assert_eq!(dir["error"], serde_json::Value::Null);
    let partitions: Vec<&str> = dir["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["partition"].as_str().unwrap())
        .collect();
    assert_eq!(partitions, ["byid-0", "byid-1"]);
    assert_eq!(dir["partitions"][0]["offsetLag"], 0);
    assert_eq!(dir["partitions"][0]["isFuture"], false);

    let missing = gregor()
        .args([
            "log-dirs",
            "--describe",
            "--bootstrap-server",
            &server.bootstrap,
        ])
        .args(["--broker-list", "0,7"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr(&missing),
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 0\n"
    );
}
