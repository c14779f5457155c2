//! Backends: where buffers live and kernels run.
//!
//! [`Backend`] is the one interface the arena, the carry, the replay engine and the model ports
//! program against. Two implementations:
//!
//! * [`CudaBackend`]: cudarc 0.19 (driver + NVRTC + cuBLAS, loaded dynamically). One context,
//!   one stream; kernels compiled by NVRTC once per process; graphs by stream capture.
//! * [`HostBackend`]: a CPU twin with the same semantics. Buffers live at fixed host addresses,
//!   launches run the kernels' host twins synchronously, and a "graph" is a recorded tape of
//!   launches bound to the raw pointers it saw at capture, so replaying it after a buffer moved
//!   touches the old address exactly as a CUDA graph would (both refuse, alike, when the old
//!   buffer was freed, see below, instead of writing through it). Freed Host blocks are handed
//!   back to the next allocation of the same size, as CUDA's stream-ordered pool hands back
//!   freed addresses, so address reuse shows up on Host too.
//!
//! Bounds: both backends keep a registry of their live allocations (`bounds::Registry`, start
//! address → length and identity) and check every operand of every copy, memset and GEMM over its
//! full extent (GEMM operands over all batches, the bias, f32/u32 alignment, overflow-checked
//! arithmetic), and the start of every kernel pointer argument, before the work is issued,
//! refusing with a typed error ([`Error::Dangling`], [`Error::OutOfBounds`], [`Error::Invalid`]).
//! So the safe methods cannot make either backend touch memory outside its live buffers; only
//! [`Backend::launch`] (how far a kernel reaches from its pointers) is `unsafe`. A capture
//! records every allocation its operations touched, whole and with its identity
//! ([`Allocation`]); [`Backend::launch_graph`] refuses, on both backends alike, when one of them
//! was freed ([`Error::Dangling`]) or freed and reallocated, even at the same address with the
//! same length ([`Error::Reallocated`]). [`Graph::check_live`] asks the same question without
//! launching.
//!
//! Every device byte goes through [`Backend::alloc`] and is counted by kind ([`AllocKind`]);
//! [`Backend::memory`] reports live and peak bytes (and `cuMemGetInfo` on CUDA).
//!
//! Stream semantics: all work is ordered on the backend's single stream. [`Backend::dtoh`]
//! waits for the stream; [`Backend::htod`] is complete when it returns. During capture
//! ([`Backend::begin_capture`]..[`Backend::end_capture`]) only stream work (launch, gemm, dtod,
//! memset) is allowed on the capturing thread; allocation, host copies, synchronization and
//! graph launches fail there with [`Error::Capturing`] on both backends.
//!
//! Threading: a backend is `Send + Sync`; any thread may issue work, in the order the calls
//! return. A capture is exclusive: from [`Backend::begin_capture`] to [`Backend::end_capture`]
//! (which must be called on the same thread), every other thread's call that issues work,
//! allocates or frees (a [`DeviceBuffer`] dropped) blocks until the capture has ended, on both
//! backends, so the graph holds exactly the capturing thread's work and nothing another thread
//! issued is lost into it. `begin_capture` itself waits for another thread's capture to end and
//! for work already admitted to be issued. So a capturing thread must not wait for another
//! thread that uses the same backend (it would wait for ever).

mod bounds;
mod cuda;
mod gate;
mod host;
mod memory;
mod op;
mod ptx_cache;

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use std::time::Instant;

pub use bounds::Allocation;
pub use cuda::{CudaBackend, compile_ptx, nvrtc_available};
pub use dcc_kernels::{Arg, DevPtr, KernelDef, LaunchDims};
pub use host::HostBackend;
pub use memory::{KindUsage, MemCounter, MemoryReport};
pub use op::StreamOp;

use crate::error::{Error, Result};

/// Which implementation a backend is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Host,
    Cuda,
}

/// What an allocation is for; memory is reported per kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocKind {
    /// A session's region arena (contract state).
    Arena,
    /// Per-session state snapshots (multi-session switching).
    Session,
    /// Per-class static staging buffers of the replay engine.
    Staging,
    /// Library workspaces (the cuBLAS workspace).
    Workspace,
    /// Memory held by instantiated graphs (CUDA: `cuMemGetInfo` delta at instantiation; Host:
    /// the tape's size).
    Graph,
    /// Device RNG state.
    Rng,
    /// Shadow buffers of verify modes (auditor).
    Audit,
    /// Anything else the caller allocates through the backend (weights, inputs, outputs).
    Other,
}

impl AllocKind {
    pub const ALL: [AllocKind; 8] = [
        AllocKind::Arena,
        AllocKind::Session,
        AllocKind::Staging,
        AllocKind::Workspace,
        AllocKind::Graph,
        AllocKind::Rng,
        AllocKind::Audit,
        AllocKind::Other,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            AllocKind::Arena => "arena",
            AllocKind::Session => "session",
            AllocKind::Staging => "staging",
            AllocKind::Workspace => "workspace",
            AllocKind::Graph => "graph",
            AllocKind::Rng => "rng",
            AllocKind::Audit => "audit",
            AllocKind::Other => "other",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// What keeps an allocation alive; held only for its `Drop`.
#[allow(dead_code)]
pub(crate) enum Owner {
    Host(host::HostAlloc),
    Cuda(cudarc::driver::CudaSlice<u8>),
}

/// One device allocation at a fixed address for its whole life (no realloc exists). Zeroed at
/// allocation. Freed (and uncounted) on drop.
pub struct DeviceBuffer {
    ptr: DevPtr,
    bytes: usize,
    kind: AllocKind,
    counter: Arc<MemCounter>,
    /// Freed by `Drop`, inside the capture gate.
    _owner: ManuallyDrop<Owner>,
}

impl DeviceBuffer {
    pub fn ptr(&self) -> DevPtr {
        self.ptr
    }

    /// Address `offset` bytes in, checked against the size.
    pub fn at(&self, offset: usize) -> Result<DevPtr> {
        if offset > self.bytes {
            return Err(Error::OutOfBounds(format!(
                "offset {offset} in a buffer of {} bytes",
                self.bytes
            )));
        }
        Ok(self.ptr.offset(offset))
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn kind(&self) -> AllocKind {
        self.kind
    }

    /// The kind of backend that allocated the buffer.
    pub fn backend_kind(&self) -> BackendKind {
        match *self._owner {
            Owner::Host(_) => BackendKind::Host,
            Owner::Cuda(_) => BackendKind::Cuda,
        }
    }

    /// Checks that `count` elements of `T` starting `offset` bytes in lie inside the buffer,
    /// aligned for `T`, and that the buffer belongs to a backend of kind `kind`.
    pub fn check_elems<T>(&self, kind: BackendKind, offset: usize, count: usize) -> Result<()> {
        if self.backend_kind() != kind {
            return Err(Error::Invalid(format!(
                "a {:?} buffer used on a {kind:?} backend",
                self.backend_kind()
            )));
        }
        let end = count
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.checked_add(offset));
        if end.is_none_or(|e| e > self.bytes) {
            return Err(Error::OutOfBounds(format!(
                "{count} elements of {} bytes at offset {offset} in a buffer of {} bytes",
                std::mem::size_of::<T>(),
                self.bytes
            )));
        }
        if !(self.ptr.0 + offset as u64).is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(Error::Invalid(format!(
                "offset {offset} is not aligned for {}-byte elements",
                std::mem::align_of::<T>()
            )));
        }
        Ok(())
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer({}, {} B, {:?})",
            self.ptr, self.bytes, self.kind
        )
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // A free is stream work on CUDA (`cuMemFreeAsync`): while another thread captures, it
        // waits for the capture to end rather than land in its graph.
        let _pass = self.counter.gate.enter();
        // Unregistered before the owner frees the memory: an operation either was checked (and,
        // on Host, ran; on CUDA, was enqueued, so the stream-ordered free follows it) before
        // this, or finds the buffer gone.
        self.counter.registry.remove(self.ptr.0);
        self.counter.sub(self.kind, self.bytes);
        // SAFETY: dropped exactly once, here, in `Drop`, and never touched again.
        unsafe { ManuallyDrop::drop(&mut self._owner) };
    }
}

pub(crate) enum GraphImpl {
    /// The Host twin's tape.
    Host(Vec<StreamOp>),
    Cuda(cudarc::driver::CudaGraph),
    /// Nothing was captured.
    Empty,
}

/// An instantiated graph: replays the captured work against the addresses it saw at capture.
pub struct Graph {
    pub(crate) imp: GraphImpl,
    /// Every allocation the captured operations touched, whole, with its identity, as it was at
    /// capture (sorted, deduplicated): a replay is refused unless each is still live as it was.
    touched: Vec<Allocation>,
    nodes: usize,
    bytes: usize,
    counter: Arc<MemCounter>,
}

impl Graph {
    pub(crate) fn new(
        imp: GraphImpl,
        mut touched: Vec<Allocation>,
        nodes: usize,
        bytes: usize,
        counter: Arc<MemCounter>,
    ) -> Graph {
        counter.add(AllocKind::Graph, bytes);
        touched.sort_unstable();
        touched.dedup();
        Graph {
            imp,
            touched,
            nodes,
            bytes,
            counter,
        }
    }

    /// Checks, under `live`, that every allocation the capture touched is still the one it saw
    /// ([`Error::Dangling`] or [`Error::Reallocated`] otherwise).
    pub(crate) fn check_touched(&self, live: &bounds::Live<'_>) -> Result<()> {
        self.touched.iter().try_for_each(|a| live.check_same(a))
    }

    /// Whether a replay would be admitted now: every allocation the captured operations touched
    /// is still live, the same allocation (identity) with the same range, as at capture. The
    /// check [`Backend::launch_graph`] makes before it runs anything, for callers that must
    /// know before they move any byte (the replay engine falls back to eager instead).
    pub fn check_live(&self) -> Result<()> {
        self.check_touched(&self.counter.registry.live())
    }

    /// Operations recorded (kernel launches, copies, memsets, GEMMs).
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Device bytes attributed to this graph.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Graph({} nodes, {} B)", self.nodes, self.bytes)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        self.counter.sub(AllocKind::Graph, self.bytes);
    }
}

/// A float32 GEMM in cuBLAS conventions (column-major), optionally strided-batched:
/// `C_b = alpha * op(A_b) * op(B_b) + beta * C_b` for `b < batch`, with `op(A)` m×k, `op(B)` k×n,
/// `C` m×n. With `beta == 0` C is not read. TF32 is off on CUDA.
///
/// The Host twin sums `p = 0..k` in order with separate multiply and add: deterministic, but not
/// bit-equal to cuBLAS (whose reduction order is its own). Replay-equals-eager holds on each
/// backend separately.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Gemm {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a: DevPtr,
    pub lda: usize,
    pub stride_a: usize,
    pub b: DevPtr,
    pub ldb: usize,
    pub stride_b: usize,
    pub beta: f32,
    pub c: DevPtr,
    pub ldc: usize,
    pub stride_c: usize,
    pub batch: usize,
}

/// A point on the stream's timeline.
pub struct Marker(pub(crate) MarkerImpl);

pub(crate) enum MarkerImpl {
    Host(Instant),
    Cuda(cudarc::driver::CudaEvent),
}

/// Plain-old-data element types that may be copied to and from device memory byte for byte.
///
/// # Safety
/// Every bit pattern of `size_of::<T>()` bytes is a valid `T`, and `T` has no padding.
pub unsafe trait Pod: Copy + Default + 'static {}
// SAFETY: primitive numeric types: no padding, every bit pattern valid.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u16 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}
// SAFETY: as above.
unsafe impl Pod for i64 {}
// SAFETY: as above.
unsafe impl Pod for f32 {}
// SAFETY: as above.
unsafe impl Pod for f64 {}
// SAFETY: IEEE binary16 is a transparent u16: no padding, every bit pattern a value.
unsafe impl Pod for half::f16 {}

/// Views a Pod slice as bytes.
pub fn as_bytes<T: Pod>(v: &[T]) -> &[u8] {
    // SAFETY: T is Pod (no padding), so every byte is initialized; the length covers v exactly.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: Pod>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: T is Pod: any byte pattern written is a valid T.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// The device interface. Object safe: the runtime holds `Arc<dyn Backend>`.
pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;
    /// Device name (`"host"` on Host).
    fn device_name(&self) -> &str;
    /// Device ordinal; part of every replay key.
    fn device_ordinal(&self) -> u32;

    /// Allocates `bytes` (zeroed) at an address that never changes until the buffer drops.
    /// Fails during capture.
    fn alloc(&self, bytes: usize, kind: AllocKind) -> Result<DeviceBuffer>;
    /// Host → device; complete when it returns. Fails during capture. `[dst, dst + src.len())`
    /// must lie inside one live buffer of this backend (checked).
    fn htod(&self, dst: DevPtr, src: &[u8]) -> Result<()>;
    /// Device → host after all prior stream work. Fails during capture. `[src, src +
    /// dst.len())` must lie inside one live buffer of this backend (checked).
    fn dtoh(&self, dst: &mut [u8], src: DevPtr) -> Result<()>;
    /// Device → device, stream-ordered, capturable. Each range must lie inside one live buffer
    /// (checked); overlapping ranges are refused ([`Error::Invalid`]) on both backends.
    fn dtod(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<()>;
    /// Sets `count` 32-bit words to `value`, stream-ordered, capturable. The words must lie
    /// inside one live buffer, 4-byte aligned (checked).
    fn memset_d32(&self, dst: DevPtr, value: u32, count: usize) -> Result<()>;
    /// Checks that `[ptr, ptr + bytes)` lies inside one live buffer of this backend, refusing as
    /// a copy of that range would ([`Error::Dangling`], [`Error::OutOfBounds`]); touches no
    /// memory and is allowed during capture. Safe wrappers of a kernel launch
    /// ([`crate::carry::write_back_rows`]) check the kernel's whole footprint with it first.
    fn check_range(&self, ptr: DevPtr, bytes: usize) -> Result<()>;
    /// Launches a registered kernel, stream-ordered, capturable. Argument kinds are checked
    /// against the kernel's declared parameters, and both backends check that each pointer
    /// argument starts inside one of their live buffers; neither backend knows how far a kernel
    /// reads or writes from there (kernels declare no footprint).
    ///
    /// # Safety
    /// Every pointer argument, together with the counts, strides, offsets and launch geometry
    /// the kernel derives from the other arguments and `dims`, must address only bytes inside
    /// live buffers of this backend (allocated by it, not freed), holding elements of the
    /// kernel's element type for that parameter (aligned for it). A range the kernel writes
    /// may overlap another pointer argument's range only where the kernel allows it (an
    /// elementwise kernel reading and writing the same index, the carry kernel's `dst == src`);
    /// the model kernels' Host twins hold each written range as an exclusive slice. Those buffers
    /// must stay alive until the work completes in stream order; for a launch recorded during
    /// capture, until the graph's last replay completes.
    unsafe fn launch(
        &self,
        kernel: &'static KernelDef,
        dims: LaunchDims,
        args: &[Arg],
    ) -> Result<()>;
    /// Float32 GEMM (cuBLAS, TF32 off, runtime-owned workspace; Host: ordered loops). The
    /// descriptor is checked as cuBLAS requires it (batch >= 1, leading dimensions at least the
    /// stored rows), and each operand over its extent `(rows-1) + (cols-1)·ld + (batch-1)·stride
    /// + 1` floats must lie inside one live buffer, f32-aligned (checked).
    fn gemm(&self, g: &Gemm) -> Result<()>;
    /// Float32 GEMM with a bias epilogue: `C[i, j] = alpha · Σ_p op(A)[i, p] · op(B)[p, j] +
    /// bias[i]` (column-major, `bias` holds `m` floats), one stream operation (CUDA: cuBLASLt,
    /// `CUBLAS_COMPUTE_32F`, no TF32, `CUBLASLT_EPILOGUE_BIAS`, the runtime's cuBLAS workspace;
    /// Host: the [`Backend::gemm`] loops, then `alpha · acc + bias[i]`). `g.beta` must be 0 and
    /// `g.batch` 1. On Host the result equals [`Backend::gemm`] with `beta = 1` over a `C`
    /// pre-filled with the bias, bit for bit, when `alpha = 1` (`1·acc + 1·bias` rounds as
    /// `acc + bias`); on CUDA the epilogue adds the bias once to the finished dot product, as
    /// `beta = 1` does. Operands are checked as for [`Backend::gemm`], the bias's `m` floats
    /// too.
    fn gemm_bias(&self, g: &Gemm, bias: DevPtr) -> Result<()>;
    /// Waits for all stream work. Fails during capture.
    fn synchronize(&self) -> Result<()>;

    /// Starts recording the calling thread's stream work instead of executing it. Exclusive:
    /// waits for another thread's capture to end and for work other threads already issue;
    /// from then on other threads' calls block until [`Backend::end_capture`] (module docs,
    /// "Threading"). Fails when the calling thread already captures.
    fn begin_capture(&self) -> Result<()>;
    /// Stops recording and instantiates the graph. Must be called on the capturing thread
    /// (elsewhere it fails, [`Error::Capture`], and ends nothing). Ends the capture even when
    /// it fails.
    fn end_capture(&self) -> Result<Graph>;
    /// Whether the calling thread is capturing.
    fn is_capturing(&self) -> bool;
    /// Replays a graph on the stream, bound to the addresses it saw at capture. Refused before
    /// anything runs, alike on both backends, unless every allocation the captured operations
    /// touched is still live as it was at capture, whole and with the same identity
    /// ([`Error::Dangling`] when freed, [`Error::Reallocated`] when freed and another buffer
    /// now holds the address, even one of the same length).
    fn launch_graph(&self, graph: &Graph) -> Result<()>;

    /// The live allocation of this backend holding `[ptr, ptr + bytes)` ([`Error::Dangling`]
    /// or [`Error::OutOfBounds`] when none holds it all).
    fn allocation(&self, ptr: DevPtr, bytes: usize) -> Result<Allocation>;
    /// Starts a trace of the stream operations the calling thread issues from now on, eager or
    /// captured, each as issued (after its checks passed); restarts one already running. The
    /// replay engine compares the traces of two runs of a callable.
    fn begin_trace(&self);
    /// Ends the calling thread's trace and returns it (empty when none was running).
    fn end_trace(&self) -> Vec<StreamOp>;

    /// Records a point on the stream.
    fn marker(&self) -> Result<Marker>;
    /// Milliseconds between two markers (waits for `end`).
    fn elapsed_ms(&self, start: &Marker, end: &Marker) -> Result<f64>;

    /// Compiles and loads the kernels' modules now (CUDA), so NVRTC stays out of timings.
    fn preload(&self, kernels: &[&'static KernelDef]) -> Result<()>;
    /// The memory ledger (with `cuMemGetInfo` on CUDA).
    fn memory(&self) -> MemoryReport;
    /// Kernel launches and GEMMs issued eagerly so far (graph replays not included).
    fn eager_launches(&self) -> u64;
    /// Starts a new peak window of the memory ledger (peaks := live bytes now), so a benchmark
    /// can report the peak of one phase.
    fn reset_peak(&self);
    /// Opens (`true`) or closes (`false`) the window an external profiler records when it is
    /// started with collection off (Nsight Compute's `--profile-from-start off`):
    /// `cuProfilerStart`/`cuProfilerStop` on CUDA, after the stream work issued so far has
    /// finished, so the window holds exactly the work issued inside it. Without such a profiler
    /// attached the calls do nothing. A no-op on Host. Fails during capture.
    fn profiler_window(&self, on: bool) -> Result<()>;
}

impl dyn Backend + '_ {
    /// Copies a Pod slice to `dst`.
    pub fn upload<T: Pod>(&self, dst: DevPtr, src: &[T]) -> Result<()> {
        self.htod(dst, as_bytes(src))
    }

    /// Reads `n` elements at `src`.
    pub fn download<T: Pod>(&self, src: DevPtr, n: usize) -> Result<Vec<T>> {
        let mut v = vec![T::default(); n];
        self.dtoh(as_bytes_mut(&mut v), src)?;
        Ok(v)
    }

    /// Allocates a buffer holding `src`.
    pub fn alloc_from<T: Pod>(&self, src: &[T], kind: AllocKind) -> Result<DeviceBuffer> {
        let b = self.alloc(std::mem::size_of_val(src).max(1), kind)?;
        self.upload(b.ptr(), src)?;
        Ok(b)
    }

    /// SHA-256 (hex) of `bytes` bytes at `src`.
    pub fn sha256(&self, src: DevPtr, bytes: usize) -> Result<String> {
        let v: Vec<u8> = self.download(src, bytes)?;
        Ok(crate::sha256_hex(&v))
    }
}

/// The Host backend, shared.
pub fn host() -> Arc<dyn Backend> {
    Arc::new(HostBackend::new())
}

/// The CUDA backend on device `ordinal`, or why there is none.
pub fn cuda(ordinal: usize) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(CudaBackend::new(ordinal)?))
}
