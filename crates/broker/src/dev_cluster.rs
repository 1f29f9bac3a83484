//! `gregor dev-cluster`: N brokers in one process on consecutive ports, sharing one metadata
//! store (one session each), each with its own log directories under the data directory, and
//! one admin listener for the whole cluster. Control requests still travel over TCP.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use model::BrokerId;
use tracing::info;

use crate::admin_http::AdminServer;
use crate::config::{BrokerConfig, ConfigError};
use crate::error::BrokerError;
use crate::server::{Broker, MetadataStore};

/// What `gregor dev-cluster` was asked for.
#[derive(Debug, Clone)]
pub struct DevClusterOptions {
    /// Number of brokers.
    pub brokers: usize,
    /// Their ids (default 0..N).
    pub broker_ids: Option<Vec<BrokerId>>,
    /// Their racks, one per broker.
    pub racks: Option<Vec<String>>,
    /// Port of the first broker; the others follow (0 picks free ports).
    pub port: u16,
    /// Data directory: `<data-dir>/metadata` and `<data-dir>/broker-<id>/logs`.
    pub data_dir: PathBuf,
    /// `server.properties` applied to every broker.
    pub config: Option<PathBuf>,
    /// `key=value` overrides applied to every broker.
    pub overrides: Vec<String>,
}

/// One configuration per broker.
pub fn broker_configs(opts: &DevClusterOptions) -> Result<Vec<BrokerConfig>, ConfigError> {
    let invalid = |key: &str, value: String, reason: String| ConfigError::InvalidValue {
        key: key.into(),
        value,
        reason,
    };
    if opts.brokers == 0 {
        return Err(invalid(
            "--brokers",
            "0".into(),
            "must be at least 1".into(),
        ));
    }
    let ids: Vec<BrokerId> = match &opts.broker_ids {
        Some(ids) if ids.len() != opts.brokers => {
            return Err(invalid(
                "--broker-ids",
                format!("{ids:?}"),
                format!("must list {} ids", opts.brokers),
            ))
        }
        Some(ids) => ids.clone(),
        None => (0..opts.brokers as BrokerId).collect(),
    };
    if let Some(racks) = &opts.racks {
        if racks.len() != opts.brokers {
            return Err(invalid(
                "--racks",
                racks.join(","),
                format!("must list {} racks", opts.brokers),
            ));
        }
    }
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let port = if opts.port == 0 {
                0
            } else {
                opts.port.saturating_add(i as u16)
            };
            let logs = opts.data_dir.join(format!("broker-{id}")).join("logs");
            // The brokers share one embedded store, in <data dir>/metadata (not in a broker's
            // log directory) unless the command line says otherwise.
            let mut overrides = vec![format!(
                "metadata.log.dir={}",
                opts.data_dir.join(metastore::EMBEDDED_SUBDIR).display()
            )];
            overrides.extend(opts.overrides.iter().cloned());
            overrides.push(format!("broker.id={id}"));
            overrides.push(format!("listeners=PLAINTEXT://127.0.0.1:{port}"));
            overrides.push(format!("log.dirs={}", logs.display()));
            if let Some(racks) = &opts.racks {
                overrides.push(format!("broker.rack={}", racks[i]));
            }
            let mut config =
                BrokerConfig::load(opts.config.as_deref(), &overrides, &opts.data_dir)?;
            // A dev cluster's offsets topic is replicated as far as it can be: min(3, brokers),
            // unless the config says otherwise.
            if !config
                .originals
                .contains_key("offsets.topic.replication.factor")
            {
                config.offsets_topic_replication_factor =
                    i16::try_from(opts.brokers.min(3)).unwrap_or(3);
            }
            Ok(config)
        })
        .collect()
}

/// What a running dev cluster can be told (`gregor dev-cluster` reads them from stdin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevClusterCommand {
    /// Stop one broker at once, without a controlled shutdown (as if it crashed: its store
    /// session ends, the controller elects new leaders and shrinks the ISRs). The others
    /// keep running.
    Stop(BrokerId),
}

impl std::str::FromStr for DevClusterCommand {
    type Err = String;

    /// `stop <broker id>`.
    fn from_str(line: &str) -> Result<Self, Self::Err> {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("stop"), Some(id), None) => id
                .parse()
                .map(DevClusterCommand::Stop)
                .map_err(|_| format!("not a broker id: {id}")),
            _ => Err(format!(
                "unknown command {line:?} (known: stop <broker id>)"
            )),
        }
    }
}

/// Runs the cluster of `configs` (from [`broker_configs`]) until `shutdown` resolves,
/// carrying out `commands` meanwhile. `on_ready` gets each broker's id and address and the admin listener's address.
pub async fn run(
    configs: Vec<BrokerConfig>,
    shutdown: impl Future<Output = ()>,
    mut commands: tokio::sync::mpsc::Receiver<DevClusterCommand>,
    on_ready: impl FnOnce(&[(BrokerId, SocketAddr)], Option<SocketAddr>),
) -> Result<(), BrokerError> {
    let store = MetadataStore::from_config(&configs[0])?;
    let admin_addr = configs[0].admin_listener;
    let mut brokers = Vec::with_capacity(configs.len());
    for config in configs {
        match Broker::start(config, store.clone(), None).await {
            Ok(broker) => brokers.push(broker),
            Err(err) => {
                for broker in brokers {
                    broker.shutdown().await;
                }
                store.close().await;
                return Err(err);
            }
        }
    }
    let admin = match admin_addr {
        Some(addr) => {
            Some(AdminServer::bind(addr, brokers.iter().map(Broker::admin_view).collect()).await?)
        }
        None => None,
    };
    let addresses: Vec<(BrokerId, SocketAddr)> = brokers
        .iter()
        .map(|b| (b.broker_id(), b.local_addr()))
        .collect();
    info!(brokers = addresses.len(), "dev cluster running");
    on_ready(&addresses, admin.as_ref().map(AdminServer::local_addr));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            command = commands.recv() => match command {
                Some(DevClusterCommand::Stop(id)) => {
                    match brokers.iter().position(|b| b.broker_id() == id) {
                        Some(index) => {
                            info!(broker_id = id, "stopping one broker (dev-cluster command)");
                            brokers.remove(index).stop().await;
                            info!(broker_id = id, "broker stopped; the others keep running");
                        }
                        None => tracing::warn!(broker_id = id, "no such running broker"),
                    }
                }
                // No more commands (stdin closed): serve until shutdown.
                None => {
                    shutdown.await;
                    break;
                }
            },
        }
    }
    if let Some(admin) = admin {
        admin.shutdown().await;
    }
    for broker in brokers {
        broker.shutdown().await;
    }
    store.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse() {
        assert_eq!("stop 1003".parse(), Ok(DevClusterCommand::Stop(1003)));
        assert_eq!(" stop  7 ".parse(), Ok(DevClusterCommand::Stop(7)));
        assert!("stop x".parse::<DevClusterCommand>().is_err());
        assert!("halt 1".parse::<DevClusterCommand>().is_err());
        assert!("stop 1 2".parse::<DevClusterCommand>().is_err());
    }

    #[test]
    fn consecutive_ports_own_log_dirs_and_racks() {
        let opts = DevClusterOptions {
            brokers: 3,
            broker_ids: Some(vec![1000, 1001, 1002]),
            racks: Some(vec!["a".into(), "a".into(), "b".into()]),
            port: 9092,
            data_dir: PathBuf::from("/d"),
            config: None,
            overrides: vec!["num.partitions=3".into()],
        };
        let configs = broker_configs(&opts).unwrap();
        assert_eq!(configs[2].broker_id, 1002);
        assert_eq!(configs[2].listener().port, 9094);
        assert_eq!(
            configs[2].log_dirs,
            vec![PathBuf::from("/d/broker-1002/logs")]
        );
        assert_eq!(configs[2].rack.as_deref(), Some("b"));
        assert_eq!(configs[0].num_partitions, 3);
        assert_eq!(configs[0].offsets_topic_replication_factor, 3);
        let two = DevClusterOptions {
            brokers: 2,
            broker_ids: None,
            racks: None,
            ..opts.clone()
        };
        assert_eq!(
            broker_configs(&two).unwrap()[1].offsets_topic_replication_factor,
            2
        );
        let set = DevClusterOptions {
            overrides: vec!["offsets.topic.replication.factor=1".into()],
            ..two
        };
        assert_eq!(
            broker_configs(&set).unwrap()[0].offsets_topic_replication_factor,
            1
        );
        let bad = DevClusterOptions {
            racks: Some(vec!["a".into()]),
            ..opts
        };
        assert!(broker_configs(&bad)
            .unwrap_err()
            .to_string()
            .contains("--racks"));
    }
}
