//! The 3xTF32 tile variants' tests: the entries against the table, the base's description,
//! the pick table and the twins' geometry checks.

use super::*;
use crate::gemm::NO_ACT;

/// The entry instantiates the template with the table's numbers; the shape is the kernel's
/// (whole `mma` tiles, 32-k groups, the four chains on one warp or dealt to two or four
/// warp groups, whole staging slots) and fits an H100.
#[test]
fn entries_match_the_table_and_fit() {
    for v in TILES {
        let src = v.kernel.source.code;
        assert_eq!(src.matches("extern \"C\" __global__ void ").count(), 1);
        let inst = v.template();
        assert!(src.contains(&inst), "{}: no {inst}", v.kernel.name);
        let bounds = format!("__launch_bounds__({}, {})", v.threads(), v.min_blocks);
        assert!(
            src.contains(&format!("{bounds} {}(", v.kernel.entry)),
            "{}",
            v.kernel.name
        );
        assert!([1, 2, 4].contains(&v.cg), "{}", v.kernel.name);
        assert!(v.bk % 32 == 0 && v.stages >= 2);
        assert!(v.threads() <= 1024);
        if v.cg > 1 {
            // gemm_t3w: a thread's staging slots are whole rows apart.
            let rs = v.threads() as usize / (v.bk / 4);
            assert!(
                rs > 0 && v.bm() % rs == 0 && v.bn() % rs == 0,
                "{}",
                v.kernel.name
            );
        }
        assert!(
            v.shared_bytes() * v.min_blocks <= 227 * 1024,
            "{}",
            v.kernel.name
        );
    }
    assert_eq!(T64X64R.template(), "gemm_t3v<2, 4, 2, 2, 32, 4, 128>");
    assert_eq!(T64X128W.template(), "gemm_t3w<4, 8, 1, 2, 4, 64, 3, 256>");
    // The ring (3 · 192 · 68 floats) holds the four partial tiles (4 · 64 · 136).
    assert_eq!(T64X128W.shared_bytes(), 4 * 3 * 192 * 68);
    assert_eq!(T64X64W.shared_bytes(), 4 * 3 * 128 * 68);
    // The small-row variants: one m16 tile and one chain a warp, each ring within its CTAs an
    // SM.
    assert_eq!(T16X32S8.template(), "gemm_t3w<1, 4, 1, 1, 4, 64, 8, 128>");
    assert_eq!(T16X32W8.template(), "gemm_t3w<1, 2, 1, 2, 4, 64, 8, 256>");
    assert_eq!(
        T16X32K128.template(),
        "gemm_t3w<1, 4, 1, 1, 4, 128, 4, 128>"
    );
    assert_eq!(T16X32S4.template(), "gemm_t3w<1, 4, 1, 1, 4, 64, 4, 128>");
    assert_eq!(T16X64S4.template(), "gemm_t3w<1, 8, 1, 1, 4, 64, 4, 128>");
    assert_eq!(T32X32S6.template(), "gemm_t3w<1, 4, 2, 1, 4, 64, 6, 256>");
    assert_eq!(T32X64S4.template(), "gemm_t3w<1, 8, 2, 1, 4, 64, 4, 256>");
    assert_eq!(T16X32S8.shared_bytes(), 4 * 8 * 48 * 68);
    assert_eq!(T16X32W8.shared_bytes(), 4 * 8 * 48 * 68);
    assert_eq!(T16X32K128.shared_bytes(), 4 * 4 * 48 * 132);
    assert_eq!(T16X32S4.shared_bytes(), 4 * 4 * 48 * 68);
    assert_eq!(T16X64S4.shared_bytes(), 4 * 4 * 80 * 68);
    assert_eq!(T32X32S6.shared_bytes(), 4 * 6 * 64 * 68);
    assert_eq!(T32X64S4.shared_bytes(), 4 * 4 * 96 * 68);
    for v in SMALL {
        assert!(
            TILES.iter().any(|t| std::ptr::eq(*t, *v)),
            "{}",
            v.kernel.name
        );
        assert_eq!(v.cg, 4, "{}: one chain a warp", v.kernel.name);
        assert_eq!(v.bm() % 16 + v.bn() % 32, 0);
        assert!(v.bm() <= 32 && v.bn() <= 64, "{}", v.kernel.name);
        // At 112 rows every one fills at least 96 CTAs for 1,536 outputs.
        let d = v.dims(112, 1536).unwrap();
        assert!(d.grid.0 * d.grid.1 >= 96, "{}", v.kernel.name);
    }
    assert_eq!(T16X32S8.dims(112, 512).unwrap().grid, (16, 7, 1));
    assert_eq!(T32X32S6.dims(112, 2048).unwrap().grid, (64, 4, 1));
    assert_eq!(TILES.len(), KERNELS.len());
    for (v, k) in TILES.iter().zip(KERNELS) {
        assert!(std::ptr::eq(v.kernel, *k));
    }
}

/// [`BASE`] is the base kernel's launch, whatever the shape.
#[test]
fn base_describes_linear_tf32x3() {
    assert_eq!((BASE.bm(), BASE.bn()), (tf32::BM, tf32::BN));
    assert_eq!(BASE.threads(), tf32::THREADS);
    for rows in [1, 7, 16, 17, 112, 1600, 1792] {
        for out in [1, 33, 80, 512, 1536, 2048] {
            assert_eq!(
                BASE.dims(rows, out),
                tf32::dims(rows, out),
                "{rows} × {out}"
            );
        }
    }
    assert_eq!(variant("gemm.linear_tf32x3").map(|v| v.bk), Some(64));
    assert!(std::ptr::eq(
        variant("gemm.linear_tf32x3_t64x64r").unwrap(),
        &T64X64R
    ));
    assert!(variant("gemm.linear_tf32x3_c32x64").is_none());
    assert!(variant("gemm.linear_32x64").is_none());
}

/// The rule at the model's shapes (measured; [`PICK`]'s docs): one session's rows take
/// `t32x64s4` for the 1,536- and 2,048-output linears and `t16x32k128` for the others; two
/// sessions' `t32x64s4` for 2,048 outputs and `t32x32s6` for the others; from four sessions'
/// `t64x64r` for 512 outputs and more (`t64x128w` from eight sessions') and `t32x32s6` below;
/// every pick launches and
/// stays in [`PICKED`], every variant of [`PICKED`] is picked, and [`pick`] is [`PICK`] read
/// top down.
#[test]
fn pick_follows_its_table() {
    assert_eq!(T64X64R.dims(1792, 512).unwrap().grid, (8, 28, 1));
    assert_eq!(T64X128W.dims(1792, 512).unwrap().grid, (4, 28, 1));
    assert_eq!(T64X128W.dims(3584, 1536).unwrap().block, (256, 1, 1));
    assert_eq!(T64X64R.shared_bytes(), 4 * 4 * 128 * 36);
    for out in [1536, 512, 2048, 80] {
        let one: &Tf32Variant = if out >= 1536 { &T32X64S4 } else { &T16X32K128 };
        for rows in [1, 112, 223] {
            assert!(std::ptr::eq(pick(rows, out), one), "{rows} × {out}");
        }
        let two: &Tf32Variant = if out >= 2048 { &T32X64S4 } else { &T32X32S6 };
        for rows in [224, 448, 511] {
            assert!(std::ptr::eq(pick(rows, out), two), "{rows} × {out}");
        }
        let four: &Tf32Variant = if out >= 512 { &T64X64R } else { &T32X32S6 };
        assert!(std::ptr::eq(pick(560, out), four), "560 × {out}");
        let eight: &Tf32Variant = if out >= 512 { &T64X128W } else { &T32X32S6 };
        for rows in [896, 1792, 3584] {
            assert!(std::ptr::eq(pick(rows, out), eight), "{rows} × {out}");
        }
    }
    assert!(std::ptr::eq(pick(0, 512), &BASE));
    let mut seen = vec![false; PICKED.len()];
    for rows in [1, 2, 7, 112, 256, 511, 512, 895, 896, 1600, 1792, 3584] {
        for out in [1, 80, 511, 512, 1023, 1024, 1536, 2048] {
            let v = pick(rows, out);
            let i = PICKED.iter().position(|p| std::ptr::eq(*p, v)).unwrap();
            seen[i] = true;
            assert!(v.dims(rows, out).is_some());
            let row = PICK.iter().find(|p| rows >= p.rows && out >= p.out);
            assert!(std::ptr::eq(row.map_or(&BASE, |p| p.variant), v));
        }
    }
    assert!(seen.iter().all(|s| *s), "{seen:?}");
    // No row is shadowed: an earlier row never reaches every shape of a later one.
    for (i, p) in PICK.iter().enumerate() {
        for q in &PICK[..i] {
            assert!(
                q.rows > p.rows || q.out > p.out,
                "{}",
                p.variant.kernel.name
            );
        }
        assert!(std::ptr::eq(pick(p.rows, p.out), p.variant));
    }
}

/// A variant's twin refuses another variant's launch (the geometry check of
/// `host_linear_by`) and computes the base's model.
#[test]
fn twins_check_their_own_geometry() {
    let x = [1.0f32; 8];
    let w = [1.0f32; 8];
    let mut y = [0.0f32; 4];
    let args = |y: &mut [f32]| {
        [
            Arg::Ptr(crate::DevPtr(y.as_mut_ptr() as u64)),
            Arg::I64(2),
            Arg::Ptr(crate::DevPtr(x.as_ptr() as u64)),
            Arg::I64(4),
            Arg::Ptr(crate::DevPtr(w.as_ptr() as u64)),
            Arg::Ptr(crate::DevPtr(w.as_ptr() as u64)),
            Arg::I32(0),
            Arg::I32(NO_ACT),
            Arg::F32(0.0),
            Arg::I64(2),
            Arg::I64(4),
            Arg::I64(2),
        ]
    };
    for v in TILES {
        let good = v.dims(2, 2).unwrap();
        let base = BASE.dims(2, 2).unwrap();
        // SAFETY: x and w hold 2 rows of 4, y 2 rows of 2: what these arguments address.
        unsafe {
            assert!(v.kernel.run_host(&base, &args(&mut y)).is_err());
            y = [0.0; 4];
            v.kernel.run_host(&good, &args(&mut y)).unwrap();
        }
        assert_eq!(y, [4.0; 4], "{}", v.kernel.name);
    }
}
