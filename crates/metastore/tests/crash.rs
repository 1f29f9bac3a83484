//! Crash durability of the embedded store: a child process (this test binary, re-run with
//! an environment variable) writes and prints every acknowledged write; the parent kills it
//! with SIGKILL mid-write, reopens the store and checks that every acknowledged write is
//! there, that the tree is consistent and that the dead process's ephemeral node is gone.
//! The values are large so that the run crosses checkpoints of the commit log (the kill may
//! land in one).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use metastore::{Client, CreateMode, EmbeddedStore, Error, SessionOptions};

/// Set (to the store directory) only in the child process.
const CHILD_ENV: &str = "GREGOR_METASTORE_CRASH_CHILD_DIR";
const WRITERS: usize = 8;
/// Bytes of padding per node: about 1,000 writes pass the 32 MiB checkpoint threshold.
const NODE_PAD: usize = 48 * 1024;

/// The child: never returns when run as the child; a no-op in a normal test run.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = EmbeddedStore::open(Path::new(&dir)).unwrap();
        let (client, _events) = store.connect(SessionOptions::default());
        match client.create("/acked", b"", CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists(_)) => {}
            Err(err) => panic!("{err}"),
        }
        client
            .create("/alive", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        // On its own line: libtest has already printed "test crash_child_writer ... ".
        println!("\nREADY");
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let client = client.clone();
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let path = format!("/acked/w{w}-{i:08}");
                    // Big values fill the commit log fast, so the run crosses checkpoints.
                    let data = format!(
                        "{{\"writer\":{w},\"i\":{i},\"pad\":\"{}\"}}",
                        "x".repeat(NODE_PAD)
                    );
                    client
                        .create(&path, data.as_bytes(), CreateMode::Persistent)
                        .await
                        .unwrap();
                    println!("ACK {path}");
                    if w == 0 {
                        let stat = client.set_data("/acked", b"{}", None).await.unwrap();
                        println!("SET {}", stat.version);
                        println!("CHECKPOINTS {}", store.commit_stats().checkpoints);
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let kill_after = 900 + (nanos % 900) as usize;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_child_writer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    let mut last_version = -1;
    let mut checkpoints = 0;
    let mut ready = false;
    let mut killed = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    // Lines printed before the kill are acknowledged writes; the pipe keeps them after it.
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(path) = line.strip_prefix("ACK ") {
            acked.push(path.to_string());
        } else if let Some(version) = line.strip_prefix("SET ") {
            last_version = last_version.max(version.parse::<i32>().unwrap());
        } else if let Some(count) = line.strip_prefix("CHECKPOINTS ") {
            checkpoints = count.parse::<u64>().unwrap();
        } else if line.ends_with("READY") {
            ready = true;
        }
        if !killed && (acked.len() >= kill_after || Instant::now() > deadline) {
            child.kill().unwrap(); // SIGKILL
            killed = true;
        }
    }
    child.wait().unwrap();
    assert!(ready && killed, "the child never got going");
    assert!(
        acked.len() >= kill_after,
        "only {} acknowledged writes",
        acked.len()
    );

    assert!(
        checkpoints >= 1,
        "the run should cross a checkpoint of the commit log"
    );

    let store = EmbeddedStore::open(dir.path()).unwrap();
    let (client, _events) = store.connect(SessionOptions::default());
    for path in &acked {
        let (data, _) = client
            .get_data(path, false)
            .await
            .unwrap_or_else(|err| panic!("acknowledged {path} lost after SIGKILL: {err}"));
        assert!(data.starts_with(b"{\"writer\":"), "{path}");
    }
    let (_, acked_stat) = client.get_data("/acked", false).await.unwrap();
    assert!(
        acked_stat.version >= last_version,
        "set_data version went back"
    );
    assert_eq!(
        client.exists("/alive", false).await.unwrap(),
        None,
        "stale ephemeral survived"
    );
    let nodes = check_tree(&client, "/").await;
    assert_eq!(
        nodes,
        store.node_count(),
        "every stored node is reachable from the root"
    );
    eprintln!(
        "{} acknowledged writes survived SIGKILL after {checkpoints} checkpoints; {nodes} nodes",
        acked.len()
    );
}

/// Walks the tree checking ZooKeeper's invariants; returns the number of nodes.
async fn check_tree(client: &Client, root: &str) -> usize {
    let mut count = 0;
    let mut stack = vec![root.to_string()];
    while let Some(path) = stack.pop() {
        let (_, stat) = client.get_data(&path, false).await.unwrap();
        let children = client.get_children(&path, false).await.unwrap();
        assert_eq!(stat.num_children as usize, children.len(), "{path}");
        assert_eq!(
            stat.ephemeral_owner, 0,
            "{path}: no session survives a restart"
        );
        assert!(
            stat.mzxid >= stat.czxid && stat.pzxid >= stat.czxid,
            "{path}: {stat:?}"
        );
        for name in children {
            let child = if path == "/" {
                format!("/{name}")
            } else {
                format!("{path}/{name}")
            };
            let (_, child_stat) = client.get_data(&child, false).await.unwrap();
            assert!(
                child_stat.czxid <= stat.pzxid,
                "{child} created after its parent's pzxid"
            );
            stack.push(child);
        }
        count += 1;
    }
    count
}
