//! `gregor meta ls|get|tree PATH`: inspect the metadata store like zookeeper-shell.
//!
//! Sources: `--zookeeper HOST:PORT[/chroot]` (a live ensemble), `--data-dir DIR` (the
//! embedded store of a STOPPED server, at `DIR/metadata/`, opened read-only; a running
//! server holds the store's lock, and then this says so and exits non-zero), or
//! `--admin URL` (a running server's HTTP admin listener, `GET /v1/meta/<path>`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use metastore::{Client, EmbeddedStore, SessionOptions, Stat};

/// How long a `--zookeeper` session may stay silent; the command is short-lived.
const ZOOKEEPER_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Args)]
pub struct MetaArgs {
    #[command(subcommand)]
    command: MetaCommand,
}

#[derive(Debug, Subcommand)]
enum MetaCommand {
    /// List a node's children, sorted: `[a, b]`.
    Ls(PathArgs),
    /// Print a node's data (pretty JSON when it is JSON) and its stat.
    Get(PathArgs),
    /// Print a node and everything below it, indented.
    Tree(PathArgs),
}

#[derive(Debug, Args)]
struct PathArgs {
    /// The znode path, e.g. /brokers/topics.
    path: String,
    #[command(flatten)]
    source: SourceArgs,
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct SourceArgs {
    /// A ZooKeeper connect string with an optional chroot, e.g. 127.0.0.1:2181/gregor.
    #[arg(long, value_name = "HOST:PORT[/CHROOT]")]
    zookeeper: Option<String>,
    /// The data directory of a stopped server; its store is read from DIR/metadata/ (or
    /// from DIR itself when it holds the store: a metadata.log.dir).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A running server's admin listener, e.g. http://127.0.0.1:9644 (read-only).
    #[arg(long, value_name = "URL")]
    admin: Option<String>,
}

/// Where the tree is read from.
#[derive(Debug)]
enum Source {
    ZooKeeper(String),
    DataDir(PathBuf),
    Admin(String),
}

impl From<SourceArgs> for Source {
    fn from(args: SourceArgs) -> Source {
        match (args.zookeeper, args.data_dir, args.admin) {
            (Some(connect), _, _) => Source::ZooKeeper(connect),
            (None, Some(dir), _) => Source::DataDir(dir),
            (None, None, Some(url)) => Source::Admin(url),
            // clap's group makes exactly one of them required.
            (None, None, None) => Source::DataDir(PathBuf::from(".")),
        }
    }
}

/// One node as every source can describe it.
#[derive(Debug)]
struct Node {
    data: Vec<u8>,
    stat: Stat,
    children: Vec<String>,
}

/// An open source: a store session, or the address of an admin listener.
#[derive(Debug)]
enum Reader {
    Store(Client),
    Admin { host_port: String },
}

impl Reader {
    /// The node at `path`, or None when it does not exist.
    async fn node(&self, path: &str) -> anyhow::Result<Option<Node>> {
        match self {
            Reader::Store(client) => {
                let (data, stat) = match client.get_data(path, false).await {
                    Ok(found) => found,
                    Err(metastore::Error::NoNode(_)) => return Ok(None),
                    Err(err) => return Err(err.into()),
                };
                let children = match client.get_children(path, false).await {
                    Ok(children) => children,
                    Err(metastore::Error::NoNode(_)) => return Ok(None),
                    Err(err) => return Err(err.into()),
                };
                Ok(Some(Node {
                    data,
                    stat,
                    children,
                }))
            }
            Reader::Admin { host_port } => admin_node(host_port, path).await,
        }
    }

    async fn close(self) {
        if let Reader::Store(client) = self {
            client.close().await;
        }
    }
}

impl Source {
    async fn open(&self) -> anyhow::Result<Reader> {
        match self {
            Source::Admin(url) => {
                let host_port = url
                    .strip_prefix("http://")
                    .unwrap_or(url)
                    .trim_end_matches('/')
                    .to_string();
                if url.starts_with("https://") || host_port.contains('/') {
                    bail!("--admin takes the listener's base URL, e.g. http://127.0.0.1:9644 (plain HTTP)");
                }
                Ok(Reader::Admin { host_port })
            }
            Source::ZooKeeper(connect) => {
                let opts = SessionOptions {
                    session_timeout: ZOOKEEPER_SESSION_TIMEOUT,
                };
                let (client, _events) = metastore::connect_zookeeper(connect, opts)
                    .await
                    .with_context(|| format!("cannot connect to ZooKeeper at {connect}"))?;
                Ok(Reader::Store(client))
            }
            Source::DataDir(dir) => {
                // DIR/metadata (the default), or DIR itself when it is a metadata.log.dir.
                let store_dir = if dir.join(metastore::STORE_FILE).is_file() {
                    dir.clone()
                } else {
                    dir.join(metastore::EMBEDDED_SUBDIR)
                };
                let store = match EmbeddedStore::open_read_only(&store_dir) {
                    Ok(store) => store,
                    Err(metastore::Error::StoreLocked(_)) => bail!(
                        "the metadata store in {} is locked by a running server; stop the \
                         server first (or use --zookeeper for a ZooKeeper-backed cluster)",
                        dir.display()
                    ),
                    Err(err) => return Err(err).context(format!("cannot read {}", dir.display())),
                };
                let (client, _events) = store.connect(SessionOptions::default());
                Ok(Reader::Store(client))
            }
        }
    }
}

pub fn run(args: MetaArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: MetaArgs) -> anyhow::Result<ExitCode> {
    let (command, path_args) = match args.command {
        MetaCommand::Ls(a) => ("ls", a),
        MetaCommand::Get(a) => ("get", a),
        MetaCommand::Tree(a) => ("tree", a),
    };
    let source = Source::from(path_args.source);
    let reader = source.open().await?;
    let path = path_args.path.as_str();
    let output = match command {
        "ls" => ls(&reader, path).await,
        "get" => get(&reader, path).await,
        _ => tree(&reader, path).await,
    };
    reader.close().await;
    print!("{}", output.with_context(|| format!("{command} {path}"))?);
    Ok(ExitCode::SUCCESS)
}

async fn existing(reader: &Reader, path: &str) -> anyhow::Result<Node> {
    reader
        .node(path)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no node at {path}"))
}

async fn ls(reader: &Reader, path: &str) -> anyhow::Result<String> {
    let node = existing(reader, path).await?;
    Ok(format!("[{}]\n", node.children.join(", ")))
}

async fn get(reader: &Reader, path: &str) -> anyhow::Result<String> {
    let node = existing(reader, path).await?;
    Ok(format!(
        "{}\n{}",
        render_data(&node.data),
        render_stat(&node.stat)
    ))
}

async fn tree(reader: &Reader, path: &str) -> anyhow::Result<String> {
    // Fail on a missing root; nodes that vanish while walking are skipped.
    existing(reader, path).await?;
    let mut out = String::new();
    let mut stack = vec![(path.to_string(), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        let name = if depth == 0 {
            node.as_str()
        } else {
            node.rsplit('/').next().unwrap_or("")
        };
        out.push_str(&format!("{}{}\n", "  ".repeat(depth), name));
        let Some(found) = reader.node(&node).await? else {
            continue;
        };
        for child in found.children.iter().rev() {
            let child_path = if node == "/" {
                format!("/{child}")
            } else {
                format!("{node}/{child}")
            };
            stack.push((child_path, depth + 1));
        }
    }
    Ok(out)
}

/// How long one admin request may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest admin answer read; a node's data is at most ZooKeeper's 1 MiB.
const ADMIN_MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

/// `GET /v1/meta<path>` from a running server's admin listener (one request per connection,
/// as that listener serves them), turned back into a [`Node`].
async fn admin_node(host_port: &str, path: &str) -> anyhow::Result<Option<Node>> {
    let (status, body) = tokio::time::timeout(
        ADMIN_TIMEOUT,
        http_get(host_port, &format!("/v1/meta{path}")),
    )
    .await
    .map_err(|_| {
        anyhow::anyhow!("the admin listener at {host_port} did not answer within {ADMIN_TIMEOUT:?}")
    })?
    .with_context(|| format!("cannot read from the admin listener at {host_port}"))?;
    match status {
        200 => {}
        404 => return Ok(None),
        _ => bail!("the admin listener answered HTTP {status}: {}", body.trim()),
    }
    let value: serde_json::Value =
        serde_json::from_str(&body).context("the admin listener sent malformed JSON")?;
    let data = match &value["data"] {
        serde_json::Value::Null => Vec::new(),
        serde_json::Value::String(text) => text.clone().into_bytes(),
        json => json.to_string().into_bytes(),
    };
    let children = value["children"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let field = |name: &str| value["stat"][name].as_i64().unwrap_or(0);
    let stat = Stat {
        czxid: field("czxid"),
        mzxid: field("mzxid"),
        pzxid: field("pzxid"),
        ctime: field("ctime"),
        mtime: field("mtime"),
        version: field("version") as i32,
        cversion: field("cversion") as i32,
        ephemeral_owner: field("ephemeral_owner"),
        data_length: field("data_length") as i32,
        num_children: field("num_children") as i32,
    };
    Ok(Some(Node {
        data,
        stat,
        children,
    }))
}

/// A plain HTTP/1.1 GET; returns the status code and the body.
async fn http_get(host_port: &str, target: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(host_port).await?;
    let request =
        format!("GET {target} HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream
        .take(ADMIN_MAX_RESPONSE_BYTES)
        .read_to_end(&mut response)
        .await?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("incomplete HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}

/// Pretty JSON when the data is JSON, else the text (lossy UTF-8); empty data prints nothing.
fn render_data(data: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Ok(pretty) = serde_json::to_string_pretty(&json) {
            return pretty;
        }
    }
    String::from_utf8_lossy(data).into_owned()
}

/// The stat lines of zookeeper-shell's `get -s`.
fn render_stat(stat: &Stat) -> String {
    format!(
        "cZxid = {:#x}\nctime = {}\nmZxid = {:#x}\nmtime = {}\npZxid = {:#x}\ncversion = {}\n\
         dataVersion = {}\naclVersion = 0\nephemeralOwner = {:#x}\ndataLength = {}\nnumChildren = {}\n",
        stat.czxid,
        java_date(stat.ctime),
        stat.mzxid,
        java_date(stat.mtime),
        stat.pzxid,
        stat.cversion,
        stat.version,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children
    )
}

/// Milliseconds since the epoch as Java's `Date.toString()` prints them in UTC, which is
/// what zookeeper-shell shows: `Sun Nov 29 20:50:00 UTC 2026`.
fn java_date(epoch_ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = epoch_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} UTC {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        year
    )
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31), proleptic Gregorian
/// (Howard Hinnant's well-known algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_like_java() {
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_796_000_000_000), "Mon Nov 30 00:53:20 UTC 2026");
        assert_eq!(java_date(951_782_400_000), "Tue Feb 29 00:00:00 UTC 2000");
    }

    #[test]
    fn data_renders_as_pretty_json_or_text() {
        assert_eq!(render_data(br#"{"a":1}"#), "{\n  \"a\": 1\n}");
        assert_eq!(render_data(b"plain text"), "plain text");
        assert_eq!(render_data(b""), "");
    }
}
