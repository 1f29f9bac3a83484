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

/// Issue 14: writes in flight when the server stops complete once it is back, each applied
/// once: a create, a sequential create, a conditional and an unconditional set, a delete and
/// a multi, sent just before the server stops (so some reach it and lose their answer, some
/// do not) and while it is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_writes_across_a_server_restart_apply_once() {
    if std::env::var("GREGOR_TEST_ZOOKEEPER").is_err() {
        if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
            return;
        }
        panic!("GREGOR_TEST_ZOOKEEPER is not set (or set GREGOR_SKIP_ZOOKEEPER=1)");
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
    let connect = format!("127.0.0.1:{port}/writes");
    // Roomy: the restart (a JVM start) must fit in it on a loaded machine.
    let opts = SessionOptions {
        session_timeout: Duration::from_secs(60),
    };
    let (client, _events) = connect_zookeeper(&connect, opts).await.unwrap();
    for (path, data) in [
        ("/seq", &b""[..]),
        ("/cond", b"0"),
        ("/plain", b"0"),
        ("/gone", b""),
        ("/m", b"0"),
    ] {
        client
            .create(path, data, CreateMode::Persistent)
            .await
            .unwrap();
    }
    let rounds = 5;
    let mut tasks = Vec::new();
    let mut stopped = false;
    for round in 0..2 * rounds {
        // The first half goes out just before the stop, the second during the outage.
        if round == rounds {
            zk(&["stop", &dir_arg]);
            stopped = true;
        }
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            c.create(&format!("/n{round}"), b"x", CreateMode::Persistent)
                .await
                .map(drop)?;
            c.create(
                "/seq/s-",
                format!("{round}").as_bytes(),
                CreateMode::PersistentSequential,
            )
            .await
            .map(drop)?;
            Ok::<_, metastore::Error>(())
        }));
    }
    assert!(stopped);
    // One chain of conditional writes: each must apply exactly once for the next to match.
    let c = client.clone();
    let chain = tokio::spawn(async move {
        for version in 0..4 {
            let stat = c
                .set_data(
                    "/cond",
                    format!("{}", version + 1).as_bytes(),
                    Some(version),
                )
                .await?;
            assert_eq!(stat.version, version + 1);
            c.set_data("/plain", format!("{}", version + 1).as_bytes(), None)
                .await?;
            c.multi(vec![
                metastore::Op::Check {
                    path: "/cond".into(),
                    version: version + 1,
                },
                metastore::Op::SetData {
                    path: "/m".into(),
                    data: format!("{}", version + 1).into_bytes(),
                    version: Some(version),
                },
            ])
            .await?;
        }
        c.delete("/gone", Some(0)).await?;
        Ok::<_, metastore::Error>(())
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    zk(&["start", &dir_arg, &port.to_string()]);
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    chain.await.unwrap().unwrap();

    for round in 0..2 * rounds {
        let (data, stat) = client.get_data(&format!("/n{round}"), false).await.unwrap();
        assert_eq!((data.as_slice(), stat.version), (&b"x"[..], 0));
    }
    // One sequential node per round, none twice.
    let mut seen = Vec::new();
    for child in client.get_children("/seq", false).await.unwrap() {
        let (data, _) = client
            .get_data(&format!("/seq/{child}"), false)
            .await
            .unwrap();
        seen.push(String::from_utf8(data).unwrap());
    }
    seen.sort();
    let mut expected: Vec<String> = (0..2 * rounds).map(|r| r.to_string()).collect();
    expected.sort();
    assert_eq!(seen, expected);
    for path in ["/cond", "/plain", "/m"] {
        let (data, stat) = client.get_data(path, false).await.unwrap();
        assert_eq!((data.as_slice(), stat.version), (&b"4"[..], 4), "{path}");
    }
    assert!(client.exists("/gone", false).await.unwrap().is_none());
    client.close().await;
}

/// A loopback TCP proxy in front of ZooKeeper that can lose one answer: once the client sends
/// a packet containing the armed marker, it is forwarded but nothing more comes back, and
/// [`Proxy::cut`] then closes the connection (the client reconnects through the proxy).
struct Proxy {
    addr: String,
    shared: std::sync::Arc<std::sync::Mutex<ProxyState>>,
    tripped: std::sync::Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct ProxyState {
    marker: Option<Vec<u8>>,
    holding: bool,
    pumps: Vec<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let shared = std::sync::Arc::new(std::sync::Mutex::new(ProxyState::default()));
        let tripped = std::sync::Arc::new(tokio::sync::Notify::new());
        let (s, t) = (shared.clone(), tripped.clone());
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let (s1, t1) = (s.clone(), t.clone());
                let up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 1 << 16];
                    loop {
                        let n = match client_read.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let chunk = &buf[..n];
                        {
                            let mut state = s1.lock().unwrap();
                            let hit = state
                                .marker
                                .as_ref()
                                .is_some_and(|m| chunk.windows(m.len()).any(|w| w == m.as_slice()));
                            if hit {
                                state.marker = None;
                                state.holding = true;
                                t1.notify_one();
                            }
                        }
                        if server_write.write_all(chunk).await.is_err() {
                            return;
                        }
                    }
                });
                let s2 = s.clone();
                let down = tokio::spawn(async move {
                    let mut buf = vec![0u8; 1 << 16];
                    loop {
                        let n = match server_read.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if s2.lock().unwrap().holding {
                            continue;
                        }
                        if client_write.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
                let mut state = s.lock().unwrap();
                state.pumps.push(up);
                state.pumps.push(down);
            }
        });
        Proxy {
            addr,
            shared,
            tripped,
        }
    }

    fn arm(&self, marker: &str) {
        self.shared.lock().unwrap().marker = Some(marker.as_bytes().to_vec());
    }

    /// Waits until the armed packet went through.
    async fn wait_tripped(&self) {
        tokio::time::timeout(Duration::from_secs(30), self.tripped.notified())
            .await
            .expect("the armed write never reached the proxy");
    }

    /// Closes the connection (its answers lost); new connections pass everything.
    fn cut(&self) {
        let mut state = self.shared.lock().unwrap();
        for pump in state.pumps.drain(..) {
            pump.abort();
        }
        state.holding = false;
    }
}

/// Waits (bounded) until `check` holds on the observer's view.
async fn until<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 14: a write that reached ZooKeeper and applied, but whose answer was lost with the
/// connection, is not applied again when it is retried after the reconnection: the client
/// reads back and answers success (create, sequential create, conditional and unconditional
/// set, delete, multi). A write is refused with ConnectionLoss before this fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_a_lost_answer_is_not_applied_twice() {
    let Ok(hosts) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
        if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
            return;
        }
        panic!("GREGOR_TEST_ZOOKEEPER is not set (or set GREGOR_SKIP_ZOOKEEPER=1)");
    };
    let chroot = format!("/gregor-lost-answer-{}", std::process::id());
    let proxy = Proxy::start(hosts.clone()).await;
    let opts = SessionOptions {
        session_timeout: Duration::from_secs(30),
    };
    let (client, _events) = connect_zookeeper(&format!("{}{chroot}", proxy.addr), opts.clone())
        .await
        .unwrap();
    let (observer, _observer_events) = connect_zookeeper(&format!("{hosts}{chroot}"), opts)
        .await
        .unwrap();
    for path in ["/seq", "/cond", "/plain", "/gone", "/m"] {
        client
            .create(path, b"0", CreateMode::Persistent)
            .await
            .unwrap();
    }

    // Create.
    proxy.arm("created-once");
    let c = client.clone();
    let write = tokio::spawn(async move {
        c.create("/created-once", b"mine", CreateMode::Persistent)
            .await
    });
    proxy.wait_tripped().await;
    until("the create applied", || async {
        observer
            .exists("/created-once", false)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    proxy.cut();
    assert_eq!(write.await.unwrap().unwrap(), "/created-once");

    // Ephemeral create: ours only if this session owns it.
    proxy.arm("ephemeral-once");
    let c = client.clone();
    let write = tokio::spawn(async move {
        c.create("/ephemeral-once", b"e", CreateMode::Ephemeral)
            .await
    });
    proxy.wait_tripped().await;
    until("the ephemeral create applied", || async {
        observer
            .exists("/ephemeral-once", false)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    proxy.cut();
    assert_eq!(write.await.unwrap().unwrap(), "/ephemeral-once");

    // Sequential create: exactly one node.
    proxy.arm("s-");
    let c = client.clone();
    let write = tokio::spawn(async move {
        c.create("/seq/s-", b"one", CreateMode::PersistentSequential)
            .await
    });
    proxy.wait_tripped().await;
    until("the sequential create applied", || async {
        !observer
            .get_children("/seq", false)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    proxy.cut();
    let created = write.await.unwrap().unwrap();
    let children = observer.get_children("/seq", false).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    assert_eq!(created, format!("/seq/{}", children[0]));

    // Conditional set: version 0 -> 1, not refused, not 2.
    proxy.arm("cond");
    let c = client.clone();
    let write = tokio::spawn(async move { c.set_data("/cond", b"1", Some(0)).await });
    proxy.wait_tripped().await;
    until("the conditional set applied", || async {
        observer.get_data("/cond", false).await.unwrap().1.version == 1
    })
    .await;
    proxy.cut();
    assert_eq!(write.await.unwrap().unwrap().version, 1);

    // Unconditional set: applied once (version 1, not 2).
    proxy.arm("plain");
    let c = client.clone();
    let write = tokio::spawn(async move { c.set_data("/plain", b"1", None).await });
    proxy.wait_tripped().await;
    until("the set applied", || async {
        observer.get_data("/plain", false).await.unwrap().1.version == 1
    })
    .await;
    proxy.cut();
    assert_eq!(write.await.unwrap().unwrap().version, 1);

    // Delete.
    proxy.arm("gone");
    let c = client.clone();
    let write = tokio::spawn(async move { c.delete("/gone", Some(0)).await });
    proxy.wait_tripped().await;
    until("the delete applied", || async {
        observer.exists("/gone", false).await.unwrap().is_none()
    })
    .await;
    proxy.cut();
    write.await.unwrap().unwrap();

    // Multi: a fenced conditional set plus a create.
    proxy.arm("multi-made");
    let c = client.clone();
    let write = tokio::spawn(async move {
        c.multi(vec![
            metastore::Op::Check {
                path: "/cond".into(),
                version: 1,
            },
            metastore::Op::SetData {
                path: "/m".into(),
                data: b"1".to_vec(),
                version: Some(0),
            },
            metastore::Op::Create {
                path: "/multi-made".into(),
                data: b"m".to_vec(),
                mode: CreateMode::Persistent,
            },
        ])
        .await
    });
    proxy.wait_tripped().await;
    until("the multi applied", || async {
        observer
            .exists("/multi-made", false)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    proxy.cut();
    let results = write.await.unwrap().unwrap();
    assert!(matches!(&results[1], metastore::OpResult::SetData(stat) if stat.version == 1));
    assert_eq!(observer.get_data("/m", false).await.unwrap().1.version, 1);

    // Everything as applied once; then clean up.
    assert_eq!(
        observer.get_data("/cond", false).await.unwrap().1.version,
        1
    );
    assert_eq!(
        observer.get_data("/plain", false).await.unwrap().1.version,
        1
    );
    client.close().await;
    for path in ["/created-once", "/multi-made", "/cond", "/plain", "/m"] {
        observer.delete(path, None).await.unwrap();
    }
    observer.delete_recursive("/seq").await.unwrap();
    observer.close().await;
    let (root, _) = connect_zookeeper(&hosts, SessionOptions::default())
        .await
        .unwrap();
    let _ = root.delete(&chroot, None).await;
    root.close().await;
}

/// Issue 32: after the session moves to a new connection (here the proxy drops it, and the
/// client reconnects through it; in an ensemble, to another server), watches armed after
/// the reconnection fire on the changes that follow. ZooKeeper drops a connection's watches
/// with the connection, so the client must register its persistent watch again on the new
/// one (SetWatches2); the crate sent only the one-shot kinds (SetWatches), and every watch
/// went silent after the first reconnection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_32_watches_fire_after_a_reconnection() {
    let Ok(hosts) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
        if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
            return;
        }
        panic!("GREGOR_TEST_ZOOKEEPER is not set (or set GREGOR_SKIP_ZOOKEEPER=1)");
    };
    let chroot = format!("/gregor-rewatch-{}", std::process::id());
    let proxy = Proxy::start(hosts.clone()).await;
    let opts = SessionOptions {
        session_timeout: Duration::from_secs(30),
    };
    let (client, mut events) = connect_zookeeper(&format!("{}{chroot}", proxy.addr), opts.clone())
        .await
        .unwrap();
    let (observer, _observer_events) = connect_zookeeper(&format!("{hosts}{chroot}"), opts)
        .await
        .unwrap();
    client
        .create("/w", b"0", CreateMode::Persistent)
        .await
        .unwrap();

    for round in 1..=3 {
        // A reconnection: every watch fires once, as before.
        client.get_data("/w", true).await.unwrap();
        proxy.cut();
        next_event(&mut events, |e| {
            *e == Event::Session(SessionState::Connected)
        })
        .await;

        // Watches armed now see the changes that follow.
        client.get_data("/w", true).await.unwrap();
        client.get_children("/", true).await.unwrap();
        observer
            .set_data("/w", round.to_string().as_bytes(), None)
            .await
            .unwrap();
        next_event(&mut events, |e| {
            *e == Event::Watch(WatchedEvent {
                kind: WatchedEventKind::NodeDataChanged,
                path: "/w".into(),
            })
        })
        .await;
        observer
            .create(&format!("/c{round}"), b"", CreateMode::Persistent)
            .await
            .unwrap();
        next_event(&mut events, |e| {
            *e == Event::Watch(WatchedEvent {
                kind: WatchedEventKind::NodeChildrenChanged,
                path: "/".into(),
            })
        })
        .await;
    }
    client.close().await;
}

/// The next event that `wanted` accepts, skipping others; fails after 15 s.
async fn next_event(events: &mut metastore::Events, wanted: impl Fn(&Event) -> bool) {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(15), events.recv())
            .await
            .unwrap_or_else(|_| panic!("no wanted event within 15 s; saw {seen:?}"))
            .expect("the stream stays open");
        if wanted(&event) {
            return;
        }
        seen.push(event);
    }
}
