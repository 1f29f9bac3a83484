//! The metadata store's log replay: a store file whose log holds up to 12 records, each
//! either raw bytes or a log entry as the writer encodes it (paths valid and invalid, node
//! stats with extreme values, deletions, zxids of any sign, a byte changed), and maybe a
//! checkpoint zxid, is opened. The check is `metastore::fuzzing::check_replay`, as in
//! `metastore::durable::replay_fuzz`.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use metastore::fuzzing::{check_replay, record, Change, Entry};

fn zxid(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => i64::MIN,
        1 => -1,
        2 => i64::MAX,
        3 => u.int_in_range(0i64..=99)?,
        _ => u.arbitrary()?,
    })
}

fn entry(u: &mut Unstructured<'_>) -> Result<Entry> {
    let zxid = zxid(u)?;
    let mut changes: Vec<Change> = Vec::new();
    for _ in 0..u.int_in_range(0usize..=7)? {
        let path = u.int_in_range(0u8..=9)?;
        let node = if u.arbitrary()? {
            let data = if u.ratio(7u8, 8)? {
                let len = u.int_in_range(0usize..=63)?;
                u.bytes(len.min(u.len()))?.to_vec()
            } else {
                vec![7u8; u.int_in_range(0usize..=200_000)?]
            };
            let mut longs: [i64; 6] = u.arbitrary()?;
            for l in &mut longs {
                if u.ratio(1u8, 4)? {
                    *l = zxid;
                }
            }
            let ints: [i32; 2] = if u.arbitrary()? {
                [0, 0]
            } else {
                u.arbitrary()?
            };
            Some((data, longs, ints))
        } else {
            None
        };
        changes.push((path, node));
    }
    let byte_change = if u.arbitrary()? {
        Some((u.arbitrary()?, u.arbitrary()?))
    } else {
        None
    };
    Ok((zxid, changes, byte_change))
}

fn input(u: &mut Unstructured<'_>) -> Result<(Vec<Vec<u8>>, Option<u64>)> {
    let mut records = Vec::new();
    for _ in 0..u.int_in_range(0usize..=12)? {
        if u.ratio(1u8, 4)? {
            let len = u.int_in_range(0usize..=200)?;
            records.push(u.bytes(len.min(u.len()))?.to_vec());
        } else {
            records.push(record(&entry(u)?));
        }
    }
    let meta_zxid = if u.arbitrary()? {
        Some(u.arbitrary()?)
    } else {
        None
    };
    Ok((records, meta_zxid))
}

fuzz_target!(|data: &[u8]| {
    let Ok((records, meta_zxid)) = input(&mut Unstructured::new(data)) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    if let Err(err) = check_replay(dir.path(), &records, meta_zxid) {
        panic!("{err}\nrecords: {records:?}\ncheckpoint zxid: {meta_zxid:?}");
    }
});
