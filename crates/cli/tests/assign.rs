//! `gregor assign` end to end: the built binary reproduces SPEC section 3's worked examples,
//! places rack-aware, and refuses bad input with one `Error:` line.

use std::process::{Command, Output};

fn gregor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gregor"))
        .arg("assign")
        .args(args)
        .output()
        .expect("run gregor")
}

fn ok(args: &[&str]) -> String {
    let out = gregor(args);
    assert!(
        out.status.success(),
        "gregor assign {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn err(args: &[&str]) -> String {
    let out = gregor(args);
    assert!(!out.status.success(), "gregor assign {args:?} should fail");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.lines().count(),
        1,
        "one error line expected: {stderr}"
    );
    assert!(stderr.starts_with("Error: "), "{stderr}");
    stderr.trim_end().to_owned()
}

const FIXED: [&str; 6] = [
    "--strategy",
    "kafka",
    "--start-index",
    "0",
    "--replica-shift",
    "0",
];

fn kafka(brokers: &str, partitions: &str, rf: &str) -> String {
    let mut args = vec![
        "--brokers",
        brokers,
        "--partitions",
        partitions,
        "--replication-factor",
        rf,
    ];
    args.extend(FIXED);
    ok(&args)
}

#[test]
fn spec_worked_example_ten_partitions() {
    assert_eq!(
        kafka("0,1,2,3,4", "10", "3"),
        r#"{"version":1,"partitions":{"0":[0,1,2],"1":[1,2,3],"2":[2,3,4],"3":[3,4,0],"4":[4,0,1],"5":[0,2,3],"6":[1,3,4],"7":[2,4,0],"8":[3,0,1],"9":[4,1,2]}}"#
            .to_owned()
            + "\n"
    );
}

#[test]
fn spec_worked_example_twelve_partitions() {
    let out = kafka("0,1,2,3,4", "12", "3");
    assert!(
        out.trim_end()
            .ends_with(r#""9":[4,1,2],"10":[0,3,4],"11":[1,4,0]}}"#),
        "{out}"
    );
}

#[test]
fn spec_worked_example_rf4_extends_each_list() {
    let out = kafka("0,1,2,3,4", "12", "4");
    assert!(
        out.starts_with(r#"{"version":1,"partitions":{"0":[0,1,2,3],"1":[1,2,3,4],"#),
        "{out}"
    );
    assert!(out.contains(r#""5":[0,2,3,4]"#), "{out}");
}

#[test]
fn list_order_matters() {
    let out = kafka("1,2,0,4,3", "2", "3");
    assert_eq!(
        out.trim_end(),
        r#"{"version":1,"partitions":{"0":[1,2,0],"1":[2,0,4]}}"#
    );
}

#[test]
fn rack_aware_example() {
    // Kafka's AdminRackAwareTest: six brokers in three racks.
    let mut args = vec![
        "--brokers",
        "0,1,2,3,4,5",
        "--racks",
        "0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1",
        "--partitions",
        "7",
        "--replication-factor",
        "3",
    ];
    args.extend(FIXED);
    assert_eq!(
        ok(&args).trim_end(),
        r#"{"version":1,"partitions":{"0":[0,3,1],"1":[3,1,5],"2":[1,5,4],"3":[5,4,2],"4":[4,2,0],"5":[2,0,3],"6":[0,4,2]}}"#
    );
}

#[test]
fn start_index_alone_implies_kafka_and_the_same_shift() {
    let a = ok(&[
        "--brokers",
        "0,1,2,3,4",
        "--partitions",
        "5",
        "--replication-factor",
        "2",
        "--start-index",
        "2",
    ]);
    let b = ok(&[
        "--brokers",
        "0,1,2,3,4",
        "--partitions",
        "5",
        "--replication-factor",
        "2",
        "--strategy",
        "kafka",
        "--start-index",
        "2",
        "--replica-shift",
        "2",
    ]);
    assert_eq!(a, b);
}

#[test]
fn balanced_is_deterministic_and_ignores_list_order() {
    let a = ok(&[
        "--brokers",
        "0,1,2,3,4",
        "--partitions",
        "7",
        "--replication-factor",
        "3",
    ]);
    let b = ok(&[
        "--brokers",
        "4,3,2,1,0",
        "--partitions",
        "7",
        "--replication-factor",
        "3",
        "--strategy",
        "balanced",
    ]);
    assert_eq!(a, b);
}

#[test]
fn table_output() {
    let mut args = vec![
        "--brokers",
        "0,1,2",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
        "--output",
        "table",
    ];
    args.extend(FIXED);
    assert_eq!(
        ok(&args),
        "broker 0 1 2  leaders  replicas\n     0 L   F        1         2\n     1 F L          1         2\n     2   F L        1         2\n"
    );
}

#[test]
fn bad_inputs_fail_with_one_line() {
    let base = [
        "--brokers",
        "0,1,2",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
    ];
    let with = |extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(extra);
        err(&args)
    };
    assert_eq!(
        err(&[
            "--brokers",
            "0,1,2",
            "--partitions",
            "3",
            "--replication-factor",
            "4"
        ]),
        "Error: Replication factor: 4 larger than available brokers: 3."
    );
    assert_eq!(
        err(&[
            "--brokers",
            "0,1,2",
            "--partitions",
            "0",
            "--replication-factor",
            "1"
        ]),
        "Error: Number of partitions must be larger than 0, got 0."
    );
    assert!(err(&[
        "--brokers",
        "0,x",
        "--partitions",
        "1",
        "--replication-factor",
        "1"
    ])
    .contains("'x' is not a number"));
    assert!(err(&[
        "--brokers",
        "0,1",
        "--partitions",
        "-1",
        "--replication-factor",
        "1"
    ])
    .contains("larger than 0"));
    assert!(err(&[
        "--brokers",
        "0,1",
        "--partitions",
        "ten",
        "--replication-factor",
        "1"
    ])
    .contains("--partitions 'ten'"));
    assert!(with(&["--racks", "0:a,1:b"]).contains("Not all brokers have rack information"));
    assert!(with(&["--strategy", "random"]).contains("unknown assignment strategy 'random'"));
    assert!(with(&["--strategy", "balanced", "--start-index", "1"])
        .contains("only applies to the 'kafka' strategy"));
    assert!(with(&["--output", "xml"]).contains("unknown --output 'xml'"));
    // Ignoring racks makes the partial rack list acceptable.
    let out = gregor(&[
        "--brokers",
        "0,1,2",
        "--racks",
        "0:a",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
        "--ignore-racks",
    ]);
    assert!(out.status.success());
}
