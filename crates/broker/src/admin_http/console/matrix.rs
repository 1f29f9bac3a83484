//! The placement matrix: partitions down the side, brokers across (grouped by rack), each
//! cell empty or the role of the broker's replica; per-broker leader and replica counts as
//! bars under the columns, with the spread (max − min).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use model::BrokerId;

use super::data::{Broker, Partition};
use super::html::esc;

/// A column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub id: BrokerId,
    pub rack: Option<String>,
    /// In the metadata's live brokers.
    pub live: bool,
}

/// The columns for `partitions`: every live broker, and every broker a replica is placed on
/// that is not live (marked), ordered by rack then id.
pub(crate) fn columns(brokers: &[Broker], partitions: &[Partition]) -> Vec<Column> {
    let mut columns: BTreeMap<BrokerId, Column> = brokers
        .iter()
        .map(|b| {
            (
                b.id,
                Column {
                    id: b.id,
                    rack: b.rack.clone(),
                    live: true,
                },
            )
        })
        .collect();
    for p in partitions {
        for &r in &p.replicas {
            columns.entry(r).or_insert(Column {
                id: r,
                rack: None,
                live: false,
            });
        }
    }
    let mut columns: Vec<Column> = columns.into_values().collect();
    columns.sort_by(|a, b| (&a.rack, a.id).cmp(&(&b.rack, b.id)));
    columns
}

/// The role of `broker`'s replica of `p`, if it has one: `leader`, `adding` / `removing`
/// (a reassignment moves it in or out), `follower` (in sync), `out-of-sync` or `offline`.
pub(crate) fn role(p: &Partition, broker: BrokerId) -> Option<&'static str> {
    if !p.replicas.contains(&broker) {
        return None;
    }
    Some(if p.offline.contains(&broker) {
        "offline"
    } else if p.leader == broker {
        "leader"
    } else if p.adding.contains(&broker) {
        "adding"
    } else if p.removing.contains(&broker) {
        "removing"
    } else if p.isr.contains(&broker) {
        "follower"
    } else {
        "out-of-sync"
    })
}

/// The matrix of `rows` (a page of `all`; the counts under the columns are over `all`).
pub(crate) fn render(columns: &[Column], all: &[Partition], rows: &[Partition]) -> String {
    let mut out = String::with_capacity(256 + rows.len() * columns.len() * 64);
    out.push_str("<div class=\"matrix-wrap\"><table class=\"matrix\" id=\"placement\"><thead>");
    // Rack header row, one cell per run of the same rack.
    out.push_str("<tr><th></th>");
    let mut i = 0;
    while i < columns.len() {
        let rack = &columns[i].rack;
        let span = columns[i..].iter().take_while(|c| &c.rack == rack).count();
        let _ = write!(
            out,
            "<th class=\"rack\" colspan=\"{span}\">{}</th>",
            rack.as_deref()
                .map(|r| format!("rack {}", esc(r)))
                .unwrap_or_else(|| "no rack".to_owned())
        );
        i += span;
    }
    out.push_str("</tr><tr><th>partition</th>");
    for c in columns {
        let _ = write!(
            out,
            "<th class=\"broker{}\" data-broker=\"{}\">{}{}</th>",
            if c.live { "" } else { " down" },
            c.id,
            c.id,
            if c.live { "" } else { " (down)" }
        );
    }
    out.push_str("</tr></thead><tbody>");
    for p in rows {
        let _ = write!(
            out,
            "<tr data-partition=\"{}\" data-replicas=\"{}\" data-leader=\"{}\"><th>{}</th>",
            p.index,
            super::html::ids(&p.replicas),
            p.leader,
            p.index
        );
        for c in columns {
            match role(p, c.id) {
                None => out.push_str("<td></td>"),
                Some(role) => {
                    let preferred = p.replicas.first() == Some(&c.id);
                    let mark = match role {
                        "leader" => "L",
                        "follower" => "F",
                        "out-of-sync" => "o",
                        "adding" => "+",
                        "removing" => "−",
                        _ => "×",
                    };
                    let _ = write!(
                        out,
                        "<td class=\"cell {role}{}\" data-broker=\"{}\" data-role=\"{role}\"{} title=\"{role}{}\">{mark}{}</td>",
                        if preferred { " preferred" } else { "" },
                        c.id,
                        if preferred { " data-preferred=\"true\"" } else { "" },
                        if preferred { ", preferred leader" } else { "" },
                        if preferred { "★" } else { "" },
                    );
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody><tfoot>");
    let leaders: Vec<usize> = columns
        .iter()
        .map(|c| all.iter().filter(|p| p.leader == c.id).count())
        .collect();
    let replicas: Vec<usize> = columns
        .iter()
        .map(|c| all.iter().filter(|p| p.replicas.contains(&c.id)).count())
        .collect();
    for (name, counts) in [("leaders", &leaders), ("replicas", &replicas)] {
        let max = counts.iter().copied().max().unwrap_or(0).max(1);
        let _ = write!(out, "<tr class=\"bars {name}\"><th>{name}</th>");
        for (c, &n) in columns.iter().zip(counts.iter()) {
            let _ = write!(
                out,
                "<td data-broker=\"{}\" data-count=\"{n}\"><div class=\"bar\" style=\"height:{}px\"></div>{n}</td>",
                c.id,
                (n * 40).div_ceil(max)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tfoot></table></div>");
    let spread =
        |counts: &[usize]| counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0);
    let _ = write!(
        out,
        "<p class=\"spread\">Spread (max − min per broker): leaders <strong id=\"leader-spread\">{}</strong>, replicas <strong id=\"replica-spread\">{}</strong>.</p>",
        spread(&leaders),
        spread(&replicas)
    );
    out
}

/// The legend under a matrix.
pub(crate) const LEGEND: &str = "<p class=\"legend\"><span class=\"cell leader\">L</span> current leader \
<span class=\"cell follower\">F</span> in-sync follower <span class=\"cell out-of-sync\">o</span> out-of-sync follower \
<span class=\"cell adding\">+</span> being added <span class=\"cell removing\">−</span> being removed (reassignment) \
<span class=\"cell offline\">×</span> offline replica ★ preferred leader (first replica)</p>";

#[cfg(test)]
mod tests {
    use super::*;

    fn p(index: i32, leader: i32, replicas: &[i32], isr: &[i32]) -> Partition {
        Partition {
            index,
            leader,
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            offline: Vec::new(),
            error_code: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    #[test]
    fn a_reassignment_marks_adding_and_removing_replicas_but_not_the_leader() {
        let mut moving = p(0, 2, &[2, 1, 3], &[2, 1]);
        moving.adding = vec![3];
        moving.removing = vec![1, 2];
        assert_eq!(role(&moving, 2), Some("leader"));
        assert_eq!(role(&moving, 1), Some("removing"));
        assert_eq!(role(&moving, 3), Some("adding"));
        assert_eq!(role(&moving, 4), None);
    }

    #[test]
    fn cells_mark_roles_and_columns_group_by_rack() {
        let brokers = vec![
            Broker {
                id: 1,
                host: "h".into(),
                port: 1,
                rack: Some("b".into()),
            },
            Broker {
                id: 2,
                host: "h".into(),
                port: 2,
                rack: Some("a".into()),
            },
            Broker {
                id: 3,
                host: "h".into(),
                port: 3,
                rack: Some("a".into()),
            },
        ];
        let parts = vec![p(0, 2, &[1, 2], &[2]), p(1, 3, &[3, 4], &[3, 4])];
        let cols = columns(&brokers, &parts);
        assert_eq!(
            cols.iter().map(|c| c.id).collect::<Vec<_>>(),
            [4, 2, 3, 1],
            "no rack first, then a, b"
        );
        assert!(!cols[0].live);
        assert_eq!(role(&parts[0], 1), Some("out-of-sync"));
        assert_eq!(role(&parts[0], 2), Some("leader"));
        assert_eq!(role(&parts[0], 3), None);
        assert_eq!(role(&parts[1], 4), Some("follower"));
        let html = render(&cols, &parts, &parts);
        assert!(html.contains("<td class=\"cell out-of-sync preferred\" data-broker=\"1\" data-role=\"out-of-sync\" data-preferred=\"true\""), "{html}");
        assert!(
            html.contains("<th class=\"rack\" colspan=\"2\">rack a</th>"),
            "{html}"
        );
        assert!(html.contains("id=\"leader-spread\">1<"), "{html}");
        assert!(html.contains("id=\"replica-spread\">0<"), "{html}");
    }
}
