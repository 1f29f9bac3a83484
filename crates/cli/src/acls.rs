//! `gregor acls`: Kafka's `kafka-acls.sh --bootstrap-server` (2.8's `AclCommand` with the
//! admin client): `--add`, `--remove` and `--list` of ACLs on topics, groups, the cluster and
//! transactional ids, with `--producer`/`--consumer` shortcuts and Kafka's output lines
//! (`Adding ACLs for resource `ResourcePattern(...)`: ...`, `Current ACLs for resource ...`).
//! Usage errors print Kafka's message and exit 1 before anything is sent; a refusal by the
//! broker prints `Error while executing ACL command: ...` and exits 1.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use client::{AdminClient, ClientError};
use kafka_protocol::messages::{
    create_acls_request::AclCreation, delete_acls_request::DeleteAclsFilter, CreateAclsRequest,
    DeleteAclsRequest, DescribeAclsRequest,
};
use kafka_protocol::protocol::StrBytes;
use security::acl::{
    AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType,
    CLUSTER_NAME,
};

/// The flags of `kafka-acls.sh` this command takes.
#[derive(Debug, Default, Clone, Args)]
#[command(about = "Add, remove or list ACLs (kafka-acls.sh).")]
pub struct AclsArgs {
    /// The Kafka server to connect to.
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// A property file containing configs to be passed to Admin Client.
    #[arg(long, alias = "admin.config", value_name = "command-config")]
    pub command_config: Option<PathBuf>,
    /// Indicates you are trying to add ACLs.
    #[arg(long)]
    pub add: bool,
    /// Indicates you are trying to remove ACLs.
    #[arg(long)]
    pub remove: bool,
    /// List ACLs for the specified resource.
    #[arg(long)]
    pub list: bool,
    /// Topic to which ACLs should be added or removed (`*`: all topics).
    #[arg(long, value_name = "topic")]
    pub topic: Vec<String>,
    /// Consumer group to which ACLs should be added or removed (`*`: all groups).
    #[arg(long, value_name = "group")]
    pub group: Vec<String>,
    /// Add/Remove cluster ACLs.
    #[arg(long)]
    pub cluster: bool,
    /// The transactional id to which ACLs should be added or removed.
    #[arg(long, value_name = "transactional-id")]
    pub transactional_id: Vec<String>,
    /// Delegation token to which ACLs should be added or removed.
    #[arg(long, value_name = "delegation-token")]
    pub delegation_token: Vec<String>,
    /// literal, prefixed (adding), or also any, match (listing and removing).
    #[arg(long, value_name = "resource-pattern-type", default_value = "literal")]
    pub resource_pattern_type: String,
    /// Operation that is being allowed or denied (default All).
    #[arg(long, value_name = "operation")]
    pub operation: Vec<String>,
    /// Principal (principalType:name) to allow; `User:*` is every user.
    #[arg(long, value_name = "allow-principal")]
    pub allow_principal: Vec<String>,
    /// Principal (principalType:name) to deny.
    #[arg(long, value_name = "deny-principal")]
    pub deny_principal: Vec<String>,
    /// Host the allowed principals have access from (default `*`).
    #[arg(long, value_name = "allow-host")]
    pub allow_host: Vec<String>,
    /// Host the denied principals are denied access from (default `*`).
    #[arg(long, value_name = "deny-host")]
    pub deny_host: Vec<String>,
    /// List ACLs for the specified principal (with --list).
    #[arg(long, value_name = "principal")]
    pub principal: Vec<String>,
    /// Convenience option for the producer role: WRITE, DESCRIBE, CREATE on topics.
    #[arg(long)]
    pub producer: bool,
    /// Convenience option for the consumer role: READ, DESCRIBE on topics, READ on groups.
    #[arg(long)]
    pub consumer: bool,
    /// With --producer: IDEMPOTENT_WRITE on the cluster.
    #[arg(long)]
    pub idempotent: bool,
    /// Assume Yes to all queries and do not prompt.
    #[arg(long)]
    pub force: bool,
}

/// A usage error: printed as Kafka's `printUsageAndDie` prints it, exit 1.
struct Usage(String);

fn usage(message: impl Into<String>) -> Usage {
    Usage(message.into())
}

/// Kafka's `ResourcePatternFilter` as the tool builds it (a type, a name, a pattern type).
type Filter = (ResourceType, String, PatternType);

fn filter_text(f: &Filter) -> String {
    format!(
        "ResourcePattern(resourceType={}, name={}, patternType={})",
        f.0, f.1, f.2
    )
}

fn check_args(args: &AclsArgs) -> Result<PatternType, Usage> {
    let actions = [args.add, args.remove, args.list]
        .iter()
        .filter(|a| **a)
        .count();
    if actions != 1 {
        return Err(usage(
            "Command must include exactly one action: --list, --add, --remove. ",
        ));
    }
    let pattern_type = match PatternType::parse(&args.resource_pattern_type) {
        Some(PatternType::Unknown) | None => {
            return Err(usage(format!(
                "Unknown resource-pattern-type: {}",
                args.resource_pattern_type
            )))
        }
        Some(p) => p,
    };
    if args.list
        && (args.producer
            || args.consumer
            || !args.allow_host.is_empty()
            || !args.allow_principal.is_empty()
            || !args.deny_host.is_empty()
            || !args.deny_principal.is_empty())
    {
        return Err(usage("Option \"[list]\" can't be used with option \"[producer, consumer, allow-host, allow-principal, deny-host, deny-principal]\""));
    }
    for (flag, set) in [("producer", args.producer), ("consumer", args.consumer)] {
        if set
            && (!args.operation.is_empty()
                || !args.deny_principal.is_empty()
                || !args.deny_host.is_empty())
        {
            return Err(usage(format!(
                "Option \"[{flag}]\" can't be used with option \"[operation, deny-principal, deny-host]\""
            )));
        }
    }
    if !args.principal.is_empty() && !args.list {
        return Err(usage(
            "The --principal option is only available if --list is set",
        ));
    }
    if args.producer && args.topic.is_empty() {
        return Err(usage("With --producer you must specify a --topic"));
    }
    if args.idempotent && !args.producer {
        return Err(usage(
            "The --idempotent option is only available if --producer is set",
        ));
    }
    if args.consumer
        && (args.topic.is_empty()
            || args.group.is_empty()
            || (!args.producer && (args.cluster || !args.transactional_id.is_empty())))
    {
        return Err(usage("With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id option should be specified."));
    }
    Ok(pattern_type)
}

fn resource_filters(args: &AclsArgs, pattern_type: PatternType) -> Vec<Filter> {
    let mut out = BTreeSet::new();
    for t in &args.topic {
        out.insert((ResourceType::Topic, t.trim().to_string(), pattern_type));
    }
    if pattern_type == PatternType::Literal && (args.cluster || args.idempotent) {
        out.insert((
            ResourceType::Cluster,
            CLUSTER_NAME.to_string(),
            PatternType::Literal,
        ));
    }
    for g in &args.group {
        out.insert((ResourceType::Group, g.trim().to_string(), pattern_type));
    }
    for t in &args.transactional_id {
        out.insert((ResourceType::TransactionalId, t.clone(), pattern_type));
    }
    for t in &args.delegation_token {
        out.insert((
            ResourceType::DelegationToken,
            t.trim().to_string(),
            pattern_type,
        ));
    }
    out.into_iter().collect()
}

fn principals(list: &[String]) -> Result<Vec<String>, Usage> {
    list.iter()
        .map(|p| {
            let p = p.trim();
            match p.split_once(':') {
                Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(p.to_string()),
                _ => Err(usage(format!(
                    "expected a string in format principalType:principalName but got {p}"
                ))),
            }
        })
        .collect()
}

fn entries(
    args: &AclsArgs,
    operations: &[Operation],
) -> Result<BTreeSet<AccessControlEntry>, Usage> {
    let hosts = |given: &[String], principals: &[String]| -> Vec<String> {
        if !given.is_empty() {
            given.iter().map(|h| h.trim().to_string()).collect()
        } else if !principals.is_empty() {
            vec!["*".to_string()]
        } else {
            Vec::new()
        }
    };
    let mut out = BTreeSet::new();
    for (permission, who, host_flags) in [
        (Permission::Allow, &args.allow_principal, &args.allow_host),
        (Permission::Deny, &args.deny_principal, &args.deny_host),
    ] {
        let who = principals(who)?;
        for principal in &who {
            for host in hosts(host_flags, &who) {
                for op in operations {
                    out.insert(AccessControlEntry {
                        principal: principal.clone(),
                        host: host.clone(),
                        operation: *op,
                        permission,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Kafka's `getResourceFilterToAcls`: the ACLs to add or remove per resource filter.
fn filter_to_acls(
    args: &AclsArgs,
    pattern_type: PatternType,
) -> Result<BTreeMap<Filter, BTreeSet<AccessControlEntry>>, Usage> {
    let filters = resource_filters(args, pattern_type);
    if filters.is_empty() {
        return Err(usage("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or --delegation-token <Delegation Token ID>"));
    }
    let mut out: BTreeMap<Filter, BTreeSet<AccessControlEntry>> = BTreeMap::new();
    if !args.producer && !args.consumer {
        let ops = if args.operation.is_empty() {
            vec![Operation::All]
        } else {
            args.operation
                .iter()
                .map(|o| Operation::parse(o.trim()).unwrap_or(Operation::Unknown))
                .collect()
        };
        let acls = entries(args, &ops)?;
        for f in &filters {
            out.insert(f.clone(), acls.clone());
        }
    }
    if args.producer {
        let topic = entries(
            args,
            &[Operation::Write, Operation::Describe, Operation::Create],
        )?;
        let txn = entries(args, &[Operation::Write, Operation::Describe])?;
        for f in &filters {
            match f.0 {
                ResourceType::Topic => {
                    out.insert(f.clone(), topic.clone());
                }
                ResourceType::TransactionalId => {
                    out.insert(f.clone(), txn.clone());
                }
                _ => {}
            }
        }
        if args.idempotent {
            out.insert(
                (
                    ResourceType::Cluster,
                    CLUSTER_NAME.to_string(),
                    PatternType::Literal,
                ),
                entries(args, &[Operation::IdempotentWrite])?,
            );
        }
    }
    if args.consumer {
        let topic = entries(args, &[Operation::Read, Operation::Describe])?;
        let group = entries(args, &[Operation::Read])?;
        for f in &filters {
            let add = match f.0 {
                ResourceType::Topic => &topic,
                ResourceType::Group => &group,
                _ => continue,
            };
            out.entry(f.clone())
                .or_default()
                .extend(add.iter().cloned());
        }
    }
    for (f, acls) in &out {
        let Some(supported) = f.0.supported_operations() else {
            continue;
        };
        if acls
            .iter()
            .any(|a| a.operation != Operation::All && !supported.contains(&a.operation))
        {
            let mut valid: Vec<&str> = supported.iter().map(|o| o.name()).collect();
            valid.push("ALL");
            return Err(usage(format!(
                "ResourceType {} only supports operations {}",
                f.0,
                valid.join(",")
            )));
        }
    }
    Ok(out)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// Kafka's exception class for an error code, as `e.getMessage` of the failed future shows it.
fn exception(code: i16, message: Option<&str>) -> String {
    let class = match code {
        31 => "ClusterAuthorizationException",
        29 => "TopicAuthorizationException",
        42 => "InvalidRequestException",
        54 => "SecurityDisabledException",
        35 => "UnsupportedVersionException",
        _ => "UnknownServerException",
    };
    let message = message.map(str::to_string).unwrap_or_else(|| {
        kafka_protocol::error::ResponseError::try_from_code(code)
            .map(|e| e.to_string())
            .unwrap_or_else(|| format!("error code {code}"))
    });
    format!("org.apache.kafka.common.errors.{class}: {message}")
}

fn entry_text(e: &AccessControlEntry) -> String {
    e.to_string()
}

fn block(entries: &BTreeSet<AccessControlEntry>) -> String {
    entries
        .iter()
        .map(|e| format!("\t{}", entry_text(e)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ACLs DescribeAcls answers for one filter (every ACE), by pattern.
async fn describe(
    admin: &mut AdminClient,
    filter: Option<&Filter>,
    out: &mut BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>>,
) -> Result<(), String> {
    let request = match filter {
        Some((t, name, p)) => DescribeAclsRequest::default()
            .with_resource_type_filter(t.code())
            .with_resource_name_filter(Some(s(name)))
            .with_pattern_type_filter(p.code()),
        None => DescribeAclsRequest::default()
            .with_resource_type_filter(ResourceType::Any.code())
            .with_resource_name_filter(None)
            .with_pattern_type_filter(PatternType::Any.code()),
    }
    .with_principal_filter(None)
    .with_host_filter(None)
    .with_operation(Operation::Any.code())
    .with_permission_type(Permission::Any.code());
    let response = admin
        .send_to_any(request)
        .await
        .map_err(|e| e.to_string())?;
    if response.error_code != 0 {
        return Err(exception(
            response.error_code,
            response.error_message.as_deref(),
        ));
    }
    for r in response.resources {
        let pattern = ResourcePattern::new(
            ResourceType::from_code(r.resource_type).unwrap_or(ResourceType::Unknown),
            r.resource_name.to_string(),
            PatternType::from_code(r.pattern_type).unwrap_or(PatternType::Unknown),
        );
        let set = out.entry(pattern).or_default();
        for a in r.acls {
            set.insert(AccessControlEntry {
                principal: a.principal.to_string(),
                host: a.host.to_string(),
                operation: Operation::from_code(a.operation).unwrap_or(Operation::Unknown),
                permission: Permission::from_code(a.permission_type).unwrap_or(Permission::Unknown),
            });
        }
    }
    Ok(())
}

/// Kafka's `listAcls`.
async fn list(
    admin: &mut AdminClient,
    args: &AclsArgs,
    pattern_type: PatternType,
) -> Result<(), String> {
    let filters = resource_filters(args, pattern_type);
    let mut acls = BTreeMap::new();
    if filters.is_empty() {
        describe(admin, None, &mut acls).await?;
    } else {
        for f in &filters {
            describe(admin, Some(f), &mut acls).await?;
        }
    }
    let print = |acls: &BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>>| {
        for (pattern, entries) in acls {
            println!(
                "Current ACLs for resource `{pattern}`: \n {} \n",
                block(entries)
            );
        }
    };
    let wanted = principals(&args.principal).map_err(|u| u.0)?;
    if wanted.is_empty() {
        print(&acls);
    } else {
        for principal in wanted {
            println!("ACLs for principal `{principal}`");
            let only: BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>> = acls
                .iter()
                .map(|(p, e)| {
                    (
                        p.clone(),
                        e.iter()
                            .filter(|a| a.principal == principal)
                            .cloned()
                            .collect::<BTreeSet<_>>(),
                    )
                })
                .filter(|(_, e)| !e.is_empty())
                .collect();
            print(&only);
        }
    }
    Ok(())
}

async fn add(
    admin: &mut AdminClient,
    resources: &BTreeMap<Filter, BTreeSet<AccessControlEntry>>,
) -> Result<(), String> {
    for (f, entries) in resources {
        println!(
            "Adding ACLs for resource `{}`: \n {} \n",
            filter_text(f),
            block(entries)
        );
        let creations = entries
            .iter()
            .map(|e| {
                AclCreation::default()
                    .with_resource_type(f.0.code())
                    .with_resource_name(s(&f.1))
                    .with_resource_pattern_type(f.2.code())
                    .with_principal(s(&e.principal))
                    .with_host(s(&e.host))
                    .with_operation(e.operation.code())
                    .with_permission_type(e.permission.code())
            })
            .collect();
        let response = admin
            .send_to_any(CreateAclsRequest::default().with_creations(creations))
            .await
            .map_err(|e| e.to_string())?;
        if let Some(failed) = response.results.iter().find(|r| r.error_code != 0) {
            return Err(exception(
                failed.error_code,
                failed.error_message.as_deref(),
            ));
        }
    }
    Ok(())
}

fn confirm(args: &AclsArgs, message: &str) -> bool {
    if args.force {
        return true;
    }
    println!("{message}");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok() && line.trim().eq_ignore_ascii_case("y")
}

async fn remove(
    admin: &mut AdminClient,
    args: &AclsArgs,
    resources: &BTreeMap<Filter, BTreeSet<AccessControlEntry>>,
) -> Result<(), String> {
    for (f, entries) in resources {
        let filter = |e: Option<&AccessControlEntry>| {
            let base = DeleteAclsFilter::default()
                .with_resource_type_filter(f.0.code())
                .with_resource_name_filter(Some(s(&f.1)))
                .with_pattern_type_filter(f.2.code());
            match e {
                Some(e) => base
                    .with_principal_filter(Some(s(&e.principal)))
                    .with_host_filter(Some(s(&e.host)))
                    .with_operation(e.operation.code())
                    .with_permission_type(e.permission.code()),
                None => base
                    .with_principal_filter(None)
                    .with_host_filter(None)
                    .with_operation(Operation::Any.code())
                    .with_permission_type(Permission::Any.code()),
            }
        };
        let filters: Vec<DeleteAclsFilter> = if entries.is_empty() {
            if !confirm(
                args,
                &format!(
                    "Are you sure you want to delete all ACLs for resource filter `{}`? (y/n)",
                    filter_text(f)
                ),
            ) {
                continue;
            }
            vec![filter(None)]
        } else {
            if !confirm(
                args,
                &format!(
                    "Are you sure you want to remove ACLs: \n {} \n from resource filter `{}`? (y/n)",
                    block(entries),
                    filter_text(f)
                ),
            ) {
                continue;
            }
            entries.iter().map(|e| filter(Some(e))).collect()
        };
        let response = admin
            .send_to_any(DeleteAclsRequest::default().with_filters(filters))
            .await
            .map_err(|e| e.to_string())?;
        for r in &response.filter_results {
            if r.error_code != 0 {
                return Err(exception(r.error_code, r.error_message.as_deref()));
            }
            if let Some(m) = r.matching_acls.iter().find(|m| m.error_code != 0) {
                return Err(exception(m.error_code, m.error_message.as_deref()));
            }
        }
    }
    Ok(())
}

/// Runs `gregor acls`.
pub fn run(args: AclsArgs) -> anyhow::Result<ExitCode> {
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        eprintln!("Missing required argument \"[bootstrap-server]\"");
        return Ok(ExitCode::from(1));
    };
    let checked = check_args(&args).and_then(|pattern_type| {
        let resources = if args.add {
            if !matches!(pattern_type, PatternType::Literal | PatternType::Prefixed) {
                return Err(usage(format!(
                    "A '--resource-pattern-type' value of '{pattern_type}' is not valid when adding acls."
                )));
            }
            let resources = filter_to_acls(&args, pattern_type)?;
            if resources.values().any(BTreeSet::is_empty) {
                return Err(usage(
                    "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.",
                ));
            }
            resources
        } else if args.remove {
            filter_to_acls(&args, pattern_type)?
        } else {
            BTreeMap::new()
        };
        Ok((pattern_type, resources))
    });
    let (pattern_type, resources) = match checked {
        Ok(ok) => ok,
        Err(Usage(message)) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(1));
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let options = crate::admin_options::admin_options(
            &bootstrap,
            "acls-tool",
            args.command_config.as_deref(),
            "--command-config",
        )?;
        let mut admin = match AdminClient::connect(options).await {
            Ok(admin) => admin,
            Err(err) => {
                println!("Error while executing ACL command: {}", connect_error(&err));
                return Ok(ExitCode::from(1));
            }
        };
        let outcome = if args.add {
            match add(&mut admin, &resources).await {
                Ok(()) => list(&mut admin, &args, pattern_type).await,
                Err(e) => Err(e),
            }
        } else if args.remove {
            match remove(&mut admin, &args, &resources).await {
                Ok(()) => list(&mut admin, &args, pattern_type).await,
                Err(e) => Err(e),
            }
        } else {
            list(&mut admin, &args, pattern_type).await
        };
        match outcome {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(message) => {
                println!("Error while executing ACL command: {message}");
                Ok(ExitCode::from(1))
            }
        }
    })
}

fn connect_error(err: &ClientError) -> String {
    err.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut AclsArgs)) -> AclsArgs {
        let mut a = AclsArgs {
            bootstrap_server: Some("127.0.0.1:9092".into()),
            resource_pattern_type: "literal".into(),
            ..AclsArgs::default()
        };
        f(&mut a);
        a
    }

    #[test]
    fn shortcuts_expand_as_kafka() {
        let a = args(|a| {
            a.add = true;
            a.consumer = true;
            a.topic = vec!["t".into()];
            a.group = vec!["g".into()];
            a.allow_principal = vec!["User:alice".into()];
        });
        let p = check_args(&a).ok().unwrap();
        let r = filter_to_acls(&a, p).ok().unwrap();
        let ops = |t: ResourceType| -> Vec<Operation> {
            r.iter()
                .find(|(f, _)| f.0 == t)
                .map(|(_, e)| e.iter().map(|e| e.operation).collect())
                .unwrap()
        };
        assert_eq!(
            ops(ResourceType::Topic),
            vec![Operation::Read, Operation::Describe]
        );
        assert_eq!(ops(ResourceType::Group), vec![Operation::Read]);
        let p = args(|a| {
            a.add = true;
            a.producer = true;
            a.idempotent = true;
            a.topic = vec!["t".into()];
            a.allow_principal = vec!["User:bob".into()];
        });
        let r = filter_to_acls(&p, PatternType::Literal).ok().unwrap();
        assert_eq!(r.len(), 2, "topic and cluster");
        assert_eq!(
            filter_text(r.keys().next().unwrap()),
            "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
        );
    }

    #[test]
    fn refusals_as_kafka() {
        let none = args(|_| {});
        assert!(check_args(&none).is_err());
        let bad_op = args(|a| {
            a.add = true;
            a.group = vec!["g".into()];
            a.operation = vec!["Write".into()];
            a.allow_principal = vec!["User:x".into()];
        });
        let p = check_args(&bad_op).ok().unwrap();
        let Err(Usage(msg)) = filter_to_acls(&bad_op, p) else {
            panic!()
        };
        assert_eq!(
            msg,
            "ResourceType GROUP only supports operations READ,DESCRIBE,DELETE,ALL"
        );
        let bad_principal = args(|a| {
            a.add = true;
            a.topic = vec!["t".into()];
            a.allow_principal = vec!["alice".into()];
        });
        assert!(filter_to_acls(&bad_principal, PatternType::Literal).is_err());
        let consumer_no_group = args(|a| {
            a.add = true;
            a.consumer = true;
            a.topic = vec!["t".into()];
        });
        assert!(check_args(&consumer_no_group).is_err());
        let bad_type = args(|a| {
            a.list = true;
            a.resource_pattern_type = "sideways".into();
        });
        assert!(check_args(&bad_type).is_err());
    }
}
