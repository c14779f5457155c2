//! The session arena at an operating point (`operating_points::<point>::ARENA`), as a port reads
//! it: the `half` point stores the estimator cache (`carry`, `solver_workspace`) as f16, so
//! those regions take half the base bytes, every other region keeps its base type and size, and
//! the layout is aligned, disjoint and split by lifetime like the base `ARENA`.

use dcc_generated::{token2wav as full, token2wav_tiny as tiny};
use dcc_runtime::contract::{ArenaLayout, DType};

const HALVED: [&str; 2] = ["carry", "solver_workspace"];

/// `point` against `base`: the same regions in the same order, the halved ones f16 at half the
/// bytes, the rest unchanged; offsets aligned, increasing and disjoint; per-session regions
/// (lifetime turn / session) before `session_bytes`, the rest after.
fn check_half(base: &ArenaLayout, point: &ArenaLayout, session_bytes: usize) {
    assert_eq!(base.regions.len(), point.regions.len());
    let mut end = 0;
    for (b, p) in base.regions.iter().zip(point.regions) {
        assert_eq!((b.name, b.dims, b.dim_names), (p.name, p.dims, p.dim_names));
        assert_eq!((b.lifetime, b.order, b.keep), (p.lifetime, p.order, p.keep));
        if HALVED.contains(&p.name) {
            assert_eq!((b.dtype, p.dtype), (DType::F32, DType::F16), "{}", p.name);
            assert_eq!(p.bytes * 2, b.bytes, "{}", p.name);
        } else {
            assert_eq!((p.dtype, p.bytes), (b.dtype, b.bytes), "{}", p.name);
        }
        assert_eq!(p.bytes, p.elems * p.dtype.size(), "{}", p.name);
        assert!(
            p.offset >= end && p.offset.is_multiple_of(point.align),
            "{}",
            p.name
        );
        assert_eq!(
            p.lifetime.per_session(),
            p.offset < session_bytes,
            "{}",
            p.name
        );
        end = p.offset + p.bytes;
    }
    assert!(end <= point.total_bytes);
}

#[test]
fn half_point_stores_the_estimator_cache_as_f16() {
    use full::operating_points::half as h;
    check_half(&full::ARENA, &h::ARENA, h::SESSION_BYTES);
    assert_eq!(h::CARRY_DTYPE, DType::F16);
    assert_eq!(h::CARRY_BYTES * 2, full::Carry::BYTES);
    // the per-session part shrinks by exactly half the carry (263,454,720 B)
    assert_eq!(
        full::SESSION_BYTES - h::SESSION_BYTES,
        full::Carry::BYTES / 2
    );
    assert_eq!(h::ARENA.total_bytes, h::ARENA_BYTES);
    assert_eq!(h::ARENA_BYTES, h::SESSION_BYTES + h::PROCESS_BYTES);
    let tiny_h = &tiny::operating_points::half::ARENA;
    check_half(
        &tiny::ARENA,
        tiny_h,
        tiny::operating_points::half::SESSION_BYTES,
    );
}

#[test]
fn duplex_point_arena_has_the_points_step_count() {
    use full::operating_points::duplex as d;
    let carry = d::ARENA.region("carry").expect("carry");
    assert_eq!(carry.dims, &d::CARRY_DIMS);
    assert_eq!(carry.dims[0], d::N_STEPS);
    assert_eq!((carry.dtype, carry.bytes), (DType::F32, d::CARRY_BYTES));
    assert_eq!(d::ARENA.total_bytes, d::ARENA_BYTES);
}
