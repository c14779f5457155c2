//! The tile variant of the 3xTF32 linear (`kernels/cuda/gemm_tiles.cuh`), [`T64X64R`]: the
//! same arguments and **the same bits as [`tf32::LINEAR`] for every shape**, with more work per
//! warp and per CTA. [`pick`] chooses it or the base by shape for speed; [`BASE`] describes
//! `gemm.linear_tf32x3` itself in the same terms.
//!
//! # Why the bits are those of `gemm.linear_tf32x3`
//!
//! [`tf32`]'s module docs fix, per output element, everything that decides its bits: the operand
//! values of every `mma` (step `s` holds `x[r, 8s + p]` and `w[o, 8s + p]` at `mma` k position
//! `p`, zeros past K, split into big and small), the chain (`s mod 4`; from 0, ascending `s`,
//! three `mma` per step in the order small·big, big·small, big·big; steps past K skipped) and the
//! end (`(p0 + p1) + (p2 + p3)`, `+ b`, the activation). An `mma` computes each of its outputs
//! from that output's row of A, column of B and accumulator alone (what the base kernel's
//! batch invariance rests on: its CUDA test moves a row to every position of an `m16` tile), so
//! an output's bits are a function of those three things. The variant keeps all three and
//! changes only who computes what:
//!
//! * a warp owns `mt × ntl` `mma` tiles (`16·mt` rows × `8·ntl` outputs; the base: 1 × 4),
//!   loading each fragment exactly as the base does;
//! * each warp runs all four chains in four accumulator sets (the base: one chain per warp, the
//!   partials exchanged through shared memory); a tile is a multiple of 32 k, so a tile's step
//!   `j` is chain `j mod 4`, and every chain takes its steps in ascending order;
//! * the end is the same fp32 additions on the same values (NVRTC `--fmad=false`), from the
//!   thread's own registers.
//!
//! The Host twin is [`tf32`]'s model ([`tf32::dot`]) for both: the Host cannot repeat an `mma`'s
//! bits, so bit-equality with the base is a CUDA test (`runtime/tests/gemm_tf32_tiles.rs`: the
//! variant against the base, bit for bit, over the model's shapes and tails in rows, outputs and
//! K, and row windows of one launch). Without a GPU, `scripts/tf32_tiles_emu/run.sh` runs the
//! CUDA source of the base and of the variant on a CPU emulation (a thread per CUDA thread, each
//! `mma` one fixed per-element model) and checks each output bit for bit against the spec
//! evaluated on the same model: the indexing (fragments, staging, chains) is the spec's.
//!
//! # The variant and the pick (H100: 132 SMs, 228 KB shared memory and 64K registers per SM)
//!
//! [`T64X64R`]: 64 × 64 outputs a CTA on 4 warps, each warp 32 × 32 outputs running the four
//! chains in registers (128 accumulators a thread, 215 registers from `ptxas -v` for sm_90 under
//! NVRTC 13.2, no spills; two CTAs an SM); 32-k tiles, four stages. A warp splits 8 x and 8 w
//! values per step for 24 `mma` (the base: 4 and 8 for 12): the split's integer work is what
//! bounds the base at large M. At one session's 112 rows its 64 × 64 tiles give too few CTAs
//! (112 × 512 outputs: 16 of them for 132 SMs), and the base wins.
//!
//! Measured on one NVIDIA H100 80GB HBM3 at commit 851d140 (`dcc-bench kernels --variants
//! tf32x3,tf32tiles,tf32auto --rows 112,1600,1792`, µs per launch; the variants were bit-equal
//! to `gemm.linear_tf32x3` there; cuBLAS is the fp32 `Backend::gemm_bias` path, not
//! batch-invariant):
//!
//! | in → out | rows | cuBLAS | base | `t64x64r` |
//! |---|---|---|---|---|
//! | 512 → 1536 | 112 | 14.46 | **13.08** | 20.60 |
//! | 512 → 1536 | 1792 | 74.48 | 110.04 | **76.53** |
//! | 512 → 512 | 112 | 11.22 | **7.91** | 19.84 |
//! | 512 → 512 | 1792 | 33.58 | 43.02 | **28.31** |
//! | 512 → 2048 | 112 | 16.22 | **16.50** | 20.57 |
//! | 512 → 2048 | 1792 | 92.98 | 144.12 | **90.86** |
//! | 2048 → 512 | 112 | 18.88 | **19.74** | 62.72 |
//! | 2048 → 512 | 1792 | 98.51 | 147.26 | **94.78** |
//! | 1536 → 512 | 112 | 17.98 | **15.88** | 48.83 |
//! | 1536 → 512 | 1792 | 76.39 | 117.28 | **70.69** |
//! | 320 → 512 | 112 | 9.85 | **6.50** | 14.64 |
//! | 320 → 512 | 1600 | – | – | **20.38** |
//! | 320 → 512 | 1792 | 23.39 | 30.53 | **20.55** |
//! | 512 → 80 | 112 | 10.19 | **7.51** | 19.31 |
//! | 512 → 80 | 1792 | 14.36 | **12.78** | 20.07 |
//!
//! So `t64x64r` from [`LARGE_ROWS`] rows for 512 outputs and more (1.3–1.6× the base there, on
//! par with cuBLAS), the base below that and for the 80-output linear. The variants that lost
//! everywhere there (the chains on a thread-block cluster's four CTAs at 32 × 32, 32 × 64 and
//! 64 × 64, and a 64 × 64 tile of 16 warps exchanging partials in shared memory) were removed.
//!
//! The weights are not pre-split: storing big and small parts would double the weights' memory
//! (and the stream a chunk reads, about 3 GB) to save the integer work of the split, which the
//! larger warp tiles already amortize (a w value split once per 32 rows).

use crate::abi::{Arg, KernelError, LaunchDims};
use crate::{CudaSource, KernelDef};

use super::{PARAMS, tf32};

/// One launch configuration of the 3xTF32 linear ([`BASE`] or [`T64X64R`]). The CUDA entry of
/// the tile variant repeats these numbers as template arguments (a test checks the two agree).
#[derive(Debug)]
pub struct Tf32Variant {
    pub kernel: &'static KernelDef,
    /// `m16` tiles per warp (rows `16·mt`).
    pub mt: usize,
    /// `n8` tiles per warp (outputs `8·ntl`).
    pub ntl: usize,
    /// Warps along rows and along outputs in one chain group.
    pub wm: usize,
    pub wn: usize,
    /// Chain groups per CTA (4 in the base: one chain each; 1 in the tile variant: every warp
    /// runs the four chains).
    pub cg: usize,
    /// k per staged tile (a multiple of 32).
    pub bk: usize,
    /// Staging buffers in the ring.
    pub stages: usize,
    /// CTAs per SM the entry is compiled for (`__launch_bounds__`).
    pub min_blocks: usize,
}

impl Tf32Variant {
    /// Output rows per CTA.
    pub const fn bm(&self) -> usize {
        16 * self.mt * self.wm
    }

    /// Outputs per CTA.
    pub const fn bn(&self) -> usize {
        8 * self.ntl * self.wn
    }

    /// Threads per CTA: 32 per warp, `wm · wn · cg` warps.
    pub const fn threads(&self) -> u32 {
        (32 * self.wm * self.wn * self.cg) as u32
    }

    /// Bytes of dynamic shared memory: the staging ring, `stages · (bm + bn) · (bk + 4)` floats,
    /// or the chains' exchange (`cg − 1` partial tiles), whichever is larger.
    pub const fn shared_bytes(&self) -> usize {
        let stage = self.stages * (self.bm() + self.bn()) * (self.bk + 4);
        let red = (self.cg - 1) * self.bm() * self.bn();
        4 * if stage > red { stage } else { red }
    }

    /// The launch over `rows × out` outputs: grid `(⌈out / bn⌉, ⌈rows / bm⌉, 1)`; `None` when
    /// empty or past CUDA's grid limits.
    pub fn dims(&self, rows: usize, out: usize) -> Option<LaunchDims> {
        let gx = out.div_ceil(self.bn());
        let gy = rows.div_ceil(self.bm());
        if gx == 0 || gy == 0 || gx > i32::MAX as usize || gy > 65_535 {
            return None;
        }
        Some(LaunchDims {
            grid: (gx as u32, gy as u32, 1),
            block: (self.threads(), 1, 1),
            shared_bytes: self.shared_bytes() as u32,
        })
    }
}

/// `gemm.linear_tf32x3` in these terms: one `m16 × n8·4` tile per warp, four warps (one chain
/// each), 64-k tiles, three stages; its launch is [`tf32::dims`].
pub static BASE: Tf32Variant = Tf32Variant {
    kernel: &tf32::LINEAR,
    mt: 1,
    ntl: 4,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 3,
    min_blocks: 1,
};

/// The NVRTC module of [`LINEAR_T64X64R`] alone: `common.cuh`, `gemm.cu`, `gemm_tiles.cuh` and
/// the variant's entry.
pub static SOURCE_T64X64R: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t64x64r",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 2) gemm_linear_tf32x3_t64x64r(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3v<2, 4, 2, 2, 32, 4, 128>(\
         GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t64x64r`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3` (module
/// docs).
pub static LINEAR_T64X64R: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t64x64r",
    source: &SOURCE_T64X64R,
    entry: "gemm_linear_tf32x3_t64x64r",
    params: PARAMS,
    host: host_t64x64r,
};

/// The launch configuration of [`LINEAR_T64X64R`]: 64 × 64 outputs a CTA on four warps of
/// 32 × 32, 32-k tiles through four stages, two CTAs an SM.
pub static T64X64R: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T64X64R,
    mt: 2,
    ntl: 4,
    wm: 2,
    wn: 2,
    cg: 1,
    bk: 32,
    stages: 4,
    min_blocks: 2,
};

unsafe fn host_t64x64r(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe {
        super::host_linear_by(
            LINEAR_T64X64R.name,
            |r, o| T64X64R.dims(r, o),
            tf32::dot,
            dims,
            a,
        )
    }
}

/// The tile variants (not [`BASE`]), in the order `dcc-bench kernels` lists them.
pub static TILES: &[&Tf32Variant] = &[&T64X64R];

/// The kernels of [`TILES`].
pub static KERNELS: &[&KernelDef] = &[&LINEAR_T64X64R];

/// Rows from which [`pick`] takes [`T64X64R`] for wide enough linears (sessions batched).
pub const LARGE_ROWS: usize = 512;

/// Outputs from which [`pick`] takes [`T64X64R`] at [`LARGE_ROWS`] rows and more.
pub const WIDE_OUT: usize = 512;

/// The variant the 3xTF32 `linear` launches for `rows × out` outputs. Speed only: both compute
/// the same bits. [`T64X64R`] from [`LARGE_ROWS`] rows and [`WIDE_OUT`] outputs, else [`BASE`]
/// (the H100 measurements of the module docs: K did not change the winner at the model's
/// 320 to 2,048 inputs).
pub fn pick(rows: usize, out: usize) -> &'static Tf32Variant {
    if rows >= LARGE_ROWS && out >= WIDE_OUT {
        &T64X64R
    } else {
        &BASE
    }
}

/// Every variant [`pick`] can choose: what a process on the 3xTF32 path compiles.
pub static PICKED: &[&Tf32Variant] = &[&BASE, &T64X64R];

/// The variant whose kernel is `name` (`gemm.linear_tf32x3`, `gemm.linear_tf32x3_t64x64r`).
pub fn variant(name: &str) -> Option<&'static Tf32Variant> {
    std::iter::once(&BASE)
        .chain(TILES.iter().copied())
        .find(|v| v.kernel.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::NO_ACT;

    /// The entry instantiates the template with the table's numbers; the shape is the kernel's
    /// (whole `mma` tiles, 32-k groups, every warp running the four chains) and fits an H100.
    #[test]
    fn entries_match_the_table_and_fit() {
        for v in TILES {
            let src = v.kernel.source.code;
            assert_eq!(src.matches("extern \"C\" __global__ void ").count(), 1);
            let inst = format!(
                "gemm_t3v<{}, {}, {}, {}, {}, {}, {}>",
                v.mt,
                v.ntl,
                v.wm,
                v.wn,
                v.bk,
                v.stages,
                v.threads()
            );
            assert!(src.contains(&inst), "{}: no {inst}", v.kernel.name);
            let bounds = format!("__launch_bounds__({}, {})", v.threads(), v.min_blocks);
            assert!(
                src.contains(&format!("{bounds} {}(", v.kernel.entry)),
                "{}",
                v.kernel.name
            );
            assert_eq!(v.cg, 1, "{}", v.kernel.name);
            assert!(v.bk % 32 == 0 && v.stages >= 2);
            assert!(v.threads() <= 1024);
            assert!(
                v.shared_bytes() * v.min_blocks <= 227 * 1024,
                "{}",
                v.kernel.name
            );
        }
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

    /// The measured rule at the model's shapes: the base at one session's 112 rows and for the
    /// 80-output linear, `t64x64r` for the batched rows of every linear of 512 outputs or more;
    /// every pick launches and stays in [`PICKED`], and both are picked.
    #[test]
    fn pick_follows_the_h100_measurements() {
        assert_eq!(T64X64R.dims(1792, 512).unwrap().grid, (8, 28, 1));
        assert_eq!(T64X64R.shared_bytes(), 4 * 4 * 128 * 36);
        for out in [1536, 512, 2048, 80] {
            assert!(std::ptr::eq(pick(112, out), &BASE), "112 × {out}");
            let big = if out >= 512 { &T64X64R } else { &BASE };
            for rows in [1600, 1792] {
                assert!(std::ptr::eq(pick(rows, out), big), "{rows} × {out}");
            }
        }
        assert!(std::ptr::eq(pick(511, 2048), &BASE));
        assert!(std::ptr::eq(pick(512, 512), &T64X64R));
        assert!(std::ptr::eq(pick(512, 511), &BASE));
        let mut seen = vec![false; PICKED.len()];
        for rows in [1, 2, 7, 112, 256, 511, 512, 1600, 1792] {
            for out in [1, 80, 511, 512, 1023, 1024, 2048] {
                let v = pick(rows, out);
                let i = PICKED.iter().position(|p| std::ptr::eq(*p, v)).unwrap();
                seen[i] = true;
                assert!(v.dims(rows, out).is_some());
            }
        }
        assert!(seen.iter().all(|s| *s), "{seen:?}");
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
}
