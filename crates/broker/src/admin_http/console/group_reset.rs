//! The group page's offset reset, as `gregor consumer-groups --reset-offsets` (and
//! kafka-consumer-groups.sh) does it: only while the group is inactive, to the earliest or
//! latest offset or to a given one (kept inside each partition's log), for one topic's
//! partitions or for every partition the group has committed. "Preview" shows the new
//! offsets (`--dry-run`); "Reset offsets" commits them with one OffsetCommit from outside
//! the group, sent to the coordinator as the CLI sends it, and is logged with the caller.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use group_coordinator::reset::{self, ResetTo};
use tracing::info;

use super::super::kafka::{Caller, Cluster};
use super::super::views::{self, Tp, EARLIEST, LATEST};
use super::super::HttpResponse;
use super::actions::bounded;
use super::html::{self, esc, kafka_error, url, view_error};
use super::{pages, Console, Form};

/// An error shown next to the form.
fn refusal(message: &str) -> String {
    format!("<p class=\"error\" role=\"alert\">{}</p>", esc(message))
}

/// The reset form of `group`'s page (values from `form`), with `below` under it.
pub(crate) fn form(console: &Console, group: &str, form: &Form, below: &str) -> String {
    let to = form.get("to").unwrap_or("earliest");
    let option = |value: &str, label: &str| {
        format!(
            "<option value=\"{value}\"{}>{label}</option>",
            if to == value { " selected" } else { "" }
        )
    };
    format!(
        "<section class=\"actions\"><h2>Actions</h2>\
<form method=\"post\" action=\"/groups/{}/reset\" id=\"reset-offsets\" data-confirm=\"Reset the committed offsets of group {g}?\">{}<h3>Reset offsets</h3>\
<p class=\"muted\">Only while the group has no members (kafka-consumer-groups.sh --reset-offsets).</p>\
<label>Topic <input name=\"topic\" value=\"{}\" placeholder=\"every topic the group has committed\"></label> \
<label>To <select name=\"to\">{}{}{}</select></label> \
<label>Offset <input name=\"offset\" type=\"number\" value=\"{}\"></label> \
<button name=\"op\" value=\"preview\" data-no-confirm>Preview</button> <button name=\"op\" value=\"execute\">Reset offsets</button>{below}</form></section>",
        url(group),
        console.csrf_field(),
        esc(form.get("topic").unwrap_or("")),
        option("earliest", "earliest"),
        option("latest", "latest"),
        option("offset", "offset"),
        esc(form.get("offset").unwrap_or("")),
        g = esc(group),
    )
}

/// The new offsets the form asks for, with Kafka's notices for offsets moved into range.
async fn plan(
    cluster: &Cluster,
    caller: &Caller,
    group: &str,
    form: &Form,
) -> Result<(BTreeMap<Tp, i64>, Vec<String>), String> {
    let to = match form.get("to") {
        Some("earliest") => ResetTo::Earliest,
        Some("latest") => ResetTo::Latest,
        Some("offset") => ResetTo::Offset(
            form.get("offset")
                .and_then(|o| o.trim().parse().ok())
                .ok_or_else(|| refusal("The offset must be a whole number."))?,
        ),
        _ => return Err(refusal("Choose earliest, latest or offset.")),
    };
    let snapshot = cluster
        .metadata()
        .map_err(|e| view_error(&views::Error::Call(e)))?;
    let described = views::describe_group(cluster, caller, &snapshot, group)
        .await
        .map_err(|e| view_error(&e))?;
    if let Some(refused) = reset::refuse_active(group, &described.state) {
        return Err(refusal(&refused));
    }
    let partitions: BTreeSet<Tp> = match form.get("topic").map(str::trim) {
        Some(topic) if !topic.is_empty() => snapshot
            .topics
            .get(topic)
            .ok_or_else(|| kafka_error(3, Some(&format!("Topic '{topic}' does not exist"))))?
            .partitions
            .keys()
            .map(|p| (topic.to_owned(), *p))
            .collect(),
        _ => described
            .partitions
            .iter()
            .filter(|(_, p)| p.committed.is_some())
            .map(|(tp, _)| tp.clone())
            .collect(),
    };
    if partitions.is_empty() {
        return Err(refusal(
            "The group has no committed offsets: name the topic to reset.",
        ));
    }
    let earliest = views::offsets(cluster, caller, &snapshot, partitions.clone(), EARLIEST).await;
    let latest = views::offsets(cluster, caller, &snapshot, partitions.clone(), LATEST).await;
    let mut offsets = BTreeMap::new();
    let mut notices = Vec::new();
    for tp in partitions {
        let (Some(&low), Some(&high)) = (earliest.get(&tp), latest.get(&tp)) else {
            return Err(refusal(&format!(
                "Cannot read the offsets of {}-{}: its leader did not answer. Nothing was reset.",
                tp.0, tp.1
            )));
        };
        let (offset, notice) = reset::new_offset(to, &tp.0, tp.1, low, high);
        notices.extend(notice);
        offsets.insert(tp, offset);
    }
    Ok((offsets, notices))
}

/// Kafka's `--dry-run` table of new offsets, with the notices above it.
fn preview(group: &str, offsets: &BTreeMap<Tp, i64>, notices: &[String]) -> String {
    let mut out = String::new();
    for notice in notices {
        let _ = write!(out, "<p class=\"notice\">{}</p>", esc(notice));
    }
    out.push_str("<table class=\"data\" id=\"reset-preview\"><thead><tr><th>group</th><th>topic</th><th>partition</th><th>new offset</th></tr></thead><tbody>");
    for ((topic, partition), offset) in offsets {
        let _ = write!(
            out,
            "<tr data-topic=\"{}\" data-partition=\"{partition}\"><td>{}</td><td>{}</td><td>{partition}</td><td class=\"new-offset\">{offset}</td></tr>",
            esc(topic),
            esc(group),
            esc(topic),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// Commits `offsets` for `group`; Kafka's error for the first partition refused.
async fn commit(
    cluster: &Cluster,
    caller: &Caller,
    group: &str,
    offsets: &BTreeMap<Tp, i64>,
) -> Result<(), String> {
    let response =
        bounded(cluster.call_coordinator(caller, group, reset::commit_request(group, offsets)))
            .await
            .map_err(|e| view_error(&e))?;
    let refused = response.topics.iter().find_map(|t| {
        t.partitions
            .iter()
            .find(|p| p.error_code != 0)
            .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
    });
    info!(principal = %caller.principal, peer = %caller.peer, group = %group,
        partitions = offsets.len(), refused = ?refused, "console: reset offsets");
    match refused {
        None => Ok(()),
        Some((topic, partition, code)) => Err(kafka_error(
            code,
            Some(&format!(
                "{} (partition {topic}-{partition})",
                client::error_message(code)
            )),
        )),
    }
}

/// `POST /groups/<group>/reset`: the preview, or the reset and back to the group page.
pub(crate) async fn reset(
    console: &Console,
    cluster: &Cluster,
    caller: &Caller,
    group: &str,
    form: &Form,
) -> HttpResponse {
    let below = match plan(cluster, caller, group, form).await {
        Ok((offsets, _)) if form.get("op") == Some("execute") => {
            match commit(cluster, caller, group, &offsets).await {
                Ok(()) => {
                    let notice = format!(
                        "Reset the committed offsets of {} of group {group}.",
                        html::count(offsets.len() as i64, "partition")
                    );
                    return HttpResponse::redirect(format!(
                        "/groups/{}?notice={}",
                        url(group),
                        url(&notice)
                    ));
                }
                Err(error) => error,
            }
        }
        Ok((offsets, notices)) => preview(group, &offsets, &notices),
        Err(error) => error,
    };
    let mut parts = pages::group(cluster, caller, group).await;
    parts.after = self::form(console, group, form, &below);
    console.show("groups", parts, &Form::default())
}
