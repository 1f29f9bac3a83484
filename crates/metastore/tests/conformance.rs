//! One conformance suite, run against both backends: every case in `cases` is instantiated
//! once for the embedded store (durable, in a temporary directory) and once for a real
//! ZooKeeper, each case in its own chroot.
//!
//! The ZooKeeper half needs `GREGOR_TEST_ZOOKEEPER=host:port` (the test script starts a
//! throwaway server with `scripts/zk.sh`). Without it those tests fail, unless
//! `GREGOR_SKIP_ZOOKEEPER=1` is set for a quick local run.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metastore::{
    connect_zookeeper, Client, CreateMode, EmbeddedStore, Error, Event, Events, Op, OpResult,
    SessionOptions, SessionState, WatchedEvent, WatchedEventKind,
};

/// How long a test waits for an event that must come.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a test waits to be confident that an event will not come.
const QUIET_PERIOD: Duration = Duration::from_millis(300);

/// A fresh, empty store for one test case.
enum Backend {
    Embedded {
        store: EmbeddedStore,
        _dir: tempfile::TempDir,
    },
    ZooKeeper {
        connect: String,
    },
}

impl Backend {
    async fn embedded(_case: &str) -> Option<Backend> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = EmbeddedStore::open(dir.path()).expect("open embedded store");
        Some(Backend::Embedded { store, _dir: dir })
    }

    async fn zookeeper(case: &str) -> Option<Backend> {
        let Ok(hosts) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
            if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
                eprintln!("skipping the ZooKeeper case {case}: GREGOR_SKIP_ZOOKEEPER=1");
                return None;
            }
            panic!(
                "GREGOR_TEST_ZOOKEEPER is not set. Run the ZooKeeper conformance tests through \
                 the project's test script (it starts a throwaway server with scripts/zk.sh and \
                 exports GREGOR_TEST_ZOOKEEPER=127.0.0.1:PORT), or set GREGOR_SKIP_ZOOKEEPER=1 \
                 to skip them in a quick local run."
            );
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let connect = format!(
            "{hosts}/gregor-conformance/{case}-{}-{nanos}",
            std::process::id()
        );
        Some(Backend::ZooKeeper { connect })
    }

    async fn connect(&self) -> (Client, Events) {
        self.connect_with(SessionOptions::default()).await
    }

    async fn connect_with(&self, opts: SessionOptions) -> (Client, Events) {
        match self {
            Backend::Embedded { store, .. } => store.connect(opts),
            Backend::ZooKeeper { connect } => connect_zookeeper(connect, opts)
                .await
                .expect("connect to ZooKeeper"),
        }
    }
}

/// The next watch event (session events other than the expected end are skipped).
async fn next_watch(events: &mut Events) -> WatchedEvent {
    loop {
        match tokio::time::timeout(EVENT_TIMEOUT, events.recv()).await {
            Ok(Some(Event::Watch(event))) => return event,
            Ok(Some(Event::Session(state))) => {
                eprintln!("session event {state:?} while waiting for a watch event")
            }
            Ok(None) => panic!("event stream ended while waiting for a watch event"),
            Err(_) => panic!("no watch event within {EVENT_TIMEOUT:?}"),
        }
    }
}

/// Waits for the session's end state, skipping anything before it, then checks the stream ends.
async fn expect_session_end(events: &mut Events, end: SessionState) {
    loop {
        match tokio::time::timeout(EVENT_TIMEOUT, events.recv()).await {
            Ok(Some(Event::Session(state))) if state == end => break,
            Ok(Some(other)) => eprintln!("skipping {other:?} while waiting for {end:?}"),
            Ok(None) => panic!("event stream ended before {end:?}"),
            Err(_) => panic!("no {end:?} within {EVENT_TIMEOUT:?}"),
        }
    }
    let rest = tokio::time::timeout(EVENT_TIMEOUT, events.recv())
        .await
        .expect("stream ends");
    assert_eq!(rest, None, "nothing may follow {end:?}");
}

async fn expect_quiet(events: &mut Events) {
    if let Ok(Some(event)) = tokio::time::timeout(QUIET_PERIOD, events.recv()).await {
        panic!("unexpected event {event:?}");
    }
}

fn watch(kind: WatchedEventKind, path: &str) -> WatchedEvent {
    WatchedEvent {
        kind,
        path: path.to_string(),
    }
}

const P: CreateMode = CreateMode::Persistent;

mod cases {
    use super::*;

    pub async fn version_conflicts(b: &Backend) {
        let (c, _events) = b.connect().await;
        c.create("/v", b"a", P).await.unwrap();
        let stat = c.set_data("/v", b"b", Some(0)).await.unwrap();
        assert_eq!(stat.version, 1);
        let err = c.set_data("/v", b"c", Some(0)).await.unwrap_err();
        assert_eq!(
            err,
            Error::BadVersion {
                path: "/v".into(),
                expected: 0
            }
        );
        assert_eq!(c.get_data("/v", false).await.unwrap().0, b"b");
        let err = c.delete("/v", Some(0)).await.unwrap_err();
        assert!(
            matches!(err, Error::BadVersion { expected: 0, .. }),
            "{err:?}"
        );
        assert_eq!(c.set_data("/v", b"d", None).await.unwrap().version, 2);
        c.delete("/v", Some(2)).await.unwrap();
        assert_eq!(c.exists("/v", false).await.unwrap(), None);
    }

    pub async fn typed_errors(b: &Backend) {
        let (c, _events) = b.connect().await;
        assert_eq!(
            c.get_data("/missing", false).await.unwrap_err(),
            Error::NoNode("/missing".into())
        );
        assert_eq!(
            c.get_children("/missing", false).await.unwrap_err(),
            Error::NoNode("/missing".into())
        );
        assert!(matches!(
            c.set_data("/missing", b"", None).await,
            Err(Error::NoNode(_))
        ));
        assert!(matches!(
            c.delete("/missing", None).await,
            Err(Error::NoNode(_))
        ));
        assert!(matches!(
            c.create("/missing/child", b"", P).await,
            Err(Error::NoNode(_))
        ));
        c.create("/e", b"", P).await.unwrap();
        assert_eq!(
            c.create("/e", b"", P).await.unwrap_err(),
            Error::NodeExists("/e".into())
        );
        c.create("/e/child", b"", P).await.unwrap();
        assert_eq!(
            c.delete("/e", None).await.unwrap_err(),
            Error::NotEmpty("/e".into())
        );
        for bad in ["e", "/e/", "//e", "/e//child", "/e/./child", "/e/.."] {
            let err = c.get_data(bad, false).await.unwrap_err();
            assert!(matches!(err, Error::BadArguments(_)), "{bad:?}: {err:?}");
            let err = c.create(bad, b"", P).await.unwrap_err();
            assert!(matches!(err, Error::BadArguments(_)), "{bad:?}: {err:?}");
        }
        assert_eq!(c.exists("/missing", false).await.unwrap(), None);
    }

    pub async fn stats_follow_zookeeper(b: &Backend) {
        let (c, _events) = b.connect().await;
        c.create("/s", b"12345", P).await.unwrap();
        let (_, s) = c.get_data("/s", false).await.unwrap();
        assert!(s.czxid > 0);
        assert_eq!((s.mzxid, s.pzxid), (s.czxid, s.czxid));
        assert_eq!(
            (s.version, s.cversion, s.num_children, s.data_length),
            (0, 0, 0, 5)
        );
        assert_eq!(s.ephemeral_owner, 0);
        assert!(s.ctime > 1_600_000_000_000 && s.mtime == s.ctime, "{s:?}");

        c.create("/s/child", b"", P).await.unwrap();
        let (_, child) = c.get_data("/s/child", false).await.unwrap();
        let (_, parent) = c.get_data("/s", false).await.unwrap();
        assert!(child.czxid > s.czxid);
        assert_eq!(
            parent.pzxid, child.czxid,
            "a child create sets the parent's pzxid"
        );
        assert_eq!((parent.cversion, parent.num_children), (1, 1));
        assert_eq!(
            (parent.mzxid, parent.version),
            (s.mzxid, 0),
            "data untouched"
        );

        let set = c.set_data("/s", b"xy", Some(0)).await.unwrap();
        assert!(set.mzxid > child.czxid);
        assert_eq!(
            (set.czxid, set.version, set.data_length, set.num_children),
            (s.czxid, 1, 2, 1)
        );
        assert_eq!(c.exists("/s", false).await.unwrap(), Some(set));

        c.delete("/s/child", None).await.unwrap();
        let (_, after) = c.get_data("/s", false).await.unwrap();
        assert!(after.pzxid > set.mzxid);
        assert_eq!((after.cversion, after.num_children), (2, 0));

        let path = c
            .create("/s/eph", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let (_, eph) = c.get_data(&path, false).await.unwrap();
        assert_eq!(eph.ephemeral_owner, c.session_id());
        assert_ne!(c.session_id(), 0);
    }

    pub async fn sequential_naming(b: &Backend) {
        let (c, _events) = b.connect().await;
        c.create("/q", b"", P).await.unwrap();
        c.create("/r", b"", P).await.unwrap();
        let seq = CreateMode::PersistentSequential;
        assert_eq!(
            c.create("/q/job-", b"", seq).await.unwrap(),
            "/q/job-0000000000"
        );
        assert_eq!(
            c.create("/q/job-", b"", seq).await.unwrap(),
            "/q/job-0000000001"
        );
        // The counter counts every child created under the parent, whatever its name.
        c.create("/q/plain", b"", P).await.unwrap();
        let eph = CreateMode::EphemeralSequential;
        assert_eq!(
            c.create("/q/lock-", b"", eph).await.unwrap(),
            "/q/lock-0000000003"
        );
        // After deletes the next number is still larger (ZooKeeper's exact number after a
        // delete depends on server internals, so only the order is part of the contract).
        c.delete("/q/plain", None).await.unwrap();
        let next = c.create("/q/lock-", b"", eph).await.unwrap();
        let suffix = next.strip_prefix("/q/lock-").unwrap();
        assert_eq!(suffix.len(), 10, "{next}");
        assert!(suffix.parse::<u32>().unwrap() > 3, "{next}");
        // Each parent has its own counter.
        assert_eq!(
            c.create("/r/job-", b"", seq).await.unwrap(),
            "/r/job-0000000000"
        );
        assert!(matches!(
            c.create("/r/", b"", seq).await,
            Err(Error::BadArguments(_))
        ));
        let children = c.get_children("/q", false).await.unwrap();
        assert_eq!(children.len(), 4);
        assert_eq!(
            children[..3],
            ["job-0000000000", "job-0000000001", "lock-0000000003"]
        );
    }

    pub async fn ephemeral_cleanup_on_close(b: &Backend) {
        let (owner, mut owner_events) = b.connect().await;
        let (other, mut other_events) = b.connect().await;
        owner.create("/live", b"", P).await.unwrap();
        let path = owner
            .create("/live/broker-1", b"{}", CreateMode::Ephemeral)
            .await
            .unwrap();
        assert!(other.exists(&path, true).await.unwrap().is_some());
        assert_eq!(
            other.get_children("/live", true).await.unwrap(),
            ["broker-1"]
        );
        owner.close().await;
        assert_eq!(
            next_watch(&mut other_events).await,
            watch(WatchedEventKind::NodeDeleted, &path)
        );
        assert_eq!(
            next_watch(&mut other_events).await,
            watch(WatchedEventKind::NodeChildrenChanged, "/live")
        );
        assert_eq!(other.exists(&path, false).await.unwrap(), None);
        assert_eq!(
            owner.get_data("/live", false).await.unwrap_err(),
            Error::Closed
        );
        assert_eq!(owner.create("/x", b"", P).await.unwrap_err(), Error::Closed);
        expect_session_end(&mut owner_events, SessionState::Closed).await;
        owner.close().await; // idempotent
        other.close().await;
    }

    pub async fn ephemeral_cleanup_on_expiry(b: &Backend) {
        let opts = SessionOptions {
            session_timeout: Duration::from_secs(2),
        };
        let (owner, mut owner_events) = b.connect_with(opts).await;
        let (other, mut other_events) = b.connect().await;
        owner.create("/ids", b"", P).await.unwrap();
        let path = owner
            .create("/ids/1", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let (_, stat) = other.get_data(&path, true).await.unwrap();
        assert_eq!(stat.ephemeral_owner, owner.session_id());
        owner.expire_session().await.unwrap();
        expect_session_end(&mut owner_events, SessionState::Expired).await;
        assert_eq!(
            next_watch(&mut other_events).await,
            watch(WatchedEventKind::NodeDeleted, &path)
        );
        assert_eq!(other.exists(&path, false).await.unwrap(), None);
        assert_eq!(
            owner.create("/ids/2", b"", P).await.unwrap_err(),
            Error::SessionExpired
        );
        assert_eq!(
            owner.get_data("/ids", false).await.unwrap_err(),
            Error::SessionExpired
        );
        // The owner re-registers with a new session.
        let (again, _events) = b.connect().await;
        again
            .create(&path, b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        assert_ne!(again.session_id(), owner.session_id());
    }

    pub async fn no_children_under_ephemerals(b: &Backend) {
        let (c, _events) = b.connect().await;
        c.create("/eph", b"", CreateMode::Ephemeral).await.unwrap();
        let err = c.create("/eph/child", b"", P).await.unwrap_err();
        assert!(matches!(err, Error::NoChildrenForEphemerals(_)), "{err:?}");
    }

    pub async fn one_shot_watches(b: &Backend) {
        let (c, mut events) = b.connect().await;
        let (writer, mut writer_events) = b.connect().await;
        c.create("/w", b"0", P).await.unwrap();

        // A data watch fires once, however many changes follow.
        c.get_data("/w", true).await.unwrap();
        writer.set_data("/w", b"1", None).await.unwrap();
        writer.set_data("/w", b"2", None).await.unwrap();
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeDataChanged, "/w")
        );
        expect_quiet(&mut events).await;

        // An exists watch on a missing node fires on its creation.
        assert_eq!(c.exists("/w/x", true).await.unwrap(), None);
        // A child watch fires on a child create, once.
        c.get_children("/w", true).await.unwrap();
        writer.create("/w/x", b"", P).await.unwrap();
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeCreated, "/w/x")
        );
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeChildrenChanged, "/w")
        );
        writer.create("/w/y", b"", P).await.unwrap();
        expect_quiet(&mut events).await;

        // A data watch fires NodeDeleted on delete; an exists watch on a present node too.
        c.get_data("/w/x", true).await.unwrap();
        c.exists("/w/y", true).await.unwrap();
        writer.delete("/w/x", None).await.unwrap();
        writer.delete("/w/y", None).await.unwrap();
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeDeleted, "/w/x")
        );
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeDeleted, "/w/y")
        );
        expect_quiet(&mut events).await;

        // A child watch fires NodeDeleted when its node goes; a read of a missing node sets none.
        writer.create("/w/z", b"", P).await.unwrap();
        c.get_children("/w/z", true).await.unwrap();
        assert!(c.get_data("/w/none", true).await.is_err());
        writer.delete("/w/z", None).await.unwrap();
        writer.create("/w/none", b"", P).await.unwrap();
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeDeleted, "/w/z")
        );
        expect_quiet(&mut events).await;

        // A watch set right after another client's change does not fire for that change,
        // even if this client's stream has not caught up with it yet.
        for i in 0..20 {
            let path = writer.create(&format!("/w/late{i}"), b"", P).await.unwrap();
            writer.set_data(&path, b"1", None).await.unwrap();
            c.get_data(&path, true).await.unwrap();
            c.exists(&path, true).await.unwrap();
        }
        expect_quiet(&mut events).await;

        // Nobody else hears about it.
        expect_quiet(&mut writer_events).await;
    }

    pub async fn watch_order_under_concurrent_writers(b: &Backend) {
        const NODES: usize = 40;
        const WRITERS: usize = 4;
        let (observer, mut events) = b.connect().await;
        observer.create("/o", b"", P).await.unwrap();
        for n in 0..NODES {
            let path = format!("/o/n{n}");
            observer.create(&path, b"", P).await.unwrap();
            observer.get_data(&path, true).await.unwrap();
        }
        observer.get_children("/o", true).await.unwrap();
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let (writer, _events) = b.connect().await;
            tasks.push(tokio::spawn(async move {
                let mut zxids = Vec::new();
                for n in (w..NODES).step_by(WRITERS) {
                    let path = format!("/o/n{n}");
                    let stat = writer.set_data(&path, b"x", None).await.unwrap();
                    zxids.push((stat.mzxid, path));
                }
                let created = writer.create(&format!("/o/new{w}"), b"", P).await.unwrap();
                let (_, stat) = writer.get_data(&created, false).await.unwrap();
                zxids.push((stat.czxid, "/o".to_string()));
                writer.close().await;
                zxids
            }));
        }
        let mut by_zxid = Vec::new();
        for task in tasks {
            by_zxid.extend(task.await.unwrap());
        }
        by_zxid.sort();
        // Only the first child change fires the one-shot child watch on /o.
        let first_child_change = by_zxid.iter().position(|(_, p)| p == "/o").unwrap();
        let expected: Vec<String> = by_zxid
            .iter()
            .enumerate()
            .filter(|(i, (_, p))| p != "/o" || *i == first_child_change)
            .map(|(_, (_, p))| p.clone())
            .collect();
        let mut seen = Vec::new();
        for _ in 0..expected.len() {
            seen.push(next_watch(&mut events).await.path);
        }
        assert_eq!(
            seen, expected,
            "events must arrive in the writes' zxid order"
        );
        expect_quiet(&mut events).await;
    }

    pub async fn multi_is_atomic(b: &Backend) {
        let (c, mut events) = b.connect().await;
        c.create("/m", b"", P).await.unwrap();
        c.get_children("/m", true).await.unwrap();
        let err = c
            .multi(vec![
                Op::Create {
                    path: "/m/a".into(),
                    data: vec![],
                    mode: P,
                },
                Op::SetData {
                    path: "/m".into(),
                    data: b"x".to_vec(),
                    version: Some(7),
                },
                Op::Create {
                    path: "/m/b".into(),
                    data: vec![],
                    mode: P,
                },
            ])
            .await
            .unwrap_err();
        match err {
            Error::Multi { index: 1, source } => {
                assert!(matches!(*source, Error::BadVersion { .. }), "{source:?}")
            }
            other => panic!("expected a multi error at op 1, got {other:?}"),
        }
        assert_eq!(
            c.exists("/m/a", false).await.unwrap(),
            None,
            "nothing was applied"
        );
        let (data, stat) = c.get_data("/m", false).await.unwrap();
        assert_eq!(
            (data.as_slice(), stat.version, stat.cversion),
            (&b""[..], 0, 0)
        );
        expect_quiet(&mut events).await;

        // The controller's fencing: every write is conditional on the epoch node's version.
        c.create("/epoch", b"1", P).await.unwrap();
        let results = c
            .multi(vec![
                Op::Check {
                    path: "/epoch".into(),
                    version: 0,
                },
                Op::Create {
                    path: "/m/a".into(),
                    data: b"a".to_vec(),
                    mode: P,
                },
                Op::SetData {
                    path: "/m".into(),
                    data: b"x".to_vec(),
                    version: Some(0),
                },
                Op::Delete {
                    path: "/m/a".into(),
                    version: Some(0),
                },
            ])
            .await
            .unwrap();
        assert_eq!(results.len(), 4);
        assert_eq!(results[0], OpResult::Checked);
        assert_eq!(results[1], OpResult::Created("/m/a".into()));
        assert!(matches!(results[2], OpResult::SetData(s) if s.version == 1));
        assert_eq!(results[3], OpResult::Deleted);
        assert_eq!(
            next_watch(&mut events).await,
            watch(WatchedEventKind::NodeChildrenChanged, "/m")
        );

        c.set_data("/epoch", b"2", Some(0)).await.unwrap(); // a new controller
        let err = c
            .multi(vec![
                Op::Check {
                    path: "/epoch".into(),
                    version: 0,
                },
                Op::SetData {
                    path: "/m".into(),
                    data: b"stale".to_vec(),
                    version: None,
                },
            ])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Multi { index: 0, .. }), "{err:?}");
        assert_eq!(c.get_data("/m", false).await.unwrap().0, b"x");
        let err = c
            .multi(vec![Op::Check {
                path: "/nope".into(),
                version: 0,
            }])
            .await
            .unwrap_err();
        match err {
            Error::Multi { index: 0, source } => assert!(matches!(*source, Error::NoNode(_))),
            other => panic!("{other:?}"),
        }
    }

    pub async fn recursive_helpers(b: &Backend) {
        let (c, _events) = b.connect().await;
        assert_eq!(
            c.create_recursive("/r/a/b/c", b"leaf", P).await.unwrap(),
            "/r/a/b/c"
        );
        assert_eq!(c.get_data("/r/a/b", false).await.unwrap().0, b"");
        assert_eq!(c.get_data("/r/a/b/c", false).await.unwrap().0, b"leaf");
        assert!(matches!(
            c.create_recursive("/r/a/b/c", b"", P).await,
            Err(Error::NodeExists(_))
        ));
        c.create_recursive("/r/a/x", b"", P).await.unwrap();
        c.create("/r/a/x/y", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        c.delete_recursive("/r").await.unwrap();
        assert_eq!(c.exists("/r", false).await.unwrap(), None);
        c.delete_recursive("/r").await.unwrap();
        assert!(matches!(
            c.delete_recursive("/").await,
            Err(Error::BadArguments(_))
        ));
    }

    /// `get_data_many` answers each path as `get_data` would, in order, across the
    /// thousand-node chunks of ZooKeeper's multi-reads, with missing and invalid paths
    /// failing alone.
    pub async fn get_data_many_reads_each_path(b: &Backend) {
        let (c, _events) = b.connect().await;
        c.create("/many", b"", P).await.unwrap();
        let written: Vec<String> = (0..2_100).map(|i| format!("/many/{i}")).collect();
        let ops = written
            .iter()
            .map(|path| Op::Create {
                path: path.clone(),
                data: path.as_bytes().to_vec(),
                mode: P,
            })
            .collect::<Vec<_>>();
        for chunk in ops.chunks(500) {
            c.multi(chunk.to_vec()).await.unwrap();
        }
        c.set_data("/many/7", b"changed", None).await.unwrap();
        let mut paths: Vec<&str> = written.iter().map(String::as_str).collect();
        paths.insert(1_500, "/many/missing");
        let results = c.get_data_many(&paths).await;
        assert_eq!(results.len(), paths.len());
        for (path, result) in paths.iter().zip(&results) {
            match *path {
                "/many/missing" => assert!(
                    matches!(result, Err(Error::NoNode(p)) if p == "/many/missing"),
                    "{result:?}"
                ),
                "/many/7" => {
                    let (data, stat) = result.as_ref().unwrap();
                    assert_eq!((data.as_slice(), stat.version), (&b"changed"[..], 1));
                }
                _ => {
                    let (data, stat) = result.as_ref().unwrap();
                    assert_eq!((data.as_slice(), stat.version), (path.as_bytes(), 0));
                }
            }
        }
        // An invalid path fails alone; the others of its chunk are still read.
        let results = c.get_data_many(&["/many/1", "no-slash", "/many/2"]).await;
        assert_eq!(results[0].as_ref().unwrap().0, b"/many/1");
        assert!(
            matches!(results[1], Err(Error::BadArguments(_))),
            "{:?}",
            results[1]
        );
        assert_eq!(results[2].as_ref().unwrap().0, b"/many/2");
        assert!(c.get_data_many(&[]).await.is_empty());
    }

    pub async fn many_clients_share_one_store(b: &Backend) {
        let mut clients = Vec::new();
        for i in 0..5 {
            let (c, events) = b.connect().await;
            if i == 0 {
                c.create("/brokers", b"", P).await.unwrap();
            }
            c.create(&format!("/brokers/{i}"), b"", CreateMode::Ephemeral)
                .await
                .unwrap();
            clients.push((c, events));
        }
        let ids: HashMap<i64, usize> = clients
            .iter()
            .enumerate()
            .map(|(i, (c, _))| (c.session_id(), i))
            .collect();
        assert_eq!(ids.len(), 5, "every client has its own session");
        clients[3].0.close().await;
        let (reader, _events) = b.connect().await;
        assert_eq!(
            reader.get_children("/brokers", false).await.unwrap(),
            ["0", "1", "2", "4"]
        );
    }
}

macro_rules! instantiate {
    ($backend:ident, [$($case:ident),* $(,)?]) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(backend) = super::Backend::$backend(stringify!($case)).await else {
                        return;
                    };
                    super::cases::$case(&backend).await;
                }
            )*
        }
    };
}

macro_rules! suite {
    ($($backend:ident),*) => {
        $(
            instantiate!($backend, [
                version_conflicts,
                typed_errors,
                stats_follow_zookeeper,
                sequential_naming,
                ephemeral_cleanup_on_close,
                ephemeral_cleanup_on_expiry,
                no_children_under_ephemerals,
                one_shot_watches,
                watch_order_under_concurrent_writers,
                multi_is_atomic,
                recursive_helpers,
                get_data_many_reads_each_path,
                many_clients_share_one_store,
            ]);
        )*
    };
}

suite!(embedded, zookeeper);
