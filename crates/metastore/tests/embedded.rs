//! Behaviour only the embedded backend has: reopening, the file lock, read-only snapshots,
//! the commit log across restarts, in-memory stores and the end of a store.

use metastore::{CreateMode, EmbeddedStore, Error, Event, SessionOptions, SessionState};

const P: CreateMode = CreateMode::Persistent;

#[tokio::test]
async fn a_reopened_store_has_every_node_stat_and_zxid() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let (c, _events) = store.connect(SessionOptions::default());
    c.create_recursive("/a/b/c", b"data", P).await.unwrap();
    c.set_data("/a/b", b"x", Some(0)).await.unwrap();
    c.create("/a/seq-", b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    c.delete("/a/b/c", None).await.unwrap();
    let before: Vec<_> = ["/", "/a", "/a/b", "/a/seq-0000000001"]
        .iter()
        .map(|p| futures_free_get(&c, p))
        .collect();
    let mut expected = Vec::new();
    for get in before {
        expected.push(get.await);
    }
    let zxid = store.last_zxid();
    store.close().await;

    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(store.last_zxid(), zxid);
    let (c, _events) = store.connect(SessionOptions::default());
    for (path, data, stat) in expected {
        let (again, again_stat) = c.get_data(&path, false).await.unwrap();
        assert_eq!((again, again_stat), (data, stat), "{path}");
    }
    assert_eq!(
        c.get_children("/a", false).await.unwrap(),
        ["b", "seq-0000000001"]
    );
    // The sequence counter survives too.
    let next = c
        .create("/a/seq-", b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert_eq!(next, "/a/seq-0000000002");
    // New zxids continue from the old ones.
    let (_, stat) = c.get_data(&next, false).await.unwrap();
    assert!(stat.czxid > zxid);
}

async fn futures_free_get(c: &metastore::Client, path: &str) -> (String, Vec<u8>, metastore::Stat) {
    let (data, stat) = c.get_data(path, false).await.unwrap();
    (path.to_string(), data, stat)
}

#[tokio::test]
async fn the_store_file_is_locked_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert!(matches!(
        EmbeddedStore::open(dir.path()),
        Err(Error::StoreLocked(_))
    ));
    assert!(matches!(
        EmbeddedStore::open_read_only(dir.path()),
        Err(Error::StoreLocked(_))
    ));
    store.close().await;
    EmbeddedStore::open(dir.path()).unwrap().close().await;
}

#[tokio::test]
async fn a_halted_store_keeps_ephemerals_until_the_next_read_write_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let (c, mut events) = store.connect(SessionOptions::default());
    c.create("/brokers", b"", P).await.unwrap();
    c.create("/brokers/1", b"{}", CreateMode::Ephemeral)
        .await
        .unwrap();
    store.halt().await;
    assert_eq!(
        c.get_data("/brokers", false).await.unwrap_err(),
        Error::Closed
    );
    assert_eq!(
        events.recv().await,
        None,
        "a halted store says nothing more"
    );

    // A read-only snapshot shows the registration as the dead process left it.
    let snapshot = EmbeddedStore::open_read_only(dir.path()).unwrap();
    let (reader, _events) = snapshot.connect(SessionOptions::default());
    let (_, stat) = reader.get_data("/brokers/1", false).await.unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id());
    let refused = reader.create("/x", b"", P).await.unwrap_err();
    assert!(matches!(refused, Error::BadArguments(_)), "{refused:?}");
    // The snapshot does not hold the file.
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let (c2, _events) = store.connect(SessionOptions::default());
    assert_eq!(c2.exists("/brokers/1", false).await.unwrap(), None);
    assert_eq!(c2.get_data("/brokers", false).await.unwrap().1.cversion, 2);
    assert!(matches!(
        EmbeddedStore::open_read_only(&dir.path().join("nothing-here")),
        Err(Error::Backend(_))
    ));
}

#[tokio::test]
async fn closing_the_store_closes_every_session() {
    let store = EmbeddedStore::open_in_memory();
    let (a, mut a_events) = store.connect(SessionOptions::default());
    let (b, mut b_events) = store.connect(SessionOptions::default());
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    b.exists("/e", true).await.unwrap();
    store.close().await;
    assert_eq!(
        a_events.recv().await,
        Some(Event::Session(SessionState::Closed))
    );
    // b may or may not hear of /e before its own end; its stream ends with Closed either way.
    let mut last = None;
    while let Some(event) = b_events.recv().await {
        last = Some(event);
    }
    assert_eq!(last, Some(Event::Session(SessionState::Closed)));
    assert_eq!(a.create("/x", b"", P).await.unwrap_err(), Error::Closed);
    let (late, mut late_events) = store.connect(SessionOptions::default());
    assert_eq!(late.get_data("/", false).await.unwrap_err(), Error::Closed);
    assert_eq!(late_events.recv().await, None);
}

#[tokio::test]
async fn dropping_the_last_client_handle_closes_its_session() {
    let store = EmbeddedStore::open_in_memory();
    let (owner, _owner_events) = store.connect(SessionOptions::default());
    let (watcher, mut events) = store.connect(SessionOptions::default());
    owner
        .create("/e", b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    watcher.exists("/e", true).await.unwrap();
    let clone = owner.clone();
    drop(owner);
    assert!(
        clone.exists("/e", false).await.unwrap().is_some(),
        "a clone keeps it alive"
    );
    drop(clone);
    let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv()).await;
    assert!(matches!(event, Ok(Some(Event::Watch(_)))), "{event:?}");
    assert_eq!(watcher.exists("/e", false).await.unwrap(), None);
}

#[test]
fn expire_session_works_from_sync_code_and_ignores_unknown_ids() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = EmbeddedStore::open_in_memory();
    let (client, mut events) = store.connect(SessionOptions::default());
    store.expire_session(12345);
    store.expire_session(client.session_id());
    runtime.block_on(async {
        assert_eq!(
            events.recv().await,
            Some(Event::Session(SessionState::Expired))
        );
        assert_eq!(events.recv().await, None);
        assert_eq!(
            client.get_data("/", false).await.unwrap_err(),
            Error::SessionExpired
        );
    });
}

/// Writes 1 KiB values to 480 znodes, 32 at a time, `rounds` times over; returns the most
/// bytes redb's page cache held after any 32 writes.
async fn most_cache_bytes_while_rewriting(store: &EmbeddedStore, rounds: usize) -> u64 {
    let (c, _events) = store.connect(SessionOptions::default());
    let paths: Vec<String> = (0..480).map(|i| format!("/o/g{}/{}", i % 40, i)).collect();
    for path in &paths {
        c.create_recursive(path, b"", P).await.unwrap();
    }
    let value = vec![b'x'; 1024];
    let mut most = 0;
    for round in 0..rounds {
        for chunk in paths.chunks(32) {
            let writes: Vec<_> = chunk
                .iter()
                .map(|path| {
                    let (c, path, mut value) = (c.clone(), path.clone(), value.clone());
                    value[0] = b'0' + (round % 10) as u8;
                    tokio::spawn(async move { c.set_data(&path, &value, None).await })
                })
                .collect();
            for write in writes {
                write.await.unwrap().unwrap();
            }
            most = most.max(store.commit_stats().cache_bytes);
        }
    }
    c.close().await;
    most
}

/// Issue 14: the broker's RSS grew in the soak while its embedded store's redb page cache
/// filled up to its 64 MiB cap. The cache is capped at [`metastore::DEFAULT_CACHE_BYTES`]
/// (8 MiB) by default and at what `open_with_cache` asks for: 14,400 writes of 1 KiB (about
/// 15 MiB of log, well past either cap) fill it, and it never holds more than the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_cache_fills_up_to_its_cap_and_no_further() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let most = most_cache_bytes_while_rewriting(&store, 30).await;
    store.close().await;
    // 8 MiB, the default cap (it was 64 MiB).
    let cap = 8 * 1024 * 1024;
    assert_eq!(metastore::DEFAULT_CACHE_BYTES as u64, cap);
    assert!(
        most <= cap,
        "the default cache held {most} bytes, cap {cap}"
    );
    assert!(most > cap / 2, "the cache is in use: {most} bytes");

    let dir = tempfile::tempdir().unwrap();
    let cap = 1024 * 1024;
    let store = EmbeddedStore::open_with_cache(dir.path(), cap).unwrap();
    let most = most_cache_bytes_while_rewriting(&store, 10).await;
    store.close().await;
    assert!(most <= cap as u64, "a 1 MiB cache held {most} bytes");
    assert!(most > 0);
}
