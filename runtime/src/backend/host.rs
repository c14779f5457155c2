//! The Host backend: a CPU twin of the CUDA backend with the same observable semantics.

use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use dcc_kernels::{Arg, DevPtr, KernelDef, LaunchDims};

use super::bounds::{self, Access, Registry, lock};
use super::{
    AllocKind, Backend, BackendKind, DeviceBuffer, Gemm, Graph, GraphImpl, Marker, MarkerImpl,
    MemCounter, MemoryReport, Owner, TapeOp,
};
use crate::error::{Error, Result};

/// Alignment of every Host allocation (CUDA allocations are at least 256-byte aligned too).
pub const HOST_ALIGN: usize = 256;

pub(crate) struct HostAlloc {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: HostAlloc owns its memory exclusively; the raw pointer is only freed in Drop.
unsafe impl Send for HostAlloc {}
// SAFETY: no interior access through &HostAlloc.
unsafe impl Sync for HostAlloc {}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in HostBackend::alloc with this very layout, freed once; no
        // operation can touch it any more: `DeviceBuffer`'s `Drop` (which runs before its owner
        // drops) unregistered it under the stream lock, after any operation in flight on
        // another thread, and every later operation finds it gone.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// The CPU twin. Thread-safe; work runs synchronously on the calling thread, which makes the
/// "stream" trivially ordered.
pub struct HostBackend {
    /// The memory ledger, with the registry of live allocations and the Host "stream" lock
    /// ([`bounds::Registry`]).
    counter: Arc<MemCounter>,
    tape: Mutex<Option<Vec<TapeOp>>>,
    launches: AtomicU64,
    /// Kernels "loaded" (preloaded or launched eagerly once). As on CUDA, the first use of a
    /// kernel inside a capture is refused, so code that captures on Host captures on CUDA.
    loaded: Mutex<std::collections::HashSet<&'static str>>,
}

impl Default for HostBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBackend {
    pub fn new() -> HostBackend {
        HostBackend {
            counter: Arc::default(),
            tape: Mutex::new(None),
            launches: AtomicU64::new(0),
            loaded: Mutex::default(),
        }
    }

    fn registry(&self) -> &Registry {
        &self.counter.registry
    }

    fn tape(&self) -> MutexGuard<'_, Option<Vec<TapeOp>>> {
        lock(&self.tape)
    }

    fn refuse_if_capturing(&self, what: &'static str) -> Result<()> {
        if self.tape().is_some() {
            Err(Error::Capturing(what))
        } else {
            Ok(())
        }
    }

    /// Records the op when capturing, else runs it.
    fn submit(&self, op: TapeOp) -> Result<()> {
        {
            let mut tape = self.tape();
            if let Some(t) = tape.as_mut() {
                self.validate(&op)?;
                t.push(op);
                return Ok(());
            }
        }
        if matches!(
            op,
            TapeOp::Launch { .. } | TapeOp::Gemm(_) | TapeOp::GemmBias(..)
        ) {
            self.launches.fetch_add(1, Ordering::Relaxed);
        }
        let _stream = self.registry().stream();
        self.exec(&op)
    }

    /// Checks every address an op names against the live allocations ([`bounds`], shared with
    /// the CUDA backend): copies, memsets and GEMMs over their whole extent; kernel launches by
    /// the start of each pointer argument (what a kernel then reads and writes is its twin's
    /// contract, see [`HostBackend::exec`]).
    fn validate(&self, op: &TapeOp) -> Result<()> {
        let access = match op {
            TapeOp::Launch { kernel, args, .. } => Access::Launch(kernel, args),
            TapeOp::Dtod { dst, src, bytes } => Access::Dtod {
                dst: *dst,
                src: *src,
                bytes: *bytes,
            },
            TapeOp::Memset32 { dst, count, .. } => Access::Memset32 {
                dst: *dst,
                count: *count,
            },
            TapeOp::Gemm(g) => Access::Gemm(g, None),
            TapeOp::GemmBias(g, bias) => Access::Gemm(g, Some(*bias)),
        };
        self.registry().live().validate(access, |_| {})
    }

    /// Validates and runs one op. The caller holds the stream lock.
    fn exec(&self, op: &TapeOp) -> Result<()> {
        self.validate(op)?;
        match op {
            TapeOp::Launch { kernel, dims, args } => {
                // SAFETY: every pointer argument starts inside a live Host allocation (validated
                // above) that cannot be freed or touched by another thread while the stream lock
                // is held. That the twin stays inside those allocations, and that its written
                // ranges alias no other argument's range (`dcc_kernels::HostFn`), is not checked
                // here (kernels declare no footprint): it is the `# Safety` contract of
                // `Backend::launch`, which every caller that queued this op (eagerly, or into a
                // tape now replayed) promised for these arguments.
                unsafe { kernel.run_host(dims, args)? };
            }
            TapeOp::Dtod { dst, src, bytes } => {
                // SAFETY: both ranges lie in live allocations and do not overlap (validated).
                unsafe {
                    std::ptr::copy_nonoverlapping(src.0 as *const u8, dst.0 as *mut u8, *bytes)
                };
            }
            TapeOp::Memset32 { dst, value, count } => {
                let p = dst.0 as *mut u32;
                for i in 0..*count {
                    // SAFETY: `count` aligned words lie in a live allocation (validated).
                    unsafe { p.add(i).write(*value) };
                }
            }
            TapeOp::Gemm(g) => {
                // SAFETY: every element the descriptor addresses lies in a live allocation and
                // is f32-aligned (`bounds::gemm_operands`, via validate above).
                unsafe { host_gemm(g, None) };
            }
            TapeOp::GemmBias(g, bias) => {
                // SAFETY: as above; the bias holds `m` aligned floats (validated).
                unsafe { host_gemm(g, Some(bias.0 as *const f32)) };
            }
        }
        Ok(())
    }
}

/// The Host GEMM: column-major, fixed summation order, separate multiply and add; with `bias`,
/// `alpha · acc + bias[i]` (C not read).
///
/// # Safety
/// A, B, C hold the (f32-aligned) elements the descriptor addresses ([`bounds::operand_elems`]
/// of each, as `bounds::gemm_operands` and [`bounds::Live::validate`] check); `bias`, when given, `m` aligned floats.
unsafe fn host_gemm(g: &Gemm, bias: Option<*const f32>) {
    let (a, b, c) = (g.a.0 as *const f32, g.b.0 as *const f32, g.c.0 as *mut f32);
    for bt in 0..g.batch {
        for j in 0..g.n {
            for i in 0..g.m {
                let mut acc = 0.0f32;
                for p in 0..g.k {
                    let ai = if g.trans_a {
                        p + i * g.lda
                    } else {
                        i + p * g.lda
                    };
                    let bi = if g.trans_b {
                        j + p * g.ldb
                    } else {
                        p + j * g.ldb
                    };
                    // SAFETY: indices inside the operands (caller).
                    acc += unsafe {
                        a.add(bt * g.stride_a + ai).read() * b.add(bt * g.stride_b + bi).read()
                    };
                }
                // SAFETY: as above.
                unsafe {
                    let cp = c.add(bt * g.stride_c + i + j * g.ldc);
                    let v = if let Some(bias) = bias {
                        g.alpha * acc + bias.add(i).read()
                    } else if g.beta == 0.0 {
                        g.alpha * acc
                    } else {
                        g.alpha * acc + g.beta * cp.read()
                    };
                    cp.write(v);
                }
            }
        }
    }
}

impl Backend for HostBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Host
    }

    fn device_name(&self) -> &str {
        "host"
    }

    fn device_ordinal(&self) -> u32 {
        0
    }

    fn alloc(&self, bytes: usize, kind: AllocKind) -> Result<DeviceBuffer> {
        self.refuse_if_capturing("allocation")?;
        let layout = Layout::from_size_align(bytes.max(1), HOST_ALIGN)
            .map_err(|e| Error::Invalid(format!("allocation of {bytes} bytes: {e}")))?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::Invalid(format!(
                "host allocation of {bytes} bytes failed"
            )));
        }
        self.registry().insert(ptr as u64, bytes.max(1));
        self.counter.add(kind, bytes);
        Ok(DeviceBuffer {
            ptr: DevPtr(ptr as u64),
            bytes,
            kind,
            counter: self.counter.clone(),
            _owner: Owner::Host(HostAlloc { ptr, layout }),
        })
    }

    fn htod(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        self.refuse_if_capturing("htod")?;
        let _stream = self.registry().stream();
        self.registry().live().check(dst.0, src.len())?;
        // SAFETY: dst range is inside a live allocation; src is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0 as *mut u8, src.len()) };
        Ok(())
    }

    fn dtoh(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        self.refuse_if_capturing("dtoh")?;
        let _stream = self.registry().stream();
        self.registry().live().check(src.0, dst.len())?;
        // SAFETY: src range is inside a live allocation; dst is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(src.0 as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn dtod(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<()> {
        self.submit(TapeOp::Dtod { dst, src, bytes })
    }

    fn memset_d32(&self, dst: DevPtr, value: u32, count: usize) -> Result<()> {
        self.submit(TapeOp::Memset32 { dst, value, count })
    }

    fn check_range(&self, ptr: DevPtr, bytes: usize) -> Result<()> {
        self.registry().check_range(ptr.0, bytes)
    }

    unsafe fn launch(
        &self,
        kernel: &'static KernelDef,
        dims: LaunchDims,
        args: &[Arg],
    ) -> Result<()> {
        // The caller's `# Safety` contract (extents inside live buffers of this backend, no
        // aliasing of written ranges, buffers alive until executed or replayed) is what the
        // twin's run in `exec` relies on; here only the kinds and the start addresses are
        // checked (`validate`, at submission and again at every replay).
        kernel.check_args(args)?;
        {
            let mut loaded = lock(&self.loaded);
            if !loaded.contains(kernel.name) {
                if self.is_capturing() {
                    return Err(Error::Capturing(
                        "first use of a kernel (call Backend::preload)",
                    ));
                }
                loaded.insert(kernel.name);
            }
        }
        self.submit(TapeOp::Launch {
            kernel,
            dims,
            args: args.to_vec(),
        })
    }

    fn gemm(&self, g: &Gemm) -> Result<()> {
        // The descriptor and its operands are checked by `submit` (`validate`).
        self.submit(TapeOp::Gemm(*g))
    }

    fn gemm_bias(&self, g: &Gemm, bias: DevPtr) -> Result<()> {
        // As on CUDA (cuBLASLt's bias pointer), so code that runs here runs there.
        bounds::check_gemm_bias(g, bias)?;
        self.submit(TapeOp::GemmBias(*g, bias))
    }

    fn synchronize(&self) -> Result<()> {
        self.refuse_if_capturing("synchronize")
    }

    fn begin_capture(&self) -> Result<()> {
        let mut t = self.tape();
        if t.is_some() {
            return Err(Error::Capture("already capturing".into()));
        }
        *t = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&self) -> Result<Graph> {
        let ops = self
            .tape()
            .take()
            .ok_or_else(|| Error::Capture("not capturing".into()))?;
        if ops.is_empty() {
            return Ok(Graph::new(GraphImpl::Empty, 0, 0, self.counter.clone()));
        }
        let n = ops.len();
        let bytes = n * std::mem::size_of::<TapeOp>()
            + ops
                .iter()
                .map(|o| match o {
                    TapeOp::Launch { args, .. } => args.len() * std::mem::size_of::<Arg>(),
                    _ => 0,
                })
                .sum::<usize>();
        Ok(Graph::new(
            GraphImpl::Host(ops),
            n,
            bytes,
            self.counter.clone(),
        ))
    }

    fn is_capturing(&self) -> bool {
        self.tape().is_some()
    }

    fn launch_graph(&self, graph: &Graph) -> Result<()> {
        self.refuse_if_capturing("graph launch")?;
        match &graph.imp {
            GraphImpl::Host(ops) => {
                // Replay is bound to the captured addresses. Refuse before running anything if
                // one of them is no longer owned (on CUDA this would be a fault or corruption).
                // The stream lock is held over the whole replay, so none can be freed midway.
                let _stream = self.registry().stream();
                for op in ops {
                    self.validate(op)?;
                }
                for op in ops {
                    self.exec(op)?;
                }
                Ok(())
            }
            GraphImpl::Empty => Ok(()),
            GraphImpl::Cuda { .. } => Err(Error::Invalid(
                "a CUDA graph cannot run on the Host backend".into(),
            )),
        }
    }

    fn marker(&self) -> Result<Marker> {
        Ok(Marker(MarkerImpl::Host(Instant::now())))
    }

    fn elapsed_ms(&self, start: &Marker, end: &Marker) -> Result<f64> {
        match (&start.0, &end.0) {
            (MarkerImpl::Host(a), MarkerImpl::Host(b)) => {
                Ok(b.saturating_duration_since(*a).as_secs_f64() * 1e3)
            }
            _ => Err(Error::Invalid("markers of another backend".into())),
        }
    }

    fn preload(&self, kernels: &[&'static KernelDef]) -> Result<()> {
        let mut loaded = lock(&self.loaded);
        loaded.extend(kernels.iter().map(|k| k.name));
        Ok(())
    }

    fn memory(&self) -> MemoryReport {
        self.counter.report()
    }

    fn eager_launches(&self) -> u64 {
        self.launches.load(Ordering::Relaxed)
    }

    fn reset_peak(&self) {
        self.counter.reset_peak();
    }
}
