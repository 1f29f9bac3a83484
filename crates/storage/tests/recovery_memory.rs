//! Issue 14: recovery streams a segment instead of reading it into memory. The parent writes
//! a 128 MiB segment; a child process (this test binary, re-executed) recovers it and reports
//! its peak resident memory (`VmHWM`), which must stay far below the segment's size.

use std::path::Path;
use std::process::Command;

use records::testing::encode_batch;
use storage::log::{Log, LogConfig};

const CHILD_ENV: &str = "GREGOR_RECOVERY_MEMORY_CHILD_DIR";
const SEGMENT_BYTES: usize = 128 << 20;

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
#[ignore = "run by recovering_a_large_segment_costs_a_window_not_the_segment as a child process"]
fn recovery_memory_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let log = Log::open(Path::new(&dir), LogConfig::default(), 0, 0).unwrap();
    println!(
        "RECOVERED {} {} {}",
        log.log_end_offset(),
        log.size_in_bytes(),
        peak_rss_kib()
    );
}

#[test]
fn recovering_a_large_segment_costs_a_window_not_the_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (end, size) = {
        let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
        let value = vec![7u8; 900 * 1024];
        while (log.size_in_bytes() as usize) < SEGMENT_BYTES {
            log.append(
                &mut encode_batch(std::slice::from_ref(&value), 0, None),
                0,
                0,
            )
            .unwrap();
        }
        (log.log_end_offset(), log.size_in_bytes())
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "recovery_memory_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RECOVERED "))
        .unwrap_or_else(|| panic!("no report from the child: {stdout}"));
    let fields: Vec<u64> = line.split(' ').map(|f| f.parse().unwrap()).collect();
    assert_eq!(
        (fields[0] as i64, fields[1]),
        (end, size),
        "recovered all of it"
    );
    let peak_mib = fields[2] / 1024;
    eprintln!(
        "peak RSS recovering a {} MiB segment: {peak_mib} MiB",
        size >> 20
    );
    assert!(
        peak_mib < 48,
        "recovering {} MiB peaked at {peak_mib} MiB of RSS",
        size >> 20
    );
}
