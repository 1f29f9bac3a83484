//! The ZooKeeper-JSON parsers: any bytes parsed as every znode type, then what reads the
//! parsed fields. The check is `znodes::fuzzing::parse_everything`, as in
//! crates/znodes/tests/fuzz_json.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    znodes::fuzzing::parse_everything(bytes);
});
