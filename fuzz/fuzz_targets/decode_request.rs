//! The request decoder: any frame (size prefix stripped) through `decode_request`, the
//! broker's decode path. The check is `protocol::fuzzing::check_decode`, as in
//! crates/protocol/tests/fuzz_full.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    protocol::fuzzing::check_decode(frame);
});
