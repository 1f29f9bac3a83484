//! Memory probe of the embedded store (issue 14, not a test): `cargo run -p metastore
//! --example rss_probe -- [--writes N] [--nodes N] [--writers N] [--every N] [--cache-bytes N] [--dir DIR]`.
//!
//! Creates `--nodes` offset-shaped znodes, then rewrites them with `set_data` round-robin,
//! `--writers` at a time, and prints the process's heap (`RssAnon`), the store file's size
//! and the commit counters every `--every` writes. Run it under heaptrack to see what the
//! heap holds.

use std::path::PathBuf;

use metastore::{CreateMode, EmbeddedStore, SessionOptions};

fn status(field: &str) -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .map(|l| l[field.len()..].trim().to_string())
        .unwrap_or_default()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let writes = opt("--writes", 200_000);
    let nodes = opt("--nodes", 480);
    let writers = opt("--writers", 1).max(1);
    let every = opt("--every", 25_000).max(1);
    let cache_bytes = opt("--cache-bytes", metastore::DEFAULT_CACHE_BYTES);
    let temp = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map_or_else(|| temp.path().to_path_buf(), PathBuf::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = EmbeddedStore::open_with_cache(&dir, cache_bytes).unwrap();
        let (client, _events) = store.connect(SessionOptions::default());
        let paths: Vec<String> = (0..nodes)
            .map(|i| format!("/consumers/g{}/offsets/t/{}", i % 40, i / 40))
            .collect();
        for path in &paths {
            client
                .create_recursive(path, b"0", CreateMode::Persistent)
                .await
                .unwrap();
        }
        let file = dir.join(metastore::STORE_FILE);
        let report = |done: usize| {
            let stats = store.commit_stats();
            println!(
                "writes {done:>9}  RssAnon {:>10}  VmRSS {:>10}  file {:>6} KiB  cache {:>6} KiB  commits {}  checkpoints {}",
                status("RssAnon:"),
                status("VmRSS:"),
                std::fs::metadata(&file).map_or(0, |m| m.len() / 1024),
                stats.cache_bytes / 1024,
                stats.commits,
                stats.checkpoints,
            );
        };
        report(0);
        let mut done = 0;
        while done < writes {
            let round: Vec<_> = (0..writers.min(writes - done))
                .map(|w| {
                    let client = client.clone();
                    let path = paths[(done + w) % paths.len()].clone();
                    let data = format!("{{\"offset\":{},\"metadata\":\"\"}}", done + w);
                    tokio::spawn(async move { client.set_data(&path, data.as_bytes(), None).await })
                })
                .collect();
            for task in round {
                task.await.unwrap().unwrap();
            }
            let before = done;
            done += writers.min(writes - done);
            if done / every != before / every {
                report(done);
            }
        }
        client.close().await;
        store.close().await;
        report(done);
    });
}
