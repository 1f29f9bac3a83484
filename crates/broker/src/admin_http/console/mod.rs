//! The web console, served by the admin listener on every path that is not an API
//! (`/metrics`, `/v1/...`): server-rendered HTML pages (Cluster, Topics, Topic with its
//! placement matrix, Consumer groups, the metadata store's znodes) with a little plain
//! JavaScript that refreshes each page's live part in place by short polling
//! (`?fragment=1`, every [`REFRESH_MS`]). The stylesheet and script are compiled into the
//! binary: no front-end build, no CDN.
//!
//! Everything shown is read with Kafka requests through the broker's own handlers
//! ([`super::kafka::Cluster`]), and every action is the Kafka request the CLI would send
//! (CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs, ElectLeaders, and
//! OffsetCommit for a group's offset reset), so an action is
//! checked exactly as a Kafka client's would be; errors are shown as Kafka's code and
//! message. Creating a topic first shows the placement the controller would produce (a
//! `validateOnly` CreateTopics, whose answer carries the assignment it would write).
//!
//! Forms are CSRF-safe: each carries a random token of this listener, and a post whose
//! `Origin` is another site is refused.

mod actions;
mod data;
mod group_reset;
mod html;
mod matrix;
mod pages;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::kafka::{Caller, Cluster};
use super::{percent_decode, HttpRequest, HttpResponse};

/// How often a page's live part is refreshed, in milliseconds.
pub(crate) const REFRESH_MS: u64 = 2000;

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// When a counter was sampled, its value then, and the rate computed at that sample.
type RateSample = (Instant, u64, Option<f64>);

/// The console's state: its CSRF token and the samples behind the rates it shows.
#[derive(Debug)]
pub(crate) struct Console {
    csrf: String,
    /// Per topic: when its messages-in counter was last sampled, the count then, and the
    /// rate computed at that sample.
    rates: Mutex<HashMap<String, RateSample>>,
}

impl Console {
    pub(crate) fn new() -> Console {
        let token: u128 = rand::random();
        Console {
            csrf: format!("{token:032x}"),
            rates: Mutex::new(HashMap::new()),
        }
    }

    /// The hidden field every form carries.
    pub(crate) fn csrf_field(&self) -> String {
        format!(
            "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
            self.csrf
        )
    }

    /// Messages in per second of `topic` on the brokers of this process (their
    /// `MessagesInPerSec` counters), over the time since the previous sample at least a
    /// second old; `None` on the first sample.
    pub(crate) fn messages_in_rate(&self, cluster: &Cluster, topic: &str) -> Option<f64> {
        let count: u64 = cluster
            .running()
            .filter_map(|ctx| ctx.metrics.topic(topic))
            .map(|m| m.messages_in.get())
            .sum();
        let now = Instant::now();
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        if rates.len() > 100_000 {
            rates.clear();
        }
        match rates.get_mut(topic) {
            Some((at, before, rate)) => {
                let elapsed = now.duration_since(*at).as_secs_f64();
                if elapsed >= 1.0 {
                    *rate = Some(count.saturating_sub(*before) as f64 / elapsed);
                    *at = now;
                    *before = count;
                }
                *rate
            }
            None => {
                rates.insert(topic.to_owned(), (now, count, None));
                None
            }
        }
    }

    /// Serves one console request.
    pub(crate) async fn route(
        &self,
        request: &HttpRequest,
        cluster: &Cluster,
        caller: &Caller,
    ) -> HttpResponse {
        let Some(path) = percent_decode(&request.path) else {
            return HttpResponse::text(400, "bad path\n");
        };
        let query = Form::parse(&request.query);
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (request.method.as_str(), segments.as_slice()) {
            ("GET", ["assets", "console.css"]) => HttpResponse::new(200, "text/css", CSS),
            ("GET", ["assets", "console.js"]) => HttpResponse::new(200, "text/javascript", JS),
            ("GET", [""]) => self.show("cluster", pages::cluster(cluster, caller).await, &query),
            ("GET", ["topics"]) => {
                let filter = query.get("filter").unwrap_or("");
                let parts = pages::topics(cluster, caller, self, filter).await;
                self.show("topics", parts, &query)
            }
            ("GET", ["topics", "new"]) => {
                actions::create_form(self, &Form::default(), String::new())
            }
            ("GET", ["topics", name]) => {
                let page = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(0);
                let extras = pages::TopicExtras {
                    notice: query.get("notice"),
                    ..Default::default()
                };
                match pages::topic(cluster, caller, self, name, page, extras).await {
                    Some(parts) => self.show("topics", parts, &query),
                    None => not_found(&format!("No topic {name}.")),
                }
            }
            ("GET", ["groups"]) => {
                self.show("groups", pages::groups(cluster, caller).await, &query)
            }
            ("GET", ["groups", group]) => {
                let mut parts = pages::group(cluster, caller, group).await;
                if let Some(notice) = query.get("notice") {
                    parts.before = format!(
                        "<p class=\"notice\" role=\"status\">{}</p>",
                        html::esc(notice)
                    );
                }
                parts.after = group_reset::form(self, group, &Form::default(), "");
                self.show("groups", parts, &query)
            }
            ("GET", ["znodes", rest @ ..]) => {
                let znode = format!("/{}", rest.join("/"));
                let znode = if znode.len() > 1 {
                    znode.trim_end_matches('/').to_owned()
                } else {
                    znode
                };
                match pages::znode(cluster, &znode).await {
                    Some(parts) => self.show("znodes", parts, &query),
                    None => not_found(&format!("No znode {znode}.")),
                }
            }
            ("POST", _) => {
                let form = Form::parse(&String::from_utf8_lossy(&request.body));
                if let Err(refused) = self.check_post(request, &form) {
                    return refused;
                }
                match segments.as_slice() {
                    ["topics", "new"] => actions::create_topic(self, cluster, caller, &form).await,
                    ["topics", name, what] => {
                        actions::topic_action(self, cluster, caller, name, what, &form).await
                    }
                    ["groups", group, "reset"] => {
                        group_reset::reset(self, cluster, caller, group, &form).await
                    }
                    _ => not_found("No such action."),
                }
            }
            ("GET", _) => not_found("No such page."),
            _ => HttpResponse::text(405, "only GET and POST are supported\n"),
        }
    }

    /// A whole page, or only its live part when the script asks (`fragment=1`).
    pub(crate) fn show(&self, nav: &str, parts: pages::Parts, query: &Form) -> HttpResponse {
        let body = if query.get("fragment") == Some("1") {
            parts.live
        } else {
            html::page(
                &parts.title,
                nav,
                &parts.before,
                Some(&parts.live),
                &parts.after,
            )
        };
        HttpResponse::new(200, "text/html; charset=utf-8", body)
    }

    /// Refuses a post without this listener's token, or sent from another site.
    fn check_post(&self, request: &HttpRequest, form: &Form) -> Result<(), HttpResponse> {
        if let (Some(origin), Some(host)) = (request.header("origin"), request.header("host")) {
            let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
            if origin != "null" && origin_host != host {
                return Err(HttpResponse::text(
                    403,
                    "refused: the form was posted from another site\n",
                ));
            }
        }
        if form.get("csrf") != Some(self.csrf.as_str()) {
            return Err(HttpResponse::text(
                403,
                "refused: the form's token is missing or stale; reload the page\n",
            ));
        }
        Ok(())
    }
}

pub(crate) fn not_found(message: &str) -> HttpResponse {
    HttpResponse::new(
        404,
        "text/html; charset=utf-8",
        html::page(
            "Not found",
            "",
            &format!("<p>{}</p>", html::esc(message)),
            None,
            "",
        ),
    )
}

/// A form or query string (`application/x-www-form-urlencoded`), in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Form(Vec<(String, String)>);

impl Form {
    pub(crate) fn parse(encoded: &str) -> Form {
        let decode = |s: &str| percent_decode(&s.replace('+', " ")).unwrap_or_default();
        Form(
            encoded
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The first value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_plus_and_percent() {
        let form = Form::parse("name=a+b%2Fc&empty=&flag&csrf=x%3D");
        assert_eq!(form.get("name"), Some("a b/c"));
        assert_eq!(form.get("empty"), Some(""));
        assert_eq!(form.get("flag"), Some(""));
        assert_eq!(form.get("csrf"), Some("x="));
        assert_eq!(form.get("missing"), None);
    }
}
