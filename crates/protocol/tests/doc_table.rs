//! docs/protocol-versions.md shows the version table to people: its first table must list
//! exactly the APIs of `SUPPORTED_APIS` with Gregor's, Kafka 2.8's and Kafka 3.9's ranges as
//! the code has them, and its second table the 3.9 ZooKeeper-mode APIs Gregor does not serve.

use kafka_protocol::messages::ApiKey;
use protocol::api_versions::{ApiVersionRange, KAFKA_2_8_ZK, KAFKA_3_9_ZK, SUPPORTED_APIS};

const DOC: &str = include_str!("../../../docs/protocol-versions.md");

/// "0-9" -> Some((0, 9)); "—" -> None.
fn range(cell: &str) -> Option<(i16, i16)> {
    let (lo, hi) = cell.split_once('-')?;
    Some((lo.trim().parse().ok()?, hi.trim().parse().ok()?))
}

fn of(table: &[ApiVersionRange], key: i16) -> Option<(i16, i16)> {
    table
        .iter()
        .find(|r| r.api_key as i16 == key)
        .map(|r| (r.min_version, r.max_version))
}

/// The rows (cells) of the markdown table under `heading`.
fn table(heading: &str) -> Vec<Vec<String>> {
    let start = DOC
        .find(heading)
        .unwrap_or_else(|| panic!("no '{heading}' section"));
    DOC[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn served_table_matches_the_code() {
    let rows = table("## APIs Gregor serves");
    let keys: Vec<i16> = rows.iter().map(|r| r[1].parse().unwrap()).collect();
    let expected: Vec<i16> = SUPPORTED_APIS.iter().map(|r| r.api_key as i16).collect();
    assert_eq!(
        keys, expected,
        "the doc lists other APIs than SUPPORTED_APIS"
    );
    for row in &rows {
        let key: i16 = row[1].parse().unwrap();
        let api = ApiKey::try_from(key).unwrap();
        assert_eq!(row[0], format!("{api:?}"), "name of key {key}");
        assert_eq!(range(&row[2]), of(KAFKA_2_8_ZK, key), "{api:?}: Kafka 2.8");
        assert_eq!(range(&row[3]), of(KAFKA_3_9_ZK, key), "{api:?}: Kafka 3.9");
        assert_eq!(range(&row[4]), of(SUPPORTED_APIS, key), "{api:?}: Gregor");
    }
}

#[test]
fn unserved_table_lists_the_rest_of_kafka_3_9() {
    let rows = table("## APIs Kafka 3.9 serves in ZooKeeper mode that Gregor does not");
    let keys: Vec<i16> = rows.iter().map(|r| r[1].parse().unwrap()).collect();
    let expected: Vec<i16> = KAFKA_3_9_ZK
        .iter()
        .map(|r| r.api_key as i16)
        .filter(|k| of(SUPPORTED_APIS, *k).is_none())
        .collect();
    assert_eq!(keys, expected);
    for row in &rows {
        let key: i16 = row[1].parse().unwrap();
        assert_eq!(
            range(&row[2]),
            of(KAFKA_2_8_ZK, key),
            "key {key}: Kafka 2.8"
        );
        assert_eq!(
            range(&row[3]),
            of(KAFKA_3_9_ZK, key),
            "key {key}: Kafka 3.9"
        );
    }
}
