//! ACLs as Kafka's `AclAuthorizer` decides them: resource patterns, access control entries,
//! the filters of DescribeAcls/DeleteAcls, and the authorization rule itself.
//!
//! The rule (Kafka 2.8's `authorizeAction`): a super user may do anything; otherwise the ACLs
//! that apply to a resource are those of its literal name, of the literal wildcard `*`, and of
//! every prefixed pattern its name starts with. No ACL at all: `allow.everyone.if.no.acl.found`
//! decides. Otherwise a matching DENY refuses, and a matching ALLOW is needed. An entry matches
//! when its principal is the caller's or `User:*`, its host the caller's address or `*`, and
//! its operation the one asked or `ALL`. An ALLOW of READ, WRITE, DELETE or ALTER implies
//! DESCRIBE; an ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS. DENY is never implied.
//!
//! Codes are the wire codes of Kafka's `ResourceType`, `PatternType`, `AclOperation` and
//! `AclPermissionType`; names are Kafka's (`SecurityUtils`: Pascal case in the store, the enum
//! name in messages).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The name of the one cluster resource (`kafka-cluster`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal resource name that matches every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal that matches every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host that matches every address.
pub const WILDCARD_HOST: &str = "*";

macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal, $upper:literal, $pascal:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// The value of a wire code (`None` for a code Kafka does not define).
            pub fn from_code(code: i8) -> Option<$name> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// Kafka's enum name (`DESCRIBE_CONFIGS`), as its tools print it.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $upper,)* }
            }

            /// The Pascal-case name the store uses (`DescribeConfigs`).
            pub fn pascal(self) -> &'static str {
                match self { $($name::$variant => $pascal,)* }
            }

            /// Parses either name, ignoring case and underscores (Kafka's `SecurityUtils`
            /// accepts the Pascal name and its upper-case form).
            pub fn parse(text: &str) -> Option<$name> {
                let key: String = text
                    .chars()
                    .filter(|c| *c != '_' && *c != '-')
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                $name::ALL_VALUES
                    .iter()
                    .copied()
                    .find(|v| v.pascal().to_ascii_lowercase() == key)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum!(
    /// Kafka's `ResourceType`.
    ResourceType {
        /// Unknown to this version.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Any type (filters only).
        Any = 1, "ANY", "Any";
        /// A topic.
        Topic = 2, "TOPIC", "Topic";
        /// A consumer group.
        Group = 3, "GROUP", "Group";
        /// The cluster (`kafka-cluster`).
        Cluster = 4, "CLUSTER", "Cluster";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID", "TransactionalId";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN", "DelegationToken";
        /// A user (delegation tokens on behalf of others, KIP-373).
        User = 7, "USER", "User";
    }
);

kafka_enum!(
    /// Kafka's `PatternType`.
    PatternType {
        /// Unknown to this version.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Any pattern type with exactly the given name (filters only).
        Any = 1, "ANY", "Any";
        /// Every pattern that would apply to the given name (filters only).
        Match = 2, "MATCH", "Match";
        /// The name as given (`*` matches every name).
        Literal = 3, "LITERAL", "Literal";
        /// Every name starting with the given one.
        Prefixed = 4, "PREFIXED", "Prefixed";
    }
);

kafka_enum!(
    /// Kafka's `AclOperation`.
    Operation {
        /// Unknown to this version.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Any operation (filters only).
        Any = 1, "ANY", "Any";
        /// Every operation.
        All = 2, "ALL", "All";
        /// Read.
        Read = 3, "READ", "Read";
        /// Write.
        Write = 4, "WRITE", "Write";
        /// Create.
        Create = 5, "CREATE", "Create";
        /// Delete.
        Delete = 6, "DELETE", "Delete";
        /// Alter.
        Alter = 7, "ALTER", "Alter";
        /// Describe.
        Describe = 8, "DESCRIBE", "Describe";
        /// Inter-broker and controller requests.
        ClusterAction = 9, "CLUSTER_ACTION", "ClusterAction";
        /// Describe configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS", "DescribeConfigs";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS", "AlterConfigs";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE", "IdempotentWrite";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS", "CreateTokens";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS", "DescribeTokens";
    }
);

kafka_enum!(
    /// Kafka's `AclPermissionType`.
    Permission {
        /// Unknown to this version.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Either (filters only).
        Any = 1, "ANY", "Any";
        /// Refuses.
        Deny = 2, "DENY", "Deny";
        /// Allows.
        Allow = 3, "ALLOW", "Allow";
    }
);

impl ResourceType {
    /// The operations an ACL on this type may name (Kafka's `AclEntry.supportedOperations`,
    /// `ALL` aside); `None` for a type that is not concrete.
    pub fn supported_operations(self) -> Option<&'static [Operation]> {
        use Operation::*;
        match self {
            ResourceType::Topic => Some(&[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ]),
            ResourceType::Group => Some(&[Read, Describe, Delete]),
            ResourceType::Cluster => Some(&[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ]),
            ResourceType::TransactionalId => Some(&[Describe, Write]),
            ResourceType::DelegationToken => Some(&[Describe]),
            ResourceType::User => Some(&[CreateTokens, DescribeTokens]),
            ResourceType::Unknown | ResourceType::Any => None,
        }
    }

    /// Whether ACLs can be stored for this type.
    pub fn is_concrete(self) -> bool {
        self.supported_operations().is_some()
    }
}

/// A stored resource pattern: a concrete type, a name, LITERAL or PREFIXED.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourcePattern {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The name (or prefix).
    pub name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// A pattern.
    pub fn new(
        resource_type: ResourceType,
        name: impl Into<String>,
        pattern_type: PatternType,
    ) -> Self {
        ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        }
    }

    /// A literal pattern.
    pub fn literal(resource_type: ResourceType, name: impl Into<String>) -> Self {
        ResourcePattern::new(resource_type, name, PatternType::Literal)
    }
}

impl fmt::Display for ResourcePattern {
    /// Kafka's `ResourcePattern.toString`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

/// One access control entry: who, from where, what, allow or deny.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccessControlEntry {
    /// `User:<name>` (or `User:*`).
    pub principal: String,
    /// An IP address or `*`.
    pub host: String,
    /// The operation (or ALL).
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

impl fmt::Display for AccessControlEntry {
    /// Kafka's `AccessControlEntry.toString`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission
        )
    }
}

/// A pattern and one entry on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    /// The resource pattern.
    pub pattern: ResourcePattern,
    /// The entry.
    pub entry: AccessControlEntry,
}

/// Why a binding cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAcl(pub String);

impl AclBinding {
    /// Kafka's checks before storing a binding (`AuthorizerUtils.validateAclBinding`, the
    /// CreateAcls handler's and the store's): every element known and concrete, the cluster
    /// resource named `kafka-cluster`, a name the store can hold, a `Type:name` principal.
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        let p = &self.pattern;
        let e = &self.entry;
        if !p.resource_type.is_concrete()
            || !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed)
            || matches!(e.operation, Operation::Unknown | Operation::Any)
            || matches!(e.permission, Permission::Unknown | Permission::Any)
        {
            return Err(InvalidAcl(
                "ACL binding contains unknown elements".to_string(),
            ));
        }
        if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
            return Err(InvalidAcl(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )));
        }
        if p.name.is_empty() {
            return Err(InvalidAcl("Invalid empty resource name".to_string()));
        }
        if !storable_name(&p.name) {
            return Err(InvalidAcl(format!(
                "Resource name '{}' cannot be stored: it may not contain '/' or control characters, nor be '.' or '..'",
                p.name
            )));
        }
        match e.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(InvalidAcl(format!(
                    "expected a string in format principalType:principalName but got {}",
                    e.principal
                )))
            }
        }
        if e.host.is_empty() {
            return Err(InvalidAcl("Invalid empty host".to_string()));
        }
        Ok(())
    }
}

/// Whether a name can be one znode path segment.
fn storable_name(name: &str) -> bool {
    name != "." && name != ".." && !name.chars().any(|c| c == '/' || c.is_control())
}

/// Kafka's `ResourcePatternFilter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePatternFilter {
    /// A type or ANY.
    pub resource_type: ResourceType,
    /// A name, or `None` for any.
    pub name: Option<String>,
    /// LITERAL, PREFIXED, ANY or MATCH.
    pub pattern_type: PatternType,
}

impl ResourcePatternFilter {
    /// Whether the filter selects `pattern` (Kafka's `ResourcePatternFilter.matches`).
    pub fn matches(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != pattern.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        match pattern.pattern_type {
            PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(&pattern.name),
            _ => false,
        }
    }

    /// Why the filter cannot be used, if it names an unknown element (Kafka refuses those).
    pub fn unknown_element(&self) -> Option<&'static str> {
        if self.resource_type == ResourceType::Unknown {
            Some("Resource type is UNKNOWN.")
        } else if self.pattern_type == PatternType::Unknown {
            Some("Resource pattern type is UNKNOWN.")
        } else {
            None
        }
    }
}

/// Kafka's `AccessControlEntryFilter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFilter {
    /// A principal, or `None` for any.
    pub principal: Option<String>,
    /// A host, or `None` for any.
    pub host: Option<String>,
    /// An operation or ANY.
    pub operation: Operation,
    /// A permission or ANY.
    pub permission: Permission,
}

impl EntryFilter {
    /// Whether the filter selects `entry`.
    pub fn matches(&self, entry: &AccessControlEntry) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| *p == entry.principal)
            && self.host.as_ref().is_none_or(|h| *h == entry.host)
            && (self.operation == Operation::Any || self.operation == entry.operation)
            && (self.permission == Permission::Any || self.permission == entry.permission)
    }

    /// Why the filter cannot be used, if it names an unknown element.
    pub fn unknown_element(&self) -> Option<&'static str> {
        if self.operation == Operation::Unknown {
            Some("Operation is UNKNOWN.")
        } else if self.permission == Permission::Unknown {
            Some("Permission type is UNKNOWN.")
        } else {
            None
        }
    }
}

/// Kafka's `AclBindingFilter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// Which patterns.
    pub pattern: ResourcePatternFilter,
    /// Which entries.
    pub entry: EntryFilter,
}

impl AclBindingFilter {
    /// The filter that selects every binding.
    pub fn any() -> Self {
        AclBindingFilter {
            pattern: ResourcePatternFilter {
                resource_type: ResourceType::Any,
                name: None,
                pattern_type: PatternType::Any,
            },
            entry: EntryFilter {
                principal: None,
                host: None,
                operation: Operation::Any,
                permission: Permission::Any,
            },
        }
    }

    /// Whether the filter selects `binding`.
    pub fn matches(&self, pattern: &ResourcePattern, entry: &AccessControlEntry) -> bool {
        self.pattern.matches(pattern) && self.entry.matches(entry)
    }

    /// Why the filter cannot be used, if it names an unknown element.
    pub fn unknown_element(&self) -> Option<&'static str> {
        self.pattern
            .unknown_element()
            .or_else(|| self.entry.unknown_element())
    }

    /// The patterns a filter can only ever select (Kafka's `matchesAtMostOne` and
    /// `filterToResources`): a named, typed LITERAL, PREFIXED or ANY filter. Deleting with
    /// such a filter reads these from the store even when the cache does not have them.
    pub fn exact_patterns(&self) -> Vec<ResourcePattern> {
        let p = &self.pattern;
        let Some(name) = &p.name else {
            return Vec::new();
        };
        if !p.resource_type.is_concrete() {
            return Vec::new();
        }
        match p.pattern_type {
            PatternType::Literal | PatternType::Prefixed => {
                vec![ResourcePattern::new(
                    p.resource_type,
                    name.clone(),
                    p.pattern_type,
                )]
            }
            PatternType::Any => vec![
                ResourcePattern::new(p.resource_type, name.clone(), PatternType::Literal),
                ResourcePattern::new(p.resource_type, name.clone(), PatternType::Prefixed),
            ],
            _ => Vec::new(),
        }
    }
}

/// Who is asking: the principal and the client's address.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// `User:<name>`.
    pub principal: &'a str,
    /// The client's IP address, as text.
    pub host: &'a str,
}

/// The authorizer's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `super.users`: principals allowed everything.
    pub super_users: BTreeSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerSettings {
    /// Parses `super.users` (`User:a;User:b`) as Kafka does: semicolon-separated principals,
    /// each `Type:name`.
    pub fn parse_super_users(text: &str) -> Result<BTreeSet<String>, InvalidAcl> {
        let mut users = BTreeSet::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once(':') {
                Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                    users.insert(item.to_string());
                }
                _ => {
                    return Err(InvalidAcl(format!(
                        "super.users: expected a string in format principalType:principalName but got {item}"
                    )))
                }
            }
        }
        Ok(users)
    }
}

/// Every ACL the authorizer knows, by pattern (the cache every broker keeps).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSet {
    by_pattern: BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>>,
}

impl AclSet {
    /// The entries of one pattern (empty when it has none).
    pub fn get(&self, pattern: &ResourcePattern) -> Option<&BTreeSet<AccessControlEntry>> {
        self.by_pattern.get(pattern)
    }

    /// Replaces a pattern's entries (removes the pattern when `entries` is empty).
    pub fn set(&mut self, pattern: ResourcePattern, entries: BTreeSet<AccessControlEntry>) {
        if entries.is_empty() {
            self.by_pattern.remove(&pattern);
        } else {
            self.by_pattern.insert(pattern, entries);
        }
    }

    /// Every pattern with entries.
    pub fn patterns(&self) -> impl Iterator<Item = &ResourcePattern> {
        self.by_pattern.keys()
    }

    /// Every binding `filter` selects, in pattern order.
    pub fn matching(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let mut out = Vec::new();
        for (pattern, entries) in &self.by_pattern {
            if !filter.pattern.matches(pattern) {
                continue;
            }
            for entry in entries {
                if filter.entry.matches(entry) {
                    out.push(AclBinding {
                        pattern: pattern.clone(),
                        entry: entry.clone(),
                    });
                }
            }
        }
        out
    }

    /// Whether any ACL exists at all.
    pub fn is_empty(&self) -> bool {
        self.by_pattern.is_empty()
    }

    /// The entries that apply to a resource (literal name, literal `*`, matching prefixes).
    fn applicable<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AccessControlEntry> + 'a {
        let literal = self
            .by_pattern
            .get(&ResourcePattern::literal(resource_type, name))
            .into_iter()
            .flatten();
        let wildcard = self
            .by_pattern
            .get(&ResourcePattern::literal(resource_type, WILDCARD_RESOURCE))
            .into_iter()
            .filter(move |_| name != WILDCARD_RESOURCE)
            .flatten();
        // Every prefix of `name` that is a char boundary; each is one map lookup.
        let prefixed = (1..=name.len())
            .filter(move |&end| name.is_char_boundary(end))
            .filter_map(move |end| {
                self.by_pattern.get(&ResourcePattern::new(
                    resource_type,
                    &name[..end],
                    PatternType::Prefixed,
                ))
            })
            .flatten();
        literal.chain(wildcard).chain(prefixed)
    }

    /// Kafka's `AclAuthorizer.authorizeAction` for one literal resource.
    pub fn authorize(
        &self,
        settings: &AuthorizerSettings,
        caller: Caller<'_>,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if settings.super_users.contains(caller.principal) {
            return true;
        }
        let mut any = false;
        let mut allowed = false;
        let implied: &[Operation] = match operation {
            Operation::Describe => &[
                Operation::Describe,
                Operation::Read,
                Operation::Write,
                Operation::Delete,
                Operation::Alter,
            ],
            Operation::DescribeConfigs => &[Operation::DescribeConfigs, Operation::AlterConfigs],
            _ => std::slice::from_ref(&operation),
        };
        for entry in self.applicable(resource_type, name) {
            any = true;
            let who = entry.principal == caller.principal || entry.principal == WILDCARD_PRINCIPAL;
            let host = entry.host == caller.host || entry.host == WILDCARD_HOST;
            if !who || !host {
                continue;
            }
            match entry.permission {
                Permission::Deny
                    if entry.operation == operation || entry.operation == Operation::All =>
                {
                    return false;
                }
                Permission::Allow
                    if entry.operation == Operation::All || implied.contains(&entry.operation) =>
                {
                    allowed = true;
                }
                _ => {}
            }
        }
        if !any {
            return settings.allow_everyone_if_no_acl_found;
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ace(principal: &str, host: &str, op: Operation, perm: Permission) -> AccessControlEntry {
        AccessControlEntry {
            principal: principal.into(),
            host: host.into(),
            operation: op,
            permission: perm,
        }
    }

    fn set(entries: &[(ResourcePattern, AccessControlEntry)]) -> AclSet {
        let mut s = AclSet::default();
        for (p, e) in entries {
            let mut cur = s.get(p).cloned().unwrap_or_default();
            cur.insert(e.clone());
            s.set(p.clone(), cur);
        }
        s
    }

    const ALICE: Caller<'static> = Caller {
        principal: "User:alice",
        host: "127.0.0.1",
    };

    fn topic(name: &str) -> ResourcePattern {
        ResourcePattern::literal(ResourceType::Topic, name)
    }

    #[test]
    fn names_round_trip_as_kafka_spells_them() {
        assert_eq!(Operation::DescribeConfigs.pascal(), "DescribeConfigs");
        assert_eq!(
            Operation::parse("DescribeConfigs"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(
            Operation::parse("DESCRIBE_CONFIGS"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(
            Operation::parse("describeconfigs"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(Operation::parse("Nope"), None);
        assert_eq!(
            ResourceType::parse("TransactionalId"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(
            ResourceType::parse("TRANSACTIONAL_ID"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(Permission::Allow.pascal(), "Allow");
        for op in Operation::ALL_VALUES {
            assert_eq!(Operation::from_code(op.code()), Some(*op));
        }
        assert_eq!(Operation::from_code(15), None);
        assert_eq!(
            topic("a").to_string(),
            "ResourcePattern(resourceType=TOPIC, name=a, patternType=LITERAL)"
        );
    }

    #[test]
    fn no_acl_means_the_setting_decides_and_super_users_pass() {
        let empty = AclSet::default();
        let mut settings = AuthorizerSettings::default();
        assert!(!empty.authorize(&settings, ALICE, Operation::Read, ResourceType::Topic, "a"));
        settings.allow_everyone_if_no_acl_found = true;
        assert!(empty.authorize(&settings, ALICE, Operation::Read, ResourceType::Topic, "a"));
        // An ACL for someone else on the resource: no longer "no ACL found".
        let other = set(&[(
            topic("a"),
            ace("User:bob", "*", Operation::Read, Permission::Allow),
        )]);
        assert!(!other.authorize(&settings, ALICE, Operation::Read, ResourceType::Topic, "a"));
        assert!(other.authorize(&settings, ALICE, Operation::Read, ResourceType::Topic, "b"));
        let supers = AuthorizerSettings {
            super_users: AuthorizerSettings::parse_super_users("User:admin; User:alice").unwrap(),
            ..Default::default()
        };
        assert!(other.authorize(&supers, ALICE, Operation::Write, ResourceType::Topic, "a"));
        assert!(AuthorizerSettings::parse_super_users("alice").is_err());
    }

    #[test]
    fn implied_operations_deny_wins_and_wildcards() {
        let s = AuthorizerSettings::default();
        let acls = set(&[
            (
                topic("a"),
                ace("User:alice", "*", Operation::Read, Permission::Allow),
            ),
            (
                topic("c"),
                ace(
                    "User:alice",
                    "*",
                    Operation::AlterConfigs,
                    Permission::Allow,
                ),
            ),
            (
                topic("d"),
                ace("User:*", "*", Operation::All, Permission::Allow),
            ),
            (
                topic("d"),
                ace("User:alice", "*", Operation::Write, Permission::Deny),
            ),
            (
                topic("e"),
                ace("User:alice", "10.0.0.1", Operation::Read, Permission::Allow),
            ),
            (
                topic("*"),
                ace("User:carol", "*", Operation::Describe, Permission::Allow),
            ),
        ]);
        let can = |c: Caller<'_>, op, name| acls.authorize(&s, c, op, ResourceType::Topic, name);
        assert!(can(ALICE, Operation::Read, "a"));
        assert!(
            can(ALICE, Operation::Describe, "a"),
            "READ implies DESCRIBE"
        );
        assert!(!can(ALICE, Operation::Write, "a"));
        assert!(can(ALICE, Operation::DescribeConfigs, "c"));
        assert!(
            !can(ALICE, Operation::Describe, "c"),
            "ALTER_CONFIGS does not imply DESCRIBE"
        );
        assert!(can(ALICE, Operation::Read, "d"), "User:* with ALL");
        assert!(!can(ALICE, Operation::Write, "d"), "DENY wins over ALLOW");
        assert!(!can(ALICE, Operation::Read, "e"), "another host");
        let other_host = Caller {
            principal: "User:alice",
            host: "10.0.0.1",
        };
        assert!(can(other_host, Operation::Read, "e"));
        let carol = Caller {
            principal: "User:carol",
            host: "127.0.0.1",
        };
        assert!(can(carol, Operation::Describe, "anything"), "the * literal");
        assert!(!can(carol, Operation::Read, "anything"));
        // A DENY of ALL refuses every operation; a DENY of READ does not refuse DESCRIBE.
        let deny = set(&[
            (
                topic("x"),
                ace("User:*", "*", Operation::All, Permission::Allow),
            ),
            (
                topic("x"),
                ace("User:alice", "*", Operation::Read, Permission::Deny),
            ),
        ]);
        assert!(!deny.authorize(&s, ALICE, Operation::Read, ResourceType::Topic, "x"));
        assert!(deny.authorize(&s, ALICE, Operation::Describe, ResourceType::Topic, "x"));
    }

    #[test]
    fn prefixed_patterns_apply_to_names_they_start() {
        let s = AuthorizerSettings::default();
        let acls = set(&[
            (
                ResourcePattern::new(ResourceType::Topic, "pay", PatternType::Prefixed),
                ace("User:alice", "*", Operation::Write, Permission::Allow),
            ),
            (
                ResourcePattern::new(ResourceType::Topic, "payroll", PatternType::Prefixed),
                ace("User:alice", "*", Operation::Write, Permission::Deny),
            ),
            (
                ResourcePattern::new(ResourceType::Group, "pay", PatternType::Prefixed),
                ace("User:alice", "*", Operation::Read, Permission::Allow),
            ),
        ]);
        let can = |op, rt, name| acls.authorize(&s, ALICE, op, rt, name);
        assert!(can(Operation::Write, ResourceType::Topic, "payments"));
        assert!(can(Operation::Write, ResourceType::Topic, "pay"));
        assert!(!can(Operation::Write, ResourceType::Topic, "payroll-2026"));
        assert!(!can(Operation::Write, ResourceType::Topic, "pa"));
        assert!(!can(Operation::Write, ResourceType::Topic, "xpay"));
        assert!(can(Operation::Read, ResourceType::Group, "pay-g"));
        assert!(!can(Operation::Read, ResourceType::Topic, "pay-g"));
        // Multi-byte names do not panic.
        assert!(!can(Operation::Write, ResourceType::Topic, "péage"));
    }

    #[test]
    fn filters_as_kafka() {
        let lit = topic("a");
        let star = topic("*");
        let pre = ResourcePattern::new(ResourceType::Topic, "a", PatternType::Prefixed);
        let pre_ab = ResourcePattern::new(ResourceType::Topic, "ab", PatternType::Prefixed);
        let f = |pt, name: Option<&str>| ResourcePatternFilter {
            resource_type: ResourceType::Topic,
            name: name.map(str::to_string),
            pattern_type: pt,
        };
        assert!(f(PatternType::Literal, Some("a")).matches(&lit));
        assert!(!f(PatternType::Literal, Some("a")).matches(&star));
        assert!(!f(PatternType::Literal, Some("a")).matches(&pre));
        assert!(f(PatternType::Any, Some("a")).matches(&lit));
        assert!(f(PatternType::Any, Some("a")).matches(&pre));
        assert!(!f(PatternType::Any, Some("a")).matches(&star));
        assert!(f(PatternType::Match, Some("abc")).matches(&star));
        assert!(f(PatternType::Match, Some("abc")).matches(&pre));
        assert!(f(PatternType::Match, Some("abc")).matches(&pre_ab));
        assert!(!f(PatternType::Match, Some("abc")).matches(&lit));
        assert!(f(PatternType::Any, None).matches(&pre_ab));
        assert!(f(PatternType::Prefixed, None).matches(&pre));
        assert!(!f(PatternType::Prefixed, None).matches(&lit));
        let group = ResourcePattern::literal(ResourceType::Group, "a");
        assert!(!f(PatternType::Any, None).matches(&group));
        let mut any = AclBindingFilter::any();
        assert!(any.matches(
            &group,
            &ace("User:x", "*", Operation::Read, Permission::Deny)
        ));
        any.entry.principal = Some("User:y".into());
        assert!(!any.matches(
            &group,
            &ace("User:x", "*", Operation::Read, Permission::Deny)
        ));
        let exact = AclBindingFilter {
            pattern: f(PatternType::Any, Some("a")),
            entry: AclBindingFilter::any().entry,
        };
        assert_eq!(exact.exact_patterns(), vec![lit.clone(), pre.clone()]);
        assert!(AclBindingFilter::any().exact_patterns().is_empty());
    }

    #[test]
    fn bindings_are_validated() {
        let ok = AclBinding {
            pattern: topic("a"),
            entry: ace("User:alice", "*", Operation::Read, Permission::Allow),
        };
        assert_eq!(ok.validate(), Ok(()));
        let mut cluster = ok.clone();
        cluster.pattern = ResourcePattern::literal(ResourceType::Cluster, "other");
        assert!(cluster.validate().unwrap_err().0.contains("kafka-cluster"));
        for bad in [
            AclBinding {
                pattern: topic(""),
                ..ok.clone()
            },
            AclBinding {
                pattern: topic("a/b"),
                ..ok.clone()
            },
            AclBinding {
                pattern: ResourcePattern::new(ResourceType::Topic, "a", PatternType::Match),
                ..ok.clone()
            },
            AclBinding {
                entry: ace("alice", "*", Operation::Read, Permission::Allow),
                ..ok.clone()
            },
            AclBinding {
                entry: ace("User:alice", "*", Operation::Any, Permission::Allow),
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
