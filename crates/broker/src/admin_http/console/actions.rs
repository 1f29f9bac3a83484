//! The console's actions, each the Kafka request the CLI would send, to the broker the CLI
//! would send it to, through the same handlers: CreateTopics (first `validateOnly`, for the
//! placement preview), CreatePartitions, DeleteTopics, IncrementalAlterConfigs. A refused
//! action shows Kafka's error code and message next to its form and changes nothing. Every
//! action is logged with the caller's principal and address.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, ElectLeadersRequest,
    IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::super::kafka::{CallError, Caller, Cluster};
use super::super::views::Error;
use super::super::HttpResponse;
use super::data::{self, Partition, RESOURCE_TOPIC};
use super::html::{self, count, esc, kafka_error, url, view_error};
use super::{matrix, pages, Console, Form};

/// How long the console waits for the controller to carry out an action (the requests'
/// `timeout_ms`; the wait itself is a little longer).
const ACTION_TIMEOUT_MS: i32 = 30_000;

fn wire_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// Runs `call` with a bound a little past [`ACTION_TIMEOUT_MS`].
pub(crate) async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, Error> {
    tokio::time::timeout(
        Duration::from_millis(ACTION_TIMEOUT_MS as u64 + 5_000),
        call,
    )
    .await
    .unwrap_or(Err(CallError::BrokerNotAvailable(-1)))
    .map_err(Error::from)
}

fn html_page(body: String) -> HttpResponse {
    HttpResponse::new(200, "text/html; charset=utf-8", body)
}

/// The create-topic form, with `below` (an error, or the preview and its confirmation).
pub(crate) fn create_form(console: &Console, form: &Form, below: String) -> HttpResponse {
    let field = |key: &str| esc(form.get(key).unwrap_or(""));
    let before = format!(
        "<form method=\"post\" action=\"/topics/new\" id=\"create-topic\">{}\
<label>Name <input name=\"name\" value=\"{}\" required pattern=\"[a-zA-Z0-9._-]+\"></label>\
<label>Partitions <input name=\"partitions\" type=\"number\" min=\"1\" value=\"{}\" placeholder=\"num.partitions\"></label>\
<label>Replication factor <input name=\"replication_factor\" type=\"number\" min=\"1\" value=\"{}\" placeholder=\"default.replication.factor\"></label>\
<label>Configs, one <code>key=value</code> a line <textarea name=\"configs\" rows=\"3\">{}</textarea></label>\
<p class=\"muted\">Placement follows the cluster's <code>placement.strategy</code>.</p>\
<button name=\"op\" value=\"preview\">Preview placement</button></form>{below}",
        console.csrf_field(),
        field("name"),
        field("partitions"),
        field("replication_factor"),
        field("configs"),
    );
    html_page(super::html::page(
        "Create a topic",
        "topics",
        &before,
        None,
        "",
    ))
}

/// The CreateTopics request the form asks for.
fn create_request(form: &Form, validate_only: bool) -> Result<CreateTopicsRequest, String> {
    let name = form.get("name").unwrap_or("").trim();
    let number = |key: &str| -> Result<i64, String> {
        match form.get(key).map(str::trim).filter(|v| !v.is_empty()) {
            None => Ok(-1),
            Some(v) => v
                .parse::<i64>()
                .map_err(|_| format!("{key} must be a number, not {v:?}")),
        }
    };
    let partitions =
        i32::try_from(number("partitions")?).map_err(|_| "partitions is out of range")?;
    let rf = i16::try_from(number("replication_factor")?)
        .map_err(|_| "replication_factor is out of range")?;
    let mut configs = Vec::new();
    for line in form.get("configs").unwrap_or("").lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("config line {line:?} is not key=value"))?;
        configs.push(
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.trim().to_owned()))
                .with_value(Some(StrBytes::from_string(v.trim().to_owned()))),
        );
    }
    Ok(CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(wire_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
            .with_configs(configs)])
        .with_timeout_ms(ACTION_TIMEOUT_MS)
        .with_validate_only(validate_only))
}

/// `POST /topics/new`: `op=preview` asks the controller what it would do, `op=create`
/// creates.
pub(crate) async fn create_topic(
    console: &Console,
    cluster: &Cluster,
    caller: &Caller,
    form: &Form,
) -> HttpResponse {
    let create = form.get("op") == Some("create");
    let request = match create_request(form, !create) {
        Ok(request) => request,
        Err(message) => {
            return create_form(
                console,
                form,
                format!("<p class=\"error\" role=\"alert\">{}</p>", esc(&message)),
            )
        }
    };
    let name = form.get("name").unwrap_or("").trim().to_owned();
    let response = bounded(cluster.call_controller(caller, request)).await;
    let result = match response {
        Ok(mut response) if !response.topics.is_empty() => response.topics.remove(0),
        Ok(_) => {
            return create_form(console, form, kafka_error(-1, Some("empty answer")));
        }
        Err(err) => return create_form(console, form, view_error(&err)),
    };
    if create {
        info!(principal = %caller.principal, peer = %caller.peer, topic = %name,
            error_code = result.error_code, "console: create topic");
    }
    if result.error_code != 0 {
        let message = result.error_message.as_ref().map(|m| m.to_string());
        return create_form(
            console,
            form,
            kafka_error(result.error_code, message.as_deref()),
        );
    }
    if create {
        return HttpResponse::redirect(format!(
            "/topics/{}?notice={}",
            url(&name),
            url(&format!("Created topic {name}."))
        ));
    }
    // The preview: the assignment the controller would write, as the topic's matrix.
    let Some(assignment) = result
        .unknown_tagged_fields
        .get(&controller::admin::create_topics::ASSIGNMENT_PREVIEW_TAG)
        .and_then(|b| controller::admin::create_topics::decode_assignment_preview(b))
    else {
        return create_form(
            console,
            form,
            "<p class=\"error\">The controller validated the topic but did not say where it would place it.</p>".to_owned(),
        );
    };
    let partitions = preview_partitions(&assignment);
    let brokers = data::metadata(cluster, caller, Some(&[]))
        .await
        .map(|md| md.brokers)
        .unwrap_or_default();
    let columns = matrix::columns(&brokers, &partitions);
    let mut below = format!(
        "<section id=\"preview\"><h2>Placement preview</h2><p>The controller would create <strong>{}</strong> with {} of {}, placed as follows.</p>",
        esc(&name),
        count(partitions.len() as i64, "partition"),
        count(partitions.first().map_or(0, |p| p.replicas.len()) as i64, "replica"),
    );
    below.push_str(&matrix::render(&columns, &partitions, &partitions));
    below.push_str(matrix::LEGEND);
    let _ = write!(
        below,
        "<form method=\"post\" action=\"/topics/new\" id=\"confirm-create\" data-confirm=\"Create {}?\">{}",
        esc(&name),
        console.csrf_field()
    );
    for key in ["name", "partitions", "replication_factor", "configs"] {
        let _ = write!(
            below,
            "<input type=\"hidden\" name=\"{key}\" value=\"{}\">",
            esc(form.get(key).unwrap_or(""))
        );
    }
    below.push_str("<p class=\"muted\">Placement is decided again when the topic is created: if brokers come or go meanwhile, it can differ.</p><button name=\"op\" value=\"create\">Create the topic</button></form></section>");
    create_form(console, form, below)
}

/// The preview's partitions: every replica in sync, the first one leading.
fn preview_partitions(assignment: &BTreeMap<i32, Vec<i32>>) -> Vec<Partition> {
    assignment
        .iter()
        .map(|(&index, replicas)| Partition {
            index,
            leader: replicas.first().copied().unwrap_or(-1),
            leader_epoch: 0,
            replicas: replicas.clone(),
            isr: replicas.clone(),
            offline: Vec::new(),
            error_code: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        })
        .collect()
}

/// `POST /topics/<name>/{partitions,config,delete}`.
pub(crate) async fn topic_action(
    console: &Console,
    cluster: &Cluster,
    caller: &Caller,
    name: &str,
    what: &str,
    form: &Form,
) -> HttpResponse {
    let outcome: Result<String, String> = match what {
        "partitions" => add_partitions(cluster, caller, name, form).await,
        "config" => alter_config(cluster, caller, name, form).await,
        "elect" => elect_preferred(cluster, caller, name).await,
        "delete" => {
            if form.get("confirm").map(str::trim) != Some(name) {
                Err("<p class=\"error\" role=\"alert\">Type the topic's name to confirm the deletion.</p>".to_owned())
            } else {
                match delete_topic(cluster, caller, name).await {
                    Ok(()) => {
                        return HttpResponse::redirect(format!(
                            "/topics?notice={}",
                            url(&format!("Deleted topic {name}."))
                        ))
                    }
                    Err(e) => Err(e),
                }
            }
        }
        _ => return super::not_found("No such action."),
    };
    match outcome {
        Ok(notice) => {
            HttpResponse::redirect(format!("/topics/{}?notice={}", url(name), url(&notice)))
        }
        Err(error) => {
            let extras = pages::TopicExtras {
                notice: None,
                form: form.clone(),
                error: Some((what, error.clone())),
            };
            match pages::topic(cluster, caller, console, name, 0, extras).await {
                Some(parts) => console.show("topics", parts, &Form::default()),
                None => html_page(super::html::page(
                    &format!("Topic {name}"),
                    "topics",
                    &error,
                    None,
                    "",
                )),
            }
        }
    }
}

async fn add_partitions(
    cluster: &Cluster,
    caller: &Caller,
    name: &str,
    form: &Form,
) -> Result<String, String> {
    let count: i32 = form
        .get("count")
        .and_then(|c| c.trim().parse().ok())
        .ok_or_else(|| {
            "<p class=\"error\" role=\"alert\">The partition count must be a number.</p>".to_owned()
        })?;
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(wire_name(name))
            .with_count(count)
            .with_assignments(None)])
        .with_timeout_ms(ACTION_TIMEOUT_MS)
        .with_validate_only(false);
    let response = bounded(cluster.call_controller(caller, request))
        .await
        .map_err(|e| view_error(&e))?;
    let result = response
        .results
        .first()
        .ok_or_else(|| kafka_error(-1, Some("empty answer")))?;
    info!(principal = %caller.principal, peer = %caller.peer, topic = %name, count,
        error_code = result.error_code, "console: add partitions");
    if result.error_code != 0 {
        return Err(kafka_error(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    Ok(format!(
        "{name} now has {}.",
        html::count(count, "partition")
    ))
}

/// A preferred leader election for every partition of the topic (ElectLeaders PREFERRED, as
/// `gregor leader-election --election-type PREFERRED --topic <t>` sends it): partitions whose
/// preferred replica leads already are counted, not refused.
async fn elect_preferred(cluster: &Cluster, caller: &Caller, name: &str) -> Result<String, String> {
    let partitions: Vec<i32> = cluster
        .metadata()
        .map_err(|e| view_error(&Error::Call(e)))?
        .topics
        .get(name)
        .map(|t| t.partitions.keys().copied().collect())
        .unwrap_or_default();
    if partitions.is_empty() {
        return Err(kafka_error(
            3,
            Some("This server does not host this topic-partition."),
        ));
    }
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(ACTION_TIMEOUT_MS)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(wire_name(name))
            .with_partitions(partitions)]));
    let response = bounded(cluster.call_controller(caller, request))
        .await
        .map_err(|e| view_error(&e))?;
    if response.error_code != 0 {
        return Err(kafka_error(response.error_code, None));
    }
    let (mut elected, mut already, mut failed) = (0, 0, Vec::new());
    for result in response
        .replica_election_results
        .iter()
        .flat_map(|t| &t.partition_result)
    {
        match result.error_code {
            0 => elected += 1,
            // ELECTION_NOT_NEEDED: the preferred replica leads already.
            84 => already += 1,
            code => failed.push(format!(
                "{name}-{}: {}",
                result.partition_id,
                kafka_error(code, result.error_message.as_deref())
            )),
        }
    }
    info!(principal = %caller.principal, peer = %caller.peer, topic = %name, elected, already,
        failed = failed.len(), "console: preferred leader election");
    if !failed.is_empty() {
        return Err(failed.join(""));
    }
    Ok(format!(
        "Preferred leader election on {name}: {elected} partition(s) moved to their preferred leader, {already} led by it already."
    ))
}

async fn alter_config(
    cluster: &Cluster,
    caller: &Caller,
    name: &str,
    form: &Form,
) -> Result<String, String> {
    let key = form.get("name").unwrap_or("").trim();
    let delete = form.get("delete").is_some();
    let value = form.get("value").unwrap_or("");
    // Kafka's AlterConfigOp.OpType: SET 0, DELETE 1.
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.to_owned()))
                .with_config_operation(i8::from(delete))
                .with_value(
                    (!delete).then(|| StrBytes::from_string(value.to_owned())),
                )])])
        .with_validate_only(false);
    let broker = cluster.any().map_err(|e| view_error(&e.into()))?.broker_id;
    let response = bounded(data::bounded(broker, cluster.call(caller, broker, request)))
        .await
        .map_err(|e| view_error(&e))?;
    let result = response
        .responses
        .first()
        .ok_or_else(|| kafka_error(-1, Some("empty answer")))?;
    info!(principal = %caller.principal, peer = %caller.peer, topic = %name, config = %key,
        delete, error_code = result.error_code, "console: alter topic config");
    if result.error_code != 0 {
        return Err(kafka_error(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    Ok(if delete {
        format!("Removed the override of {key}.")
    } else {
        format!("Set {key}={value}.")
    })
}

async fn delete_topic(cluster: &Cluster, caller: &Caller, name: &str) -> Result<(), String> {
    let request = DeleteTopicsRequest::default()
        .with_topics(vec![
            kafka_protocol::messages::delete_topics_request::DeleteTopicState::default()
                .with_name(Some(wire_name(name))),
        ])
        .with_timeout_ms(ACTION_TIMEOUT_MS);
    let response = bounded(cluster.call_controller(caller, request))
        .await
        .map_err(|e| view_error(&e))?;
    let result = response
        .responses
        .first()
        .ok_or_else(|| kafka_error(-1, Some("empty answer")))?;
    info!(principal = %caller.principal, peer = %caller.peer, topic = %name,
        error_code = result.error_code, "console: delete topic");
    if result.error_code != 0 {
        return Err(kafka_error(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    Ok(())
}
