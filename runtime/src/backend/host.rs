//! The Host backend: a CPU twin of the CUDA backend with the same observable semantics.

use std::alloc::Layout;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use dcc_kernels::{Arg, DevPtr, KernelDef, LaunchDims};

use super::bounds::{self, Allocation, Registry, lock};
use super::gate::{Pass, Tracer};
use super::{
    AllocKind, Backend, BackendKind, DeviceBuffer, Gemm, Graph, GraphImpl, Marker, MarkerImpl,
    MemCounter, MemoryReport, Owner, StreamOp,
};
use crate::error::{Error, Result};

/// Alignment of every Host allocation (CUDA allocations are at least 256-byte aligned too).
pub const HOST_ALIGN: usize = 256;

/// Freed blocks kept at most, in bytes, for reuse.
const POOL_BYTES: usize = 64 << 20;

/// Freed Host blocks kept for reuse by the next allocation of the same size, newest first, as
/// CUDA's stream-ordered pool (`cuMemAllocAsync`, which the CUDA backend allocates through) hands
/// a freed address straight back. So address reuse, and the hazard of a graph replayed into a
/// buffer freed and reallocated at the same address, shows up on Host as on the GPU.
#[derive(Default)]
struct Pool(Mutex<PoolState>);

#[derive(Default)]
struct PoolState {
    /// Block size → addresses (each block allocated with `Layout(size, HOST_ALIGN)`).
    free: HashMap<usize, Vec<usize>>,
    bytes: usize,
}

impl Pool {
    /// A kept block of exactly `layout` (contents undefined), if any.
    fn take(&self, layout: Layout) -> Option<*mut u8> {
        let mut s = lock(&self.0);
        let p = s.free.get_mut(&layout.size())?.pop()?;
        s.bytes -= layout.size();
        Some(p as *mut u8)
    }

    /// Keeps `ptr` (a block of `layout` the caller owns and gives up) or frees it.
    ///
    /// # Safety
    /// `ptr` was allocated by `std::alloc` with `layout`, is owned by the caller, and is not
    /// used by it afterwards.
    unsafe fn put(&self, ptr: *mut u8, layout: Layout) {
        let mut s = lock(&self.0);
        if s.bytes + layout.size() <= POOL_BYTES {
            s.bytes += layout.size();
            s.free.entry(layout.size()).or_default().push(ptr as usize);
        } else {
            drop(s);
            // SAFETY: allocated with this layout, owned and given up by the caller.
            unsafe { std::alloc::dealloc(ptr, layout) };
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let s = lock(&self.0);
        for (&size, ptrs) in &s.free {
            // Cannot fail: the layout of every kept block was valid when it was allocated.
            if let Ok(layout) = Layout::from_size_align(size, HOST_ALIGN) {
                for &p in ptrs {
                    // SAFETY: a block the pool owns (given up by its `HostAlloc`), allocated
                    // with this layout, freed once here.
                    unsafe { std::alloc::dealloc(p as *mut u8, layout) };
                }
            }
        }
    }
}

pub(crate) struct HostAlloc {
    ptr: *mut u8,
    layout: Layout,
    pool: Arc<Pool>,
}

// SAFETY: HostAlloc owns its memory exclusively; the raw pointer is only given up in Drop.
unsafe impl Send for HostAlloc {}
// SAFETY: no interior access through &HostAlloc.
unsafe impl Sync for HostAlloc {}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated with this very layout (in HostBackend::alloc, or by the pool's first
        // owner), given up once; no operation can touch it any more: `DeviceBuffer`'s `Drop`
        // (which drops this owner) unregistered it first, under the stream lock, after any
        // operation in flight on another thread, and every later operation finds it gone.
        unsafe { self.pool.put(self.ptr, self.layout) };
    }
}

/// What a capture has recorded so far.
struct Tape {
    ops: Vec<StreamOp>,
    /// Every allocation the ops touched, with its identity ([`Graph::check_live`]).
    touched: Vec<Allocation>,
}

/// The CPU twin. Thread-safe; work runs synchronously on the calling thread, which makes the
/// "stream" trivially ordered.
pub struct HostBackend {
    /// The memory ledger, with the registry of live allocations, the Host "stream" lock
    /// ([`bounds::Registry`]) and the capture gate.
    counter: Arc<MemCounter>,
    /// The capturing thread's tape (the capture gate says which thread that is).
    tape: Mutex<Option<Tape>>,
    pool: Arc<Pool>,
    tracer: Tracer,
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
            pool: Arc::default(),
            tracer: Tracer::default(),
            launches: AtomicU64::new(0),
            loaded: Mutex::default(),
        }
    }

    fn registry(&self) -> &Registry {
        &self.counter.registry
    }

    fn tape(&self) -> MutexGuard<'_, Option<Tape>> {
        lock(&self.tape)
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

    /// Records the op when the calling thread captures, else runs it (waiting for another
    /// thread's capture to end first).
    fn submit(&self, op: StreamOp) -> Result<()> {
        let pass = self.counter.gate.enter();
        if pass.capturing() {
            let mut tape = self.tape();
            let t = tape
                .as_mut()
                .ok_or_else(|| Error::Capture("capturing without a tape".into()))?;
            self.registry()
                .live()
                .validate(op.access(), |a| t.touched.push(a))?;
            self.tracer.record(|| op.clone());
            t.ops.push(op);
            return Ok(());
        }
        if op.is_launch() {
            self.launches.fetch_add(1, Ordering::Relaxed);
        }
        let _stream = self.registry().stream();
        self.exec(&op)?;
        self.tracer.record(|| op);
        Ok(())
    }

    /// Checks every address an op names against the live allocations ([`bounds`], shared with
    /// the CUDA backend): copies, memsets and GEMMs over their whole extent; kernel launches by
    /// the start of each pointer argument (what a kernel then reads and writes is its twin's
    /// contract, see [`HostBackend::exec`]).
    fn validate(&self, op: &StreamOp) -> Result<()> {
        self.registry().live().validate(op.access(), |_| {})
    }

    /// Validates and runs one op. The caller holds the stream lock.
    fn exec(&self, op: &StreamOp) -> Result<()> {
        self.validate(op)?;
        match op {
            StreamOp::Launch { kernel, dims, args } => {
                // SAFETY: every pointer argument starts inside a live Host allocation (validated
                // above) that cannot be freed or touched by another thread while the stream lock
                // is held. That the twin stays inside those allocations, and that its written
                // ranges alias no other argument's range (`dcc_kernels::HostFn`), is not checked
                // here (kernels declare no footprint): it is the `# Safety` contract of
                // `Backend::launch`, which every caller that queued this op (eagerly, or into a
                // tape now replayed) promised for these arguments.
                unsafe { kernel.run_host(dims, args)? };
            }
            StreamOp::Dtod { dst, src, bytes } => {
                // SAFETY: both ranges lie in live allocations and do not overlap (validated).
                unsafe {
                    std::ptr::copy_nonoverlapping(src.0 as *const u8, dst.0 as *mut u8, *bytes)
                };
            }
            StreamOp::Memset32 { dst, value, count } => {
                let p = dst.0 as *mut u32;
                for i in 0..*count {
                    // SAFETY: `count` aligned words lie in a live allocation (validated).
                    unsafe { p.add(i).write(*value) };
                }
            }
            StreamOp::Gemm(g) => {
                // SAFETY: every element the descriptor addresses lies in a live allocation and
                // is f32-aligned (`bounds::gemm_operands`, via validate above).
                unsafe { host_gemm(g, None) };
            }
            StreamOp::GemmBias(g, bias) => {
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
        let _pass = self.host_work("allocation")?;
        let layout = Layout::from_size_align(bytes.max(1), HOST_ALIGN)
            .map_err(|e| Error::Invalid(format!("allocation of {bytes} bytes: {e}")))?;
        let ptr = match self.pool.take(layout) {
            Some(p) => {
                // SAFETY: a block of `layout.size()` bytes the pool gave up to us, unused by
                // anything else; zeroed as a fresh allocation is.
                unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                p
            }
            // SAFETY: layout has non-zero size.
            None => unsafe { std::alloc::alloc_zeroed(layout) },
        };
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
            _owner: ManuallyDrop::new(Owner::Host(HostAlloc {
                ptr,
                layout,
                pool: self.pool.clone(),
            })),
        })
    }

    fn htod(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        let _pass = self.host_work("htod")?;
        let _stream = self.registry().stream();
        self.registry().live().check(dst.0, src.len())?;
        // SAFETY: dst range is inside a live allocation; src is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0 as *mut u8, src.len()) };
        Ok(())
    }

    fn dtoh(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        let _pass = self.host_work("dtoh")?;
        let _stream = self.registry().stream();
        self.registry().live().check(src.0, dst.len())?;
        // SAFETY: src range is inside a live allocation; dst is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(src.0 as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn dtod(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<()> {
        self.submit(StreamOp::Dtod { dst, src, bytes })
    }

    fn memset_d32(&self, dst: DevPtr, value: u32, count: usize) -> Result<()> {
        self.submit(StreamOp::Memset32 { dst, value, count })
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
        self.submit(StreamOp::Launch {
            kernel,
            dims,
            args: args.to_vec(),
        })
    }

    fn gemm(&self, g: &Gemm) -> Result<()> {
        // The descriptor and its operands are checked by `submit` (`validate`).
        self.submit(StreamOp::Gemm(*g))
    }

    fn gemm_bias(&self, g: &Gemm, bias: DevPtr) -> Result<()> {
        // As on CUDA (cuBLASLt's bias pointer), so code that runs here runs there.
        bounds::check_gemm_bias(g, bias)?;
        self.submit(StreamOp::GemmBias(*g, bias))
    }

    fn synchronize(&self) -> Result<()> {
        self.host_work("synchronize").map(|_| ())
    }

    fn begin_capture(&self) -> Result<()> {
        self.counter.gate.begin()?;
        *self.tape() = Some(Tape {
            ops: Vec::new(),
            touched: Vec::new(),
        });
        Ok(())
    }

    fn end_capture(&self) -> Result<Graph> {
        let _ending = self.counter.gate.ending()?;
        let Tape { ops, touched } = self
            .tape()
            .take()
            .ok_or_else(|| Error::Capture("not capturing".into()))?;
        if ops.is_empty() {
            return Ok(Graph::new(
                GraphImpl::Empty,
                Vec::new(),
                0,
                0,
                self.counter.clone(),
            ));
        }
        let n = ops.len();
        let bytes = n * std::mem::size_of::<StreamOp>()
            + ops
                .iter()
                .map(|o| match o {
                    StreamOp::Launch { args, .. } => args.len() * std::mem::size_of::<Arg>(),
                    _ => 0,
                })
                .sum::<usize>();
        Ok(Graph::new(
            GraphImpl::Host(ops),
            touched,
            n,
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
            GraphImpl::Host(ops) => {
                // Replay is bound to the captured allocations. Refuse before running anything if
                // one of them is no longer the one the capture saw (on CUDA this would be a
                // fault or corruption): the whole allocation with its identity, as on CUDA. The
                // stream lock is held over the whole replay, so none can be freed midway; `exec`
                // re-validates each op besides.
                let _stream = self.registry().stream();
                graph.check_touched(&self.registry().live())?;
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

    fn allocation(&self, ptr: DevPtr, bytes: usize) -> Result<Allocation> {
        self.registry().live().check(ptr.0, bytes)
    }

    fn begin_trace(&self) {
        self.tracer.begin();
    }

    fn end_trace(&self) -> Vec<StreamOp> {
        self.tracer.end()
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

    fn profiler_window(&self, _on: bool) -> Result<()> {
        let _pass = self.host_work("profiler window")?;
        Ok(())
    }
}
