//! `gregor dump-log`: Kafka's `kafka-dump-log.sh` (DumpLogSegments) over a broker's files:
//! `.log` segments (batches, and with `--deep-iteration` / `--print-data-log` their records),
//! `.index` and `.timeindex` (entries, or `--index-sanity-check`), with `--offsets-decoder`
//! printing `__consumer_offsets` keys and values as Kafka's JSON.
//!
//! Reads files only; no broker needed. Output lines follow DumpLogSegments' shapes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use group_coordinator::log_records::{self, GroupMetadataSnapshot, LogRecord, OffsetValue};
use records::{BatchHeader, Compression, TimestampType};

/// Kafka's `RecordBatch.DELETE_HORIZON` attribute bit (KIP-534).
const DELETE_HORIZON_BIT: i16 = 0x40;

/// The flags of `kafka-dump-log.sh` that Gregor implements.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Print the batches, records and index entries of a broker's log files (kafka-dump-log.sh)."
)]
pub struct DumpLogArgs {
    /// REQUIRED: The comma separated list of data and index log files to be dumped.
    #[arg(long, value_name = "file1, file2, ...", value_delimiter = ',')]
    pub files: Vec<PathBuf>,
    /// If set, printing the messages content when dumping data logs. Automatically set if
    /// any decoder option is specified.
    #[arg(long)]
    pub print_data_log: bool,
    /// If set, uses deep instead of shallow iteration. Automatically set if print-data-log
    /// is enabled.
    #[arg(long)]
    pub deep_iteration: bool,
    /// If set, log data will be parsed as offset data from the __consumer_offsets topic.
    #[arg(long)]
    pub offsets_decoder: bool,
    /// If set, just checks the index sanity without printing its content.
    #[arg(long)]
    pub index_sanity_check: bool,
    /// If set, just verify the index log without printing its content.
    #[arg(long)]
    pub verify_index_only: bool,
    /// Whether to skip printing metadata for each record.
    #[arg(long)]
    pub skip_record_metadata: bool,
    /// Limit the amount of total batches read in bytes avoiding reading the whole .log
    /// file(s).
    #[arg(long, default_value_t = i32::MAX)]
    pub max_bytes: i32,
}

/// Runs the command; returns the process exit code.
pub fn run(args: DumpLogArgs) -> anyhow::Result<ExitCode> {
    if args.files.is_empty() {
        eprintln!("Missing required argument \"[files]\"");
        return Ok(ExitCode::from(1));
    }
    let print_data = args.print_data_log || args.offsets_decoder;
    let options = Options {
        print_data,
        deep: args.deep_iteration || print_data,
        offsets_decoder: args.offsets_decoder,
        skip_record_metadata: args.skip_record_metadata,
        max_bytes: usize::try_from(args.max_bytes.max(0)).unwrap_or(usize::MAX),
    };
    let mut problems = Problems::default();
    let mut failed = false;
    for file in &args.files {
        println!("Dumping {}", file.display());
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let result = match name.rsplit_once('.').map(|(_, suffix)| suffix) {
            Some("log") => dump_log(file, &options, &mut problems).map(|text| print!("{text}")),
            Some("index") => dump_index(
                file,
                args.index_sanity_check,
                args.verify_index_only,
                &mut problems,
            )
            .map(|text| print!("{text}")),
            Some("timeindex") => dump_time_index(
                file,
                args.index_sanity_check,
                args.verify_index_only,
                &mut problems,
            )
            .map(|text| print!("{text}")),
            _ => {
                eprintln!("Ignoring unknown file {}", file.display());
                Ok(())
            }
        };
        if let Err(err) = result {
            eprintln!("Error: {err:#}");
            failed = true;
        }
    }
    eprint!("{}", problems.report());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Debug, Clone, Copy)]
struct Options {
    print_data: bool,
    deep: bool,
    offsets_decoder: bool,
    skip_record_metadata: bool,
    max_bytes: usize,
}

/// What DumpLogSegments reports on stderr after all files.
#[derive(Debug, Default)]
struct Problems {
    /// index file -> (index offset, the offsets of the batch found at its position).
    index_mismatches: BTreeMap<String, Vec<(i64, i64)>>,
    /// log file -> (offset, the next offset found).
    non_consecutive: BTreeMap<String, Vec<(i64, i64)>>,
    /// time index file -> (indexed timestamp, the batch's max timestamp).
    time_mismatches: BTreeMap<String, Vec<(i64, i64)>>,
}

impl Problems {
    fn report(&self) -> String {
        let mut out = String::new();
        for (file, list) in &self.index_mismatches {
            let _ = writeln!(out, "Mismatches in :{file}");
            for (index_offset, log_offset) in list {
                let _ = writeln!(
                    out,
                    "  Index offset: {index_offset}, log offset: {log_offset}"
                );
            }
        }
        for (file, list) in &self.time_mismatches {
            let _ = writeln!(out, "Found timestamp mismatch in :{file}");
            for (indexed, actual) in list {
                let _ = writeln!(out, "  Index timestamp: {indexed}, log timestamp: {actual}");
            }
        }
        for (file, list) in &self.non_consecutive {
            let _ = writeln!(out, "Non-consecutive offsets in {file}");
            for (first, second) in list {
                let _ = writeln!(out, "  {first} is followed by {second}");
            }
        }
        out
    }
}

/// The base offset a segment file's name carries (`00000000000000000042.log` -> 42).
fn base_offset_of(file: &Path) -> anyhow::Result<i64> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("");
    stem.parse::<i64>().map_err(|_| {
        anyhow::anyhow!("{name} is not named after its base offset (NNNNNNNNNNNNNNNNNNNN.log)")
    })
}

fn sibling(file: &Path, suffix: &str) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("");
    file.with_file_name(format!("{stem}.{suffix}"))
}

fn read(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))
}

fn codec_name(header: &BatchHeader) -> &'static str {
    match header.compression() {
        Some(Compression::None) => "none",
        Some(Compression::Gzip) => "gzip",
        Some(Compression::Snappy) => "snappy",
        Some(Compression::Lz4) => "lz4",
        Some(Compression::Zstd) => "zstd",
        None => "unknown",
    }
}

fn timestamp_type_name(header: &BatchHeader) -> &'static str {
    match header.timestamp_type() {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// One batch of a segment: position, header, whole batch bytes, CRC valid.
type FoundBatch<'a> = (usize, BatchHeader, &'a [u8], bool);

/// The batches of a segment, and the bytes they cover.
fn batches(bytes: &[u8]) -> (Vec<FoundBatch<'_>>, usize) {
    let mut out = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let Ok(header) = records::read_batch_header_at(bytes, position) else {
            break;
        };
        let size = header.size_in_bytes();
        let valid = records::validate_batch_at(bytes, position).is_ok();
        out.push((position, header, &bytes[position..position + size], valid));
        position += size;
    }
    (out, position)
}

/// DumpLogSegments' `dumpLog`.
fn dump_log(file: &Path, options: &Options, problems: &mut Problems) -> anyhow::Result<String> {
    let start = base_offset_of(file)?;
    let bytes = read(file)?;
    let mut out = format!("Log starting offset: {start}\n");
    let limit = bytes.len().min(options.max_bytes);
    let (found, valid_bytes) = batches(&bytes[..limit]);
    let mut last_offset = -1i64;
    for (position, header, batch, valid) in found {
        let delete_horizon = if header.attributes & DELETE_HORIZON_BIT != 0 {
            format!("OptionalLong[{}]", header.base_timestamp)
        } else {
            "OptionalLong.empty".to_owned()
        };
        let _ = writeln!(
            out,
            "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {delete_horizon} position: {position} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {valid}",
            header.base_offset,
            header.last_offset(),
            header.records_count,
            header.base_sequence,
            header.last_sequence(),
            header.producer_id,
            header.producer_epoch,
            header.partition_leader_epoch,
            header.is_transactional(),
            header.is_control(),
            timestamp_type_name(&header),
            header.max_timestamp,
            header.size_in_bytes(),
            header.magic,
            codec_name(&header),
            header.crc,
        );
        if !options.deep {
            continue;
        }
        let section = records::records_section(batch)
            .map_err(|e| anyhow::anyhow!("cannot read the batch at position {position}: {e}"))?;
        let list = records::record::records(&section, header.records_count).map_err(|e| {
            anyhow::anyhow!("cannot read the records of the batch at position {position}: {e}")
        })?;
        for record in list {
            let offset = header.base_offset + i64::from(record.offset_delta);
            if last_offset != -1 && offset != last_offset + 1 {
                problems
                    .non_consecutive
                    .entry(absolute(file))
                    .or_default()
                    .push((last_offset, offset));
            }
            last_offset = offset;
            let mut line = String::from("| ");
            let mut prefix = "";
            if !options.skip_record_metadata {
                let timestamp = match header.timestamp_type() {
                    TimestampType::LogAppendTime => header.max_timestamp,
                    TimestampType::CreateTime => {
                        header.base_timestamp.wrapping_add(record.timestamp_delta)
                    }
                };
                let sequence = if header.base_sequence < 0 {
                    -1
                } else {
                    header.base_sequence.wrapping_add(record.offset_delta)
                };
                let header_keys: Vec<String> = record
                    .headers()
                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                    .collect();
                let _ = write!(
                    line,
                    "offset: {offset} {}: {timestamp} keySize: {} valueSize: {} sequence: {sequence} headerKeys: [{}]",
                    timestamp_type_name(&header),
                    record.key_length,
                    record.value_length,
                    header_keys.join(",")
                );
                prefix = " ";
                if header.is_control() {
                    line.push_str(&control_text(record.key, record.value));
                }
            }
            if options.print_data && !header.is_control() {
                let (key, payload) = if options.offsets_decoder {
                    offsets_text(offset, record.key, record.value)?
                } else if record.value.is_none() {
                    (None, None)
                } else {
                    (
                        record.key.map(|k| String::from_utf8_lossy(k).into_owned()),
                        record
                            .value
                            .map(|v| String::from_utf8_lossy(v).into_owned()),
                    )
                };
                if let Some(key) = key {
                    let _ = write!(line, "{prefix}key: {key}");
                }
                if let Some(payload) = payload {
                    let _ = write!(line, " payload: {payload}");
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    let trailing = bytes.len().saturating_sub(valid_bytes);
    if trailing > 0 && options.max_bytes >= bytes.len() {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(out, "Found {trailing} invalid bytes at the end of {name}");
    }
    Ok(out)
}

fn absolute(file: &Path) -> String {
    std::path::absolute(file)
        .unwrap_or_else(|_| file.to_owned())
        .display()
        .to_string()
}

/// A control record: Kafka's end transaction marker (key: version, type; value: version,
/// coordinator epoch).
fn control_text(key: Option<&[u8]>, value: Option<&[u8]>) -> String {
    let type_id = key
        .filter(|k| k.len() >= 4)
        .map_or(-1, |k| i16::from_be_bytes([k[2], k[3]]));
    match type_id {
        0 | 1 => {
            let epoch = value
                .filter(|v| v.len() >= 6)
                .map_or(-1, |v| i32::from_be_bytes([v[2], v[3], v[4], v[5]]));
            let kind = if type_id == 0 { "ABORT" } else { "COMMIT" };
            format!(" endTxnMarker: {kind} coordinatorEpoch: {epoch}")
        }
        other => format!(" controlType: UNKNOWN({other})"),
    }
}

fn version_of(bytes: &[u8]) -> i16 {
    if bytes.len() >= 2 {
        i16::from_be_bytes([bytes[0], bytes[1]])
    } else {
        -1
    }
}

/// The `--offsets-decoder` key and payload of one `__consumer_offsets` record: Kafka's
/// `{"type":"<key version>","data":{...}}` and `{"version":"<value version>","data":{...}}`,
/// `<DELETE>` for a tombstone.
fn offsets_text(
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> anyhow::Result<(Option<String>, Option<String>)> {
    let Some(key) = key else {
        anyhow::bail!("Failed to decode message at offset {offset} using offset topic decoder (message had a missing key)");
    };
    let key_version = version_of(key);
    let value_version = value.map(version_of);
    let decoded = log_records::decode(key, value).map_err(|e| {
        anyhow::anyhow!(
            "Failed to decode message at offset {offset} using offset topic decoder: {e}"
        )
    })?;
    let (key_json, value_json) = match decoded {
        LogRecord::Offset {
            group,
            topic,
            partition,
            value,
        } => (
            obj(vec![
                ("group", j(&group)),
                ("topic", j(&topic)),
                ("partition", j(&partition)),
            ]),
            value.map(|v| offset_value_json(&v, value_version.unwrap_or(-1))),
        ),
        LogRecord::Group { group, value } => (
            obj(vec![("group", j(&group))]),
            value.map(|v| group_value_json(&v, value_version.unwrap_or(-1))),
        ),
        LogRecord::Unsupported { key_version } => (
            obj(vec![("unknownKeyVersion", j(&key_version))]),
            value.map(|v| obj(vec![("unknownValueBytes", j(&v.len()))])),
        ),
    };
    let key_text = obj(vec![
        ("type", j(&key_version.to_string())),
        ("data", key_json),
    ]);
    let payload = match value_json {
        Some(data) => obj(vec![
            ("version", j(&value_version.unwrap_or(-1).to_string())),
            ("data", data),
        ]),
        None => "<DELETE>".to_owned(),
    };
    Ok((Some(key_text), Some(payload)))
}

/// A JSON value's text.
fn j<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// A JSON object with its fields in the given order (Kafka's JSON converters write fields
/// in schema order; serde_json's map would sort them).
fn obj(fields: Vec<(&str, String)>) -> String {
    let body: Vec<String> = fields
        .into_iter()
        .map(|(name, value)| format!("{}:{value}", j(name)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// `OffsetCommitValue` as Kafka's JSON converter writes it: the fields of `version` only.
fn offset_value_json(value: &OffsetValue, version: i16) -> String {
    let mut fields = vec![("offset", j(&value.offset))];
    if version >= 3 {
        fields.push(("leaderEpoch", j(&value.leader_epoch)));
    }
    fields.push(("metadata", j(&value.metadata)));
    fields.push(("commitTimestamp", j(&value.commit_timestamp_ms)));
    if version == 1 {
        fields.push((
            "expireTimestamp",
            j(&value.expire_timestamp_ms.unwrap_or(-1)),
        ));
    }
    obj(fields)
}

/// `GroupMetadataValue` as DumpLogSegments prints it: a consumer group's subscriptions and
/// assignments decoded.
fn group_value_json(value: &GroupMetadataSnapshot, version: i16) -> String {
    let consumer = value.protocol_type == "consumer";
    let members: Vec<String> = value
        .members
        .iter()
        .map(|m| {
            let mut member = vec![("memberId", j(&m.member_id))];
            if version >= 3 {
                member.push(("groupInstanceId", j(&m.group_instance_id)));
            }
            member.push(("clientId", j(&m.client_id)));
            member.push(("clientHost", j(&m.client_host)));
            if version >= 1 {
                member.push(("rebalanceTimeout", j(&m.rebalance_timeout_ms)));
            }
            member.push(("sessionTimeout", j(&m.session_timeout_ms)));
            let subscription = consumer
                .then(|| group_coordinator::consumer_protocol::subscribed_topics(&m.subscription))
                .flatten();
            member.push((
                "subscription",
                match subscription {
                    Some(topics) => obj(vec![("topics", j(&topics))]),
                    None => j(&base64(&m.subscription)),
                },
            ));
            let assignment = consumer
                .then(|| group_coordinator::consumer_protocol::assigned_partitions(&m.assignment))
                .flatten();
            member.push((
                "assignment",
                match assignment {
                    Some(assigned) => {
                        let partitions: Vec<String> = assigned
                            .iter()
                            .map(|(t, ps)| obj(vec![("topic", j(t)), ("partitions", j(ps))]))
                            .collect();
                        obj(vec![(
                            "assignedPartitions",
                            format!("[{}]", partitions.join(",")),
                        )])
                    }
                    None => j(&base64(&m.assignment)),
                },
            ));
            obj(member)
        })
        .collect();
    let mut fields = vec![
        ("protocolType", j(&value.protocol_type)),
        ("generation", j(&value.generation)),
        ("protocol", j(&value.protocol)),
        ("leader", j(&value.leader)),
    ];
    if version >= 2 {
        fields.push((
            "currentStateTimestamp",
            j(&value.current_state_timestamp_ms),
        ));
    }
    fields.push(("members", format!("[{}]", members.join(","))));
    obj(fields)
}

/// Bytes as Jackson writes a `byte[]` field: base64.
fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// (relative offset, position) entries of an offset index.
fn offset_entries(bytes: &[u8]) -> Vec<(u32, u32)> {
    bytes
        .chunks_exact(8)
        .map(|e| {
            (
                u32::from_be_bytes([e[0], e[1], e[2], e[3]]),
                u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect()
}

/// DumpLogSegments' `dumpIndex`: `offset: N position: P` per entry; each entry must point
/// at a batch that holds its offset (Gregor indexes a batch's base offset, Kafka its last).
fn dump_index(
    file: &Path,
    sanity_only: bool,
    verify_only: bool,
    problems: &mut Problems,
) -> anyhow::Result<String> {
    let base = base_offset_of(file)?;
    let bytes = read(file)?;
    let entries = offset_entries(&bytes);
    let mut out = String::new();
    if entries.is_empty() {
        let _ = writeln!(out, "{} is empty.", file.display());
        return Ok(out);
    }
    if sanity_only {
        sanity_check_offsets(file, base, &bytes, &entries)?;
        let _ = writeln!(out, "{} passed sanity check.", file.display());
        return Ok(out);
    }
    let log = read(&sibling(file, "log")).unwrap_or_default();
    for (i, &(relative, position)) in entries.iter().enumerate() {
        if relative == 0 && i > 0 {
            break;
        }
        let offset = base + i64::from(relative);
        match records::read_batch_header_at(&log, position as usize) {
            Ok(header) if header.base_offset <= offset && offset <= header.last_offset() => {}
            Ok(header) => problems
                .index_mismatches
                .entry(absolute(file))
                .or_default()
                .push((offset, header.base_offset)),
            Err(_) => problems
                .index_mismatches
                .entry(absolute(file))
                .or_default()
                .push((offset, -1)),
        }
        if !verify_only {
            let _ = writeln!(out, "offset: {offset} position: {position}");
        }
    }
    Ok(out)
}

/// Kafka's `OffsetIndex.sanityCheck`: whole entries, offsets and positions increasing.
fn sanity_check_offsets(
    file: &Path,
    base: i64,
    bytes: &[u8],
    entries: &[(u32, u32)],
) -> anyhow::Result<()> {
    if !bytes.len().is_multiple_of(8) {
        anyhow::bail!(
            "Index file {} is corrupt, found {} bytes which is neither positive nor a multiple of 8.",
            file.display(),
            bytes.len()
        );
    }
    for pair in entries.windows(2) {
        if pair[1].0 <= pair[0].0 || pair[1].1 <= pair[0].1 {
            anyhow::bail!(
                "Corrupt index found, index file ({}) has non-increasing entries: offset {} at position {} follows offset {} at position {}.",
                file.display(),
                base + i64::from(pair[1].0),
                pair[1].1,
                base + i64::from(pair[0].0),
                pair[0].1
            );
        }
    }
    Ok(())
}

/// DumpLogSegments' `dumpTimeIndex`: `timestamp: T offset: N` per entry.
fn dump_time_index(
    file: &Path,
    sanity_only: bool,
    verify_only: bool,
    problems: &mut Problems,
) -> anyhow::Result<String> {
    let base = base_offset_of(file)?;
    let bytes = read(file)?;
    let entries: Vec<(i64, u32)> = bytes
        .chunks_exact(12)
        .map(|e| {
            (
                i64::from_be_bytes(e[0..8].try_into().expect("8 bytes")),
                u32::from_be_bytes(e[8..12].try_into().expect("4 bytes")),
            )
        })
        .collect();
    let mut out = String::new();
    if sanity_only {
        if !bytes.len().is_multiple_of(12) {
            anyhow::bail!(
                "Time index file {} is corrupt, found {} bytes which is neither positive nor a multiple of 12.",
                file.display(),
                bytes.len()
            );
        }
        for pair in entries.windows(2) {
            if pair[1].0 <= pair[0].0 {
                anyhow::bail!(
                    "Corrupt time index found, time index file ({}) has non-increasing timestamps: {} follows {}.",
                    file.display(),
                    pair[1].0,
                    pair[0].0
                );
            }
        }
        let _ = writeln!(out, "{} passed sanity check.", file.display());
        return Ok(out);
    }
    let log = read(&sibling(file, "log")).unwrap_or_default();
    let (found, _) = batches(&log);
    let mut previous = -1i64;
    for (i, &(timestamp, relative)) in entries.iter().enumerate() {
        if relative == 0 && i > 0 {
            break;
        }
        let offset = base + i64::from(relative);
        if let Some((_, header, _, _)) = found
            .iter()
            .find(|(_, h, _, _)| h.base_offset <= offset && offset <= h.last_offset())
        {
            if header.max_timestamp < timestamp {
                problems
                    .time_mismatches
                    .entry(absolute(file))
                    .or_default()
                    .push((timestamp, header.max_timestamp));
            }
        }
        if previous >= timestamp {
            problems
                .time_mismatches
                .entry(absolute(file))
                .or_default()
                .push((timestamp, previous));
        }
        if !verify_only {
            let _ = writeln!(out, "timestamp: {timestamp} offset: {offset}");
        }
        previous = timestamp;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use records::builder::{BatchBuilder, BatchSpec, NewRecord};

    fn batch(base: i64, values: &[(&str, &str)]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(BatchSpec::new(base));
        for (i, (k, v)) in values.iter().enumerate() {
            builder.push(&NewRecord {
                offset: base + i as i64,
                timestamp: 1_700_000_000_000 + i as i64,
                key: Some(k.as_bytes()),
                value: Some(v.as_bytes()),
                headers: &[(b"h", Some(b"x"))],
            });
        }
        builder.build()
    }

    #[test]
    fn a_segment_prints_kafkas_batch_and_record_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let mut bytes = batch(0, &[("k0", "hello"), ("k1", "world")]);
        bytes.extend(batch(2, &[("k2", "again")]));
        bytes.extend([1, 2, 3]);
        std::fs::write(&path, &bytes).unwrap();
        let options = Options {
            print_data: true,
            deep: true,
            offsets_decoder: false,
            skip_record_metadata: false,
            max_bytes: usize::MAX,
        };
        let text = dump_log(&path, &options, &mut Problems::default()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Log starting offset: 0");
        assert!(lines[1].starts_with("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000001 size: "), "{}", lines[1]);
        assert!(
            lines[1].contains(" magic: 2 compresscodec: none crc: "),
            "{}",
            lines[1]
        );
        assert!(lines[1].ends_with(" isvalid: true"), "{}", lines[1]);
        assert_eq!(
            lines[2],
            "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h] key: k0 payload: hello"
        );
        assert!(lines[4].starts_with("baseOffset: 2 lastOffset: 2 count: 1"));
        assert_eq!(
            lines[6],
            "Found 3 invalid bytes at the end of 00000000000000000000.log"
        );
    }

    #[test]
    fn offsets_records_decode_as_kafkas_json() {
        let key = log_records::offset_key("g", "t", 3);
        let value = log_records::offset_value(&OffsetValue {
            offset: 42,
            leader_epoch: 0,
            metadata: String::new(),
            commit_timestamp_ms: 5,
            expire_timestamp_ms: None,
        });
        let (k, v) = offsets_text(0, Some(&key), Some(&value)).unwrap();
        assert_eq!(
            k.unwrap(),
            r#"{"type":"1","data":{"group":"g","topic":"t","partition":3}}"#
        );
        assert_eq!(
            v.unwrap(),
            r#"{"version":"3","data":{"offset":42,"leaderEpoch":0,"metadata":"","commitTimestamp":5}}"#
        );
        let (_, tombstone) = offsets_text(1, Some(&key), None).unwrap();
        assert_eq!(tombstone.unwrap(), "<DELETE>");
        assert!(offsets_text(2, None, Some(b"x")).is_err());
    }

    #[test]
    fn base64_is_standard() {
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
    }
}
