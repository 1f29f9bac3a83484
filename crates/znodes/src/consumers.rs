//! Typed operations on the consumer-group znodes (`/consumers/<group>/...`, the seed's layout,
//! SPEC section 7): committed offsets (persistent, decimal text), member registrations and
//! partition owners (ephemeral, owned by the coordinating broker's session).
//!
//! Offset writes are one `multi` per call: the common case (every offset node exists) is a
//! single multi of `SetData` ops; when some node is missing, the multi also creates the
//! missing empty parents, so a commit is never half-applied.

use std::collections::{BTreeMap, BTreeSet};

use metastore::{CreateMode, Op};
use model::{TopicName, TopicPartition};

use crate::json::{decode_consumer_offset, encode_consumer_offset, ConsumerMemberZNode, ZnodeJson};
use crate::paths;
use crate::zk_client::{KafkaZkClient, ZkClientError};

type Result<T> = std::result::Result<T, ZkClientError>;

/// How often a commit retries when the tree changed between its reads and its multi.
const COMMIT_ATTEMPTS: usize = 3;

/// One stored committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredOffset {
    /// The committed offset.
    pub offset: i64,
    /// When it was last written (ms since the epoch, the znode's mtime).
    pub mtime_ms: i64,
}

/// Every group's committed offsets: group -> partition -> offset.
pub type AllConsumerOffsets = BTreeMap<String, BTreeMap<TopicPartition, StoredOffset>>;

impl KafkaZkClient {
    /// Writes `/consumers/<group>/offsets/<t>/<p>` for every offset, creating what is
    /// missing, in one multi (all or nothing).
    pub async fn commit_consumer_offsets(
        &self,
        group: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        // Optimistic first: every node exists already (every commit after the first).
        let sets: Vec<Op> = offsets
            .iter()
            .map(|(tp, offset)| Op::SetData {
                path: paths::consumer_offset(group, &tp.topic, tp.partition),
                data: encode_consumer_offset(*offset),
                version: None,
            })
            .collect();
        match self.client().multi(sets).await {
            Ok(_) => return Ok(()),
            Err(metastore::Error::Multi { source, .. })
                if matches!(*source, metastore::Error::NoNode(_)) => {}
            Err(metastore::Error::Multi { source, .. }) => return Err((*source).into()),
            Err(err) => return Err(err.into()),
        }
        let mut last_err = None;
        for _ in 0..COMMIT_ATTEMPTS {
            let ops = self.offset_ops_creating_parents(group, offsets).await?;
            match self.client().multi(ops).await {
                Ok(_) => return Ok(()),
                // Someone created or deleted a node between the reads and the multi.
                Err(metastore::Error::Multi { source, .. })
                    if matches!(
                        *source,
                        metastore::Error::NoNode(_) | metastore::Error::NodeExists(_)
                    ) =>
                {
                    last_err = Some((*source).into());
                }
                Err(metastore::Error::Multi { source, .. }) => return Err((*source).into()),
                Err(err) => return Err(err.into()),
            }
        }
        Err(last_err.unwrap_or_else(|| {
            ZkClientError::Store(metastore::Error::NoNode(paths::consumer_group(group)))
        }))
    }

    async fn offset_ops_creating_parents(
        &self,
        group: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<Vec<Op>> {
        let mut ops = Vec::new();
        let mut created = BTreeSet::new();
        let offsets_root = format!("{}/offsets", paths::consumer_group(group));
        for (tp, offset) in offsets {
            let path = paths::consumer_offset(group, &tp.topic, tp.partition);
            let data = encode_consumer_offset(*offset);
            if self.client().exists(&path, false).await?.is_some() {
                ops.push(Op::SetData {
                    path,
                    data,
                    version: None,
                });
                continue;
            }
            for parent in [
                paths::consumer_group(group),
                offsets_root.clone(),
                paths::consumer_offsets(group, &tp.topic),
            ] {
                if created.contains(&parent) {
                    continue;
                }
                if self.client().exists(&parent, false).await?.is_none() {
                    ops.push(Op::Create {
                        path: parent.clone(),
                        data: Vec::new(),
                        mode: CreateMode::Persistent,
                    });
                }
                created.insert(parent);
            }
            if created.insert(path.clone()) {
                ops.push(Op::Create {
                    path,
                    data,
                    mode: CreateMode::Persistent,
                });
            }
        }
        Ok(ops)
    }

    /// Reads every group's committed offsets. Names under `/consumers` that are not valid
    /// offsets (foreign data) are skipped, not fatal.
    pub async fn get_all_consumer_offsets(&self) -> Result<AllConsumerOffsets> {
        let mut all = AllConsumerOffsets::new();
        for segment in self.children_or_empty(paths::consumers()).await? {
            let Some(group) = paths::group_from_segment(&segment) else {
                continue;
            };
            let offsets_root = format!("{}/offsets", paths::consumer_group(&group));
            for topic in self.children_or_empty(&offsets_root).await? {
                let Ok(topic) = TopicName::try_from(topic.as_str()) else {
                    continue;
                };
                let topic_path = paths::consumer_offsets(&group, &topic);
                for partition in self.children_or_empty(&topic_path).await? {
                    let Ok(partition) = partition.parse::<i32>() else {
                        continue;
                    };
                    let path = paths::consumer_offset(&group, &topic, partition);
                    let (data, stat) = match self.client().get_data(&path, false).await {
                        Ok(found) => found,
                        Err(metastore::Error::NoNode(_)) => continue,
                        Err(err) => return Err(err.into()),
                    };
                    let offset =
                        decode_consumer_offset(&data).map_err(|err| ZkClientError::Decode {
                            path: path.clone(),
                            reason: err.to_string(),
                        })?;
                    all.entry(group.clone()).or_default().insert(
                        TopicPartition::new(topic.clone(), partition),
                        StoredOffset {
                            offset,
                            mtime_ms: stat.mtime,
                        },
                    );
                }
            }
        }
        Ok(all)
    }

    /// One committed offset from `/consumers/<group>/offsets/<topic>/<partition>`, or `None`
    /// when there is none (OffsetFetch v0, as Kafka 2.8's `getConsumerOffset`).
    pub async fn get_consumer_offset(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>> {
        let path = paths::consumer_offset(group, &tp.topic, tp.partition);
        let data = match self.client().get_data(&path, false).await {
            Ok((data, _)) => data,
            Err(metastore::Error::NoNode(_)) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        decode_consumer_offset(&data)
            .map(Some)
            .map_err(|err| ZkClientError::Decode {
                path,
                reason: err.to_string(),
            })
    }

    /// Deletes some committed offsets of one group in one multi (missing ones are skipped).
    pub async fn delete_consumer_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        let mut ops = Vec::new();
        for tp in partitions {
            let path = paths::consumer_offset(group, &tp.topic, tp.partition);
            if self.client().exists(&path, false).await?.is_some() {
                ops.push(Op::Delete {
                    path,
                    version: None,
                });
            }
        }
        self.multi_deletes(ops).await
    }

    /// Deletes `/consumers/<group>` and everything under it in one multi.
    pub async fn delete_consumer_group(&self, group: &str) -> Result<()> {
        let ops = self.subtree_deletes(&paths::consumer_group(group)).await?;
        self.multi_deletes(ops).await
    }

    /// Deletes every group's `/consumers/<group>/offsets/<topic>` subtree (a deleted topic).
    pub async fn delete_topic_consumer_offsets(&self, topic: &TopicName) -> Result<()> {
        for segment in self.children_or_empty(paths::consumers()).await? {
            let Some(group) = paths::group_from_segment(&segment) else {
                continue;
            };
            let ops = self
                .subtree_deletes(&paths::consumer_offsets(&group, topic))
                .await?;
            self.multi_deletes(ops).await?;
        }
        Ok(())
    }

    /// Writes the ephemeral `/consumers/<group>/ids/<member>` (creating the persistent
    /// parents), replacing an existing registration's data.
    pub async fn register_consumer_member(
        &self,
        group: &str,
        member: &str,
        registration: &ConsumerMemberZNode,
    ) -> Result<()> {
        let path = paths::consumer_member(group, member);
        let data = registration.to_json_bytes();
        match self
            .client()
            .create_recursive(&path, &data, CreateMode::Ephemeral)
            .await
        {
            Ok(_) => Ok(()),
            Err(metastore::Error::NodeExists(_)) => {
                self.client().set_data(&path, &data, None).await?;
                Ok(())
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes `/consumers/<group>/ids/<member>` (a missing node is fine).
    pub async fn delete_consumer_member(&self, group: &str, member: &str) -> Result<()> {
        match self
            .client()
            .delete(&paths::consumer_member(group, member), None)
            .await
        {
            Ok(()) | Err(metastore::Error::NoNode(_)) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// The group's partition owners as stored: partition -> member id.
    pub async fn get_consumer_owners(
        &self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, String>> {
        let mut owners = BTreeMap::new();
        let root = format!("{}/owners", paths::consumer_group(group));
        for topic in self.children_or_empty(&root).await? {
            let Ok(topic) = TopicName::try_from(topic.as_str()) else {
                continue;
            };
            for partition in self
                .children_or_empty(&paths::consumer_owners(group, &topic))
                .await?
            {
                let Ok(partition) = partition.parse::<i32>() else {
                    continue;
                };
                let path = paths::consumer_owner(group, &topic, partition);
                match self.client().get_data(&path, false).await {
                    Ok((data, _)) => {
                        owners.insert(
                            TopicPartition::new(topic.clone(), partition),
                            String::from_utf8_lossy(&data).into_owned(),
                        );
                    }
                    Err(metastore::Error::NoNode(_)) => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
        Ok(owners)
    }

    /// Makes `/consumers/<group>/owners/<t>/<p>` (ephemeral, the member id) hold exactly
    /// `owners`: stale owner nodes are deleted, changed ones rewritten, new ones created.
    pub async fn set_consumer_owners(
        &self,
        group: &str,
        owners: &BTreeMap<TopicPartition, String>,
    ) -> Result<()> {
        let current = self.get_consumer_owners(group).await?;
        for (tp, member) in &current {
            if owners.get(tp) != Some(member) {
                let path = paths::consumer_owner(group, &tp.topic, tp.partition);
                match self.client().delete(&path, None).await {
                    Ok(()) | Err(metastore::Error::NoNode(_)) => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
        for (tp, member) in owners {
            if current.get(tp) == Some(member) {
                continue;
            }
            let path = paths::consumer_owner(group, &tp.topic, tp.partition);
            match self
                .client()
                .create_recursive(&path, member.as_bytes(), CreateMode::Ephemeral)
                .await
            {
                Ok(_) => {}
                Err(metastore::Error::NodeExists(_)) => {
                    self.client()
                        .set_data(&path, member.as_bytes(), None)
                        .await?;
                }
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    pub(crate) async fn children_or_empty(&self, path: &str) -> Result<Vec<String>> {
        match self.client().get_children(path, false).await {
            Ok(children) => Ok(children),
            Err(metastore::Error::NoNode(_)) => Ok(Vec::new()),
            Err(err) => Err(err.into()),
        }
    }

    /// Delete ops for `root` and everything under it, children before parents.
    async fn subtree_deletes(&self, root: &str) -> Result<Vec<Op>> {
        let mut parents_first = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(path) = stack.pop() {
            match self.client().get_children(&path, false).await {
                Ok(children) => {
                    stack.extend(children.into_iter().map(|c| format!("{path}/{c}")));
                    parents_first.push(path);
                }
                Err(metastore::Error::NoNode(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(parents_first
            .into_iter()
            .rev()
            .map(|path| Op::Delete {
                path,
                version: None,
            })
            .collect())
    }

    async fn multi_deletes(&self, ops: Vec<Op>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        match self.client().multi(ops).await {
            Ok(_) => Ok(()),
            Err(metastore::Error::Multi { source, .. }) => Err((*source).into()),
            Err(err) => Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metastore::{EmbeddedStore, SessionOptions};

    fn client() -> ((), KafkaZkClient) {
        let store = EmbeddedStore::open_in_memory();
        let (client, events) = store.connect(SessionOptions::default());
        ((), KafkaZkClient::new(client, events))
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(TopicName::try_from(topic).expect("topic"), partition)
    }

    #[tokio::test]
    async fn offsets_round_trip_and_are_overwritten() {
        let (_dir, zk) = client();
        zk.ensure_persistent_paths().await.expect("paths");
        zk.commit_consumer_offsets("g", &[(tp("a", 0), 5), (tp("a", 1), 7), (tp("b", 0), 1)])
            .await
            .expect("first commit");
        zk.commit_consumer_offsets("g", &[(tp("a", 0), 9), (tp("c", 3), 2)])
            .await
            .expect("second commit");
        let (data, _) = zk
            .client()
            .get_data("/consumers/g/offsets/a/0", false)
            .await
            .expect("offset node");
        assert_eq!(data, b"9");
        let all = zk.get_all_consumer_offsets().await.expect("load");
        let g: BTreeMap<_, _> = all["g"]
            .iter()
            .map(|(k, v)| (k.clone(), v.offset))
            .collect();
        assert_eq!(
            g,
            BTreeMap::from([
                (tp("a", 0), 9),
                (tp("a", 1), 7),
                (tp("b", 0), 1),
                (tp("c", 3), 2)
            ])
        );

        zk.delete_topic_consumer_offsets(&tp("a", 0).topic)
            .await
            .expect("drop topic");
        zk.delete_consumer_offsets("g", &[tp("b", 0), tp("zz", 0)])
            .await
            .expect("drop one");
        let all = zk.get_all_consumer_offsets().await.expect("load");
        assert_eq!(
            all["g"].keys().cloned().collect::<Vec<_>>(),
            vec![tp("c", 3)]
        );

        zk.delete_consumer_group("g").await.expect("delete group");
        assert!(zk
            .get_all_consumer_offsets()
            .await
            .expect("load")
            .is_empty());
        assert!(zk
            .client()
            .exists("/consumers/g", false)
            .await
            .expect("exists")
            .is_none());
    }

    /// Issue 14: any string is a group id. Each odd id is one node under `/consumers`,
    /// reads back as itself, and nothing lands outside `/consumers`.
    #[tokio::test]
    async fn any_group_id_is_one_node_under_consumers() {
        let (_dir, zk) = client();
        zk.ensure_persistent_paths().await.expect("paths");
        let odd = [
            "a/b",
            "..",
            ".",
            "a/../../brokers",
            "with space",
            "100%",
            "ünïcode",
            "plain.group-1_x",
        ];
        for (i, group) in odd.iter().enumerate() {
            zk.commit_consumer_offsets(group, &[(tp("t", 0), i as i64)])
                .await
                .unwrap_or_else(|e| panic!("commit for {group:?}: {e}"));
            let reg = ConsumerMemberZNode {
                version: 1,
                subscription: BTreeMap::from([("t".to_owned(), 1)]),
                pattern: "white_list".to_owned(),
                timestamp: 1,
            };
            zk.register_consumer_member(group, "client/with/slashes-1", &reg)
                .await
                .unwrap_or_else(|e| panic!("member of {group:?}: {e}"));
        }
        let all = zk.get_all_consumer_offsets().await.expect("load");
        for (i, group) in odd.iter().enumerate() {
            assert_eq!(all[*group][&tp("t", 0)].offset, i as i64, "{group:?}");
        }
        assert_eq!(all.len(), odd.len());
        let mut children = zk
            .client()
            .get_children("/consumers", false)
            .await
            .expect("children");
        children.sort();
        assert_eq!(children.len(), odd.len(), "{children:?}");
        assert!(
            children.contains(&"plain.group-1_x".to_owned()),
            "plain ids unchanged"
        );
        assert!(children.contains(&"a%2Fb".to_owned()));
        assert!(children.contains(&"%2E%2E".to_owned()));
        assert_eq!(
            zk.client()
                .get_children("/brokers", false)
                .await
                .expect("brokers")
                .iter()
                .filter(|c| c.as_str() == "offsets")
                .count(),
            0,
            "nothing written under /brokers"
        );
        zk.delete_consumer_group("a/../../brokers")
            .await
            .expect("delete");
        assert!(!zk
            .get_all_consumer_offsets()
            .await
            .expect("load")
            .contains_key("a/../../brokers"));
        assert!(zk
            .client()
            .exists("/brokers", false)
            .await
            .expect("exists")
            .is_some());
    }

    #[tokio::test]
    async fn members_and_owners_are_ephemeral_and_replaced() {
        let (_dir, zk) = client();
        zk.ensure_persistent_paths().await.expect("paths");
        let reg = ConsumerMemberZNode {
            version: 1,
            subscription: BTreeMap::from([("a".to_owned(), 1)]),
            pattern: "white_list".to_owned(),
            timestamp: 42,
        };
        zk.register_consumer_member("g", "m1", &reg)
            .await
            .expect("register");
        zk.register_consumer_member("g", "m1", &reg)
            .await
            .expect("register again");
        let stat = zk
            .client()
            .exists("/consumers/g/ids/m1", false)
            .await
            .expect("exists")
            .expect("member node");
        assert_ne!(stat.ephemeral_owner, 0);

        let owners = BTreeMap::from([(tp("a", 0), "m1".to_owned()), (tp("a", 1), "m2".to_owned())]);
        zk.set_consumer_owners("g", &owners).await.expect("owners");
        assert_eq!(zk.get_consumer_owners("g").await.expect("read"), owners);
        let moved = BTreeMap::from([(tp("a", 1), "m1".to_owned())]);
        zk.set_consumer_owners("g", &moved).await.expect("owners");
        assert_eq!(zk.get_consumer_owners("g").await.expect("read"), moved);

        zk.delete_consumer_member("g", "m1").await.expect("delete");
        zk.delete_consumer_member("g", "m1")
            .await
            .expect("delete again");
        assert!(zk
            .client()
            .exists("/consumers/g/ids/m1", false)
            .await
            .expect("exists")
            .is_none());
    }
}
