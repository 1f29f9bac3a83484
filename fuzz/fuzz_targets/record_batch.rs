//! The record-batch validator: the first 10 bytes choose the topic's policy (compacted,
//! LogAppendTime, timestamp bound, target codec), the rest is the record set
//! (`records::fuzzing::split_input`). The check is `records::fuzzing::check_record_set`, as
//! in crates/records/tests/fuzz_full.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((policy, set)) = records::fuzzing::split_input(data) {
        records::fuzzing::check_record_set(set, &policy);
    }
});
