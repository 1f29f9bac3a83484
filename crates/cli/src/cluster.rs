//! Connections to the brokers of one cluster for the kafka-*.sh-like tools that talk to
//! partition leaders and group coordinators (consumer-groups, get-offsets, delete-records,
//! console-producer/consumer, the perf tests): Metadata for leaders, FindCoordinator,
//! ListOffsets, Produce and Fetch over the `client` crate's [`Connection`].

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail};
use bytes::Bytes;
use client::{Connection, ConnectionOptions};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FindCoordinatorRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// Kafka's message for an error code, including the group errors the client crate does not
/// name.
pub(crate) fn error_message(code: i16) -> &'static str {
    match code {
        14 => "The coordinator is loading and hence can't process requests.",
        15 => "The coordinator is not available.",
        16 => "This is not the correct coordinator.",
        24 => "The configured groupId is invalid.",
        25 => "The coordinator is not aware of this member.",
        27 => "The group is rebalancing, so a rejoin is needed.",
        68 => "The group is not empty.",
        69 => "The group id does not exist.",
        other => client::error_message(other),
    }
}

/// A topic's name on the wire.
pub(crate) fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// One partition's answer to a Fetch.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// (producer id, first offset) of the transactions aborted in the fetched range.
    pub aborted: Vec<(i64, i64)>,
    pub records: Bytes,
}

/// Connections to the brokers of one cluster, opened on demand.
pub(crate) struct Cluster {
    pub bootstrap: Connection,
    pub brokers: BTreeMap<i32, String>,
    pub racks: BTreeMap<i32, Option<String>>,
    connections: BTreeMap<i32, Connection>,
    /// topic -> partition -> leader.
    pub leaders: BTreeMap<String, BTreeMap<i32, i32>>,
    /// Topics Metadata marks internal.
    pub internal: BTreeSet<String>,
    /// group -> the id of its coordinator, as FindCoordinator last answered.
    pub coordinators: BTreeMap<String, i32>,
    /// How each connection is opened (`client.id`, `--command-config`'s SASL and TLS).
    options: ConnectionOptions,
}

impl Cluster {
    pub async fn connect(
        bootstrap_servers: &str,
        options: ConnectionOptions,
    ) -> anyhow::Result<Cluster> {
        let mut last_err = None;
        for addr in bootstrap_servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match Connection::connect_with(addr, options.clone()).await {
                Ok(bootstrap) => {
                    let mut cluster = Cluster {
                        bootstrap,
                        brokers: BTreeMap::new(),
                        racks: BTreeMap::new(),
                        connections: BTreeMap::new(),
                        leaders: BTreeMap::new(),
                        internal: BTreeSet::new(),
                        coordinators: BTreeMap::new(),
                        options,
                    };
                    cluster.refresh().await?;
                    return Ok(cluster);
                }
                Err(err) => last_err = Some(err),
            }
        }
        Err(match last_err {
            Some(err) => anyhow!(err),
            None => anyhow!("no bootstrap server given"),
        })
    }

    pub async fn refresh(&mut self) -> anyhow::Result<()> {
        let response = self
            .bootstrap
            .send(MetadataRequest::default().with_topics(None))
            .await?;
        self.brokers = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        self.racks = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.rack.as_ref().map(ToString::to_string)))
            .collect();
        self.internal = response
            .topics
            .iter()
            .filter(|t| t.is_internal)
            .filter_map(|t| Some(t.name.as_ref()?.to_string()))
            .collect();
        self.leaders = response
            .topics
            .iter()
            .filter_map(|t| {
                let name = t.name.as_ref()?.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.leader_id.0))
                    .collect();
                Some((name, partitions))
            })
            .collect();
        Ok(())
    }

    pub async fn broker(&mut self, id: i32) -> anyhow::Result<&mut Connection> {
        if !self.connections.contains_key(&id) {
            let addr = self
                .brokers
                .get(&id)
                .ok_or_else(|| anyhow!("broker {id} is not in the cluster metadata"))?
                .clone();
            let connection = Connection::connect_with(&addr, self.options.clone()).await?;
            self.connections.insert(id, connection);
        }
        Ok(self.connections.get_mut(&id).expect("just inserted"))
    }

    /// The leader of `topic`-`partition`, refreshing metadata once when it is unknown.
    pub async fn leader(&mut self, topic: &str, partition: i32) -> anyhow::Result<i32> {
        for attempt in 0..20 {
            if let Some(&leader) = self.leaders.get(topic).and_then(|p| p.get(&partition)) {
                if leader >= 0 {
                    return Ok(leader);
                }
            }
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            self.refresh().await?;
        }
        bail!("no leader for {topic}-{partition}")
    }

    pub async fn coordinator(&mut self, group: &str) -> anyhow::Result<&mut Connection> {
        let mut last = 0;
        for _ in 0..20 {
            let key = StrBytes::from_string(group.to_owned());
            // v4+ (KIP-699) asks for a batch of keys and answers one coordinator per key.
            let version = self
                .bootstrap
                .negotiated_version::<FindCoordinatorRequest>()?;
            let request = if version >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
            } else {
                FindCoordinatorRequest::default().with_key(key)
            };
            let response = self.bootstrap.send_version(request, version).await?;
            let (error_code, id, host, port) = match response.coordinators.first() {
                Some(c) if version >= 4 => (c.error_code, c.node_id.0, c.host.clone(), c.port),
                _ => (
                    response.error_code,
                    response.node_id.0,
                    response.host.clone(),
                    response.port,
                ),
            };
            if error_code == 0 {
                self.brokers
                    .entry(id)
                    .or_insert_with(|| format!("{host}:{port}"));
                self.coordinators.insert(group.to_owned(), id);
                return self.broker(id).await;
            }
            last = error_code;
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        bail!(
            "cannot find the coordinator of group '{group}': {}",
            error_message(last)
        )
    }

    /// Latest (`timestamp` -1), earliest (-2), max-timestamp (-3) or by-time offsets of
    /// `partitions`, from their leaders; partitions without an answer are left out.
    pub async fn list_offsets(
        &mut self,
        partitions: &BTreeSet<(String, i32)>,
        timestamp: i64,
    ) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
        Ok(self
            .list_offsets_detailed(partitions, timestamp, 0)
            .await?
            .into_iter()
            .filter_map(|(tp, answer)| answer.ok().map(|offset| (tp, offset)))
            .collect())
    }

    /// Like [`Cluster::list_offsets`], with each partition's error code and the offset as
    /// answered (-1 when there is none, e.g. a timestamp after the last record), at
    /// `isolation_level` (0 read_uncommitted, 1 read_committed).
    pub async fn list_offsets_detailed(
        &mut self,
        partitions: &BTreeSet<(String, i32)>,
        timestamp: i64,
        isolation_level: i8,
    ) -> anyhow::Result<BTreeMap<(String, i32), Result<i64, i16>>> {
        let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
        let mut offsets = BTreeMap::new();
        for (topic, partition) in partitions {
            let leader = self
                .leaders
                .get(topic)
                .and_then(|p| p.get(partition))
                .copied()
                .unwrap_or(-1);
            if leader >= 0 {
                by_leader
                    .entry(leader)
                    .or_default()
                    .entry(topic.clone())
                    .or_default()
                    .push(*partition);
            } else {
                // LEADER_NOT_AVAILABLE
                offsets.insert((topic.clone(), *partition), Err(5));
            }
        }
        for (leader, topics) in by_leader {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_isolation_level(isolation_level)
                .with_topics(
                    topics
                        .iter()
                        .map(|(topic, partitions)| {
                            ListOffsetsTopic::default()
                                .with_name(topic_name(topic))
                                .with_partitions(
                                    partitions
                                        .iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(*p)
                                                .with_timestamp(timestamp)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let response = self.broker(leader).await?.send(request).await?;
            for topic in response.topics {
                for p in topic.partitions {
                    let answer = if p.error_code == 0 {
                        Ok(if p.offset >= 0 {
                            p.offset
                        } else {
                            p.old_style_offsets.first().copied().unwrap_or(-1)
                        })
                    } else {
                        Err(p.error_code)
                    };
                    offsets.insert((topic.name.to_string(), p.partition_index), answer);
                }
            }
        }
        Ok(offsets)
    }

    /// Appends one record set to `topic`-`partition` on its leader; the base offset. `acks`
    /// is 1 or -1 (a broker answers no acks=0 request, so callers send those as acks=1).
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
        timeout_ms: i32,
    ) -> anyhow::Result<i64> {
        let mut last = 0;
        for _ in 0..10 {
            let leader = self.leader(topic, partition).await?;
            let request = ProduceRequest::default()
                .with_acks(acks)
                .with_timeout_ms(timeout_ms)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic_name(topic))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records.clone()))])]);
            let connection = self.broker(leader).await?;
            let response = connection.send(request).await?;
            let answer = response
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .ok_or_else(|| anyhow!("the broker answered no partition"))?;
            match answer.error_code {
                0 => return Ok(answer.base_offset),
                // NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION:
                // the metadata is stale or the topic was just created.
                6 | 5 | 3 => {
                    last = answer.error_code;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    self.refresh().await?;
                }
                code => bail!("{}", error_message(code)),
            }
        }
        bail!("{}", error_message(last))
    }

    /// Reads from `offset` of `topic`-`partition` on its leader.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
        isolation_level: i8,
    ) -> anyhow::Result<Fetched> {
        let leader = self.leader(topic, partition).await?;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_isolation_level(isolation_level)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(max_bytes)])]);
        let response = self.broker(leader).await?.send(request).await?;
        let data = response
            .responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .ok_or_else(|| anyhow!("the broker answered no partition"))?;
        if matches!(data.error_code, 6 | 5 | 3) {
            self.refresh().await?;
        }
        Ok(Fetched {
            error_code: data.error_code,
            high_watermark: data.high_watermark,
            last_stable_offset: data.last_stable_offset,
            aborted: data
                .aborted_transactions
                .unwrap_or_default()
                .iter()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect(),
            records: data.records.unwrap_or_default(),
        })
    }
}

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A one-thread runtime for a command.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The connection options of a tool: `client.id`, and `--command-config`'s settings.
pub(crate) fn connection_options(
    bootstrap: &str,
    client_id: &str,
    config_file: Option<&std::path::Path>,
) -> anyhow::Result<ConnectionOptions> {
    Ok(
        crate::admin_options::admin_options(bootstrap, client_id, config_file, "--command-config")?
            .connection,
    )
}
