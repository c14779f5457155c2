//! The Host backend: a CPU twin of the CUDA backend with the same observable semantics.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use dcc_kernels::{Arg, DevPtr, KernelDef, LaunchDims};

use super::{
    AllocKind, Backend, BackendKind, DeviceBuffer, Gemm, Graph, GraphImpl, Marker, MarkerImpl,
    MemCounter, MemoryReport, Owner, TapeOp,
};
use crate::error::{Error, Result};

/// Alignment of every Host allocation (CUDA allocations are at least 256-byte aligned too).
pub const HOST_ALIGN: usize = 256;

/// Live allocations by start address: lets replays and copies refuse addresses no live buffer
/// owns instead of touching freed memory.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, usize>> {
        // A poisoned lock only means another thread panicked while holding it; the map itself
        // is always consistent (single insert/remove operations).
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks that `[addr, addr + bytes)` lies inside one live allocation.
    fn check(&self, addr: u64, bytes: usize) -> Result<()> {
        let live = self.lock();
        match live.range(..=addr).next_back() {
            Some((&start, &len)) if addr + bytes as u64 <= start + len as u64 => Ok(()),
            Some((&start, &len)) if addr < start + len as u64 => Err(Error::OutOfBounds(format!(
                "{bytes} bytes at {addr:#x} overrun the buffer {start:#x}+{len}"
            ))),
            _ => Err(Error::Dangling(addr)),
        }
    }
}

pub(crate) struct HostAlloc {
    ptr: *mut u8,
    layout: Layout,
    registry: Arc<Registry>,
}

// SAFETY: HostAlloc owns its memory exclusively; the raw pointer is only freed in Drop.
unsafe impl Send for HostAlloc {}
// SAFETY: no interior access through &HostAlloc.
unsafe impl Sync for HostAlloc {}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        self.registry.lock().remove(&(self.ptr as u64));
        // SAFETY: allocated in HostBackend::alloc with this very layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// The CPU twin. Thread-safe; work runs synchronously on the calling thread, which makes the
/// "stream" trivially ordered.
pub struct HostBackend {
    registry: Arc<Registry>,
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
            registry: Arc::default(),
            counter: Arc::default(),
            tape: Mutex::new(None),
            launches: AtomicU64::new(0),
            loaded: Mutex::default(),
        }
    }

    fn tape(&self) -> MutexGuard<'_, Option<Vec<TapeOp>>> {
        self.tape.lock().unwrap_or_else(|p| p.into_inner())
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
        self.exec(&op)
    }

    /// Checks every address an op names against the live allocations.
    fn validate(&self, op: &TapeOp) -> Result<()> {
        match op {
            TapeOp::Launch { kernel, args, .. } => {
                kernel.check_args(args)?;
                for a in args {
                    if let Arg::Ptr(p) = a {
                        self.registry.check(p.0, 0)?;
                    }
                }
                Ok(())
            }
            TapeOp::Dtod { dst, src, bytes } => {
                self.registry.check(dst.0, *bytes)?;
                self.registry.check(src.0, *bytes)
            }
            TapeOp::Memset32 { dst, count, .. } => self.registry.check(dst.0, count * 4),
            TapeOp::Gemm(g) => {
                for p in [g.a, g.b, g.c] {
                    self.registry.check(p.0, 0)?;
                }
                Ok(())
            }
            TapeOp::GemmBias(g, bias) => {
                for p in [g.a, g.b, g.c] {
                    self.registry.check(p.0, 0)?;
                }
                self.registry.check(bias.0, g.m * 4)
            }
        }
    }

    fn exec(&self, op: &TapeOp) -> Result<()> {
        self.validate(op)?;
        match op {
            TapeOp::Launch { kernel, dims, args } => {
                // SAFETY: every pointer argument starts inside a live Host allocation (validated
                // above); kernels index within the extents their arguments describe.
                unsafe { kernel.run_host(dims, args)? };
            }
            TapeOp::Dtod { dst, src, bytes } => {
                let (d, s) = (dst.0, src.0);
                if d < s + *bytes as u64 && s < d + *bytes as u64 && *bytes > 0 {
                    return Err(Error::Invalid("dtod ranges overlap".into()));
                }
                // SAFETY: both ranges lie in live allocations (validated) and do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(s as *const u8, d as *mut u8, *bytes) };
            }
            TapeOp::Memset32 { dst, value, count } => {
                let p = dst.0 as *mut u32;
                for i in 0..*count {
                    // SAFETY: count words lie in a live allocation (validated); unaligned-safe.
                    unsafe { p.add(i).write_unaligned(*value) };
                }
            }
            TapeOp::Gemm(g) => {
                // SAFETY: operands are live allocations (validated); sizes per the descriptor.
                unsafe { host_gemm(g, None) };
            }
            TapeOp::GemmBias(g, bias) => {
                // SAFETY: as above; the bias holds m floats (validated).
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
/// A, B, C hold the elements the descriptor addresses; `bias`, when given, `m` floats.
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
        self.registry.lock().insert(ptr as u64, bytes.max(1));
        self.counter.add(kind, bytes);
        Ok(DeviceBuffer {
            ptr: DevPtr(ptr as u64),
            bytes,
            kind,
            counter: self.counter.clone(),
            _owner: Owner::Host(HostAlloc {
                ptr,
                layout,
                registry: self.registry.clone(),
            }),
        })
    }

    fn htod(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        self.refuse_if_capturing("htod")?;
        self.registry.check(dst.0, src.len())?;
        // SAFETY: dst range is inside a live allocation; src is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0 as *mut u8, src.len()) };
        Ok(())
    }

    fn dtoh(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        self.refuse_if_capturing("dtoh")?;
        self.registry.check(src.0, dst.len())?;
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

    fn launch(&self, kernel: &'static KernelDef, dims: LaunchDims, args: &[Arg]) -> Result<()> {
        kernel.check_args(args)?;
        {
            let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
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
        if g.batch == 0 || g.lda == 0 || g.ldb == 0 || g.ldc < g.m.max(1) {
            return Err(Error::Invalid(format!("gemm descriptor {g:?}")));
        }
        self.submit(TapeOp::Gemm(*g))
    }

    fn gemm_bias(&self, g: &Gemm, bias: DevPtr) -> Result<()> {
        if g.batch != 1 || g.beta != 0.0 || g.lda == 0 || g.ldb == 0 || g.ldc < g.m.max(1) {
            return Err(Error::Invalid(format!(
                "gemm_bias descriptor {g:?} (batch 1, beta 0)"
            )));
        }
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
                for op in ops {
                    self.validate(op)?;
                }
                for op in ops {
                    self.exec(op)?;
                }
                Ok(())
            }
            GraphImpl::Empty => Ok(()),
            GraphImpl::Cuda(_) => Err(Error::Invalid(
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
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
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
