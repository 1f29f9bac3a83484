//! `gregor assign`: an offline replica placement planner for operators.
//!
//! Runs the `assignment` crate on a broker list given on the command line and prints the
//! result as `/brokers/topics` JSON or as a broker x partition table. It touches no cluster:
//! the balanced strategy sees an empty cluster load.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Context};
use assignment::{Assignment, BrokerMetadata, ClusterLoad, Fixed, Strategy};
use model::BrokerId;

/// Arguments of `gregor assign`. Numbers are taken as text and parsed here so that every
/// mistake ends in one `Error: ...` line.
#[derive(Debug, clap::Args)]
pub struct AssignArgs {
    /// Broker ids in placement order, e.g. `1,2,0,4,3` (positions index this list).
    #[arg(long)]
    brokers: String,
    /// Rack of each broker, e.g. `1:a,2:b,0:a,4:b,3:c` (all brokers or none).
    #[arg(long)]
    racks: Option<String>,
    /// Number of partitions to place.
    #[arg(long, allow_hyphen_values = true)]
    partitions: String,
    /// Replicas per partition.
    #[arg(long, allow_hyphen_values = true)]
    replication_factor: String,
    /// Fix the position of partition 0's leader (Kafka's `fixedStartIndex`; also the shift
    /// unless --replica-shift is given). Implies --strategy kafka when no strategy is named.
    #[arg(long)]
    start_index: Option<String>,
    /// Fix the gap between first and second replica. Implies --strategy kafka when no
    /// strategy is named.
    #[arg(long)]
    replica_shift: Option<String>,
    /// Id of the first partition placed (the current partition count when adding partitions).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    start_partition_id: String,
    /// `kafka` (Kafka 2.8 exactly, random unless fixed) or `balanced` (default).
    #[arg(long)]
    strategy: Option<String>,
    /// Place as if no broker had a rack.
    #[arg(long)]
    ignore_racks: bool,
    /// `json` (default) or `table`.
    #[arg(long, default_value = "json")]
    output: String,
}

/// Runs `gregor assign`.
pub fn run(args: AssignArgs) -> anyhow::Result<ExitCode> {
    let ids = parse_broker_list(&args.brokers)?;
    let brokers = attach_racks(&ids, args.racks.as_deref())?;
    let partitions: i32 = parse_number("--partitions", &args.partitions)?;
    let replication_factor: i16 = parse_number("--replication-factor", &args.replication_factor)?;
    let start_partition_id: i32 = parse_number("--start-partition-id", &args.start_partition_id)?;
    let fixed = Fixed {
        start_index: args
            .start_index
            .as_deref()
            .map(|s| parse_number("--start-index", s))
            .transpose()?,
        replica_shift: args
            .replica_shift
            .as_deref()
            .map(|s| parse_number("--replica-shift", s))
            .transpose()?,
    };
    let strategy = match args.strategy.as_deref() {
        Some(s) => s.parse::<Strategy>()?,
        None if fixed.is_fixed() => Strategy::Kafka,
        None => Strategy::Balanced,
    };
    let output = match args.output.as_str() {
        "json" => Output::Json,
        "table" => Output::Table,
        other => bail!("unknown --output '{other}': expected 'json' or 'table'"),
    };
    let assignment = assignment::assign(
        strategy,
        &brokers,
        partitions,
        replication_factor,
        fixed,
        start_partition_id,
        args.ignore_racks,
        &ClusterLoad::new(),
        &mut rand::rng(),
    )?;
    match output {
        Output::Json => println!("{}", to_json(&assignment)),
        Output::Table => print!("{}", to_table(&ids, &assignment)),
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy)]
enum Output {
    Json,
    Table,
}

fn parse_number<T: std::str::FromStr>(flag: &str, text: &str) -> anyhow::Result<T> {
    text.trim()
        .parse()
        .ok()
        .with_context(|| format!("{flag} '{text}' is not a valid number"))
}

fn parse_broker_list(text: &str) -> anyhow::Result<Vec<BrokerId>> {
    let mut ids = Vec::new();
    for token in text.split(',') {
        let token = token.trim();
        if token.is_empty() {
            bail!("--brokers '{text}' has an empty entry: expected ids like 1,2,0");
        }
        let id: BrokerId = token
            .parse()
            .ok()
            .with_context(|| format!("--brokers: broker id '{token}' is not a number"))?;
        if ids.contains(&id) {
            bail!("--brokers lists broker {id} more than once");
        }
        ids.push(id);
    }
    Ok(ids)
}

fn attach_racks(ids: &[BrokerId], racks: Option<&str>) -> anyhow::Result<Vec<BrokerMetadata>> {
    let mut rack_of: BTreeMap<BrokerId, String> = BTreeMap::new();
    if let Some(racks) = racks {
        for entry in racks.split(',') {
            let (id, rack) = entry
                .split_once(':')
                .with_context(|| format!("--racks entry '{entry}' is not broker:rack, e.g. 1:a"))?;
            let id: BrokerId =
                id.trim().parse().ok().with_context(|| {
                    format!("--racks: broker id '{}' is not a number", id.trim())
                })?;
            let rack = rack.trim();
            if rack.is_empty() {
                bail!("--racks entry '{entry}' has an empty rack name");
            }
            if !ids.contains(&id) {
                bail!("--racks names broker {id}, which is not in --brokers");
            }
            if rack_of.insert(id, rack.to_owned()).is_some() {
                bail!("--racks gives broker {id} more than one rack");
            }
        }
    }
    Ok(ids
        .iter()
        .map(|id| BrokerMetadata {
            id: *id,
            rack: rack_of.get(id).cloned(),
        })
        .collect())
}

/// `{"version":1,"partitions":{"0":[1,2,0],...}}`, partitions in numeric order.
fn to_json(assignment: &Assignment) -> String {
    let partitions: Vec<String> = assignment
        .iter()
        .map(|(p, replicas)| {
            let list: Vec<String> = replicas.iter().map(BrokerId::to_string).collect();
            format!("\"{p}\":[{}]", list.join(","))
        })
        .collect();
    format!(
        "{{\"version\":1,\"partitions\":{{{}}}}}",
        partitions.join(",")
    )
}

/// One row per broker (in `--brokers` order), one column per partition: `L` where the broker
/// leads, `F` where it follows; then the broker's leader and replica counts.
fn to_table(brokers: &[BrokerId], assignment: &Assignment) -> String {
    let broker_width = brokers
        .iter()
        .map(|b| b.to_string().len())
        .max()
        .unwrap_or(1)
        .max("broker".len());
    let cell_width = assignment
        .keys()
        .map(|p| p.to_string().len())
        .max()
        .unwrap_or(1);
    let mut out = format!("{:>broker_width$}", "broker");
    for p in assignment.keys() {
        let _ = write!(out, " {p:>cell_width$}");
    }
    out.push_str("  leaders  replicas\n");
    for broker in brokers {
        let _ = write!(out, "{broker:>broker_width$}");
        let (mut leaders, mut replicas) = (0, 0);
        for list in assignment.values() {
            let cell = match list.iter().position(|b| b == broker) {
                Some(0) => "L",
                Some(_) => "F",
                None => "",
            };
            leaders += usize::from(cell == "L");
            replicas += usize::from(!cell.is_empty());
            let _ = write!(out, " {cell:>cell_width$}");
        }
        let _ = writeln!(out, "  {leaders:>7}  {replicas:>8}");
    }
    // Brokers outside the list cannot appear: placement only uses listed brokers.
    debug_assert!(assignment
        .values()
        .flatten()
        .collect::<BTreeSet<_>>()
        .iter()
        .all(|b| brokers.contains(b)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_are_numeric_order() {
        let a: Assignment = (0..11).map(|p| (p, vec![p % 2, 1 - p % 2])).collect();
        let json = to_json(&a);
        assert!(
            json.starts_with(r#"{"version":1,"partitions":{"0":[0,1],"1":[1,0],"2":[0,1]"#),
            "{json}"
        );
        assert!(json.ends_with(r#""9":[1,0],"10":[0,1]}}"#), "{json}");
    }

    #[test]
    fn table_marks_leaders_and_followers() {
        let a: Assignment = BTreeMap::from([(0, vec![1, 2]), (1, vec![2, 0])]);
        let table = to_table(&[1, 2, 0], &a);
        assert_eq!(
            table,
            "broker 0 1  leaders  replicas\n     1 L          1         1\n     2 F L        1         2\n     0   F        0         1\n"
        );
    }

    #[test]
    fn rack_and_broker_parsing_errors() {
        assert!(parse_broker_list("1,,2")
            .unwrap_err()
            .to_string()
            .contains("empty entry"));
        assert!(parse_broker_list("1,x")
            .unwrap_err()
            .to_string()
            .contains("'x' is not a number"));
        assert!(parse_broker_list("1,1")
            .unwrap_err()
            .to_string()
            .contains("more than once"));
        assert!(attach_racks(&[1], Some("2:a"))
            .unwrap_err()
            .to_string()
            .contains("not in --brokers"));
        assert!(attach_racks(&[1], Some("1"))
            .unwrap_err()
            .to_string()
            .contains("not broker:rack"));
        assert!(attach_racks(&[1], Some("1:a,1:b"))
            .unwrap_err()
            .to_string()
            .contains("more than one rack"));
    }
}
