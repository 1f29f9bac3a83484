//! HTML building blocks of the console: escaping, the page shell, Kafka errors, sizes.

use std::fmt::Write as _;

/// `s` with HTML's five special characters escaped (text and attribute values).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `n` and `noun`, the noun plural unless `n` is one: "1 replica", "6 partitions".
pub(crate) fn count(n: impl Into<i64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `s` percent-encoded for a URL path segment or query value.
pub(crate) fn url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A page: the shell around `before` (static: headings, forms), the live part (`live`,
/// replaced in place every [`super::REFRESH_MS`] by `console.js`; none on pages that only
/// hold a form) and `after`.
pub(crate) fn page(
    title: &str,
    nav: &str,
    before: &str,
    live: Option<&str>,
    after: &str,
) -> String {
    let link = |href: &str, name: &str, key: &str| {
        let current = if key == nav {
            " aria-current=\"page\""
        } else {
            ""
        };
        format!("<a href=\"{href}\"{current}>{name}</a>")
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Gregor</title><link rel=\"stylesheet\" href=\"/assets/console.css\"></head>\
<body><header><a class=\"brand\" href=\"/\">Gregor</a><nav>{}{}{}{}</nav>\
<span id=\"refresh-state\" class=\"muted\"></span></header>\
<main><h1>{title}</h1>{before}{live}{after}</main>\
<script src=\"/assets/console.js\"></script></body></html>\n",
        link("/", "Cluster", "cluster"),
        link("/topics", "Topics", "topics"),
        link("/groups", "Consumer groups", "groups"),
        link("/znodes/", "Metadata store", "znodes"),
        title = esc(title),
        live = live
            .map(|l| format!(
                "<div id=\"live\" data-refresh=\"{}\">{l}</div>",
                super::REFRESH_MS
            ))
            .unwrap_or_default(),
    )
}

/// Kafka's name of an error code (`TOPIC_ALREADY_EXISTS`), or the number.
pub(crate) fn error_name(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        Some(err) => {
            let camel = format!("{err:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
        None if code == -1 => "UNKNOWN_SERVER_ERROR".to_owned(),
        None => format!("ERROR_{code}"),
    }
}

/// A Kafka error as the console shows it: name, code and message.
pub(crate) fn kafka_error(code: i16, message: Option<&str>) -> String {
    let message = message
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| client::error_message(code));
    format!(
        "<p class=\"error\" role=\"alert\" data-error-code=\"{code}\"><strong>{} ({code})</strong>: {}</p>",
        error_name(code),
        esc(message)
    )
}

/// A view error (no answer, or a Kafka error).
pub(crate) fn view_error(err: &super::super::views::Error) -> String {
    match err {
        super::super::views::Error::Kafka(code, message) => kafka_error(*code, message.as_deref()),
        super::super::views::Error::Call(err) => format!(
            "<p class=\"error\" role=\"alert\"><strong>no answer</strong>: {}</p>",
            esc(&err.to_string())
        ),
    }
}

/// Bytes in B, KiB, MiB, GiB, TiB.
pub(crate) fn bytes(n: i64) -> String {
    if n < 0 {
        return "–".to_owned();
    }
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// A list of broker ids, comma-separated.
pub(crate) fn ids(ids: &[i32]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(count(1, "replica"), "1 replica");
        assert_eq!(count(6, "partition"), "6 partitions");
        assert_eq!(count(0, "group"), "0 groups");
    }

    #[test]
    fn escapes_and_names() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(url("a b/ç"), "a%20b%2F%C3%A7");
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(38), "INVALID_REPLICATION_FACTOR");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        let e = kafka_error(36, Some("Topic 't' already exists."));
        assert!(
            e.contains("TOPIC_ALREADY_EXISTS (36)") && e.contains("&#39;t&#39;"),
            "{e}"
        );
    }
}
