//! `gregor meta` end to end: the built binary reads an embedded store of a stopped server
//! (`--data-dir`) and a live ZooKeeper (`--zookeeper`), and refuses a locked store.
//!
//! The ZooKeeper case needs `GREGOR_TEST_ZOOKEEPER=host:port` (the test script starts a
//! server with scripts/zk.sh); it fails without it unless `GREGOR_SKIP_ZOOKEEPER=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use metastore::{Client, CreateMode, EmbeddedStore, SessionOptions, EMBEDDED_SUBDIR};

fn gregor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gregor"))
        .arg("meta")
        .args(args)
        .output()
        .expect("run gregor")
}

fn ok(args: &[&str]) -> String {
    let out = gregor(args);
    assert!(
        out.status.success(),
        "gregor meta {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn err(args: &[&str]) -> String {
    let out = gregor(args);
    assert!(!out.status.success(), "gregor meta {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("gregor-meta-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The layout the tests read back, written like Kafka would.
async fn populate(client: &Client) {
    let p = CreateMode::Persistent;
    client
        .create_recursive("/brokers/ids", b"", p)
        .await
        .unwrap();
    client
        .create(
            "/brokers/ids/1",
            br#"{"version":5,"host":"localhost","port":9092}"#,
            CreateMode::Ephemeral,
        )
        .await
        .unwrap();
    client
        .create_recursive(
            "/brokers/topics/orders",
            br#"{"version":2,"partitions":{"0":[1]}}"#,
            p,
        )
        .await
        .unwrap();
    client.create("/plain", b"not json", p).await.unwrap();
    client
        .set_data("/plain", b"still not json", Some(0))
        .await
        .unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A data dir whose server has stopped, leaving its broker registration behind.
fn stopped_server_data_dir() -> TempDir {
    let dir = TempDir::new("stopped");
    runtime().block_on(async {
        let store = EmbeddedStore::open(&dir.path().join(EMBEDDED_SUBDIR)).unwrap();
        let (client, _events) = store.connect(SessionOptions::default());
        populate(&client).await;
        // Stop like a killed server: the broker registration stays on disk.
        store.halt().await;
    });
    dir
}

#[test]
fn ls_get_and_tree_read_a_stopped_servers_store() {
    let dir = stopped_server_data_dir();
    assert_eq!(
        ok(&["ls", "/", "--data-dir", dir.arg()]),
        "[brokers, plain]\n"
    );
    assert_eq!(
        ok(&["ls", "/brokers", "--data-dir", dir.arg()]),
        "[ids, topics]\n"
    );
    assert_eq!(
        ok(&["ls", "/brokers/ids/1", "--data-dir", dir.arg()]),
        "[]\n"
    );

    let get = ok(&["get", "/brokers/ids/1", "--data-dir", dir.arg()]);
    let expected_json = "{\n  \"host\": \"localhost\",\n  \"port\": 9092,\n  \"version\": 5\n}\n";
    assert!(get.starts_with(expected_json), "{get}");
    let stat: Vec<&str> = get[expected_json.len()..].lines().collect();
    let keys: Vec<&str> = stat
        .iter()
        .map(|l| l.split(" = ").next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "cZxid",
            "ctime",
            "mZxid",
            "mtime",
            "pZxid",
            "cversion",
            "dataVersion",
            "aclVersion",
            "ephemeralOwner",
            "dataLength",
            "numChildren"
        ]
    );
    assert!(stat[0].starts_with("cZxid = 0x"), "{get}");
    assert!(
        stat[1].ends_with(" UTC 2026") || stat[1].contains(" UTC "),
        "{get}"
    );
    assert_ne!(
        stat[8], "ephemeralOwner = 0x0",
        "the stopped server's registration is shown as it was"
    );
    assert_eq!(stat[9], "dataLength = 44");

    let get = ok(&["get", "/plain", "--data-dir", dir.arg()]);
    assert!(get.starts_with("still not json\ncZxid = 0x"), "{get}");
    assert!(
        get.contains("\ndataVersion = 1\n") && get.contains("\nephemeralOwner = 0x0\n"),
        "{get}"
    );

    let tree = ok(&["tree", "/", "--data-dir", dir.arg()]);
    assert_eq!(
        tree,
        "/\n  brokers\n    ids\n      1\n    topics\n      orders\n  plain\n"
    );
    assert_eq!(
        ok(&["tree", "/brokers/topics", "--data-dir", dir.arg()]),
        "/brokers/topics\n  orders\n"
    );

    let missing = err(&["get", "/nope", "--data-dir", dir.arg()]);
    assert!(missing.contains("no node at /nope"), "{missing}");
}

#[test]
fn a_running_servers_store_is_refused_clearly() {
    let dir = TempDir::new("locked");
    let rt = runtime();
    let store = EmbeddedStore::open(&dir.path().join(EMBEDDED_SUBDIR)).unwrap();
    let stderr = err(&["ls", "/", "--data-dir", dir.arg()]);
    assert!(stderr.contains("locked by a running server"), "{stderr}");
    rt.block_on(store.close());
    assert_eq!(ok(&["ls", "/", "--data-dir", dir.arg()]), "[]\n");
}

#[test]
fn a_dir_without_a_store_is_an_error() {
    let dir = TempDir::new("empty");
    let stderr = err(&["ls", "/", "--data-dir", dir.arg()]);
    assert!(stderr.contains("no metadata store"), "{stderr}");
    assert!(
        !dir.path().join(EMBEDDED_SUBDIR).exists(),
        "reading must not create a store"
    );
    let stderr = err(&["ls", "/"]);
    assert!(
        stderr.contains("--zookeeper") && stderr.contains("--data-dir"),
        "{stderr}"
    );
}

#[test]
fn reads_a_live_zookeeper() {
    let Ok(hosts) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
        if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
            return;
        }
        panic!(
            "GREGOR_TEST_ZOOKEEPER is not set. Run this test through the project's test script \
             (it starts ZooKeeper with scripts/zk.sh), or set GREGOR_SKIP_ZOOKEEPER=1 to skip it."
        );
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let connect = format!("{hosts}/gregor-cli-meta-{}-{nanos}", std::process::id());
    let rt = runtime();
    let (client, _events) = rt
        .block_on(metastore::connect_zookeeper(
            &connect,
            SessionOptions::default(),
        ))
        .unwrap();
    rt.block_on(populate(&client));
    assert_eq!(
        ok(&["ls", "/brokers", "--zookeeper", &connect]),
        "[ids, topics]\n"
    );
    let get = ok(&["get", "/brokers/topics/orders", "--zookeeper", &connect]);
    assert!(get.starts_with("{\n  \"partitions\": {\n    \"0\": [\n      1\n    ]\n  },\n  \"version\": 2\n}\ncZxid = 0x"), "{get}");
    let owner = format!("ephemeralOwner = {:#x}", client.session_id());
    assert!(ok(&["get", "/brokers/ids/1", "--zookeeper", &connect]).contains(&owner));
    assert_eq!(
        ok(&["tree", "/", "--zookeeper", &connect]),
        "/\n  brokers\n    ids\n      1\n    topics\n      orders\n  plain\n"
    );
    rt.block_on(client.close());
}
