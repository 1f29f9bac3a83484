//! The ACL znodes, exactly as Kafka's `AclAuthorizer` keeps them (`ZkAclStore`,
//! `ZkAclChangeStore`), so ACLs written by Kafka's tools into the same ZooKeeper read the same.
//!
//! - `/kafka-acl/<ResourceType>/<name>`: the entries of a LITERAL pattern;
//!   `/kafka-acl-extended/prefixed/<ResourceType>/<name>`: those of a PREFIXED one. The data is
//!   `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`
//!   (`<ResourceType>` and the names inside in Pascal case). Writes are conditional on the
//!   znode's version; a pattern without entries has no znode.
//! - `/kafka-acl-changes/acl_changes_<seq>`: a LITERAL pattern changed; the data is
//!   `<TYPE>:<name>` (Kafka writes the enum name, `TOPIC:orders`; the Pascal form is read too).
//! - `/kafka-acl-extended-changes/acl_changes_<seq>`: a PREFIXED pattern changed; the data is
//!   `{"version":1,"resourceType":"TOPIC","name":"pay","patternType":"PREFIXED"}`.

use std::collections::BTreeSet;

use metastore::CreateMode;
use security::acl::{
    AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use serde::{Deserialize, Serialize};

use crate::json::ZnodeJson;
use crate::zk_client::{decode, KafkaZkClient, Result};

/// `/kafka-acl`: LITERAL patterns.
pub fn literal_root() -> &'static str {
    "/kafka-acl"
}

/// `/kafka-acl-extended`.
pub fn extended_root() -> &'static str {
    "/kafka-acl-extended"
}

/// `/kafka-acl-extended/prefixed`: PREFIXED patterns.
pub fn prefixed_root() -> &'static str {
    "/kafka-acl-extended/prefixed"
}

/// `/kafka-acl-changes`: notifications for LITERAL patterns.
pub fn literal_changes() -> &'static str {
    "/kafka-acl-changes"
}

/// `/kafka-acl-extended-changes`: notifications for PREFIXED patterns.
pub fn extended_changes() -> &'static str {
    "/kafka-acl-extended-changes"
}

/// The sequence prefix of a change notification's name.
pub const CHANGE_PREFIX: &str = "acl_changes_";

/// The paths Kafka's authorizer creates when it starts (`createAclPaths`).
pub fn acl_paths() -> [&'static str; 4] {
    [
        literal_root(),
        prefixed_root(),
        literal_changes(),
        extended_changes(),
    ]
}

fn root(pattern_type: PatternType) -> Option<&'static str> {
    match pattern_type {
        PatternType::Literal => Some(literal_root()),
        PatternType::Prefixed => Some(prefixed_root()),
        _ => None,
    }
}

/// The znode of a pattern (`None` for a pattern type that is not stored).
pub fn pattern_path(pattern: &ResourcePattern) -> Option<String> {
    Some(format!(
        "{}/{}/{}",
        root(pattern.pattern_type)?,
        pattern.resource_type.pascal(),
        pattern.name
    ))
}

/// The sequence number of a notification's name (`acl_changes_0000000007` -> 7).
pub fn change_sequence(child: &str) -> Option<u64> {
    child.strip_prefix(CHANGE_PREFIX)?.parse().ok()
}

/// One entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AclEntryJson {
    /// `User:alice`.
    pub principal: String,
    /// `Allow` / `Deny`.
    pub permission_type: String,
    /// `Read`, `DescribeConfigs`, ...
    pub operation: String,
    /// `*` or an address.
    pub host: String,
}

/// A pattern's znode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclsZNode {
    /// Format version: 1.
    pub version: i32,
    /// The entries.
    pub acls: Vec<AclEntryJson>,
}

impl ZnodeJson for AclsZNode {
    const WHAT: &'static str = "ACLs";
}

impl AclsZNode {
    /// The znode for `entries`.
    pub fn new(entries: &BTreeSet<AccessControlEntry>) -> Self {
        AclsZNode {
            version: 1,
            acls: entries
                .iter()
                .map(|e| AclEntryJson {
                    principal: e.principal.clone(),
                    permission_type: e.permission.pascal().to_string(),
                    operation: e.operation.pascal().to_string(),
                    host: e.host.clone(),
                })
                .collect(),
        }
    }

    /// The entries (Kafka refuses a version other than 1, and so do we). An entry whose
    /// operation or permission this version does not know is kept as UNKNOWN, which never
    /// matches a request (as Kafka's `SecurityUtils` maps unknown names).
    pub fn entries(&self) -> std::result::Result<BTreeSet<AccessControlEntry>, String> {
        if self.version != 1 {
            return Err(format!("unsupported ACL znode version {}", self.version));
        }
        Ok(self
            .acls
            .iter()
            .map(|a| AccessControlEntry {
                principal: a.principal.clone(),
                host: a.host.clone(),
                operation: Operation::parse(&a.operation).unwrap_or(Operation::Unknown),
                permission: Permission::parse(&a.permission_type).unwrap_or(Permission::Unknown),
            })
            .collect())
    }
}

/// An extended change notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedAclChange {
    /// Format version: 1.
    pub version: i32,
    /// `TOPIC`, ...
    pub resource_type: String,
    /// The pattern's name.
    pub name: String,
    /// `PREFIXED`.
    pub pattern_type: String,
}

impl ZnodeJson for ExtendedAclChange {
    const WHAT: &'static str = "ACL change";
}

/// The data of a change notification for `pattern` (literal: `TOPIC:name`).
pub fn encode_change(pattern: &ResourcePattern) -> Vec<u8> {
    match pattern.pattern_type {
        PatternType::Literal => {
            format!("{}:{}", pattern.resource_type.name(), pattern.name).into_bytes()
        }
        _ => ExtendedAclChange {
            version: 1,
            resource_type: pattern.resource_type.name().to_string(),
            name: pattern.name.clone(),
            pattern_type: pattern.pattern_type.name().to_string(),
        }
        .to_json_bytes(),
    }
}

/// The pattern a change notification names (`extended`: from `/kafka-acl-extended-changes`).
pub fn decode_change(extended: bool, data: &[u8]) -> Option<ResourcePattern> {
    if extended {
        let change = ExtendedAclChange::from_json_bytes(data).ok()?;
        if change.version > 1 {
            return None;
        }
        let pattern_type = PatternType::parse(&change.pattern_type)?;
        let resource_type = ResourceType::parse(&change.resource_type)?;
        (pattern_type == PatternType::Prefixed && resource_type.is_concrete())
            .then(|| ResourcePattern::new(resource_type, change.name, pattern_type))
    } else {
        let text = std::str::from_utf8(data).ok()?;
        let (kind, name) = text.split_once(':')?;
        let resource_type = ResourceType::parse(kind)?;
        resource_type
            .is_concrete()
            .then(|| ResourcePattern::literal(resource_type, name))
    }
}

/// A pattern's entries and its znode version (`None`: no znode).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionedAcls {
    /// The entries.
    pub entries: BTreeSet<AccessControlEntry>,
    /// The znode's version.
    pub version: Option<i32>,
}

fn changes_root(extended: bool) -> &'static str {
    if extended {
        extended_changes()
    } else {
        literal_changes()
    }
}

impl KafkaZkClient {
    /// Creates the ACL parents (`/kafka-acl`, ...) if missing.
    pub async fn create_acl_paths(&self) -> Result<()> {
        for path in acl_paths() {
            match self
                .client()
                .create_recursive(path, &[], CreateMode::Persistent)
                .await
            {
                Ok(_) | Err(metastore::Error::NodeExists(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// One pattern's entries with the znode version.
    pub async fn get_versioned_acls(&self, pattern: &ResourcePattern) -> Result<VersionedAcls> {
        let Some(path) = pattern_path(pattern) else {
            return Ok(VersionedAcls::default());
        };
        match self.client().get_data(&path, false).await {
            Ok((data, stat)) => {
                let entries = if data.is_empty() {
                    BTreeSet::new()
                } else {
                    decode(&path, &data, |d| {
                        AclsZNode::from_json_bytes(d)
                            .map_err(|e| e.to_string())
                            .and_then(|z| z.entries())
                    })?
                };
                Ok(VersionedAcls {
                    entries,
                    version: Some(stat.version),
                })
            }
            Err(metastore::Error::NoNode(_)) => Ok(VersionedAcls::default()),
            Err(err) => Err(err.into()),
        }
    }

    /// Writes a pattern's entries on the condition that its znode is at `version` (`None`:
    /// that it does not exist; it is created). An empty set deletes the znode. Returns the
    /// new version, or `None` when the condition failed (somebody else wrote first).
    pub async fn conditional_set_acls(
        &self,
        pattern: &ResourcePattern,
        entries: &BTreeSet<AccessControlEntry>,
        version: Option<i32>,
    ) -> Result<Option<Option<i32>>> {
        let Some(path) = pattern_path(pattern) else {
            return Err(crate::ZkClientError::Decode {
                path: pattern.to_string(),
                reason: "only LITERAL and PREFIXED patterns are stored".into(),
            });
        };
        if entries.is_empty() {
            let Some(version) = version else {
                return Ok(Some(None));
            };
            return match self.client().delete(&path, Some(version)).await {
                Ok(()) | Err(metastore::Error::NoNode(_)) => Ok(Some(None)),
                Err(metastore::Error::BadVersion { .. }) => Ok(None),
                Err(err) => Err(err.into()),
            };
        }
        let data = AclsZNode::new(entries).to_json_bytes();
        match version {
            Some(version) => match self.client().set_data(&path, &data, Some(version)).await {
                Ok(stat) => Ok(Some(Some(stat.version))),
                Err(metastore::Error::BadVersion { .. } | metastore::Error::NoNode(_)) => Ok(None),
                Err(err) => Err(err.into()),
            },
            None => match self
                .client()
                .create_recursive(&path, &data, CreateMode::Persistent)
                .await
            {
                Ok(_) => Ok(Some(Some(0))),
                Err(metastore::Error::NodeExists(_)) => Ok(None),
                Err(err) => Err(err.into()),
            },
        }
    }

    /// Every stored pattern (Kafka's `loadCache` walk: each store's resource types, then
    /// their names). Types this version does not know are skipped.
    pub async fn get_acl_patterns(&self) -> Result<Vec<ResourcePattern>> {
        let mut out = Vec::new();
        for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
            let Some(root) = root(pattern_type) else {
                continue;
            };
            for kind in self.children_or_empty(root).await? {
                let Some(resource_type) = ResourceType::parse(&kind).filter(|t| t.is_concrete())
                else {
                    continue;
                };
                for name in self.children_or_empty(&format!("{root}/{kind}")).await? {
                    out.push(ResourcePattern::new(resource_type, name, pattern_type));
                }
            }
        }
        Ok(out)
    }

    /// Tells every broker that `pattern` changed.
    pub async fn create_acl_change_notification(&self, pattern: &ResourcePattern) -> Result<()> {
        let extended = pattern.pattern_type != PatternType::Literal;
        let path = format!("{}/{CHANGE_PREFIX}", changes_root(extended));
        self.client()
            .create_recursive(
                &path,
                &encode_change(pattern),
                CreateMode::PersistentSequential,
            )
            .await?;
        Ok(())
    }

    /// The notifications of one change store (optionally watching for new ones), in
    /// sequence order.
    pub async fn get_acl_changes(&self, extended: bool, watch: bool) -> Result<Vec<(u64, String)>> {
        let children = match self
            .client()
            .get_children(changes_root(extended), watch)
            .await
        {
            Ok(children) => children,
            Err(metastore::Error::NoNode(_)) => Vec::new(),
            Err(err) => return Err(err.into()),
        };
        let mut changes: Vec<(u64, String)> = children
            .into_iter()
            .filter_map(|c| change_sequence(&c).map(|seq| (seq, c)))
            .collect();
        changes.sort();
        Ok(changes)
    }

    /// One notification: the pattern it names (`None` when unreadable) and its creation
    /// time. `Ok(None)` when it is gone.
    pub async fn get_acl_change(
        &self,
        extended: bool,
        child: &str,
    ) -> Result<Option<(Option<ResourcePattern>, i64)>> {
        let path = format!("{}/{child}", changes_root(extended));
        match self.client().get_data(&path, false).await {
            Ok((data, stat)) => Ok(Some((decode_change(extended, &data), stat.ctime))),
            Err(metastore::Error::NoNode(_)) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes the notifications of one store created before `cutoff_ms`.
    pub async fn purge_acl_changes_before(&self, extended: bool, cutoff_ms: i64) -> Result<usize> {
        let mut purged = 0;
        for (_, child) in self.get_acl_changes(extended, false).await? {
            let Some((_, ctime)) = self.get_acl_change(extended, &child).await? else {
                continue;
            };
            if ctime >= cutoff_ms {
                break;
            }
            let path = format!("{}/{child}", changes_root(extended));
            match self.client().delete(&path, None).await {
                Ok(()) | Err(metastore::Error::NoNode(_)) => purged += 1,
                Err(err) => return Err(err.into()),
            }
        }
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_json_as_kafka_writes_them() {
        let lit = ResourcePattern::literal(ResourceType::TransactionalId, "tx");
        let pre = ResourcePattern::new(ResourceType::Topic, "pay", PatternType::Prefixed);
        assert_eq!(pattern_path(&lit).unwrap(), "/kafka-acl/TransactionalId/tx");
        assert_eq!(
            pattern_path(&pre).unwrap(),
            "/kafka-acl-extended/prefixed/Topic/pay"
        );
        let mut entries = BTreeSet::new();
        entries.insert(AccessControlEntry {
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        });
        let json = String::from_utf8(AclsZNode::new(&entries).to_json_bytes()).unwrap();
        assert_eq!(
            json,
            r#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}"#
        );
        // Kafka's own spacing and field order read the same.
        let kafka = br#"{"version": 1, "acls": [ { "host":"*", "permissionType": "Allow","operation": "Read","principal": "User:alice"}]}"#;
        assert_eq!(
            AclsZNode::from_json_bytes(kafka)
                .unwrap()
                .entries()
                .unwrap(),
            entries
        );
        assert_eq!(encode_change(&lit), b"TRANSACTIONAL_ID:tx");
        assert_eq!(
            String::from_utf8(encode_change(&pre)).unwrap(),
            r#"{"version":1,"resourceType":"TOPIC","name":"pay","patternType":"PREFIXED"}"#
        );
        assert_eq!(decode_change(false, b"TRANSACTIONAL_ID:tx"), Some(lit));
        assert_eq!(
            decode_change(false, b"Topic:a:b"),
            Some(ResourcePattern::literal(ResourceType::Topic, "a:b"))
        );
        assert_eq!(decode_change(true, &encode_change(&pre)), Some(pre));
        assert_eq!(decode_change(false, b"nonsense"), None);
        assert_eq!(decode_change(true, b"{"), None);
        assert_eq!(change_sequence("acl_changes_0000000012"), Some(12));
    }
}
