//! The ZooKeeper backend across a server restart: a read issued during the outage completes
//! once the server is back, the stream reports `Disconnected` then `Connected`, every registered watch fires
//! once after the reconnection (events missed meanwhile are not resent by ZooKeeper), and
//! the session with its ephemeral node survives.
//!
//! It runs its own throwaway server with `scripts/zk.sh` (so it can restart it), and only
//! where the ZooKeeper tests run: with `GREGOR_TEST_ZOOKEEPER` set (the test script's proof
//! that ZooKeeper is installed). Without it, it fails unless `GREGOR_SKIP_ZOOKEEPER=1`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use metastore::{
    connect_zookeeper, CreateMode, Event, SessionOptions, SessionState, WatchedEvent,
    WatchedEventKind,
};

fn zk_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/zk.sh")
}

fn zk(args: &[&str]) {
    let status = Command::new("bash")
        .arg(zk_script())
        .args(args)
        .status()
        .expect("run zk.sh");
    assert!(status.success(), "scripts/zk.sh {args:?} failed");
}

/// Stops the server even if the test panics.
struct Server(String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(zk_script())
            .args(["stop", &self.0])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_server_restart() {
    if std::env::var("GREGOR_TEST_ZOOKEEPER").is_err() {
        if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
            return;
        }
        panic!(
            "GREGOR_TEST_ZOOKEEPER is not set. Run the ZooKeeper tests through the project's \
             test script, or set GREGOR_SKIP_ZOOKEEPER=1 to skip them in a quick local run."
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    zk(&["start", &dir_arg, &port.to_string()]);
    let _server = Server(dir_arg.clone());

    let connect = format!("127.0.0.1:{port}/restart");
    let opts = SessionOptions {
        session_timeout: Duration::from_secs(30),
    };
    let (client, mut events) = connect_zookeeper(&connect, opts).await.unwrap();
    client
        .create("/config", b"1", CreateMode::Persistent)
        .await
        .unwrap();
    client
        .create("/alive", b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    client.get_data("/config", true).await.unwrap();

    zk(&["stop", &dir_arg]);
    // The server comes back two seconds later; a read issued during the outage waits for the
    // reconnection (or is retried after a connection loss) instead of failing.
    let restart = tokio::task::spawn_blocking({
        let dir_arg = dir_arg.clone();
        move || {
            std::thread::sleep(Duration::from_secs(2));
            zk(&["start", &dir_arg, &port.to_string()]);
        }
    });
    let (data, _) = client.get_data("/config", false).await.unwrap();
    assert_eq!(data, b"1");
    restart.await.unwrap();

    let mut seen = Vec::new();
    while !seen.contains(&Event::Watch(WatchedEvent {
        kind: WatchedEventKind::NodeDataChanged,
        path: "/config".into(),
    })) {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an event after the restart")
            .expect("the stream stays open");
        seen.push(event);
    }
    let disconnected = seen
        .iter()
        .position(|e| *e == Event::Session(SessionState::Disconnected));
    let connected = seen
        .iter()
        .rposition(|e| *e == Event::Session(SessionState::Connected));
    assert!(
        matches!((disconnected, connected), (Some(d), Some(c)) if d < c),
        "{seen:?}"
    );
    assert!(
        client.exists("/alive", false).await.unwrap().is_some(),
        "the session survived"
    );
    client.close().await;
}
