//! Embedded store benchmark (not a timed test): `cargo bench -p metastore --bench store`.
//!
//! (a) Acknowledged writes per second with group commit from 64 concurrent writers.
//! (b) A store of 1,000,000 znodes in Kafka's shape is built and closed, then reopened in a
//!     fresh process (so the build's memory does not count) to time `EmbeddedStore::open`
//!     and read the process's RSS after the reload.
//!
//! Options: `--writers N` (64; a second run uses 8x as many), `--writes N`, `--skip-writes`,
//! `--nodes N`, `--dir DIR` (default: a
//! temporary directory; an existing `DIR/large` store is reused instead of rebuilt).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use metastore::{CreateMode, EmbeddedStore, Op, SessionOptions};

const PARTITIONS_PER_TOPIC: usize = 4;
/// Nodes per topic: /brokers/topics/t, .../partitions, 4 x (.../P, .../P/state), /config/topics/t.
const NODES_PER_TOPIC: usize = 3 + 2 * PARTITIONS_PER_TOPIC;
const TOPICS_IN_FLIGHT: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("reload-child") {
        reload_child(Path::new(&args[2]));
        return;
    }
    let opt = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let writers = opt("--writers", 64);
    let total_writes = opt("--writes", 128_000);
    let nodes = opt("--nodes", 1_000_000);
    let temp = tempfile::tempdir().expect("temp dir");
    let base: PathBuf = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map_or_else(|| temp.path().to_path_buf(), PathBuf::from);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "metastore embedded benchmark; store under {}",
        base.display()
    );
    // The asked-for shape (64 writers), then the same load from 8x more writers, to show how
    // group commit scales when more writes wait for each fsync.
    if !args.iter().any(|a| a == "--skip-writes") {
        for (run, writers) in [writers, writers * 8].into_iter().enumerate() {
            let dir = base.join(format!("writes-{run}"));
            runtime.block_on(write_throughput(&dir, writers, total_writes / writers));
        }
    }
    let large = base.join("large");
    if large.join(metastore::STORE_FILE).exists() {
        println!("(b) reusing the store in {}", large.display());
    } else {
        runtime.block_on(build_kafka_shaped(&large, nodes));
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("reload-child")
        .arg(base.join("large"))
        .output()
        .expect("run the reload child");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "reload child failed");
}

async fn write_throughput(dir: &Path, writers: usize, writes_per_writer: usize) {
    let store = EmbeddedStore::open(dir).unwrap();
    let (setup, _events) = store.connect(SessionOptions::default());
    setup
        .create("/bench", b"", CreateMode::Persistent)
        .await
        .unwrap();
    let data = vec![b'x'; 100];
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (client, events) = store.connect(SessionOptions::default());
        let data = data.clone();
        tasks.push(tokio::spawn(async move {
            let _events = events;
            client
                .create(&format!("/bench/w{w}"), b"", CreateMode::Persistent)
                .await
                .unwrap();
            for i in 0..writes_per_writer {
                let path = format!("/bench/w{w}/n{i}");
                client
                    .create(&path, &data, CreateMode::Persistent)
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let total = writers * (writes_per_writer + 1);
    let stats = store.commit_stats();
    println!(
        "    {} commits, {:.1} requests per commit, {:.2} ms per commit (write + fsync)",
        stats.commits,
        stats.requests as f64 / stats.commits.max(1) as f64,
        stats.commit_micros as f64 / 1000.0 / stats.commits.max(1) as f64
    );
    println!(
        "(a) group commit: {total} acknowledged creates (100-byte data) from {writers} \
         concurrent writers in {:.2} s = {:.0} writes/s (target >= 20,000)",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    store.close().await;
}

async fn build_kafka_shaped(dir: &Path, nodes: usize) {
    let store = EmbeddedStore::open(dir).unwrap();
    let (client, _events) = store.connect(SessionOptions::default());
    for path in ["/brokers", "/brokers/topics", "/config", "/config/topics"] {
        client
            .create(path, b"", CreateMode::Persistent)
            .await
            .unwrap();
    }
    let topics = nodes.saturating_sub(5).div_ceil(NODES_PER_TOPIC);
    let start = Instant::now();
    let mut next_topic = 0;
    while next_topic < topics {
        let mut batch = Vec::new();
        for t in next_topic..(next_topic + TOPICS_IN_FLIGHT).min(topics) {
            let client = client.clone();
            batch.push(tokio::spawn(async move {
                client.multi(topic_ops(t)).await.unwrap()
            }));
        }
        next_topic += batch.len();
        for task in batch {
            task.await.unwrap();
        }
    }
    let built = store.node_count();
    println!(
        "(b) built {built} znodes ({topics} topics x {PARTITIONS_PER_TOPIC} partitions, one \
         multi per topic) in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    store.close().await;
    let file = dir.join(metastore::STORE_FILE);
    let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    println!("    store file {:.0} MiB", size as f64 / 1048576.0);
}

/// Kafka 2.8's znodes for one topic, with its JSON (about 100 bytes per partition state).
fn topic_ops(t: usize) -> Vec<Op> {
    let topic = format!("/brokers/topics/topic-{t:06}");
    let assignment: Vec<String> = (0..PARTITIONS_PER_TOPIC)
        .map(|p| format!("\"{p}\":[{},{},{}]", p % 5, (p + 1) % 5, (p + 2) % 5))
        .collect();
    let topic_json = format!(
        "{{\"version\":2,\"partitions\":{{{}}},\"adding_replicas\":{{}},\"removing_replicas\":{{}}}}",
        assignment.join(",")
    );
    let create = |path: String, data: String| Op::Create {
        path,
        data: data.into_bytes(),
        mode: CreateMode::Persistent,
    };
    let mut ops = vec![
        create(topic.clone(), topic_json),
        create(format!("{topic}/partitions"), String::new()),
    ];
    for p in 0..PARTITIONS_PER_TOPIC {
        ops.push(create(format!("{topic}/partitions/{p}"), String::new()));
        ops.push(create(
            format!("{topic}/partitions/{p}/state"),
            format!(
                "{{\"controller_epoch\":1,\"leader\":{},\"version\":1,\"leader_epoch\":0,\"isr\":[{},{},{}]}}",
                p % 5,
                p % 5,
                (p + 1) % 5,
                (p + 2) % 5
            ),
        ));
    }
    ops.push(create(
        format!("/config/topics/topic-{t:06}"),
        "{\"version\":1,\"config\":{}}".to_string(),
    ));
    ops
}

/// Runs in a fresh process: times the reload and reports the RSS after it.
fn reload_child(dir: &Path) {
    let rss_before = rss_kib();
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let store = EmbeddedStore::open(dir).unwrap();
    let elapsed: Duration = start.elapsed();
    let cpu = cpu_seconds() - cpu_before;
    let rss_after = rss_kib();
    println!(
        "    reload: EmbeddedStore::open of {} znodes in {:.2} s wall, {:.2} s CPU (target < 5 s)",
        store.node_count(),
        elapsed.as_secs_f64(),
        cpu
    );
    println!(
        "    RSS after reload {:.0} MiB (before open {:.0} MiB; target < 1024 MiB)",
        rss_after as f64 / 1024.0,
        rss_before as f64 / 1024.0
    );
}

/// User plus system CPU time of this process, from /proc/self/stat (in clock ticks of 1/100 s,
/// the Linux default).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
