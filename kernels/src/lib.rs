//! dcc-kernels: CUDA C sources under `kernels/cuda` and their bit-faithful Rust host twins.
//!
//! # The kernel model
//!
//! A kernel is a [`KernelDef`]: a name, the CUDA C module ([`CudaSource`]) that defines it, the
//! `extern "C"` entry symbol, its declared parameter kinds ([`Param`]) and a host twin
//! ([`HostFn`]). The runtime's CUDA backend compiles each [`CudaSource`] once per process with
//! NVRTC (options: [`NVRTC_OPTIONS`]), loads it once per context and launches the entry with raw
//! device addresses and scalars ([`Arg`]). The Host backend calls the twin with the same
//! arguments, where every [`DevPtr`] is a host address.
//!
//! Launch arguments are plain integers and floats, so a launch can be recorded on a tape (the
//! Host backend's "graph") and replayed against the pointers it saw at capture.
//!
//! # Bit-faithfulness rules (what makes a twin equal to its CUDA kernel bit for bit)
//!
//! * NVRTC compiles with `--fmad=false`: `a*b + c` is a rounded multiply then a rounded add on
//!   the device, exactly as in Rust. Where a kernel wants a fused multiply-add it writes
//!   `__fmaf_rn(a, b, c)` and the twin writes `a.mul_add(b, c)`.
//! * `--ftz=false --prec-div=true --prec-sqrt=true`: IEEE division and square root, denormals
//!   kept; `x / y` and `x.sqrt()` in Rust match.
//! * Transcendentals (`expf`, `tanhf`, `logf`, ...) of the CUDA math library are *not* bit-equal
//!   to Rust's. A kernel that needs them implements the function from `+ - * /` (and
//!   `__fmaf_rn`) in a `__device__` helper and the twin ports that helper line by line.
//! * Reductions have one fixed order, the same in both (e.g. one thread walks a row, or a fixed
//!   tree over a fixed block size); no atomics in reductions.
//! * Integer arithmetic wraps (`wrapping_*` in Rust, unsigned overflow in C).
//!
//! # Families
//!
//! Kernels are grouped by what they compute, one module per family: [`norm`], [`act`],
//! [`elementwise`], [`attention`], [`copy`], [`embed`], [`gemm`], [`carry`], [`rng`], [`conv`]
//! (direct 1-D convolutions), [`signal`] (harmonic excitation, STFT/ISTFT) (and [`synthetic`], the
//! runtime's test kernels). A kernel is named `<family>.<op>` and its CUDA entry
//! `<family>_<op>`. Each family's host twins live beside its kernels in `kernels/src/<family>.rs`;
//! a twin rebuilds slices from the raw addresses and calls the family's public slice function that
//! performs the kernel's arithmetic: that function *is* the twin's body, so there is one copy of
//! every row body. A `Linear` (and the flow decoder's im2col convolutions) runs on one of four
//! GEMM paths the caller picks (`dcc_runtime::ops::GemmPath`): the runtime's `Backend::gemm`
//! (cuBLAS on a device, an ordered-loop twin on the Host backend; the default), [`gemm`]'s
//! batch-invariant linear (one k order fixed by K alone, bit-identical on both backends), its
//! 3xTF32 tensor-core sibling ([`gemm::tf32`]: batch-invariant, its twin a model within a derived
//! bound; on that path the attention runs on tensor cores too, [`attention::tf32`]), or the
//! half-precision linear over binary16 weights ([`gemm::f16`]: batch-invariant, its twin a model
//! within a derived bound); those three are the kernels here whose twins are not bit-equal. [`conv`]
//! holds the vocoder's small direct convolutions (any padding side, dilation, stride, nearest
//! upsampling, float64), one thread per output in a fixed tap order.
//! [`math`] holds the twins of the shared `__device__` helpers (transcendentals, the warp reduction order) of `kernels/cuda/common.cuh`.
//! No name here refers to a model: the same kernels serve any model the runtime runs.
//!
//! Layout conventions of the model families: activations are row-major `[rows, cols]`
//! ("time-major": one row per frame, channels contiguous); a `torch.nn.Linear` weight is
//! `[out, in]` row-major, as stored in a vendor state_dict; convolution weights are re-laid out
//! once at load time from torch's `[out, in, k]` to `[out, k, in]` (by the model's layer code) so
//! that a 1-D convolution over a time-major input is a plain GEMM over overlapping rows: output
//! row `t` reads the `k` consecutive input rows from `t`, one contiguous run of `k·c_in` floats,
//! so the input is `[t_out, k·c_in]` with leading dimension `c_in`.
//!
//! # Adding a family
//!
//! 1. Write `kernels/cuda/<family>.cu` with `extern "C" __global__` entries named
//!    `<family>_<op>`. If it needs the shared helpers, its source is `common.cuh` followed by the
//!    family file (one NVRTC translation unit, no `#include`).
//! 2. Write `kernels/src/<family>.rs` (or `<family>/mod.rs` when long) with
//!    `pub static SOURCE: CudaSource = CudaSource { name: "<family>", code:
//!    concat!(include_str!("../cuda/common.cuh"), include_str!("../cuda/<family>.cu")) };` (or
//!    just `include_str!` of the family file), one `pub static FOO: KernelDef` per entry
//!    (`twin::kdef!` names it `<family>.<op>` / `<family>_<op>`), its host twin over the family's
//!    public slice function, and `pub static KERNELS: &[&KernelDef] = &[&FOO, ..];`.
//! 3. Add `pub mod <family>;` below and `<family>::KERNELS` to [`MODULES`], and to
//!    [`FIXED_MODULES`] when the runtime's ops launch it (a model then preloads it; a test
//!    fails until every family is classified).
//! 4. The runtime's tests compile every module in [`MODULES`] on the GPU machine
//!    (`cuda_all_registered_modules_compile`), and each twin gets a test against its kernel there
//!    (`runtime/tests/kernels.rs`).
//!
//! Kernel names are unique across the registry ([`registry`] checks it in a test).

pub mod abi;
pub mod act;
pub mod attention;
pub mod carry;
pub mod conv;
pub mod copy;
pub mod elementwise;
pub mod embed;
pub mod gemm;
pub mod half_kv;
pub mod math;
pub mod norm;
pub mod philox;
pub mod rng;
pub mod signal;
pub mod synthetic;
mod twin;

pub use abi::{Arg, Args, DevPtr, KernelError, LaunchDims, Param};

/// One CUDA C translation unit, compiled as a whole by NVRTC.
#[derive(Debug)]
pub struct CudaSource {
    /// Module name, unique in the registry; the runtime caches compiled PTX under it. Either the
    /// family (`norm`: the module is `kernels/cuda/norm.cu`) or `<family>/<part>` for a family
    /// compiled as several modules, each one part of the family's kernels (the invariant
    /// linear's variants, [`gemm`]: a process compiles only those it launches).
    pub name: &'static str,
    /// CUDA C text (`include_str!` of `kernels/cuda/<family>.cu`, after `common.cuh` for the
    /// families that share its helpers, and for a part the entries of that part).
    pub code: &'static str,
}

impl CudaSource {
    /// The family: the module name up to its `/`, the name of the `kernels/cuda/*.cu` file.
    pub fn family(&self) -> &'static str {
        self.name.split('/').next().unwrap_or(self.name)
    }
}

/// Host twin of a kernel: performs the whole launch (every block and thread) on the CPU.
///
/// # Safety
/// Every pointer argument must address host memory valid for everything the kernel reads and
/// writes at these arguments (the Host backend only hands out addresses of its own buffers).
pub type HostFn = unsafe fn(dims: &LaunchDims, args: &[Arg]) -> Result<(), KernelError>;

/// A kernel: CUDA entry plus host twin.
#[derive(Debug)]
pub struct KernelDef {
    /// Unique name across the registry (`<family>.<op>`).
    pub name: &'static str,
    pub source: &'static CudaSource,
    /// The `extern "C"` symbol in `source`.
    pub entry: &'static str,
    /// Declared parameter kinds, in order; every launch is checked against them.
    pub params: &'static [Param],
    pub host: HostFn,
}

impl KernelDef {
    /// Checks an argument list against the declared parameters.
    pub fn check_args(&self, args: &[Arg]) -> Result<(), KernelError> {
        if args.len() != self.params.len() {
            return Err(KernelError::Args(format!(
                "{}: {} arguments given, {} declared",
                self.name,
                args.len(),
                self.params.len()
            )));
        }
        for (i, (a, p)) in args.iter().zip(self.params).enumerate() {
            if a.param() != *p {
                return Err(KernelError::Args(format!(
                    "{}: argument {i} is {:?}, declared {p:?}",
                    self.name,
                    a.param()
                )));
            }
        }
        Ok(())
    }

    /// Runs the host twin after checking the argument kinds.
    ///
    /// # Safety
    /// See [`HostFn`].
    pub unsafe fn run_host(&self, dims: &LaunchDims, args: &[Arg]) -> Result<(), KernelError> {
        self.check_args(args)?;
        // SAFETY: forwarded from the caller.
        unsafe { (self.host)(dims, args) }
    }
}

/// NVRTC options every module is compiled with (see the bit-faithfulness rules above). The
/// runtime adds `--gpu-architecture` for the device it runs on.
pub const NVRTC_OPTIONS: &[&str] = &[
    "--fmad=false",
    "--ftz=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--std=c++17",
];

/// Every module's kernel list. Extend with one line per module.
pub static MODULES: &[&[&KernelDef]] = &[
    norm::KERNELS,
    act::KERNELS,
    elementwise::KERNELS,
    attention::KERNELS,
    attention::tf32::KERNELS,
    attention::f16::KERNELS,
    copy::KERNELS,
    embed::KERNELS,
    gemm::KERNELS,
    gemm::f16::KERNELS,
    half_kv::KERNELS,
    carry::KERNELS,
    rng::KERNELS,
    conv::KERNELS,
    signal::KERNELS,
    synthetic::KERNELS,
];

/// The families a model's ops launch whatever their shapes and GEMM path: every family in
/// [`MODULES`] but the invariant linear's ([`gemm`], whose variants are chosen by shape and only
/// launched on that GEMM path: [`gemm::PICKED`]) and the runtime's test kernels ([`synthetic`]).
/// Compilation is per module and each of these is one small module, so a process preloads
/// them whole ([`fixed`]); a test checks that every family of [`MODULES`] is here or one of
/// those two.
pub static FIXED_MODULES: &[&[&KernelDef]] = &[
    norm::KERNELS,
    act::KERNELS,
    elementwise::KERNELS,
    attention::KERNELS,
    attention::tf32::KERNELS,
    attention::f16::KERNELS,
    copy::KERNELS,
    embed::KERNELS,
    half_kv::KERNELS,
    carry::KERNELS,
    rng::KERNELS,
    conv::KERNELS,
    signal::KERNELS,
];

/// Every kernel of [`FIXED_MODULES`].
pub fn fixed() -> Vec<&'static KernelDef> {
    FIXED_MODULES.concat()
}

/// All registered kernels.
pub fn registry() -> impl Iterator<Item = &'static KernelDef> {
    MODULES.iter().flat_map(|m| m.iter().copied())
}

/// Looks a kernel up by name.
pub fn kernel(name: &str) -> Option<&'static KernelDef> {
    registry().find(|k| k.name == name)
}

/// Every distinct CUDA source in the registry.
pub fn sources() -> Vec<&'static CudaSource> {
    let mut out: Vec<&'static CudaSource> = Vec::new();
    for k in registry() {
        if !out.iter().any(|s| s.name == k.source.name) {
            out.push(k.source);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_entries_exist() {
        let mut names: Vec<&str> = registry().map(|k| k.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate kernel names");
        // Module names key the runtime's PTX caches: two sources may not share one.
        for a in registry() {
            for b in registry() {
                assert!(
                    a.source.name != b.source.name || std::ptr::eq(a.source, b.source),
                    "two modules named {}",
                    a.source.name
                );
            }
        }
        for k in registry() {
            // `void name(`, or `void __launch_bounds__(…) name(`.
            let sig = format!(" {}(", k.entry);
            assert!(
                k.source.code.contains(&sig),
                "{}: entry `{}` not found in {}.cu",
                k.name,
                k.entry,
                k.source.name
            );
            assert!(
                k.source.code.contains("extern \"C\""),
                "{}: no extern C",
                k.source.name
            );
        }
    }

    /// Every CUDA file under `kernels/cuda` is a registered module (its kernels in [`MODULES`]):
    /// `<family>.cu`, or `<family>_<part>.cu` for a part of a family kept in a file of its own
    /// (`gemm_f16.cu`), whose text some registered source holds; and every `extern "C"` entry of
    /// every registered source is some kernel's entry.
    #[test]
    fn every_module_and_entry_is_registered() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
        let stems: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter_map(|f| f.strip_suffix(".cu").map(str::to_owned))
            .collect();
        for f in &stems {
            let text = std::fs::read_to_string(dir.join(format!("{f}.cu"))).unwrap();
            assert!(
                sources().iter().any(|s| s.code.contains(&text)),
                "kernels/cuda/{f}.cu is in no registered module"
            );
        }
        let mut files: Vec<String> = stems
            .iter()
            .map(|f| f.split('_').next().unwrap_or(f).to_owned())
            .collect();
        files.sort();
        files.dedup();
        let mut modules: Vec<&str> = sources().iter().map(|s| s.family()).collect();
        modules.sort_unstable();
        modules.dedup();
        assert_eq!(
            files, modules,
            "kernels/cuda/*.cu vs the modules in MODULES"
        );
        for s in sources() {
            let mut rest = s.code;
            while let Some(i) = rest.find("extern \"C\" __global__ void ") {
                rest = &rest[i + "extern \"C\" __global__ void ".len()..];
                if let Some(bounds) = rest.strip_prefix("__launch_bounds__(") {
                    rest = bounds[bounds.find(')').unwrap() + 1..].trim_start();
                }
                let entry = &rest[..rest.find('(').unwrap()];
                assert!(
                    registry().any(|k| k.entry == entry && std::ptr::eq(k.source, s)),
                    "{}: entry `{entry}` has no KernelDef",
                    s.name
                );
            }
        }
        for k in registry() {
            assert!(
                k.name.starts_with(&format!("{}.", k.source.family())),
                "{} is not named after its family {}",
                k.name,
                k.source.family()
            );
        }
    }

    /// [`MODULES`] is [`FIXED_MODULES`], the invariant linear's and the synthetic kernels.
    #[test]
    fn fixed_modules_are_every_family_but_two() {
        let fixed = fixed();
        for k in registry() {
            let listed = fixed.iter().any(|f| std::ptr::eq(*f, k));
            let family = k.source.family();
            assert_eq!(
                listed,
                family != "gemm" && family != "synthetic",
                "{}: in FIXED_MODULES {listed}",
                k.name
            );
        }
        assert_eq!(
            fixed.len() + gemm::KERNELS.len() + gemm::f16::KERNELS.len() + synthetic::KERNELS.len(),
            registry().count()
        );
    }

    #[test]
    fn check_args_rejects_mismatch() {
        let k = &synthetic::AFFINE;
        assert!(k.check_args(&[Arg::Ptr(DevPtr(8))]).is_err());
        let ok = [
            Arg::Ptr(DevPtr(8)),
            Arg::Ptr(DevPtr(16)),
            Arg::I64(1),
            Arg::F32(1.0),
            Arg::F32(0.0),
        ];
        assert!(k.check_args(&ok).is_ok());
        let bad = [
            Arg::Ptr(DevPtr(8)),
            Arg::Ptr(DevPtr(16)),
            Arg::I32(1),
            Arg::F32(1.0),
            Arg::F32(0.0),
        ];
        assert!(k.check_args(&bad).is_err());
    }
}
