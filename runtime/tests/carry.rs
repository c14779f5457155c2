//! The carry against the stock concatenation, with the shadow auditor.

mod common;

use std::sync::Arc;

use common::data;
use dcc_runtime::Error;
use dcc_runtime::backend::{AllocKind, Backend};
use dcc_runtime::carry::{Carry, CarrySpec, stock_concat};
use dcc_runtime::contract::{CacheOrder, Keep};

const FP: usize = 302;
const FR: usize = 100;
const CHUNK: usize = 50;
const CAP: usize = FP + FR + CHUNK;

/// The paper's rule on `order` storage (`Keep::natural`).
fn paper(order: CacheOrder) -> Keep {
    Keep::natural(order, FP, FR)
}

/// minicpmo-utils 1.0.7 on prepend storage: the append rule (`head = prompt, tail = retained`).
fn vendor() -> Keep {
    Keep::natural(CacheOrder::Append, FP, FR)
}

fn spec(keep: Keep) -> CarrySpec {
    CarrySpec {
        keep,
        outer: 6,
        inner: 8,
        capacity: CAP,
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Drives a carry like a streaming decoder: a prompt of FP frames, then chunks of CHUNK new
/// frames written into the envelope's spare capacity, retention after each chunk, a turn reset
/// every `turn` chunks. Keeps an independent host model (stock concatenation) and, with
/// `check_model`, compares it with the device carry after every chunk (off only where the carry
/// deliberately runs another kernel than its declaration). Returns the carry bytes after each
/// chunk.
fn drive(
    b: &Arc<dyn Backend>,
    carry: &mut Carry,
    chunks: u64,
    turn: u64,
    seed: u64,
    check_model: bool,
) -> Vec<Vec<u32>> {
    let s = *carry.spec();
    let rs = s.capacity * s.inner;
    let region = carry.live_ptr();
    // Prompt: FP frames per row.
    let mut model: Vec<u32> = vec![0; s.outer * rs];
    let prompt = bits(&data(seed, s.outer * rs));
    for r in 0..s.outer {
        model[r * rs..r * rs + FP * s.inner]
            .copy_from_slice(&prompt[r * rs..r * rs + FP * s.inner]);
    }
    b.upload(region, &model).unwrap();
    carry.set_extent(FP).unwrap();
    carry.save_base().unwrap();
    let base = model.clone();
    let mut extent = FP;
    let mut out = Vec::new();
    for c in 1..=chunks {
        if c > 1 && (c - 1) % turn == 0 {
            carry.reset_turn().unwrap();
            model = base.clone();
            extent = FP;
        }
        let fresh = bits(&data(seed * 1_000_003 + c, s.outer * CHUNK * s.inner));
        for r in 0..s.outer {
            let dst = r * rs + extent * s.inner;
            model[dst..dst + CHUNK * s.inner]
                .copy_from_slice(&fresh[r * CHUNK * s.inner..(r + 1) * CHUNK * s.inner]);
            b.upload(
                region.offset(dst * 4),
                &fresh[r * CHUNK * s.inner..(r + 1) * CHUNK * s.inner],
            )
            .unwrap();
        }
        extent += CHUNK;
        carry.set_extent(extent).unwrap();
        let applied = carry.retain(c).unwrap();
        assert_eq!(applied, extent > FP + FR, "chunk {c}");
        if applied {
            let kept = stock_concat(&s, &model, rs, extent).unwrap();
            let kl = s.bound() * s.inner;
            for r in 0..s.outer {
                model[r * rs..r * rs + kl].copy_from_slice(&kept[r * kl..(r + 1) * kl]);
            }
            extent = s.bound();
        }
        assert_eq!(carry.extent(), extent);
        assert_eq!(carry.ptr(), region, "the carry never moves");
        let dev: Vec<u32> = b.download(region, s.outer * rs).unwrap();
        out.push(dev.clone());
        if check_model {
            for r in 0..s.outer {
                assert_eq!(
                    &dev[r * rs..r * rs + extent * s.inner],
                    &model[r * rs..r * rs + extent * s.inner],
                    "chunk {c} row {r}"
                );
            }
        }
    }
    out
}

fn carry_equals_stock_over_300_retentions(b: Arc<dyn Backend>) {
    for order in [CacheOrder::Prepend, CacheOrder::Append] {
        let s = spec(paper(order));
        let region = b.alloc(s.live_bytes(), AllocKind::Arena).unwrap();
        let mut carry = Carry::in_place(b.clone(), s, &region).unwrap().with_audit();
        drive(&b, &mut carry, 350, 25, 11, true);
        let a = carry.audit().unwrap();
        println!("{order:?}: {a}");
        assert!(a.applications >= 300, "{a}");
        assert_eq!(a.agreements, a.applications, "{a}");
        assert_eq!(a.addresses.len(), 1, "{a}");
        assert_eq!(*a.addresses.first().unwrap(), region.ptr().0);
        assert_eq!(a.turn_resets, 13);
        assert!(a.first_divergence.is_none());
    }
}

fn separate_carry_region_equals_stock(b: Arc<dyn Backend>) {
    let s = spec(paper(CacheOrder::Prepend));
    let live = b.alloc(s.live_bytes(), AllocKind::Arena).unwrap();
    let c = b
        .alloc(s.outer * s.bound() * s.inner * 4, AllocKind::Arena)
        .unwrap();
    let h = bits(&data(5, s.outer * s.capacity * s.inner));
    b.upload(live.ptr(), &h).unwrap();
    let mut carry = Carry::separate(b.clone(), s, &live, &c)
        .unwrap()
        .with_audit();
    carry.set_extent(CAP).unwrap();
    assert!(carry.retain(1).unwrap());
    let got: Vec<u32> = b.download(c.ptr(), s.outer * s.bound() * s.inner).unwrap();
    assert_eq!(
        got,
        stock_concat(&s, &h, s.capacity * s.inner, CAP).unwrap()
    );
    assert_eq!(carry.audit().unwrap().agreements, 1);
}

fn mixup_is_caught_at_first_divergent_chunk(b: Arc<dyn Backend>) {
    // A prepend-ordered cache declared with the paper's rule, retained with the append rule
    // (the development bug the paper reports): the auditor flags chunk 3, the first retention.
    let s = spec(paper(CacheOrder::Prepend));
    let region = b.alloc(s.live_bytes(), AllocKind::Arena).unwrap();
    let mut carry = Carry::in_place(b.clone(), s, &region)
        .unwrap()
        .with_launch_keep(paper(CacheOrder::Append))
        .with_audit();
    drive(&b, &mut carry, 10, 100, 3, false);
    let a = carry.audit().unwrap();
    println!("{a}");
    let d = a
        .first_divergence
        .expect("the auditor must catch the mix-up");
    assert_eq!((d.application, d.chunk), (1, 3));
    assert_eq!(a.agreements, 0);
    // At chunk 3 (ℓ = FP + 3·CHUNK) both rules keep H[0:FR] in place; the paper's rule then
    // wants H[ℓ − FP] at frame FR, the append rule leaves H[FR] there. Both are prompt frames
    // of row 0, so the first divergence is (row 0, frame FR, word 0) with these exact values.
    let prompt = bits(&data(3, s.outer * s.capacity * s.inner));
    let l = FP + 3 * CHUNK;
    assert_eq!((d.row, d.frame, d.word), (0, FR, 0));
    assert_eq!(d.expected, prompt[(l - FP) * s.inner]);
    assert_eq!(d.got, prompt[FR * s.inner]);
}

fn paper_and_vendor_slicing_differ_from_chunk_3(b: Arc<dyn Backend>) {
    let sp = spec(paper(CacheOrder::Prepend));
    let sv = spec(vendor());
    let (rp, rv) = (
        b.alloc(sp.live_bytes(), AllocKind::Arena).unwrap(),
        b.alloc(sv.live_bytes(), AllocKind::Arena).unwrap(),
    );
    let mut cp = Carry::in_place(b.clone(), sp, &rp).unwrap().with_audit();
    let mut cv = Carry::in_place(b.clone(), sv, &rv).unwrap().with_audit();
    let op = drive(&b, &mut cp, 8, 100, 21, true);
    let ov = drive(&b, &mut cv, 8, 100, 21, true);
    let first = op.iter().zip(&ov).position(|(a, b)| a != b).map(|i| i + 1);
    assert_eq!(
        first,
        Some(3),
        "paper and vendor retention first differ at chunk 3"
    );
    // Each agrees with its own declared stock concatenation.
    for c in [&cp, &cv] {
        let a = c.audit().unwrap();
        assert_eq!(a.agreements, a.applications);
        assert_eq!(a.applications, 6);
    }
}

both!(
    carry_equals_stock_over_300_retentions,
    separate_carry_region_equals_stock,
    mixup_is_caught_at_first_divergent_chunk,
    paper_and_vendor_slicing_differ_from_chunk_3,
);

/// Property test over random geometries on the Host backend: for every (ℓ, head, tail, outer,
/// inner, capacity) the API accepts, in place and into a
/// separate region, the carry equals a naive concatenation of the declared slices, the address
/// never moves, the other rows are not disturbed, and a separate carry leaves the live region
/// untouched. Shifts ℓ − L from 1 (many overlapping passes) to more than the tail (one pass),
/// and the degenerate head = 0 / tail = 0 declarations, are all drawn.
#[test]
fn carry_equals_naive_concat_for_random_geometries() {
    let b = common::host();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    for case in 0..600 {
        let (prompt, retained) = match next(8) {
            0 => (0, 1 + next(20)),
            1 => (1 + next(20), 0),
            _ => (1 + next(40), 1 + next(40)),
        };
        let bound = prompt + retained;
        let capacity = bound + 1 + next(2 * bound + 3);
        let extent = bound + 1 + next(capacity - bound);
        let order = [CacheOrder::Prepend, CacheOrder::Append][next(2)];
        let keep = Keep::natural(order, prompt, retained);
        let s = CarrySpec {
            keep,
            outer: 1 + next(4),
            inner: 1 + next(5),
            capacity,
        };
        let rs = s.capacity * s.inner;
        let h: Vec<u32> = (0..s.outer * rs)
            .map(|i| (i as u32).wrapping_mul(0x9E37_79B9) ^ case)
            .collect();
        // Naive concatenation of the declared slices (independent of `Retention`).
        let (head, tail) = if order == CacheOrder::Prepend {
            (retained, prompt)
        } else {
            (prompt, retained)
        };
        let want: Vec<Vec<u32>> = (0..s.outer)
            .map(|r| {
                let row = &h[r * rs..r * rs + extent * s.inner];
                let mut v = row[..head * s.inner].to_vec();
                v.extend_from_slice(&row[(extent - tail) * s.inner..]);
                v
            })
            .collect();
        let what = format!("case {case}: {s:?} extent {extent}");
        let kl = bound * s.inner;

        let live = b.alloc_from(&h, AllocKind::Arena).unwrap();
        let mut carry = Carry::in_place(b.clone(), s, &live).unwrap().with_audit();
        carry.set_extent(extent).unwrap();
        assert!(carry.retain(0).unwrap(), "{what}");
        assert_eq!((carry.ptr(), carry.extent()), (live.ptr(), bound), "{what}");
        let got: Vec<u32> = b.download(live.ptr(), s.outer * rs).unwrap();
        for (r, w) in want.iter().enumerate() {
            assert_eq!(
                &got[r * rs..r * rs + kl],
                &w[..],
                "{what} in place, row {r}"
            );
            // Frames at or past ℓ are spare capacity: never touched.
            assert_eq!(
                &got[r * rs + extent * s.inner..(r + 1) * rs],
                &h[r * rs + extent * s.inner..(r + 1) * rs],
                "{what} in place, row {r} past the extent"
            );
        }
        let a = carry.audit().unwrap();
        assert_eq!((a.applications, a.agreements), (1, 1), "{what}: {a}");

        let live = b.alloc_from(&h, AllocKind::Arena).unwrap();
        let sep = b.alloc(s.carry_bytes(), AllocKind::Arena).unwrap();
        let mut carry = Carry::separate(b.clone(), s, &live, &sep).unwrap();
        carry.set_extent(extent).unwrap();
        assert!(carry.retain(0).unwrap(), "{what}");
        let got: Vec<u32> = b.download(sep.ptr(), s.outer * kl).unwrap();
        let flat: Vec<u32> = want.concat();
        assert_eq!(got, flat, "{what} separate");
        assert_eq!(
            b.download::<u32>(live.ptr(), s.outer * rs).unwrap(),
            h,
            "{what}: a separate carry leaves the live region as it was"
        );
    }
}

/// Turn reset writes the saved base back into the same bytes, after any number of retentions.
#[test]
fn turn_reset_restores_the_base_in_place() {
    let b = common::host();
    let s = spec(paper(CacheOrder::Prepend));
    let region = b.alloc(s.live_bytes(), AllocKind::Arena).unwrap();
    let mut carry = Carry::in_place(b.clone(), s, &region).unwrap();
    assert!(carry.reset_turn().is_err(), "no base saved yet");
    let base = bits(&data(77, s.outer * s.capacity * s.inner));
    b.upload(region.ptr(), &base).unwrap();
    carry.set_extent(FP).unwrap();
    carry.save_base().unwrap();
    for c in 0..4 {
        b.upload(
            region.ptr(),
            &bits(&data(c, s.outer * s.capacity * s.inner)),
        )
        .unwrap();
        carry.set_extent(CAP).unwrap();
        assert!(carry.retain(c).unwrap());
    }
    carry.reset_turn().unwrap();
    assert_eq!((carry.ptr(), carry.extent()), (region.ptr(), FP));
    assert_eq!(b.download::<u32>(region.ptr(), base.len()).unwrap(), base);
}

/// The carry knows its regions' sizes: a buffer too small for the declared rows is refused at
/// construction (before any launch could write past it), and so is a launch keep rule that
/// keeps another number of frames than the declaration, at the first retention.
#[test]
fn carry_regions_are_checked_before_any_launch() {
    let b = common::host();
    let s = spec(paper(CacheOrder::Prepend));
    let small = b.alloc(s.live_bytes() - 4, AllocKind::Arena).unwrap();
    assert!(Carry::in_place(b.clone(), s, &small).is_err());
    let live = b.alloc(s.live_bytes(), AllocKind::Arena).unwrap();
    let sep = b.alloc(s.carry_bytes() - 4, AllocKind::Arena).unwrap();
    assert!(Carry::separate(b.clone(), s, &live, &sep).is_err());
    let before: Vec<u32> = b.download(live.ptr(), s.live_bytes() / 4).unwrap();
    let mut carry = Carry::in_place(b.clone(), s, &live)
        .unwrap()
        .with_launch_keep(Keep::natural(CacheOrder::Prepend, FP + 1, FR));
    carry.set_extent(CAP).unwrap();
    assert!(
        matches!(carry.retain(0), Err(Error::Carry(_))),
        "a launch keeping another L is refused"
    );
    assert_eq!(b.download::<u32>(live.ptr(), before.len()).unwrap(), before);
}
