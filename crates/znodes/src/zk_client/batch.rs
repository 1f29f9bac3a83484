//! Batched operations of [`KafkaZkClient`] (Kafka's pipelined `createTopicPartitionStatesRaw`,
//! `updateLeaderAndIsr`, `getTopicPartitionStates` and the recursive topic delete), for work that
//! touches thousands of partitions at once.
//!
//! Writes go in fenced multis: each multi checks the `/controller_epoch` version first, so a
//! deposed controller changes nothing. A batch is split into chunks that stay under
//! ZooKeeper's `jute.maxbuffer` (1 MiB by default: a larger request is refused and the
//! connection dropped) by bytes ([`MULTI_MAX_BYTES`]) and by op count ([`MULTI_MAX_OPS`]).
//! Chunks go out concurrently ([`MAX_IN_FLIGHT`] at a time): ZooKeeper pipelines them on the
//! session's connection and the embedded store commits the ones queued together in one group
//! commit. A chunk is atomic; when it fails for a reason other than a moved controller, each
//! of its items is tried alone, so one bad partition does not fail the others. Every batch
//! returns one outcome per item, in the order given.

use std::collections::{BTreeMap, BTreeSet};

use futures::stream::{self, StreamExt};
use metastore::{CreateMode, Op, OpResult};
use model::{TopicName, TopicPartition};

use super::{
    decode, KafkaZkClient, Result, VersionedPartitionState, VersionedTopicAssignment, ZkClientError,
};
use crate::json::{PartitionStateZNode, ZnodeJson};
use crate::paths;

/// The most bytes of ops (paths and data, plus [`OP_OVERHEAD`] each) one multi carries: half
/// of ZooKeeper's default `jute.maxbuffer`, leaving room for the framing and the response.
pub const MULTI_MAX_BYTES: usize = 512 * 1024;
/// The most ops one multi carries.
pub const MULTI_MAX_OPS: usize = 1000;
/// The most multis or reads of one batch in flight at once.
pub const MAX_IN_FLIGHT: usize = 64;
/// What an op costs in a request besides its path and data (type, lengths, version, ACL).
const OP_OVERHEAD: usize = 64;

/// One unit of a batch: ops that must apply together (in one multi), and whose outcome is
/// reported under `key`.
#[derive(Debug)]
struct Item<K> {
    key: K,
    ops: Vec<Op>,
}

fn op_bytes(op: &Op) -> usize {
    OP_OVERHEAD
        + match op {
            Op::Create { path, data, .. } | Op::SetData { path, data, .. } => {
                path.len() + data.len()
            }
            Op::Delete { path, .. } | Op::Check { path, .. } => path.len(),
        }
}

/// Splits `items` into chunks of at most [`MULTI_MAX_OPS`] ops and [`MULTI_MAX_BYTES`] bytes
/// (one fenced check included), keeping each item whole and the order.
fn chunks<K>(items: Vec<Item<K>>) -> Vec<Vec<Item<K>>> {
    let check_bytes = OP_OVERHEAD + paths::controller_epoch().len();
    let mut out = Vec::new();
    let mut current: Vec<Item<K>> = Vec::new();
    let (mut ops, mut bytes) = (1, check_bytes);
    for item in items {
        let item_ops = item.ops.len();
        let item_bytes: usize = item.ops.iter().map(op_bytes).sum();
        if !current.is_empty()
            && (ops + item_ops > MULTI_MAX_OPS || bytes + item_bytes > MULTI_MAX_BYTES)
        {
            out.push(std::mem::take(&mut current));
            (ops, bytes) = (1, check_bytes);
        }
        ops += item_ops;
        bytes += item_bytes;
        current.push(item);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Per-item outcomes of a batch, in the order given.
pub type Outcomes<K, T> = Vec<(K, Result<T>)>;

impl KafkaZkClient {
    /// Runs `items` in chunked, fenced multis; a failed chunk is retried item by item. Returns
    /// each item's op results, or [`ZkClientError::ControllerMoved`] for the whole batch.
    async fn run_fenced<K>(
        &self,
        items: Vec<Item<K>>,
        epoch_zk_version: i32,
    ) -> Result<Outcomes<K, Vec<OpResult>>> {
        // The futures are collected first: a stream over a borrowing iterator makes the
        // caller's future not `Send` (rust-lang/rust#102211).
        let runs: Vec<_> = chunks(items)
            .into_iter()
            .map(|chunk| self.run_chunk(chunk, epoch_zk_version))
            .collect();
        let mut results: Vec<Outcomes<K, Vec<OpResult>>> = stream::iter(runs)
            .buffered(MAX_IN_FLIGHT)
            .collect::<Vec<Result<_>>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
        Ok(results.drain(..).flatten().collect())
    }

    async fn run_chunk<K>(
        &self,
        chunk: Vec<Item<K>>,
        epoch_zk_version: i32,
    ) -> Result<Outcomes<K, Vec<OpResult>>> {
        let ops: Vec<Op> = chunk.iter().flat_map(|i| i.ops.iter().cloned()).collect();
        match self.fenced_multi(Some(epoch_zk_version), ops).await {
            Ok(results) => {
                // Each item takes its ops' results in order (one pass: splitting the rest off
                // per item would move the whole tail each time, quadratic in the chunk).
                let mut results = results.into_iter();
                Ok(chunk
                    .into_iter()
                    .map(|item| {
                        let mine: Vec<OpResult> = results.by_ref().take(item.ops.len()).collect();
                        (item.key, Ok(mine))
                    })
                    .collect())
            }
            Err(err @ ZkClientError::ControllerMoved { .. }) => Err(err),
            Err(err) if chunk.len() == 1 => {
                let item = chunk.into_iter().next().expect("one item");
                Ok(vec![(item.key, Err(err))])
            }
            Err(_) => {
                // Find out which items fail: each alone, still fenced.
                let singles: Vec<_> = chunk
                    .into_iter()
                    .map(|item| async move {
                        let result = self.fenced_multi(Some(epoch_zk_version), item.ops).await;
                        (item.key, result)
                    })
                    .collect();
                let out: Outcomes<K, Vec<OpResult>> = stream::iter(singles)
                    .buffered(MAX_IN_FLIGHT)
                    .collect()
                    .await;
                if out
                    .iter()
                    .any(|(_, r)| matches!(r, Err(ZkClientError::ControllerMoved { .. })))
                {
                    return Err(ZkClientError::ControllerMoved {
                        expected_epoch_zk_version: epoch_zk_version,
                    });
                }
                Ok(out)
            }
        }
    }

    /// Creates the state znodes of many partitions (and their missing empty parents
    /// `/brokers/topics/<t>/partitions` and `.../partitions/<p>`), fenced on the controller
    /// epoch, in chunked multis. Per partition: `Ok(())`, or
    /// [`ZkClientError::NodeExists`] naming the state path when the state exists already.
    pub async fn create_partition_states(
        &self,
        states: Vec<(TopicPartition, PartitionStateZNode)>,
        epoch_zk_version: i32,
    ) -> Result<Outcomes<TopicPartition, ()>> {
        // Which parents exist: one children read per topic.
        let topics: BTreeSet<TopicName> = states.iter().map(|(tp, _)| tp.topic.clone()).collect();
        let reads: Vec<_> = topics
            .into_iter()
            .map(|topic| async move {
                let path = paths::topic_partitions(&topic);
                let children = match self.client.get_children(&path, false).await {
                    Ok(children) => Some(children),
                    Err(metastore::Error::NoNode(_)) => None,
                    Err(err) => return Err(ZkClientError::from(err)),
                };
                Ok((topic, children))
            })
            .collect();
        let listed: Vec<Result<(TopicName, Option<Vec<String>>)>> =
            stream::iter(reads).buffered(MAX_IN_FLIGHT).collect().await;
        let mut missing_topics = Vec::new();
        let mut existing: BTreeMap<TopicName, std::collections::BTreeSet<String>> = BTreeMap::new();
        for entry in listed {
            let (topic, children) = entry?;
            match children {
                Some(children) => {
                    existing.insert(topic, children.into_iter().collect());
                }
                None => {
                    existing.insert(topic.clone(), Default::default());
                    missing_topics.push(topic);
                }
            }
        }
        // First the `/partitions` parents (usually one op per new topic), then the rest.
        if !missing_topics.is_empty() {
            let items = missing_topics
                .iter()
                .map(|topic| Item {
                    key: (),
                    ops: vec![Op::Create {
                        path: paths::topic_partitions(topic),
                        data: Vec::new(),
                        mode: CreateMode::Persistent,
                    }],
                })
                .collect();
            // Created meanwhile by someone else is fine; a parent that could not be created
            // makes its partitions fail below with NoNode, and each then takes the
            // one-partition path, which reports its own error.
            self.run_fenced(items, epoch_zk_version).await?;
        }
        let items = states
            .into_iter()
            .map(|(tp, state)| {
                let mut ops = Vec::with_capacity(2);
                let partition = tp.partition.to_string();
                if !existing
                    .get(&tp.topic)
                    .is_some_and(|children| children.contains(&partition))
                {
                    ops.push(Op::Create {
                        path: paths::topic_partition(&tp.topic, tp.partition),
                        data: Vec::new(),
                        mode: CreateMode::Persistent,
                    });
                }
                ops.push(Op::Create {
                    path: paths::partition_state(&tp.topic, tp.partition),
                    data: state.to_json_bytes(),
                    mode: CreateMode::Persistent,
                });
                Item {
                    key: (tp, state),
                    ops,
                }
            })
            .collect();
        let mut out = Vec::new();
        for ((tp, state), result) in self.run_fenced(items, epoch_zk_version).await? {
            let result = match result {
                Ok(_) => Ok(()),
                // A parent that appeared or vanished since it was listed: the one-partition
                // path re-reads the parents.
                Err(ZkClientError::NodeExists(path))
                    if path != paths::partition_state(&tp.topic, tp.partition) =>
                {
                    self.create_partition_state(&tp, &state, epoch_zk_version)
                        .await
                }
                Err(ZkClientError::Store(metastore::Error::NoNode(_))) => {
                    self.create_partition_state(&tp, &state, epoch_zk_version)
                        .await
                }
                Err(err) => Err(err),
            };
            if let Err(ZkClientError::ControllerMoved { .. }) = result {
                return Err(ZkClientError::ControllerMoved {
                    expected_epoch_zk_version: epoch_zk_version,
                });
            }
            out.push((tp, result));
        }
        Ok(out)
    }

    /// Overwrites the state znodes of many partitions, each at its expected version, fenced
    /// on the controller epoch, in chunked multis. Per partition: the new znode version, or
    /// the error (a `BadVersion` store error when someone else changed the state).
    pub async fn set_partition_states(
        &self,
        states: Vec<(TopicPartition, PartitionStateZNode, i32)>,
        epoch_zk_version: i32,
    ) -> Result<Outcomes<TopicPartition, i32>> {
        let items = states
            .into_iter()
            .map(|(tp, state, expected_version)| Item {
                ops: vec![Op::SetData {
                    path: paths::partition_state(&tp.topic, tp.partition),
                    data: state.to_json_bytes(),
                    version: Some(expected_version),
                }],
                key: (tp, expected_version),
            })
            .collect();
        Ok(self
            .run_fenced(items, epoch_zk_version)
            .await?
            .into_iter()
            .map(|((tp, expected), result)| {
                let result = result.map(|results| match results.last() {
                    Some(OpResult::SetData(stat)) => stat.version,
                    _ => expected + 1,
                });
                (tp, result)
            })
            .collect())
    }

    /// The state znodes of many partitions, read in bulk (multi-reads on ZooKeeper): per partition its state with
    /// the znode version, `None` when it has none, or the error (undecodable data included).
    pub async fn get_partition_states(
        &self,
        partitions: &[TopicPartition],
    ) -> Vec<(TopicPartition, Result<Option<VersionedPartitionState>>)> {
        let paths: Vec<String> = partitions
            .iter()
            .map(|tp| paths::partition_state(&tp.topic, tp.partition))
            .collect();
        let path_refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let reads = self.client.get_data_many(&path_refs).await;
        partitions
            .iter()
            .zip(&paths)
            .zip(reads)
            .map(|((tp, path), read)| {
                let result = match read {
                    Ok((data, stat)) => decode(path, &data, PartitionStateZNode::from_json_bytes)
                        .map(|state| {
                            Some(VersionedPartitionState {
                                state,
                                zk_version: stat.version,
                            })
                        }),
                    Err(metastore::Error::NoNode(_)) => Ok(None),
                    Err(err) => Err(err.into()),
                };
                (tp.clone(), result)
            })
            .collect()
    }

    /// The assignment znodes of many topics, read concurrently (watched when `watch`, as
    /// [`KafkaZkClient::get_topic_assignment`]): per topic the assignment with its version,
    /// `None` when the topic does not exist, or the error (undecodable data included).
    pub async fn get_topic_assignments(
        &self,
        topics: &[TopicName],
        watch: bool,
    ) -> Vec<(TopicName, Result<Option<VersionedTopicAssignment>>)> {
        let reads: Vec<_> =
            topics
                .iter()
                .map(|topic| async move {
                    (topic.clone(), self.get_topic_assignment(topic, watch).await)
                })
                .collect();
        stream::iter(reads)
            .buffered(MAX_IN_FLIGHT * 4)
            .collect()
            .await
    }

    /// The last step of a topic deletion: `/brokers/topics/<t>` and everything under it, then
    /// `/config/topics/<t>` and `/admin/delete_topics/<t>`, deepest level first, each level in
    /// chunked fenced multis (one multi of a 10,000-partition topic would pass ZooKeeper's
    /// `jute.maxbuffer`). Nodes already gone are fine, so a deletion cut short (by a failover)
    /// finishes when run again; the deletion mark goes last, so until then the next controller
    /// resumes the deletion.
    pub async fn delete_topic_znodes(
        &self,
        topic: &TopicName,
        epoch_zk_version: i32,
    ) -> Result<()> {
        let levels = self.subtree_levels(&paths::topic(topic)).await?;
        // `levels[0]` is the topic node; it goes in the last multi with the config and mark.
        for level in levels.iter().skip(1).rev() {
            self.delete_paths(level.clone(), epoch_zk_version).await?;
        }
        let mut last: Vec<String> = levels.first().cloned().unwrap_or_default();
        for path in [paths::config_topic(topic), paths::delete_topic(topic)] {
            if self.client.exists(&path, false).await?.is_some() {
                last.push(path);
            }
        }
        if last.is_empty() {
            return Ok(());
        }
        // Not chunked: at most three ops, and all or none (the mark only goes with the rest).
        let ops = last
            .into_iter()
            .map(|path| Op::Delete {
                path,
                version: None,
            })
            .collect();
        match self.fenced_multi(Some(epoch_zk_version), ops).await {
            Ok(_) => Ok(()),
            // Something under the topic appeared or vanished meanwhile: walk it again.
            Err(ZkClientError::Store(
                metastore::Error::NotEmpty(_) | metastore::Error::NoNode(_),
            )) => Box::pin(self.delete_topic_znodes(topic, epoch_zk_version)).await,
            Err(err) => Err(err),
        }
    }

    /// Deletes `paths` (no two of which are parent and child), fenced, in chunked multis;
    /// a path already gone counts as deleted.
    async fn delete_paths(&self, paths: Vec<String>, epoch_zk_version: i32) -> Result<()> {
        let items = paths
            .into_iter()
            .map(|path| Item {
                ops: vec![Op::Delete {
                    path: path.clone(),
                    version: None,
                }],
                key: path,
            })
            .collect();
        for (_, result) in self.run_fenced(items, epoch_zk_version).await? {
            match result {
                Ok(_) | Err(ZkClientError::Store(metastore::Error::NoNode(_))) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// `root` and every node below it, by depth (`[0]` is `[root]`), children read
    /// concurrently level by level. Empty when `root` does not exist.
    async fn subtree_levels(&self, root: &str) -> Result<Vec<Vec<String>>> {
        let mut levels: Vec<Vec<String>> = Vec::new();
        let mut current = vec![root.to_owned()];
        while !current.is_empty() {
            let reads: Vec<_> = current
                .iter()
                .map(|path| async move {
                    match self.client.get_children(path, false).await {
                        Ok(children) => Ok(Some((path.clone(), children))),
                        Err(metastore::Error::NoNode(_)) => Ok(None),
                        Err(err) => Err(ZkClientError::from(err)),
                    }
                })
                .collect();
            /// A node and its children, `None` once gone.
            type Listed = Result<Option<(String, Vec<String>)>>;
            let listed: Vec<Listed> = stream::iter(reads)
                .buffered(MAX_IN_FLIGHT * 4)
                .collect()
                .await;
            let mut found = Vec::new();
            let mut next = Vec::new();
            for entry in listed {
                if let Some((path, children)) = entry? {
                    next.extend(children.into_iter().map(|c| format!("{path}/{c}")));
                    found.push(path);
                }
            }
            if !found.is_empty() {
                levels.push(found);
            }
            current = next;
        }
        Ok(levels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(path: &str, data_len: usize) -> Op {
        Op::Create {
            path: path.to_owned(),
            data: vec![0; data_len],
            mode: CreateMode::Persistent,
        }
    }

    #[test]
    fn chunks_stay_under_both_limits_and_keep_items_whole_and_in_order() {
        // 2,500 items of two ops each: op count decides (499 items per chunk with the check).
        let items: Vec<Item<usize>> = (0..2500)
            .map(|i| Item {
                key: i,
                ops: vec![create("/a", 0), create("/a/b", 10)],
            })
            .collect();
        let split = chunks(items);
        assert!(split.iter().all(|c| 2 * c.len() < MULTI_MAX_OPS));
        assert_eq!(split[0].len(), (MULTI_MAX_OPS - 1) / 2);
        let keys: Vec<usize> = split.iter().flatten().map(|i| i.key).collect();
        assert_eq!(keys, (0..2500).collect::<Vec<_>>());

        // Large data: bytes decide.
        let items: Vec<Item<usize>> = (0..100)
            .map(|i| Item {
                key: i,
                ops: vec![create("/big", 100_000)],
            })
            .collect();
        let split = chunks(items);
        for c in &split {
            let bytes: usize = c.iter().flat_map(|i| &i.ops).map(op_bytes).sum();
            assert!(bytes <= MULTI_MAX_BYTES, "{bytes}");
        }
        assert_eq!(split[0].len(), 5);
        assert_eq!(split.iter().map(Vec::len).sum::<usize>(), 100);

        // An item larger than the limit still goes, alone.
        let split = chunks(vec![
            Item {
                key: 0,
                ops: vec![create("/x", 10)],
            },
            Item {
                key: 1,
                ops: vec![create("/huge", MULTI_MAX_BYTES)],
            },
            Item {
                key: 2,
                ops: vec![create("/y", 10)],
            },
        ]);
        assert_eq!(
            split
                .iter()
                .map(|c| c.iter().map(|i| i.key).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            vec![vec![0], vec![1], vec![2]]
        );
    }
}
