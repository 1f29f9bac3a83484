//! The decoder never panics or aborts on arbitrary bytes, including bytes that start like a
//! real request header of a supported API.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use protocol::{decode_request, SUPPORTED_APIS};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_request(Bytes::from(bytes));
    }

    #[test]
    fn supported_header_then_arbitrary_body(
        row in 0..SUPPORTED_APIS.len(),
        version_offset in 0i16..4,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let api = SUPPORTED_APIS[row];
        let version = (api.min_version + version_offset).min(api.max_version);
        let mut frame = BytesMut::new();
        frame.put_i16(api.api_key as i16);
        frame.put_i16(version);
        frame.put_i32(1);
        frame.put_i16(-1);
        frame.extend_from_slice(&body);
        let _ = decode_request(frame.freeze());
    }
}
