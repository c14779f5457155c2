//! Tile variants of the 3xTF32 linear (`kernels/cuda/gemm_tiles.cuh`): the same arguments and
//! **the same bits as [`tf32::LINEAR`] for every shape**, with more work per warp and per CTA.
//! [`pick`] chooses one by shape for speed; [`BASE`] describes `gemm.linear_tf32x3` itself in
//! the same terms.
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
//! an output's bits are a function of those three things. A variant keeps all three and changes
//! only who computes what:
//!
//! * a warp owns `mt × ntl` `mma` tiles (`16·mt` rows × `8·ntl` outputs; the base: 1 × 4),
//!   loading each fragment exactly as the base does;
//! * the chains: `cg = 4` — warp group `c` runs chain `c` over a CTA tile of `wm × wn` warps,
//!   as the base's warp `c` does; `cg = 1, cl = 1` — each warp runs all four chains in four
//!   accumulator sets (a tile is a multiple of 32 k, so a tile's step `j` is chain `j mod 4`);
//!   `cl = 4` — the four CTAs of a thread-block cluster (sm_90) share one output tile, CTA rank
//!   `c` stages and runs only chain `c`'s steps (8 of every 32 k), and rank 0 reads the others'
//!   partials from their shared memory (distributed shared memory) at the end;
//! * every chain takes its steps in ascending order into its own accumulator; the end is the
//!   same fp32 additions on the same values (NVRTC `--fmad=false`).
//!
//! The Host twin is [`tf32`]'s model ([`tf32::dot`]) for every variant: the Host cannot repeat
//! an `mma`'s bits, so bit-equality with the base is a CUDA test (`runtime/tests/
//! gemm_tf32_tiles.rs`: every variant against the base, bit for bit, over the model's shapes and
//! tails in rows, outputs and K, and row windows of one launch). Without a GPU,
//! `scripts/tf32_tiles_emu/run.sh` runs the CUDA source of the base and of every variant on a
//! CPU emulation (a thread per CUDA thread, each `mma` one fixed per-element model) and checks
//! each output bit for bit against the spec evaluated on the same model: the indexing
//! (fragments, staging, chains, the exchange of partials, the cluster split) is the spec's.
//!
//! # The variants (H100: 132 SMs, 228 KB shared memory and 64K registers per SM)
//!
//! * [`C32X64`], [`C32X32`] (one session, 112 rows): the base's 16 × 32 tile re-reads every
//!   weight once per 16 rows (7 times at 112 rows) and each x row once per 32 outputs, so a
//!   2048 → 512 linear moves about 43 MB through L2 for 4 MB of weights; a larger tile in one CTA
//!   would leave SMs idle (112 × 512 outputs are 112 base CTAs). With the chains on four CTAs of
//!   a cluster, a 32 × 64 tile halves that traffic and still launches 128 CTAs there (32 × 32:
//!   256 CTAs), each staging only its chain's k through a four-deep ring of 128-k tiles.
//! * [`T64X64`] (batched sessions, ≥ 512 rows): 64 × 64 outputs, 16 warps (four chain groups of
//!   2 × 2 warps, each warp 32 × 32 outputs): a warp splits 8 x and 8 w values per step for 24
//!   `mma` (the base: 4 and 8 for 12), the split's integer work being what bounds the base at
//!   large M; 64-k tiles, four stages.
//! * [`T64X64R`]: the same tile on 4 warps, each running the four chains in registers (128
//!   accumulators a thread, two CTAs an SM): no exchange at the end, fewer warps to hide latency.
//! * [`C64X64`]: the same 32 × 32 warp tiles, four warps a CTA, the chains on a cluster (a 64 ×
//!   64 tile on four SMs): `t64x64`'s reuse per staged value with four times its CTAs; at 112
//!   rows the widest linears (1,536 and 2,048 outputs) still launch 192 and 256 CTAs on it.
//!
//! Registers and spills (NVRTC 13.2 for sm_90, then `ptxas -v`): none spill; `c32x32` 72,
//! `c32x64` 96, `c64x64` 168, `t64x64` 105, `t64x64r` 215 registers a thread (the base: 86),
//! each within its `__launch_bounds__`.
//!
//! The weights are not pre-split: storing big and small parts would double the weights' memory
//! (and the stream a chunk reads, about 3 GB) to save the integer work of the split, which the
//! larger warp tiles already amortize (a w value split once per 16·`mt` rows).

use crate::abi::{Arg, KernelError, LaunchDims};
use crate::{CudaSource, KernelDef};

use super::{PARAMS, tf32};

/// One launch configuration of the 3xTF32 linear ([`BASE`] or a tile variant). The CUDA entry
/// repeats these numbers as template arguments (a test checks the two agree).
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
    /// Chain groups per CTA (4: one chain each; 1: every warp runs the four chains).
    pub cg: usize,
    /// CTAs per cluster, one chain each (4), or 1.
    pub cl: usize,
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

    /// Bytes of dynamic shared memory: the staging ring, `stages · (bm + bn) · (bk / cl + 4)`
    /// floats, or the chains' exchange (three partial tiles for `cg = 4`, one for `cl = 4`),
    /// whichever is larger.
    pub const fn shared_bytes(&self) -> usize {
        let stage = self.stages * (self.bm() + self.bn()) * (self.bk / self.cl + 4);
        let slots = if self.cl == 4 { 1 } else { self.cg - 1 };
        let red = slots * self.bm() * self.bn();
        4 * if stage > red { stage } else { red }
    }

    /// The launch over `rows × out` outputs: grid `(⌈out / bn⌉, ⌈rows / bm⌉, cl)`; `None` when
    /// empty or past CUDA's grid limits.
    pub fn dims(&self, rows: usize, out: usize) -> Option<LaunchDims> {
        let gx = out.div_ceil(self.bn());
        let gy = rows.div_ceil(self.bm());
        if gx == 0 || gy == 0 || gx > i32::MAX as usize || gy > 65_535 {
            return None;
        }
        Some(LaunchDims {
            grid: (gx as u32, gy as u32, self.cl as u32),
            block: (self.threads(), 1, 1),
            shared_bytes: self.shared_bytes() as u32,
        })
    }

    /// CTAs of a `rows × out` launch.
    pub fn ctas(&self, rows: usize, out: usize) -> usize {
        out.div_ceil(self.bn()) * rows.div_ceil(self.bm()) * self.cl
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
    cl: 1,
    bk: 64,
    stages: 3,
    min_blocks: 1,
};

macro_rules! tile {
    ($kid:ident, $vid:ident, $src:ident, $host:ident, $name:literal, $attr:literal, $mt:literal, $ntl:literal, $wm:literal, $wn:literal, $cg:literal, $cl:literal, $bk:literal, $st:literal, $mb:literal, $nt:literal) => {
        #[doc = concat!("The NVRTC module of [`", stringify!($kid), "`] alone: `common.cuh`, ",
                        "`gemm.cu`, `gemm_tiles.cuh` and this variant's entry.")]
        pub static $src: CudaSource = CudaSource {
            name: concat!("gemm/linear_tf32x3_", $name),
            code: concat!(
                include_str!("../../cuda/common.cuh"),
                include_str!("../../cuda/gemm.cu"),
                include_str!("../../cuda/gemm_tiles.cuh"),
                "\nextern \"C\" __global__ void __launch_bounds__(",
                $nt,
                ", ",
                $mb,
                ") ",
                $attr,
                "gemm_linear_tf32x3_",
                $name,
                "(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, \
                 int bias, int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3v<",
                $mt, ", ", $ntl, ", ", $wm, ", ", $wn, ", ", $cg, ", ", $cl, ", ", $bk, ", ",
                $st, ", ", $nt,
                ">(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
            ),
        };
        #[doc = concat!("`gemm.linear_tf32x3_", $name, "`: the 3xTF32 linear, bit-equal to ",
                        "`gemm.linear_tf32x3` (module docs).")]
        pub static $kid: KernelDef = KernelDef {
            name: concat!("gemm.linear_tf32x3_", $name),
            source: &$src,
            entry: concat!("gemm_linear_tf32x3_", $name),
            params: PARAMS,
            host: $host,
        };
        #[doc = concat!("The launch configuration of [`", stringify!($kid), "`].")]
        pub static $vid: Tf32Variant = Tf32Variant {
            kernel: &$kid,
            mt: $mt,
            ntl: $ntl,
            wm: $wm,
            wn: $wn,
            cg: $cg,
            cl: $cl,
            bk: $bk,
            stages: $st,
            min_blocks: $mb,
        };
        unsafe fn $host(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
            // SAFETY: forwarded HostFn contract.
            unsafe { super::host_linear_by($kid.name, |r, o| $vid.dims(r, o), tf32::dot, dims, a) }
        }
    };
}

tile!(
    LINEAR_C32X64,
    C32X64,
    SOURCE_C32X64,
    host_c32x64,
    "c32x64",
    "T3V_CLUSTER4 ",
    1,
    4,
    2,
    2,
    1,
    4,
    128,
    4,
    4,
    128
);
tile!(
    LINEAR_C32X32,
    C32X32,
    SOURCE_C32X32,
    host_c32x32,
    "c32x32",
    "T3V_CLUSTER4 ",
    1,
    2,
    2,
    2,
    1,
    4,
    128,
    4,
    4,
    128
);
tile!(
    LINEAR_C64X64,
    C64X64,
    SOURCE_C64X64,
    host_c64x64,
    "c64x64",
    "T3V_CLUSTER4 ",
    2,
    4,
    2,
    2,
    1,
    4,
    128,
    4,
    3,
    128
);
tile!(
    LINEAR_T64X64,
    T64X64,
    SOURCE_T64X64,
    host_t64x64,
    "t64x64",
    "",
    2,
    4,
    2,
    2,
    4,
    1,
    64,
    4,
    1,
    512
);
tile!(
    LINEAR_T64X64R,
    T64X64R,
    SOURCE_T64X64R,
    host_t64x64r,
    "t64x64r",
    "",
    2,
    4,
    2,
    2,
    1,
    1,
    32,
    4,
    2,
    128
);

/// The tile variants (not [`BASE`]), in the order `dcc-bench kernels` lists them.
pub static TILES: &[&Tf32Variant] = &[&C32X64, &C32X32, &C64X64, &T64X64, &T64X64R];

/// The kernels of [`TILES`].
pub static KERNELS: &[&KernelDef] = &[
    &LINEAR_C32X64,
    &LINEAR_C32X32,
    &LINEAR_C64X64,
    &LINEAR_T64X64,
    &LINEAR_T64X64R,
];

/// Rows from which [`pick`] takes the in-CTA 64 × 64 tile (sessions batched: enough CTAs
/// without the cluster split).
pub const LARGE_ROWS: usize = 512;

/// K below which [`pick`] keeps the base kernel at small row counts: a chain of fewer than
/// eight steps gains little from the cluster split's deeper staging.
pub const CLUSTER_MIN_K: usize = 256;

/// CTAs a launch should reach to give each of an H100's 132 SMs work (about one each).
pub const MIN_CTAS: usize = 128;

/// The cluster tiles [`pick`] tries at small row counts, the most reuse per staged value first.
pub static CLUSTER_TILES: &[&Tf32Variant] = &[&C64X64, &C32X64];

/// The variant the 3xTF32 `linear` launches for `rows × out` outputs over `k` inputs. Speed
/// only: every variant computes the same bits. From [`LARGE_ROWS`] rows [`T64X64`]; below,
/// from [`CLUSTER_MIN_K`] inputs, the first of [`CLUSTER_TILES`] that still launches
/// [`MIN_CTAS`] CTAs (L2 traffic per output falls as `1/bm + 1/bn`, so the largest tile that
/// fills the SMs), else [`C32X32`]; below that K [`BASE`]. At one session's 112 rows:
/// `c64x64` for 1,536 and 2,048 outputs, `c32x64` for 512, `c32x32` for 80. A first rule from
/// the H100's resources (module docs), to be set from `dcc-bench kernels`.
pub fn pick(rows: usize, out: usize, k: usize) -> &'static Tf32Variant {
    if rows >= LARGE_ROWS {
        &T64X64
    } else if k < CLUSTER_MIN_K {
        &BASE
    } else {
        CLUSTER_TILES
            .iter()
            .copied()
            .find(|v| v.ctas(rows, out) >= MIN_CTAS)
            .unwrap_or(&C32X32)
    }
}

/// Every variant [`pick`] can choose: what a process on the 3xTF32 path compiles
/// ([`T64X64R`] serves the benchmark only).
pub static PICKED: &[&Tf32Variant] = &[&BASE, &C64X64, &C32X64, &C32X32, &T64X64];

/// The variant whose kernel is `name` (`gemm.linear_tf32x3`, `gemm.linear_tf32x3_c32x64`, ...).
pub fn variant(name: &str) -> Option<&'static Tf32Variant> {
    std::iter::once(&BASE)
        .chain(TILES.iter().copied())
        .find(|v| v.kernel.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::NO_ACT;

    /// Every entry instantiates the template with the table's numbers, the cluster attribute
    /// exactly on the `cl = 4` entries; the shapes are the kernel's (whole `mma` tiles, 32-k
    /// groups, a supported chain layout) and fit an H100.
    #[test]
    fn entries_match_the_table_and_fit() {
        for v in TILES {
            let src = v.kernel.source.code;
            assert_eq!(src.matches("extern \"C\" __global__ void ").count(), 1);
            let inst = format!(
                "gemm_t3v<{}, {}, {}, {}, {}, {}, {}, {}, {}>",
                v.mt,
                v.ntl,
                v.wm,
                v.wn,
                v.cg,
                v.cl,
                v.bk,
                v.stages,
                v.threads()
            );
            assert!(src.contains(&inst), "{}: no {inst}", v.kernel.name);
            let bounds = format!("__launch_bounds__({}, {})", v.threads(), v.min_blocks);
            assert!(src.contains(&bounds), "{}", v.kernel.name);
            assert_eq!(
                src.contains(&format!("T3V_CLUSTER4 {}(", v.kernel.entry)),
                v.cl == 4,
                "{}",
                v.kernel.name
            );
            assert!(
                matches!((v.cg, v.cl), (4, 1) | (1, 1) | (1, 4)),
                "{}",
                v.kernel.name
            );
            assert!(v.bk % 32 == 0 && (v.bk / v.cl) % 8 == 0 && v.stages >= 2);
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
            variant("gemm.linear_tf32x3_t64x64").unwrap(),
            &T64X64
        ));
        assert!(variant("gemm.linear_32x64").is_none());
    }

    /// The cluster variants launch four CTAs per tile along z; the model's shapes at one
    /// session give every SM of an H100 work on the picked variant.
    #[test]
    fn pick_covers_the_model_and_stays_in_picked() {
        assert_eq!(C32X64.dims(112, 512).unwrap().grid, (8, 4, 4));
        assert_eq!(T64X64.dims(1792, 512).unwrap().grid, (8, 28, 1));
        for (k, out, name) in [
            (512, 1536, "c64x64"),
            (512, 512, "c32x64"),
            (1536, 512, "c32x64"),
            (512, 2048, "c64x64"),
            (2048, 512, "c32x64"),
            (320, 512, "c32x64"),
            (512, 80, "c32x32"),
        ] {
            let v = pick(112, out, k);
            assert_eq!(
                v.kernel.name,
                format!("gemm.linear_tf32x3_{name}"),
                "{k} → {out}"
            );
            assert!(out < 512 || v.ctas(112, out) >= MIN_CTAS, "{k} → {out}");
        }
        assert!(std::ptr::eq(pick(112, 512, 80), &BASE));
        assert!(std::ptr::eq(pick(1600, 80, 512), &T64X64));
        let mut seen = vec![false; PICKED.len()];
        for rows in [1, 2, 7, 112, 256, 511, 512, 1600, 1792] {
            for out in [1, 80, 512, 1023, 1024, 2048] {
                for k in [1, 80, 255, 256, 2048] {
                    let v = pick(rows, out, k);
                    let i = PICKED.iter().position(|p| std::ptr::eq(*p, v)).unwrap();
                    seen[i] = true;
                    assert!(v.dims(rows, out).is_some());
                }
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
