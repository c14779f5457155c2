//! The CUDA backend: cudarc 0.19 (driver, NVRTC, cuBLAS), loaded dynamically.
//!
//! One context (the primary context of the ordinal), one non-default stream that all work is
//! ordered on, cudarc's per-buffer event tracking disabled (single stream: no cross-stream
//! synchronization is needed, and tracking events must not leak into captures). Kernels are
//! compiled by NVRTC once per module and architecture, the PTX kept in memory for the process and
//! on disk across processes ([`super::ptx_cache`]), and loaded once per backend.
//! cuBLAS gets a workspace the runtime allocates and counts, so capture never allocates, and
//! `CUBLAS_DEFAULT_MATH` (no TF32) for exact float32.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::cublas::sys as blas_sys;
use cudarc::cublaslt::{result as lt_res, sys as lt_sys};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use cudarc::driver::{result as drv, sys as drv_sys};
use cudarc::nvrtc::{CompileOptions, Ptx};
use dcc_kernels::{Arg, CudaSource, DevPtr, KernelDef, LaunchDims};

use super::bounds::{self, Access, Allocation, Live, lock};
use super::gate::{Pass, Tracer};
use super::ptx_cache::{self, DiskCache, Origin};
use super::{
    AllocKind, Backend, BackendKind, DeviceBuffer, Gemm, Graph, GraphImpl, Marker, MarkerImpl,
    MemCounter, MemoryReport, Owner, StreamOp,
};
use crate::error::{BlasError, Error, NoDevice, Result};

/// Dynamic shared memory every kernel may take without opting in.
const DEFAULT_DYNAMIC_SHARED_BYTES: u32 = 48 * 1024;

/// cuBLAS workspace the runtime owns (32 MiB, NVIDIA's recommendation for Hopper).
pub const CUBLAS_WORKSPACE_BYTES: usize = 32 << 20;

struct Blas {
    handle: blas_sys::cublasHandle_t,
    _workspace: DeviceBuffer,
}

// SAFETY: a cuBLAS handle may be used from any thread as long as calls are serialized; the
// backend only touches it under its Mutex.
unsafe impl Send for Blas {}

/// Drop never panics and cannot return an error: a failed release is logged to stderr.
fn log_release<E: std::fmt::Debug>(what: &str, r: std::result::Result<(), E>) {
    if let Err(e) = r {
        eprintln!("dcc-runtime: releasing {what} failed: {e:?}");
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: the handle was created by cublasCreate and is destroyed once.
        let r = unsafe { cudarc::cublas::result::destroy_handle(self.handle) };
        log_release("the cuBLAS handle", r);
    }
}

/// One cuBLASLt GEMM shape with a bias epilogue: descriptor, layouts and the algorithm the
/// heuristic picked once (so every later call of the shape, eager or captured, runs the same
/// kernels and rounds the same).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct LtKey {
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    /// Alignment in bytes (power of two, at most 256) of A, B, C.
    align: [u32; 3],
}

struct LtPlan {
    desc: lt_sys::cublasLtMatmulDesc_t,
    a: lt_sys::cublasLtMatrixLayout_t,
    b: lt_sys::cublasLtMatrixLayout_t,
    c: lt_sys::cublasLtMatrixLayout_t,
    algo: lt_sys::cublasLtMatmulAlgo_t,
}

impl Drop for LtPlan {
    fn drop(&mut self) {
        for layout in [self.a, self.b, self.c] {
            // Null when `Lt::make` failed before creating it.
            if !layout.is_null() {
                // SAFETY: created once in `Lt::make`, destroyed once here.
                let r = unsafe { lt_res::destroy_matrix_layout(layout) };
                log_release("a cuBLASLt layout", r);
            }
        }
        // SAFETY: created first in `Lt::make` (never null in a plan), destroyed once here.
        let r = unsafe { lt_res::destroy_matmul_desc(self.desc) };
        log_release("a cuBLASLt matmul descriptor", r);
    }
}

/// cuBLASLt (bias-epilogue GEMMs). Shares the cuBLAS workspace: both run on the backend's one
/// stream, so their uses of it are ordered.
struct Lt {
    handle: lt_sys::cublasLtHandle_t,
    workspace: DevPtr,
    plans: HashMap<LtKey, LtPlan>,
}

// SAFETY: the handle and descriptors are only touched under the backend's Mutex.
unsafe impl Send for Lt {}

impl Drop for Lt {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: created by cublasLtCreate, destroyed once, after its descriptors.
        let r = unsafe { lt_res::destroy_handle(self.handle) };
        log_release("the cuBLASLt handle", r);
    }
}

fn align_of(p: DevPtr) -> u32 {
    if p.0 == 0 {
        256
    } else {
        (1u64 << p.0.trailing_zeros().min(8)) as u32
    }
}

/// The error a GEMM reports when setting up cuBLAS or cuBLASLt failed at `CudaBackend::new`.
fn unavailable(setup: &Error) -> Error {
    Error::Cublas(BlasError::Unavailable(Box::new(setup.clone())))
}

impl Lt {
    fn plan(&mut self, key: LtKey) -> Result<&LtPlan> {
        if !self.plans.contains_key(&key) {
            let plan = Self::make(self.handle, key)?;
            self.plans.insert(key, plan);
        }
        Ok(&self.plans[&key])
    }

    fn make(handle: lt_sys::cublasLtHandle_t, key: LtKey) -> Result<LtPlan> {
        use lt_sys::cublasLtMatmulDescAttributes_t as D;
        use lt_sys::cublasLtMatmulPreferenceAttributes_t as P;
        let f32t = lt_sys::cudaDataType::CUDA_R_32F;
        let desc =
            lt_res::create_matmul_desc(lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, f32t)?;
        let layout = |rows: usize, cols: usize, ld: usize| {
            lt_res::create_matrix_layout(f32t, rows as u64, cols as u64, ld as i64)
        };
        let (ar, ac) = if key.trans_a {
            (key.k, key.m)
        } else {
            (key.m, key.k)
        };
        let (br, bc) = if key.trans_b {
            (key.n, key.k)
        } else {
            (key.k, key.n)
        };
        // Built one by one so that a failure destroys what exists (LtPlan's Drop).
        let mut plan = LtPlan {
            desc,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            c: std::ptr::null_mut(),
            algo: lt_sys::cublasLtMatmulAlgo_t { data: [0; 8] },
        };
        plan.a = layout(ar, ac, key.lda)?;
        plan.b = layout(br, bc, key.ldb)?;
        plan.c = layout(key.m, key.n, key.ldc)?;
        let set = |attr: D, v: &[u8]| {
            // SAFETY: desc is live; the value buffer has the attribute's size.
            unsafe {
                lt_res::set_matmul_desc_attribute(plan.desc, attr, v.as_ptr() as *const _, v.len())
            }
            .map_err(Error::from)
        };
        set(
            D::CUBLASLT_MATMUL_DESC_TRANSA,
            &(key.trans_a as i32).to_ne_bytes(),
        )?;
        set(
            D::CUBLASLT_MATMUL_DESC_TRANSB,
            &(key.trans_b as i32).to_ne_bytes(),
        )?;
        let epi = lt_sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS as u32;
        set(D::CUBLASLT_MATMUL_DESC_EPILOGUE, &epi.to_ne_bytes())?;
        let pref = lt_res::create_matmul_pref()?;
        let heur = (|| {
            let setp = |attr: P, v: &[u8]| {
                // SAFETY: pref is live; the value buffer has the attribute's size.
                unsafe {
                    lt_res::set_matmul_pref_attribute(pref, attr, v.as_ptr() as *const _, v.len())
                }
            };
            setp(
                P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &(CUBLAS_WORKSPACE_BYTES as u64).to_ne_bytes(),
            )?;
            setp(
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                &key.align[0].to_ne_bytes(),
            )?;
            setp(
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                &key.align[1].to_ne_bytes(),
            )?;
            setp(
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                &key.align[2].to_ne_bytes(),
            )?;
            setp(
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                &key.align[2].to_ne_bytes(),
            )?;
            // SAFETY: every descriptor is live.
            unsafe {
                lt_res::get_matmul_algo_heuristic(
                    handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                )
            }
        })();
        // SAFETY: created above, destroyed once.
        let r = unsafe { lt_res::destroy_matmul_pref(pref) };
        log_release("a cuBLASLt preference", r);
        plan.algo = heur?.algo;
        Ok(plan)
    }
}

/// The most threads [`CudaBackend::load_modules`] compiles modules on.
const MAX_COMPILE_THREADS: usize = 8;

/// Process-wide PTX cache: (module, arch) → PTX text.
fn ptx_cache() -> MutexGuard<'static, HashMap<(&'static str, String), String>> {
    static CACHE: OnceLock<Mutex<HashMap<(&'static str, String), String>>> = OnceLock::new();
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The on-disk PTX cache of this process ([`ptx_cache::dir`]), with the NVRTC version its keys
/// include; `None` when disabled or when NVRTC does not say its version.
fn disk_cache() -> Option<&'static (DiskCache, (i32, i32))> {
    static DISK: OnceLock<Option<(DiskCache, (i32, i32))>> = OnceLock::new();
    DISK.get_or_init(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints through valid pointers; the NVRTC library was
        // found present before any backend exists (CudaBackend::new).
        let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        let ok = r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS;
        Some((DiskCache::new(ptx_cache::dir()?), (major, minor))).filter(|_| ok)
    })
    .as_ref()
}

/// NVRTC options of every module for `arch`: [`dcc_kernels::NVRTC_OPTIONS`] and the
/// architecture.
fn nvrtc_options(arch: &str) -> Vec<String> {
    let mut options: Vec<String> = dcc_kernels::NVRTC_OPTIONS
        .iter()
        .map(|s| s.to_string())
        .collect();
    options.push(format!("--gpu-architecture={arch}"));
    options
}

/// `src` compiled by NVRTC for `arch` (`sm_90`, ...) with the options every module is compiled
/// with, as PTX text: no device and no cache. What `tests/nvrtc.rs` checks every registered
/// module with, on any machine where libnvrtc loads ([`nvrtc_available`]), GPU or not.
pub fn compile_ptx(src: &'static CudaSource, arch: &str) -> Result<String> {
    nvrtc(src, nvrtc_options(arch))
}

/// Whether libnvrtc can be loaded (cudarc panics on the first NVRTC call where it cannot).
pub fn nvrtc_available() -> bool {
    // SAFETY: tries to open the library under cudarc's candidate names and closes it again;
    // no symbol is looked up or called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// `src` compiled by NVRTC with `options`, as PTX text.
fn nvrtc(src: &'static CudaSource, options: Vec<String>) -> Result<String> {
    let opts = CompileOptions {
        options,
        name: Some(format!("{}.cu", src.name)),
        ..Default::default()
    };
    let ptx =
        cudarc::nvrtc::compile_ptx_with_opts(src.code, opts).map_err(|error| Error::Nvrtc {
            module: src.name.into(),
            error,
        })?;
    // A compiled image is NUL-terminated text.
    Ok(match ptx.as_bytes() {
        Some(b) => String::from_utf8_lossy(b.strip_suffix(&[0]).unwrap_or(b)).into_owned(),
        None => ptx.to_src(),
    })
}

/// The PTX of `src` for `arch`: this process's cache, else [`ptx_cache::fetch`] (the disk
/// cache, else NVRTC, stored on disk; a failed disk write is reported once per process).
/// `fresh`: compile whatever is cached (the cached copy did not load).
fn module_ptx(src: &'static CudaSource, arch: &str, fresh: bool) -> Result<(String, Origin)> {
    let mem_key = (src.name, arch.to_string());
    if !fresh && let Some(p) = ptx_cache().get(&mem_key).cloned() {
        return Ok((p, Origin::Process));
    }
    let options = nvrtc_options(arch);
    let disk = disk_cache().map(|(c, v)| (c, ptx_cache::key(src.code, &options, arch, *v)));
    let got = ptx_cache::fetch(
        disk.as_ref().map(|(c, k)| (*c, k.as_str())),
        fresh,
        || nvrtc(src, options),
        |c, e| {
            static WARNED: std::sync::atomic::AtomicBool =
                std::sync::atomic::AtomicBool::new(false);
            if !WARNED.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "dcc-runtime: the PTX cache at {} is not writable ({e}); compiling in every \
                     process (set {}=off to silence this)",
                    c.dir().display(),
                    ptx_cache::DIR_VAR
                );
            }
        },
    )?;
    ptx_cache().insert(mem_key, got.0.clone());
    Ok(got)
}

/// The CUDA backend.
pub struct CudaBackend {
    // Field order is drop order: cuBLAS handles and buffers before the stream and context
    // (cuBLASLt first: it uses the cuBLAS workspace).
    /// The first error of setting the library up, if any (every GEMM then reports it).
    lt: Result<Mutex<Lt>, Error>,
    blas: Result<Mutex<Blas>, Error>,
    /// Loaded kernels, with the dynamic shared memory each may take (raised on demand above the
    /// default 48 KB, `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    functions: Mutex<HashMap<&'static str, (CudaFunction, u32)>>,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    name: String,
    ordinal: u32,
    arch: String,
    /// The memory ledger, with the registry of live allocations: every operand of every
    /// operation is checked against it before the CUDA call is issued (the same checks as the
    /// Host twin, [`bounds`]). A buffer is unregistered (under the registry's lock) before its
    /// slice frees the memory, stream-ordered after all work enqueued so far (`cuMemFreeAsync`
    /// on the backend's stream, or a synchronize then `cuMemFree`), so an operation either was
    /// checked and enqueued before the free or finds the buffer gone. It also holds the capture
    /// gate: the stream is captured by one thread, and only that thread's work reaches it
    /// while it captures (a capturing stream would take in work enqueued from any thread).
    counter: Arc<MemCounter>,
    /// The allocations the current capture's operations touched (host memory only, reserved at
    /// `begin_capture`; a lookup itself never allocates).
    touched: Mutex<Vec<Allocation>>,
    tracer: Tracer,
    free_before_capture: Mutex<Option<usize>>,
    launches: AtomicU64,
}

impl CudaBackend {
    /// Opens device `ordinal`. Fails with [`Error::NoDevice`] when the driver library is absent,
    /// no device exists, or NVRTC is missing.
    pub fn new(ordinal: usize) -> Result<CudaBackend> {
        // SAFETY: only tries to dlopen the driver library.
        if !unsafe { drv_sys::is_culib_present() } {
            return Err(Error::NoDevice(NoDevice::Missing(
                "the CUDA driver library (libcuda)",
            )));
        }
        if !nvrtc_available() {
            return Err(Error::NoDevice(NoDevice::Missing(
                "the NVRTC library (libnvrtc)",
            )));
        }
        let count = CudaContext::device_count().map_err(|e| Error::NoDevice(NoDevice::Init(e)))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoDevice(NoDevice::Ordinal {
                requested: ordinal,
                present: count,
            }));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|error| Error::NoDevice(NoDevice::Context { ordinal, error }))?;
        // SAFETY: every operation of this backend runs on the one stream created below, so the
        // cross-stream events cudarc would record per buffer are not needed (and must not be
        // recorded into captures).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let name = ctx.name()?;
        let (major, minor) = ctx.compute_capability()?;
        let counter: Arc<MemCounter> = Arc::default();
        let mut backend = CudaBackend {
            lt: Err(Error::Invalid("cuBLASLt is not set up yet".into())),
            blas: Err(Error::Invalid("cuBLAS is not set up yet".into())),
            functions: Mutex::default(),
            modules: Mutex::default(),
            stream,
            ctx,
            name,
            ordinal: ordinal as u32,
            arch: format!("sm_{major}{minor}"),
            counter,
            touched: Mutex::default(),
            tracer: Tracer::default(),
            free_before_capture: Mutex::new(None),
            launches: AtomicU64::new(0),
        };
        backend.blas = backend.init_blas().map(Mutex::new);
        backend.lt = backend.init_lt().map(Mutex::new);
        Ok(backend)
    }

    fn init_lt(&self) -> Result<Lt> {
        let workspace = {
            let blas = self.blas.as_ref().map_err(unavailable)?;
            lock(blas)._workspace.ptr()
        };
        // SAFETY: only tries to dlopen cuBLASLt.
        if !unsafe { lt_sys::is_culib_present() } {
            return Err(Error::Cublas(BlasError::Missing("libcublasLt")));
        }
        self.ctx.bind_to_thread()?;
        let handle = lt_res::create_handle()?;
        Ok(Lt {
            handle,
            workspace,
            plans: HashMap::new(),
        })
    }

    fn init_blas(&self) -> Result<Blas> {
        // SAFETY: only tries to dlopen cuBLAS.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(Error::Cublas(BlasError::Missing("libcublas")));
        }
        self.ctx.bind_to_thread()?;
        let handle = cudarc::cublas::result::create_handle()?;
        let workspace = match self.alloc(CUBLAS_WORKSPACE_BYTES, AllocKind::Workspace) {
            Ok(w) => w,
            Err(e) => {
                // SAFETY: handle just created, destroyed once.
                let r = unsafe { cudarc::cublas::result::destroy_handle(handle) };
                log_release("the cuBLAS handle", r);
                return Err(e);
            }
        };
        let blas = Blas {
            handle,
            _workspace: workspace,
        };
        // SAFETY: valid handle and stream of this context.
        unsafe { cudarc::cublas::result::set_stream(handle, self.stream.cu_stream() as _) }?;
        // SAFETY: the workspace is a live device allocation of the stated size, owned by `blas`
        // for as long as the handle lives (dropped together).
        unsafe {
            blas_sys::cublasSetWorkspace_v2(
                handle,
                blas._workspace.ptr().0 as *mut _,
                CUBLAS_WORKSPACE_BYTES,
            )
            .result()?;
            blas_sys::cublasSetMathMode(handle, blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)
                .result()?;
        }
        Ok(blas)
    }

    /// The compute architecture NVRTC targets (`sm_90` on H100/H200).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Admits host work (allocation, host copies, synchronization, graph launches): refused on
    /// the capturing thread, waits for the capture to end on any other.
    fn host_work(&self, what: &'static str) -> Result<Pass<'_>> {
        let pass = self.counter.gate.enter();
        if pass.capturing() {
            return Err(Error::Capturing(what));
        }
        Ok(pass)
    }

    fn module(&self, k: &'static KernelDef) -> Result<Arc<CudaModule>> {
        let name = k.source.name;
        if let Some(m) = lock(&self.modules).get(name) {
            return Ok(m.clone());
        }
        let m = ptx_cache::load(
            module_ptx(k.source, &self.arch, false)?,
            |ptx| Ok(self.ctx.load_module(Ptx::from_src(ptx))?),
            || module_ptx(k.source, &self.arch, true).map(|p| p.0),
            |e| {
                eprintln!(
                    "dcc-runtime: the cached PTX of module `{name}` did not load ({e}); compiling \
                     it again"
                )
            },
        )?;
        lock(&self.modules).insert(name, m.clone());
        Ok(m)
    }

    /// Loads the modules of `kernels` not loaded yet, several at a time: on a machine whose
    /// caches are cold, NVRTC and the driver's PTX compiler take seconds per module (the
    /// 3xTF32 and f16 tile variants most), and one module's compile does not wait for
    /// another's. Each module is loaded once (duplicates are dropped first); the first error
    /// is returned, after every thread has finished.
    fn load_modules(&self, kernels: &[&'static KernelDef]) -> Result<()> {
        let mut todo: Vec<&'static KernelDef> = Vec::new();
        {
            let loaded = lock(&self.modules);
            for &k in kernels {
                let name = k.source.name;
                if !loaded.contains_key(name) && !todo.iter().any(|t| t.source.name == name) {
                    todo.push(k);
                }
            }
        }
        if todo.len() < 2 {
            return Ok(());
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_COMPILE_THREADS)
            .min(todo.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(k) = todo.get(i) else { return Ok(()) };
                            self.module(k)?;
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(Error::Invalid("a module-loading thread panicked".into()))
                    })
                })
                .collect()
        });
        results.into_iter().collect()
    }

    /// The kernel's function, allowed `shared` bytes of dynamic shared memory; `capturing`:
    /// whether the calling thread captures.
    fn function(
        &self,
        k: &'static KernelDef,
        shared: u32,
        capturing: bool,
    ) -> Result<CudaFunction> {
        if let Some((f, limit)) = lock(&self.functions).get_mut(k.name) {
            if shared > *limit {
                // Not a stream operation: allowed while capturing. A request past the device's
                // opt-in maximum fails here, with the driver's error.
                f.set_attribute(
                    drv_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(shared).map_err(|_| {
                        Error::Invalid(format!("{}: {shared} B of shared memory", k.name))
                    })?,
                )?;
                *limit = shared;
            }
            return Ok(f.clone());
        }
        if capturing {
            // Module loading is not a stream operation, but compiling inside a capture would put
            // NVRTC into capture time; preload instead.
            return Err(Error::Capturing(
                "first use of a kernel (call Backend::preload)",
            ));
        }
        let f = self.module(k)?.load_function(k.entry)?;
        lock(&self.functions).insert(k.name, (f, DEFAULT_DYNAMIC_SHARED_BYTES));
        self.function(k, shared, capturing)
    }

    fn stream_ptr(&self) -> drv_sys::CUstream {
        self.stream.cu_stream()
    }

    /// Checks every address `op` names against the live allocations ([`Live::validate`], the
    /// Host twin's checks) and, while the calling thread captures (`pass`), records the
    /// allocations it touches for `launch_graph`. The returned guard keeps every buffer
    /// registered (no free can be enqueued) until the caller has enqueued the work and drops it.
    fn checked(&self, op: Access<'_>, pass: &Pass<'_>) -> Result<Live<'_>> {
        let live = self.counter.registry.live();
        if pass.capturing() {
            let mut touched = lock(&self.touched);
            live.validate(op, |s| touched.push(s))?;
        } else {
            live.validate(op, |_| {})?;
        }
        Ok(live)
    }
}

fn int(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Invalid(format!("gemm {what} = {v} exceeds i32")))
}

fn long(v: usize, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::Invalid(format!("gemm {what} = {v} exceeds i64")))
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device_name(&self) -> &str {
        &self.name
    }

    fn device_ordinal(&self) -> u32 {
        self.ordinal
    }

    fn alloc(&self, bytes: usize, kind: AllocKind) -> Result<DeviceBuffer> {
        let _pass = self.host_work("allocation")?;
        let slice = self.stream.alloc_zeros::<u8>(bytes.max(1))?;
        let ptr = {
            let (p, _sync) = slice.device_ptr(&self.stream);
            DevPtr(p)
        };
        self.counter.registry.insert(ptr.0, bytes.max(1));
        self.counter.add(kind, bytes);
        Ok(DeviceBuffer {
            ptr,
            bytes,
            kind,
            counter: self.counter.clone(),
            _owner: ManuallyDrop::new(Owner::Cuda(slice)),
        })
    }

    fn htod(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        let _pass = self.host_work("htod")?;
        let live = self.counter.registry.live();
        live.check(dst.0, src.len())?;
        self.ctx.bind_to_thread()?;
        // SAFETY: `[dst, dst + src.len())` lies in a live allocation of this backend (checked
        // above; `live` keeps it registered, so unfreed, until the copy is enqueued); the copy
        // is complete before `src` can be released because the stream is synchronized below.
        unsafe { drv::memcpy_htod_async(dst.0, src, self.stream_ptr()) }?;
        self.stream.synchronize()?;
        drop(live);
        Ok(())
    }

    fn dtoh(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        let _pass = self.host_work("dtoh")?;
        let live = self.counter.registry.live();
        live.check(src.0, dst.len())?;
        self.ctx.bind_to_thread()?;
        // SAFETY: `[src, src + dst.len())` lies in a live allocation of this backend (checked
        // above, kept registered by `live`); the stream is synchronized before `dst` is handed
        // back.
        unsafe { drv::memcpy_dtoh_async(dst, src.0, self.stream_ptr()) }?;
        self.stream.synchronize()?;
        drop(live);
        Ok(())
    }

    fn dtod(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<()> {
        // Both ranges in live allocations; overlap refused (cuMemcpyDtoD is undefined on it).
        let pass = self.counter.gate.enter();
        let live = self.checked(Access::Dtod { dst, src, bytes }, &pass)?;
        if bytes == 0 {
            // Nothing to enqueue; traced all the same, as on Host.
            self.tracer.record(|| StreamOp::Dtod { dst, src, bytes });
            return Ok(());
        }
        self.ctx.bind_to_thread()?;
        // SAFETY: both ranges lie in live allocations of this backend and do not overlap
        // (checked above; `live` keeps them registered until the copy is enqueued, and their
        // frees are stream-ordered after it).
        unsafe { drv::memcpy_dtod_async(dst.0, src.0, bytes, self.stream_ptr()) }?;
        drop(live);
        self.tracer.record(|| StreamOp::Dtod { dst, src, bytes });
        Ok(())
    }

    fn memset_d32(&self, dst: DevPtr, value: u32, count: usize) -> Result<()> {
        let pass = self.counter.gate.enter();
        let live = self.checked(Access::Memset32 { dst, count }, &pass)?;
        if count == 0 {
            // Nothing to enqueue; traced all the same, as on Host.
            self.tracer
                .record(|| StreamOp::Memset32 { dst, value, count });
            return Ok(());
        }
        self.ctx.bind_to_thread()?;
        // SAFETY: `count` 4-byte-aligned words at dst lie in a live allocation of this backend
        // (checked above, kept registered by `live` until the memset is enqueued).
        unsafe { drv_sys::cuMemsetD32Async(dst.0, value, count, self.stream_ptr()).result() }?;
        drop(live);
        self.tracer
            .record(|| StreamOp::Memset32 { dst, value, count });
        Ok(())
    }

    fn check_range(&self, ptr: DevPtr, bytes: usize) -> Result<()> {
        self.counter.registry.check_range(ptr.0, bytes)
    }

    unsafe fn launch(
        &self,
        kernel: &'static KernelDef,
        dims: LaunchDims,
        args: &[Arg],
    ) -> Result<()> {
        kernel.check_args(args)?;
        let pass = self.counter.gate.enter();
        let f = self.function(kernel, dims.shared_bytes, pass.capturing())?;
        // As on Host: each pointer argument starts inside a live buffer (and, while capturing,
        // its allocation is recorded for `launch_graph`). How far the kernel reaches from there
        // is the caller's `# Safety` contract.
        let live = self.checked(Access::Launch(kernel, args), &pass)?;
        let cfg = LaunchConfig {
            grid_dim: dims.grid,
            block_dim: dims.block,
            shared_mem_bytes: dims.shared_bytes,
        };
        let mut b = self.stream.launch_builder(&f);
        for a in args {
            match a {
                Arg::Ptr(p) => b.arg(&p.0),
                Arg::I32(v) => b.arg(v),
                Arg::U32(v) => b.arg(v),
                Arg::I64(v) => b.arg(v),
                Arg::U64(v) => b.arg(v),
                Arg::F32(v) => b.arg(v),
            };
        }
        // SAFETY: the argument kinds match the kernel's declared parameters (checked above), so
        // the kernel reads each parameter as the type it was pushed as, and each pointer starts
        // inside a live buffer (checked above; `live` keeps them registered until the launch is
        // enqueued). That every pointer, with the counts and geometry the kernel derives from
        // the other arguments and `dims`, stays inside live device buffers of this context that
        // outlive the work (every replay of a graph this launch is captured into, too: the start
        // of each is re-checked by `launch_graph`) is the caller's `# Safety` contract of
        // `Backend::launch`.
        unsafe { b.launch(cfg) }?;
        drop(live);
        if !pass.capturing() {
            self.launches.fetch_add(1, Ordering::Relaxed);
        }
        self.tracer.record(|| StreamOp::Launch {
            kernel,
            dims,
            args: args.to_vec(),
        });
        Ok(())
    }

    fn gemm(&self, g: &Gemm) -> Result<()> {
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (m, n, k, batch) = (
            int(g.m, "m")?,
            int(g.n, "n")?,
            int(g.k, "k")?,
            int(g.batch, "batch")?,
        );
        let (lda, ldb, ldc) = (int(g.lda, "lda")?, int(g.ldb, "ldb")?, int(g.ldc, "ldc")?);
        let (stride_a, stride_b, stride_c) = (
            long(g.stride_a, "stride_a")?,
            long(g.stride_b, "stride_b")?,
            long(g.stride_c, "stride_c")?,
        );
        // The descriptor as cuBLAS requires it, and A, B, C over all batches in live
        // allocations, f32-aligned (the Host twin's checks). Lock order: the gate, the
        // registry, then cuBLAS.
        let pass = self.counter.gate.enter();
        let live = self.checked(Access::Gemm(g, None), &pass)?;
        let blas = self.blas.as_ref().map_err(unavailable)?;
        let blas = lock(blas);
        self.ctx.bind_to_thread()?;
        // SAFETY: every element the descriptor addresses in A, B, C lies in a live allocation
        // of this backend, f32-aligned (checked above; `live` keeps them registered until the
        // call is enqueued); the handle is bound to this backend's stream; alpha/beta are host
        // scalars read during the call (host pointer mode).
        unsafe {
            cudarc::cublas::result::sgemm_strided_batched(
                blas.handle,
                op(g.trans_a),
                op(g.trans_b),
                m,
                n,
                k,
                &g.alpha,
                g.a.0 as *const f32,
                lda,
                stride_a,
                g.b.0 as *const f32,
                ldb,
                stride_b,
                &g.beta,
                g.c.0 as *mut f32,
                ldc,
                stride_c,
                batch,
            )
        }?;
        drop(live);
        if !pass.capturing() {
            self.launches.fetch_add(1, Ordering::Relaxed);
        }
        self.tracer.record(|| StreamOp::Gemm(*g));
        Ok(())
    }

    fn gemm_bias(&self, g: &Gemm, bias: DevPtr) -> Result<()> {
        bounds::check_gemm_bias(g, bias)?;
        for (v, what) in [
            (g.m, "m"),
            (g.n, "n"),
            (g.k, "k"),
            (g.lda, "lda"),
            (g.ldb, "ldb"),
            (g.ldc, "ldc"),
        ] {
            int(v, what)?;
        }
        // The descriptor as cuBLAS requires it, A, B, C and the bias (`m` floats) in live
        // allocations, f32-aligned (the Host twin's checks), before a plan is made for it. Lock
        // order: the gate, the registry, then cuBLASLt.
        let pass = self.counter.gate.enter();
        let live = self.checked(Access::Gemm(g, Some(bias)), &pass)?;
        let lt = self.lt.as_ref().map_err(unavailable)?;
        let mut lt = lock(lt);
        self.ctx.bind_to_thread()?;
        let key = LtKey {
            trans_a: g.trans_a,
            trans_b: g.trans_b,
            m: g.m,
            n: g.n,
            k: g.k,
            lda: g.lda,
            ldb: g.ldb,
            ldc: g.ldc,
            align: [align_of(g.a), align_of(g.b), align_of(g.c)],
        };
        let (handle, workspace) = (lt.handle, lt.workspace);
        let plan = lt.plan(key)?;
        let beta = 0.0f32;
        let bias_ptr: u64 = bias.0;
        // SAFETY: the plan's descriptors are live (owned by `lt`, locked); every element the
        // descriptor addresses in A, B, C and the bias's `m` floats lie in live allocations of
        // this backend (checked above, kept registered by `live`); the workspace is the
        // runtime's cuBLAS workspace of CUBLAS_WORKSPACE_BYTES, used on this stream only.
        unsafe {
            lt_res::set_matmul_desc_attribute(
                plan.desc,
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                &bias_ptr as *const u64 as *const _,
                std::mem::size_of::<u64>(),
            )?;
            lt_res::matmul(
                handle,
                plan.desc,
                &g.alpha as *const f32 as *const _,
                &beta as *const f32 as *const _,
                g.a.0 as *const _,
                plan.a,
                g.b.0 as *const _,
                plan.b,
                g.c.0 as *const _,
                plan.c,
                g.c.0 as *mut _,
                plan.c,
                &plan.algo,
                workspace.0 as *mut _,
                CUBLAS_WORKSPACE_BYTES,
                self.stream_ptr() as *mut _,
            )?;
        }
        drop(live);
        if !pass.capturing() {
            self.launches.fetch_add(1, Ordering::Relaxed);
        }
        self.tracer.record(|| StreamOp::GemmBias(*g, bias));
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        let _pass = self.host_work("synchronize")?;
        self.stream.synchronize()?;
        Ok(())
    }

    fn begin_capture(&self) -> Result<()> {
        // Exclusive from here: other threads' work waits (the stream would record it).
        self.counter.gate.begin()?;
        let begun = (|| {
            self.stream.synchronize()?;
            {
                let mut touched = lock(&self.touched);
                touched.clear();
                touched.reserve(256);
            }
            *lock(&self.free_before_capture) = self.ctx.mem_get_info().ok().map(|(free, _)| free);
            self.stream
                .begin_capture(drv_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            Ok(())
        })();
        if begun.is_err() {
            // Not capturing after all: let the other threads in again.
            drop(self.counter.gate.ending());
        }
        begun
    }

    fn end_capture(&self) -> Result<Graph> {
        // Other threads wait until the graph is instantiated and uploaded, whatever fails.
        let _ending = self.counter.gate.ending()?;
        let touched = std::mem::take(&mut *lock(&self.touched));
        let g = self
            .stream
            .end_capture(drv_sys::CUgraphInstantiate_flags(0))
            .map_err(Error::EndCapture)?;
        let Some(g) = g else {
            return Ok(Graph::new(
                GraphImpl::Empty,
                Vec::new(),
                0,
                0,
                self.counter.clone(),
            ));
        };
        let mut nodes: usize = 0;
        // SAFETY: the graph is alive (owned by `g`); a null node array asks only for the count.
        unsafe {
            drv_sys::cuGraphGetNodes(g.cu_graph(), std::ptr::null_mut(), &mut nodes).result()
        }?;
        g.upload()?;
        self.stream.synchronize()?;
        let before = lock(&self.free_before_capture).take();
        let after = self.ctx.mem_get_info().ok().map(|(free, _)| free);
        let bytes = match (before, after) {
            (Some(b), Some(a)) => b.saturating_sub(a),
            _ => 0,
        };
        Ok(Graph::new(
            GraphImpl::Cuda(g),
            touched,
            nodes,
            bytes,
            self.counter.clone(),
        ))
    }

    fn is_capturing(&self) -> bool {
        self.counter.gate.is_mine()
    }

    fn launch_graph(&self, graph: &Graph) -> Result<()> {
        let _pass = self.host_work("graph launch")?;
        match &graph.imp {
            GraphImpl::Cuda(g) => {
                // The graph is bound to the allocations it saw at capture. Refuse before running
                // anything if one its operations touched was freed since, or freed and
                // reallocated (same address or not: the identity differs), as the Host twin
                // does: the graph would fault or corrupt memory. `live` keeps them registered
                // until the replay is enqueued.
                let live = self.counter.registry.live();
                graph.check_touched(&live)?;
                g.launch()?;
                drop(live);
                Ok(())
            }
            GraphImpl::Empty => Ok(()),
            GraphImpl::Host(_) => Err(Error::Invalid(
                "a Host tape cannot run on the CUDA backend".into(),
            )),
        }
    }

    fn allocation(&self, ptr: DevPtr, bytes: usize) -> Result<Allocation> {
        self.counter.registry.live().check(ptr.0, bytes)
    }

    fn begin_trace(&self) {
        self.tracer.begin();
    }

    fn end_trace(&self) -> Vec<StreamOp> {
        self.tracer.end()
    }

    fn marker(&self) -> Result<Marker> {
        let _pass = self.counter.gate.enter();
        let e = self
            .ctx
            .new_event(Some(drv_sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        e.record(&self.stream)?;
        Ok(Marker(MarkerImpl::Cuda(e)))
    }

    fn elapsed_ms(&self, start: &Marker, end: &Marker) -> Result<f64> {
        match (&start.0, &end.0) {
            (MarkerImpl::Cuda(a), MarkerImpl::Cuda(b)) => {
                b.synchronize()?;
                Ok(a.elapsed_ms(b)? as f64)
            }
            _ => Err(Error::Invalid("markers of another backend".into())),
        }
    }

    fn preload(&self, kernels: &[&'static KernelDef]) -> Result<()> {
        let pass = self.counter.gate.enter();
        if !pass.capturing() {
            self.load_modules(kernels)?;
        }
        for k in kernels {
            self.function(k, 0, pass.capturing())?;
        }
        Ok(())
    }

    fn memory(&self) -> MemoryReport {
        let mut r = self.counter.report();
        if let Ok((free, total)) = self.ctx.mem_get_info() {
            r.device_free = Some(free);
            r.device_total = Some(total);
        }
        r
    }

    fn eager_launches(&self) -> u64 {
        self.launches.load(Ordering::Relaxed)
    }

    fn reset_peak(&self) {
        self.counter.reset_peak();
    }

    fn profiler_window(&self, on: bool) -> Result<()> {
        let _pass = self.host_work("profiler window")?;
        self.stream.synchronize()?;
        self.stream.context().bind_to_thread()?;
        // SAFETY: no arguments; the context is current on this thread (bound above) and the
        // stream idle, so the window's edge falls between the work issued before and after.
        let r = unsafe {
            if on {
                cudarc::driver::sys::cuProfilerStart()
            } else {
                cudarc::driver::sys::cuProfilerStop()
            }
        };
        r.result()?;
        Ok(())
    }
}
