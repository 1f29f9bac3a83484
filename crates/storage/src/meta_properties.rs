//! `meta.properties` in every log directory: which cluster and which broker the logs belong
//! to, in Kafka's ZooKeeper-mode format (version 0, `BrokerMetadataCheckpoint`):
//!
//! ```text
//! #
//! #Mon Dec 07 13:27:24 UTC 2026
//! cluster.id=Zjaq1Hq9RXuZQqVbbAHtaA
//! version=0
//! broker.id=0
//! ```
//!
//! A broker refuses to start when a log directory's file names another cluster or another
//! broker, as Kafka does (with Kafka's words, plus the file's path). Directories without the
//! file get one once the checks pass.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::StorageError;

/// The file's name in each log directory.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// What a `meta.properties` file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// `version` (0 in ZooKeeper mode; 1 is KRaft's).
    pub version: i32,
    /// `broker.id` (version 0) or `node.id` (version 1).
    pub broker_id: Option<i32>,
    /// `cluster.id`.
    pub cluster_id: Option<String>,
}

/// What the log directories hold before a broker starts on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirsState {
    /// Directories without `meta.properties`.
    pub unformatted: Vec<PathBuf>,
    /// No directory has `meta.properties` and none holds a partition: a broker that never
    /// wrote here (or, if the store says it hosts partitions, logs that are somewhere else).
    pub fresh: bool,
}

/// Reads `<dir>/meta.properties` (`None`: no such file).
pub fn read_meta_properties(dir: &Path) -> Result<Option<MetaProperties>, StorageError> {
    let path = dir.join(META_PROPERTIES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => {
            return Err(StorageError::Io {
                op: "read",
                path,
                source: err,
            })
        }
    };
    parse(&text)
        .map(Some)
        .map_err(|reason| StorageError::BadMetaProperties { path, reason })
}

/// Checks every log directory's `meta.properties` against this broker and the store's
/// cluster id (Kafka's `KafkaServer.getOrGenerateBrokerMetadata` checks), and says which
/// directories have none. Writes nothing.
pub fn check_log_dirs(
    log_dirs: &[PathBuf],
    broker_id: i32,
    cluster_id: &str,
) -> Result<LogDirsState, StorageError> {
    let mut unformatted = Vec::new();
    let mut has_partitions = false;
    for dir in log_dirs {
        let refused = |reason: String| StorageError::BadMetaProperties {
            path: dir.join(META_PROPERTIES_FILE),
            reason,
        };
        match read_meta_properties(dir)? {
            None => unformatted.push(dir.clone()),
            Some(meta) => {
                if meta.version != 0 {
                    return Err(refused(format!(
                        "version {} is not supported: a ZooKeeper-mode broker reads version 0 \
                         (version 1 is written by KRaft's kafka-storage.sh format)",
                        meta.version
                    )));
                }
                match meta.cluster_id.as_deref() {
                    Some(found) if found != cluster_id => {
                        return Err(refused(format!(
                            "The Cluster ID {cluster_id} doesn't match stored clusterId \
                             Some({found}) in meta.properties. The broker is trying to join \
                             the wrong cluster. Configured zookeeper.connect (or the embedded \
                             store, metadata.log.dir) may be wrong."
                        )));
                    }
                    _ => {}
                }
                match meta.broker_id {
                    Some(found) if found != broker_id => {
                        return Err(refused(format!(
                            "Configured broker.id {broker_id} doesn't match stored broker.id \
                             Some({found}) in meta.properties. If you moved your data, make \
                             sure your configured broker.id matches. If you intend to create \
                             a new broker, you should remove all data in your data \
                             directories (log.dirs)."
                        )));
                    }
                    None => {
                        return Err(refused("broker.id is missing".to_owned()));
                    }
                    _ => {}
                }
            }
        }
        if let Ok(entries) = std::fs::read_dir(dir) {
            has_partitions |= entries.flatten().any(|e| {
                e.path().is_dir()
                    && crate::log_manager::is_partition_dir_name(&e.file_name().to_string_lossy())
            });
        }
    }
    let fresh = unformatted.len() == log_dirs.len() && !has_partitions;
    Ok(LogDirsState { unformatted, fresh })
}

/// Writes `meta.properties` (atomically: a temporary file, fsync, rename) into each of
/// `dirs`, creating the directory if needed.
pub fn write_meta_properties(
    dirs: &[PathBuf],
    broker_id: i32,
    cluster_id: &str,
) -> Result<(), StorageError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for dir in dirs {
        std::fs::create_dir_all(dir).map_err(StorageError::io("create log directory", dir))?;
        let path = dir.join(META_PROPERTIES_FILE);
        let tmp = dir.join(format!("{META_PROPERTIES_FILE}.tmp"));
        crate::sync_group::replace_file(
            &path,
            &tmp,
            format(broker_id, cluster_id, now).as_bytes(),
        )?;
    }
    Ok(())
}

/// Java's `Properties.store` output for Kafka's three keys, in the order Kafka 2.8 writes
/// them, under its two comment lines (an empty comment, then the date as `Date.toString`).
fn format(broker_id: i32, cluster_id: &str, unix_seconds: u64) -> String {
    format!(
        "#\n#{}\ncluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n",
        java_date_utc(unix_seconds)
    )
}

/// `java.util.Date.toString()` in UTC: `Mon Dec 07 13:27:24 UTC 2026`.
fn java_date_utc(unix_seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_seconds / 86_400;
    let secs = unix_seconds % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {day:02} {:02}:{:02}:{:02} UTC {year}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        secs / 3_600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The keys of a properties file as Kafka writes it (`key=value` lines, `#`/`!` comments;
/// `:` also separates, as in Java).
fn parse(text: &str) -> Result<MetaProperties, String> {
    let mut version = None;
    let mut broker_id = None;
    let mut node_id = None;
    let mut cluster_id = None;
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some(at) = line.find(['=', ':']) else {
            continue;
        };
        let (key, value) = (line[..at].trim(), line[at + 1..].trim());
        let number = |what: &str| {
            value
                .parse::<i32>()
                .map_err(|_| format!("{what} is not a number: '{value}'"))
        };
        match key {
            "version" => version = Some(number("version")?),
            "broker.id" => broker_id = Some(number("broker.id")?),
            "node.id" => node_id = Some(number("node.id")?),
            "cluster.id" => cluster_id = Some(value.to_owned()),
            _ => {}
        }
    }
    let version = version.ok_or("the version key is missing")?;
    Ok(MetaProperties {
        version,
        broker_id: if version == 0 { broker_id } else { node_id },
        cluster_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_format_round_trips() {
        let text = format(3, "Zjaq1Hq9RXuZQqVbbAHtaA", 1_796_650_044);
        assert_eq!(
            text,
            "#\n#Mon Dec 07 13:27:24 UTC 2026\ncluster.id=Zjaq1Hq9RXuZQqVbbAHtaA\nversion=0\nbroker.id=3\n"
        );
        assert_eq!(
            parse(&text),
            Ok(MetaProperties {
                version: 0,
                broker_id: Some(3),
                cluster_id: Some("Zjaq1Hq9RXuZQqVbbAHtaA".to_owned())
            })
        );
        assert_eq!(java_date_utc(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date_utc(951_782_400), "Tue Feb 29 00:00:00 UTC 2000");
        // A file Kafka wrote, keys in another order.
        assert_eq!(
            parse("#\n#Fri Aug 27 09:07:44 UTC 2021\nbroker.id=1\nversion=0\ncluster.id=x\n")
                .unwrap()
                .broker_id,
            Some(1)
        );
        assert!(parse("broker.id=1\n").is_err());
        assert!(parse("version=0\nbroker.id=one\n").is_err());
    }

    #[test]
    fn a_directory_of_another_cluster_or_broker_is_refused() {
        let root = std::env::temp_dir().join(format!("meta-props-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let dirs = [a.clone(), b.clone()];
        let state = check_log_dirs(&dirs, 1, "c1").unwrap();
        assert!(state.fresh);
        assert_eq!(state.unformatted, dirs);
        write_meta_properties(&dirs, 1, "c1").unwrap();
        let state = check_log_dirs(&dirs, 1, "c1").unwrap();
        assert!(!state.fresh && state.unformatted.is_empty());
        let err = check_log_dirs(&dirs, 2, "c1").unwrap_err().to_string();
        assert!(
            err.contains("Configured broker.id 2 doesn't match stored broker.id Some(1)")
                && err.contains(&a.join("meta.properties").display().to_string()),
            "{err}"
        );
        let err = check_log_dirs(&dirs, 1, "c2").unwrap_err().to_string();
        assert!(
            err.contains("The Cluster ID c2 doesn't match stored clusterId Some(c1)"),
            "{err}"
        );
        // A directory without the file but with a partition in it is not fresh.
        std::fs::remove_file(b.join("meta.properties")).unwrap();
        std::fs::remove_file(a.join("meta.properties")).unwrap();
        std::fs::create_dir_all(b.join("orders-0")).unwrap();
        let state = check_log_dirs(&dirs, 1, "c1").unwrap();
        assert!(!state.fresh);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
