//! Segment recovery: a log of batches written, closed, its active segment (and maybe its
//! indexes) damaged, opened again; it must recover exactly the batches before the first
//! changed byte. The input is decoded into a `storage::fuzzing::RecoveryCase` (sizes bounded
//! as in the proptest: up to 30 batches of up to 20 records of up to 60 kB); the check is
//! `storage::fuzzing::check_recovery`, as in crates/storage/tests/fuzz_recovery.rs.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use storage::fuzzing::{check_recovery, Damage, RecoveryCase};

fn damage(u: &mut Unstructured<'_>) -> Result<Damage> {
    Ok(match u.int_in_range(0u8..=6)? {
        0 | 1 => {
            let n = if u.arbitrary()? {
                u.int_in_range(1usize..=99)?
            } else {
                u.int_in_range(100usize..=70_000)?
            };
            if u.arbitrary()? {
                Damage::Append(vec![0; n])
            } else {
                let b: u8 = u.arbitrary()?;
                Damage::Append(
                    (0..n)
                        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(b))
                        .collect(),
                )
            }
        }
        2 | 3 => {
            let at = u.arbitrary()?;
            let len = u.int_in_range(1usize..=63)?;
            Damage::Overwrite(at, u.bytes(len.min(u.len()))?.to_vec())
        }
        4 | 5 => {
            let value = match u.int_in_range(0u8..=5)? {
                0 => -1,
                1 => 0,
                2 => i64::MAX,
                3 => 1 << 33,
                _ => u.arbitrary()?,
            };
            Damage::Header(u.arbitrary()?, u.int_in_range(0u8..=6)?, value)
        }
        _ => Damage::Cut(u.arbitrary()?),
    })
}

fn case(u: &mut Unstructured<'_>) -> Result<RecoveryCase> {
    let batches = u.int_in_range(1usize..=29)?;
    let mut plan = Vec::with_capacity(batches);
    for _ in 0..batches {
        let count = u.int_in_range(1usize..=19)?;
        let size = if u.ratio(3u8, 4)? {
            u.int_in_range(1usize..=199)?
        } else {
            u.int_in_range(200usize..=59_999)?
        };
        plan.push((count, size));
    }
    let segment_bytes = [4_096u64, 100_000, 1 << 30][u.int_in_range(0usize..=2)?];
    let index_interval_bytes = if u.arbitrary()? { 1 } else { 4_096 };
    let mut damages = Vec::new();
    for _ in 0..u.int_in_range(1usize..=3)? {
        damages.push(damage(u)?);
    }
    let index_damage = if u.arbitrary()? {
        let at = u.arbitrary()?;
        let len = u.int_in_range(1usize..=15)?;
        Some((at, u.bytes(len.min(u.len()))?.to_vec()))
    } else {
        None
    };
    Ok(RecoveryCase {
        plan,
        segment_bytes,
        index_interval_bytes,
        damages,
        index_damage,
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(case) = case(&mut Unstructured::new(data)) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    if let Err(err) = check_recovery(dir.path(), &case) {
        panic!("{err}\ncase: {case:?}");
    }
});
