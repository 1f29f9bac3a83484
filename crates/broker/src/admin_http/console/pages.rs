//! The console's read pages. Each returns the page's static part (headings, forms) and its
//! live part (what `console.js` refreshes in place).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::super::kafka::{Caller, Cluster};
use super::super::views::{self, EARLIEST, LATEST};
use super::data;
use super::html::{self, bytes, esc, ids, kafka_error, url, view_error};
use super::{matrix, Console, Form};

/// Partitions per page of the topic page (matrix and table).
pub(crate) const PAGE_ROWS: usize = 500;

/// A page's parts.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    pub title: String,
    pub before: String,
    pub live: String,
    /// After the live part (forms, which a refresh must not reset).
    pub after: String,
}

fn metadata_error(err: &views::Error) -> Parts {
    Parts {
        title: "Unavailable".to_owned(),
        live: view_error(err),
        ..Parts::default()
    }
}

/// Cluster: id, controller, brokers with their load, totals, the metadata store.
pub(crate) async fn cluster(cluster: &Cluster, caller: &Caller) -> Parts {
    let md = match data::metadata(cluster, caller, None).await {
        Ok(md) => md,
        Err(err) => return metadata_error(&err),
    };
    let dirs = data::log_dirs(cluster, caller, &md.brokers).await;
    let mut live = String::new();
    let (epoch, since) = controller_znodes(cluster).await;
    let store = cluster
        .any()
        .map(|ctx| match &ctx.config.zookeeper_connect {
            Some(connect) => format!("ZooKeeper at <code>{}</code>", esc(connect)),
            None => format!(
                "embedded store in <code>{}</code>",
                esc(&ctx
                    .config
                    .data_dir
                    .join(metastore::EMBEDDED_SUBDIR)
                    .display()
                    .to_string())
            ),
        })
        .unwrap_or_default();
    let _ = write!(
        live,
        "<dl class=\"facts\"><dt>Cluster id</dt><dd id=\"cluster-id\">{}</dd>\
<dt>Controller</dt><dd id=\"controller\">broker <strong>{}</strong>, epoch {}{}</dd>\
<dt>Metadata store</dt><dd>{store}</dd></dl>",
        esc(&md.cluster_id),
        md.controller_id,
        epoch.map_or("unknown".to_owned(), |e| e.to_string()),
        since
            .map(|s| format!(", since {}", esc(&s)))
            .unwrap_or_default(),
    );
    let partitions: Vec<&data::Partition> = md.topics.iter().flat_map(|t| &t.partitions).collect();
    live.push_str("<h2>Brokers</h2><table class=\"data\" id=\"brokers\"><thead><tr><th>id</th><th>address</th><th>rack</th><th>leads</th><th>hosts</th><th>under-replicated (led)</th><th>log dirs</th><th>used</th><th>free / total</th></tr></thead><tbody>");
    for b in &md.brokers {
        let leads = partitions.iter().filter(|p| p.leader == b.id).count();
        let hosts = partitions
            .iter()
            .filter(|p| p.replicas.contains(&b.id))
            .count();
        let under = partitions
            .iter()
            .filter(|p| p.leader == b.id && p.under_replicated())
            .count();
        let (dirs_text, used, space) = match dirs.get(&b.id) {
            Some(d) => (
                d.dirs
                    .iter()
                    .map(|(path, code, _, _)| {
                        if *code == 0 {
                            esc(path)
                        } else {
                            format!("{} ({})", esc(path), super::html::error_name(*code))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("<br>"),
                bytes(d.used_bytes()),
                d.dirs
                    .iter()
                    .map(|(_, _, total, usable)| format!("{} / {}", bytes(*usable), bytes(*total)))
                    .collect::<Vec<_>>()
                    .join("<br>"),
            ),
            None => ("no answer".to_owned(), "–".to_owned(), "–".to_owned()),
        };
        let _ = write!(
            live,
            "<tr data-broker=\"{}\"><td>{}{}</td><td>{}:{}</td><td>{}</td><td>{leads}</td><td>{hosts}</td><td>{under}</td><td>{dirs_text}</td><td>{used}</td><td>{space}</td></tr>",
            b.id,
            b.id,
            if b.id == md.controller_id { " <span class=\"badge\">controller</span>" } else { "" },
            esc(&b.host),
            b.port,
            b.rack.as_deref().map(esc).unwrap_or_else(|| "–".to_owned()),
        );
    }
    live.push_str("</tbody></table>");
    let under = partitions.iter().filter(|p| p.under_replicated()).count();
    let offline = partitions.iter().filter(|p| p.is_offline()).count();
    let replicas: usize = partitions.iter().map(|p| p.replicas.len()).sum();
    let used: i64 = dirs.values().map(|d| d.used_bytes()).sum();
    let _ = write!(
        live,
        "<h2>Totals</h2><dl class=\"facts\" id=\"totals\"><dt>Brokers</dt><dd>{}</dd><dt>Topics</dt><dd>{}</dd>\
<dt>Partitions</dt><dd>{}</dd><dt>Replicas</dt><dd>{replicas}</dd><dt>Under-replicated</dt><dd>{under}</dd>\
<dt>Offline</dt><dd>{offline}</dd><dt>Size on disk</dt><dd>{}</dd></dl>",
        md.brokers.len(),
        md.topics.len(),
        partitions.len(),
        bytes(used),
    );
    Parts {
        title: "Cluster".to_owned(),
        live,
        ..Parts::default()
    }
}

/// The controller's epoch and since when it is controller, from `/controller_epoch` and
/// `/controller` (what `zookeeper-shell get /controller` shows).
async fn controller_znodes(cluster: &Cluster) -> (Option<i64>, Option<String>) {
    let Ok(ctx) = cluster.any() else {
        return (None, None);
    };
    let zk = ctx.zk();
    let client = zk.client();
    let epoch = client
        .get_data(znodes::paths::controller_epoch(), false)
        .await
        .ok()
        .and_then(|(d, _)| String::from_utf8_lossy(&d).trim().parse().ok());
    let since = client
        .get_data(znodes::paths::controller(), false)
        .await
        .ok()
        .map(|(d, stat)| {
            let ms = serde_json::from_slice::<serde_json::Value>(&d)
                .ok()
                .and_then(|v| {
                    v.get("timestamp").and_then(|t| {
                        t.as_str()
                            .and_then(|s| s.parse::<i64>().ok())
                            .or_else(|| t.as_i64())
                    })
                })
                .unwrap_or(stat.ctime);
            utc(ms)
        });
    (epoch, since)
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Topics: one row each, filtered by name.
pub(crate) async fn topics(
    cluster: &Cluster,
    caller: &Caller,
    console: &Console,
    filter: &str,
) -> Parts {
    let md = match data::metadata(cluster, caller, None).await {
        Ok(md) => md,
        Err(err) => return metadata_error(&err),
    };
    let shown: Vec<&data::Topic> = md
        .topics
        .iter()
        .filter(|t| filter.is_empty() || t.name.contains(filter))
        .collect();
    let dirs = data::log_dirs(cluster, caller, &md.brokers).await;
    let names: Vec<&str> = shown.iter().map(|t| t.name.as_str()).collect();
    let configs = data::topic_configs(cluster, caller, &names)
        .await
        .unwrap_or_default();
    let mut live = format!(
        "<p class=\"muted\">{} of {}.</p><table class=\"data\" id=\"topics\"><thead><tr><th>name</th><th>partitions</th><th>replication factor</th><th>under-replicated</th><th>offline</th><th>size on disk</th><th>messages in /s</th><th>config overrides</th></tr></thead><tbody>",
        shown.len(),
        html::count(md.topics.len() as i64, "topic")
    );
    for t in shown {
        let size: i64 = dirs
            .values()
            .flat_map(|d| d.sizes.iter())
            .filter(|((name, _), _)| name == &t.name)
            .map(|(_, s)| *s)
            .sum();
        let overrides = match configs.get(&t.name) {
            Some(Ok(configs)) => configs
                .iter()
                .filter(|c| c.source == "topic")
                .map(|c| {
                    format!(
                        "<code>{}={}</code>",
                        esc(&c.name),
                        if c.sensitive {
                            "(sensitive)".to_owned()
                        } else {
                            esc(c.value.as_deref().unwrap_or(""))
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join(" "),
            Some(Err(err)) => view_error(err),
            None => String::new(),
        };
        let _ = write!(
            live,
            "<tr data-name=\"{}\"><td><a href=\"/topics/{}\">{}</a>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{overrides}</td></tr>",
            esc(&t.name),
            url(&t.name),
            esc(&t.name),
            if t.internal { " <span class=\"badge\">internal</span>" } else { "" },
            t.partitions.len(),
            t.replication_factor(),
            t.partitions.iter().filter(|p| p.under_replicated()).count(),
            t.partitions.iter().filter(|p| p.is_offline()).count(),
            bytes(size),
            console.messages_in_rate(cluster, &t.name).map_or("–".to_owned(), |r| format!("{r:.1}")),
        );
    }
    live.push_str("</tbody></table>");
    let before = format!(
        "<form method=\"get\" action=\"/topics\" class=\"filter\"><label>Filter by name <input id=\"filter\" name=\"filter\" value=\"{}\" autocomplete=\"off\"></label> <button>Filter</button></form>\
<p><a class=\"button\" href=\"/topics/new\">Create a topic</a></p>",
        esc(filter)
    );
    Parts {
        title: "Topics".to_owned(),
        before,
        live,
        ..Parts::default()
    }
}

/// What a topic page shows beside the topic: a notice after an action, or a refused
/// action's form (as filled in) and its error (next to the form it names).
#[derive(Debug, Default)]
pub(crate) struct TopicExtras<'a> {
    pub notice: Option<&'a str>,
    pub form: Form,
    pub error: Option<(&'a str, String)>,
}

/// One topic: the placement matrix, the partition table, the configs, and the actions.
pub(crate) async fn topic(
    cluster: &Cluster,
    caller: &Caller,
    console: &Console,
    name: &str,
    page: usize,
    extras: TopicExtras<'_>,
) -> Option<Parts> {
    let TopicExtras {
        notice,
        form,
        error,
    } = extras;
    let md = match data::metadata(cluster, caller, Some(&[name])).await {
        Ok(md) => md,
        Err(err) => return Some(metadata_error(&err)),
    };
    let mut t = md.topic(name)?.clone();
    if t.error_code == 3 {
        return None;
    }
    data::mark_reassignments(cluster, caller, name, &mut t.partitions).await;
    let mut live = String::new();
    if t.error_code != 0 {
        live.push_str(&kafka_error(t.error_code, None));
    }
    let pages = t.partitions.len().div_ceil(PAGE_ROWS).max(1);
    let page = page.min(pages - 1);
    let rows = &t.partitions[(page * PAGE_ROWS).min(t.partitions.len())
        ..((page + 1) * PAGE_ROWS).min(t.partitions.len())];
    let _ = write!(
        live,
        "<dl class=\"facts\"><dt>Topic id</dt><dd>{}</dd><dt>Partitions</dt><dd>{}</dd><dt>Replication factor</dt><dd>{}</dd><dt>Under-replicated</dt><dd>{}</dd><dt>Offline</dt><dd>{}</dd>{}</dl>",
        // Kafka's form (Uuid.toString: URL-safe base64), as the CLI and every tool print it.
        model::TopicId::from_bytes(*t.id.as_bytes()),
        t.partitions.len(),
        t.replication_factor(),
        t.partitions.iter().filter(|p| p.under_replicated()).count(),
        t.partitions.iter().filter(|p| p.is_offline()).count(),
        if t.internal { "<dt>Internal</dt><dd>yes</dd>" } else { "" },
    );
    live.push_str("<h2>Placement</h2>");
    let columns = matrix::columns(&md.brokers, &t.partitions);
    live.push_str(&matrix::render(&columns, &t.partitions, rows));
    live.push_str(matrix::LEGEND);
    if pages > 1 {
        live.push_str(&pager(name, page, pages));
    }
    // Partition table: offsets from the leaders, sizes from the leaders' log dirs.
    let tps: Vec<(String, i32)> = rows.iter().map(|p| (name.to_owned(), p.index)).collect();
    let snapshot = cluster.metadata().ok();
    let (start, end) = match &snapshot {
        Some(s) => (
            views::offsets(cluster, caller, s, tps.clone(), EARLIEST).await,
            views::offsets(cluster, caller, s, tps, LATEST).await,
        ),
        None => Default::default(),
    };
    let leaders: Vec<data::Broker> = md
        .brokers
        .iter()
        .filter(|b| rows.iter().any(|p| p.leader == b.id))
        .cloned()
        .collect();
    let dirs = data::log_dirs(cluster, caller, &leaders).await;
    live.push_str("<h2>Partitions</h2><table class=\"data\" id=\"partitions\"><thead><tr><th>partition</th><th>leader</th><th>epoch</th><th>replicas</th><th>ISR</th><th>offline</th><th>log start</th><th>log end</th><th>size (leader)</th></tr></thead><tbody>");
    for p in rows {
        let key = (name.to_owned(), p.index);
        let _ = write!(
            live,
            "<tr data-partition=\"{}\"><td>{}</td><td class=\"leader\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.index,
            p.index,
            if p.leader < 0 { "none".to_owned() } else { p.leader.to_string() },
            p.leader_epoch,
            ids(&p.replicas),
            ids(&p.isr),
            ids(&p.offline),
            start.get(&key).map_or("–".to_owned(), |o| o.to_string()),
            end.get(&key).map_or("–".to_owned(), |o| o.to_string()),
            dirs.get(&p.leader)
                .and_then(|d| d.sizes.get(&key))
                .map_or("–".to_owned(), |s| bytes(*s)),
        );
    }
    live.push_str("</tbody></table>");
    let configs = data::topic_configs(cluster, caller, &[name]).await;
    live.push_str("<h2>Configs</h2>");
    match configs.as_ref().map(|c| c.get(name)) {
        Ok(Some(Ok(configs))) => {
            live.push_str("<table class=\"data\" id=\"configs\"><thead><tr><th>name</th><th>value</th><th>source</th></tr></thead><tbody>");
            for c in configs {
                let _ = write!(
                    live,
                    "<tr data-config=\"{}\" class=\"source-{}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&c.name),
                    c.source,
                    esc(&c.name),
                    if c.sensitive { "(sensitive)".to_owned() } else { esc(c.value.as_deref().unwrap_or("null")) },
                    c.source
                );
            }
            live.push_str("</tbody></table>");
        }
        Ok(Some(Err(err))) | Err(err) => live.push_str(&view_error(err)),
        Ok(None) => live.push_str("<p class=\"muted\">no answer</p>"),
    }
    let mut before = String::new();
    if let Some(notice) = notice {
        let _ = write!(
            before,
            "<p class=\"notice\" role=\"status\">{}</p>",
            esc(notice)
        );
    }
    let after = topic_actions(console, name, t.partitions.len(), &form, error);
    Some(Parts {
        title: format!("Topic {name}"),
        before,
        live,
        after,
    })
}

fn pager(name: &str, page: usize, pages: usize) -> String {
    let mut out = String::from("<nav class=\"pager\">Page: ");
    for p in 0..pages {
        if p == page {
            let _ = write!(out, "<strong>{}</strong> ", p + 1);
        } else {
            let _ = write!(
                out,
                "<a href=\"/topics/{}?page={p}\">{}</a> ",
                url(name),
                p + 1
            );
        }
    }
    out.push_str("</nav>");
    out
}

/// The forms of a topic page; `error` (shown next to the form `form` came from).
pub(crate) fn topic_actions(
    console: &Console,
    name: &str,
    partitions: usize,
    form: &Form,
    error: Option<(&str, String)>,
) -> String {
    let err = |which: &str| match &error {
        Some((w, e)) if *w == which => e.clone(),
        _ => String::new(),
    };
    let action = |what: &str| format!("/topics/{}/{what}", url(name));
    let csrf = console.csrf_field();
    format!(
        "<section class=\"actions\"><h2>Actions</h2>\
<form method=\"post\" action=\"{}\" id=\"add-partitions\" data-confirm=\"Add partitions to {n}?\">{csrf}<h3>Add partitions</h3>\
<label>New partition count <input name=\"count\" type=\"number\" min=\"1\" value=\"{}\" required></label> <button>Add partitions</button>{}</form>\
<form method=\"post\" action=\"{}\" id=\"alter-config\" data-confirm=\"Change the config of {n}?\">{csrf}<h3>Change a config</h3>\
<label>Name <input name=\"name\" value=\"{}\" required></label> <label>Value <input name=\"value\" value=\"{}\"></label> \
<label><input type=\"checkbox\" name=\"delete\" value=\"1\"> remove the override</label> <button>Apply</button>{}</form>\
<form method=\"post\" action=\"{}\" id=\"delete-topic\" data-confirm=\"Delete {n} and all its data?\">{csrf}<h3>Delete the topic</h3>\
<label>Type the topic's name to confirm <input name=\"confirm\" autocomplete=\"off\" required></label> <button class=\"danger\">Delete</button>{}</form>\
<form method=\"post\" action=\"{}\" id=\"elect-preferred\" data-confirm=\"Move the leaders of {n} back to their preferred replicas?\">{csrf}<h3>Preferred leader election</h3>\
<p class=\"muted\">Each partition's first replica leads again where it is alive and in sync (kafka-leader-election.sh --election-type PREFERRED).</p> <button>Elect preferred leaders</button>{}</form></section>",
        action("partitions"),
        form.get("count").map(str::to_owned).unwrap_or_else(|| (partitions + 1).to_string()),
        err("partitions"),
        action("config"),
        esc(form.get("name").unwrap_or("")),
        esc(form.get("value").unwrap_or("")),
        err("config"),
        action("delete"),
        err("delete"),
        action("elect"),
        err("elect"),
        n = esc(name),
    )
}

/// Consumer groups: state, protocol, members and total lag of each.
pub(crate) async fn groups(cluster: &Cluster, caller: &Caller) -> Parts {
    let listed = match views::list_groups(cluster, caller).await {
        Ok(listed) => listed,
        Err(err) => return metadata_error(&err),
    };
    let snapshot = match cluster.metadata() {
        Ok(s) => s,
        Err(err) => return metadata_error(&err.into()),
    };
    let mut live = format!(
        "<p class=\"muted\">{}.</p><table class=\"data\" id=\"groups\"><thead><tr><th>group</th><th>state</th><th>protocol type</th><th>protocol</th><th>members</th><th>total lag</th></tr></thead><tbody>",
        html::count(listed.len() as i64, "group")
    );
    for g in &listed {
        let described = views::describe_group(cluster, caller, &snapshot, &g.group_id).await;
        let (protocol, members, lag) = match &described {
            Ok(d) => (
                esc(&d.protocol),
                d.members.len().to_string(),
                d.lag_per_topic().values().sum::<i64>().to_string(),
            ),
            Err(err) => (view_error(err), "–".to_owned(), "–".to_owned()),
        };
        let _ = write!(
            live,
            "<tr data-name=\"{}\"><td><a href=\"/groups/{}\">{}</a></td><td>{}</td><td>{}</td><td>{protocol}</td><td>{members}</td><td class=\"lag\">{lag}</td></tr>",
            esc(&g.group_id),
            url(&g.group_id),
            esc(&g.group_id),
            esc(&g.state),
            esc(&g.protocol_type),
        );
    }
    live.push_str("</tbody></table>");
    Parts {
        title: "Consumer groups".to_owned(),
        live,
        ..Parts::default()
    }
}

/// One group: members, committed offsets, log ends and lag (as `consumer-groups --describe`).
pub(crate) async fn group(cluster: &Cluster, caller: &Caller, group: &str) -> Parts {
    let snapshot = match cluster.metadata() {
        Ok(s) => s,
        Err(err) => return metadata_error(&err.into()),
    };
    let title = format!("Consumer group {group}");
    let d = match views::describe_group(cluster, caller, &snapshot, group).await {
        Ok(d) => d,
        Err(err) => {
            return Parts {
                title,
                live: view_error(&err),
                ..Parts::default()
            }
        }
    };
    let mut live = format!(
        "<dl class=\"facts\"><dt>State</dt><dd id=\"group-state\">{}</dd><dt>Protocol type</dt><dd>{}</dd><dt>Protocol</dt><dd>{}</dd><dt>Members</dt><dd>{}</dd></dl>",
        esc(&d.state),
        esc(&d.protocol_type),
        esc(&d.protocol),
        d.members.len()
    );
    live.push_str("<h2>Members</h2><table class=\"data\" id=\"members\"><thead><tr><th>member</th><th>client id</th><th>host</th><th>assigned partitions</th></tr></thead><tbody>");
    for m in &d.members {
        let assigned: BTreeMap<&str, Vec<i32>> =
            m.assigned.iter().fold(BTreeMap::new(), |mut acc, (t, p)| {
                acc.entry(t.as_str()).or_insert_with(Vec::new).push(*p);
                acc
            });
        let _ = write!(
            live,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.member_id),
            esc(&m.client_id),
            esc(&m.host),
            assigned
                .iter()
                .map(|(t, ps)| format!("{}: {}", esc(t), ids(ps)))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    live.push_str("</tbody></table><h2>Offsets</h2><table class=\"data\" id=\"offsets\"><thead><tr><th>topic</th><th>partition</th><th>committed</th><th>log end</th><th>lag</th><th>member</th></tr></thead><tbody>");
    let dash = || "–".to_owned();
    for ((topic, partition), p) in &d.partitions {
        let _ = write!(
            live,
            "<tr data-topic=\"{}\" data-partition=\"{partition}\"><td>{}</td><td>{partition}</td><td>{}</td><td>{}</td><td class=\"lag\">{}</td><td>{}</td></tr>",
            esc(topic),
            esc(topic),
            p.committed.map_or_else(dash, |o| o.to_string()),
            p.log_end.map_or_else(dash, |o| o.to_string()),
            p.lag().map_or_else(dash, |o| o.to_string()),
            p.owner.as_deref().map_or_else(dash, esc),
        );
    }
    live.push_str("</tbody></table><h2>Lag per topic</h2><table class=\"data\" id=\"topic-lag\"><thead><tr><th>topic</th><th>total lag</th></tr></thead><tbody>");
    let topics: BTreeSet<&str> = d.partitions.keys().map(|(t, _)| t.as_str()).collect();
    let lag = d.lag_per_topic();
    for t in topics {
        let _ = write!(
            live,
            "<tr data-topic=\"{}\"><td>{}</td><td class=\"lag\">{}</td></tr>",
            esc(t),
            esc(t),
            lag.get(t).map_or_else(dash, |l| l.to_string())
        );
    }
    live.push_str("</tbody></table>");
    Parts {
        title,
        live,
        ..Parts::default()
    }
}

/// The znode browser: data (as JSON when it is), stat and children of `path`.
pub(crate) async fn znode(cluster: &Cluster, path: &str) -> Option<Parts> {
    let ctx = match cluster.any() {
        Ok(ctx) => ctx,
        Err(err) => return Some(metadata_error(&err.into())),
    };
    let described = match super::super::describe_znode(ctx, path).await {
        Ok(Some(d)) => d,
        Ok(None) => return None,
        Err(err) => {
            return Some(Parts {
                title: format!("Metadata store: {path}"),
                live: format!("<p class=\"error\">{}</p>", esc(&err.to_string())),
                ..Parts::default()
            })
        }
    };
    let mut crumbs = String::from("<nav class=\"crumbs\"><a href=\"/znodes/\">/</a>");
    let mut prefix = String::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        prefix.push('/');
        prefix.push_str(segment);
        let _ = write!(
            crumbs,
            " <a href=\"/znodes{}\">{}</a> /",
            prefix.split('/').map(url).collect::<Vec<_>>().join("/"),
            esc(segment)
        );
    }
    crumbs.push_str("</nav>");
    let data = match &described["data"] {
        serde_json::Value::Null => "<p class=\"muted\">no data</p>".to_owned(),
        serde_json::Value::String(s) => format!("<pre id=\"znode-data\">{}</pre>", esc(s)),
        value => format!(
            "<pre id=\"znode-data\" class=\"json\">{}</pre>",
            esc(&serde_json::to_string_pretty(value).unwrap_or_default())
        ),
    };
    let mut live = format!(
        "{crumbs}<h2>Data</h2>{data}<h2>Stat</h2><table class=\"data\" id=\"stat\"><tbody>"
    );
    if let Some(stat) = described["stat"].as_object() {
        for (k, v) in stat {
            let shown = match k.as_str() {
                "ctime" | "mtime" => format!("{v} ({})", v.as_i64().map(utc).unwrap_or_default()),
                "ephemeral_owner" if v.as_i64() == Some(0) => "0 (persistent)".to_owned(),
                "ephemeral_owner" => format!("{:#x} (ephemeral)", v.as_i64().unwrap_or(0)),
                _ => v.to_string(),
            };
            let _ = write!(live, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&shown));
        }
    }
    live.push_str("</tbody></table><h2>Children</h2><ul id=\"children\">");
    let base = if path == "/" {
        String::new()
    } else {
        path.to_owned()
    };
    for child in described["children"].as_array().into_iter().flatten() {
        let child = child.as_str().unwrap_or_default();
        let _ = write!(
            live,
            "<li><a href=\"/znodes{}/{}\">{}</a></li>",
            base.split('/').map(url).collect::<Vec<_>>().join("/"),
            url(child),
            esc(child)
        );
    }
    live.push_str("</ul>");
    Some(Parts {
        title: format!("Metadata store: {path}"),
        before: "<p class=\"muted\">Read-only view of the metadata tree.</p>".to_owned(),
        live,
        ..Parts::default()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_epoch_millis() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(1_796_083_200_000), "2026-12-01 00:00:00 UTC");
        assert_eq!(
            super::utc(951_782_400_000 + 3_723_000),
            "2000-02-29 01:02:03 UTC"
        );
    }
}
