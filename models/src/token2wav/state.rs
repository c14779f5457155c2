//! A session's streaming state and where it lives.
//!
//! Every piece of state is a region of the contract (`specs/token2wav*.yaml`), and its shape
//! comes from there: the estimator carry and the solver workspace `[step, layer, cfg, head,
//! frame, k‖v]` (prepend-ordered: newest frames first), the token-clock conformer cache
//! `[block, head, token, k‖v]` and the frame-clock upsample cache `[up_block, head, frame, k‖v]`
//! (append-ordered), and the conv contexts `estimator_conv_cache` `[step, layer, cfg, conv,
//! frame, hidden]`, `pre_lookahead_cache` `[token, dim]`, `up_layer_cache` `[frame, dim]`.
//! Axes are found by name; a region must be stored as the port addresses it (its clock axes
//! where the port expects them, packed, the other dims the model's), or the state is refused.
//!
//! Two stores ([`StateStore`]):
//! * **state rule** (`Fixed`): the regions in one arena laid out by the contract, at fixed
//!   addresses for the session's life; every cache is written back in place by the carry right
//!   after the layer (conformer) or solver step (estimator) that reads it, so the solver
//!   workspace holds one step's slice that every step reuses (the contract's `lifetime:
//!   iteration`);
//! * **stock** (`Stock`): the vendor's allocation pattern. The solver workspace is the vendor's
//!   envelope, [`STOCK_STEPS`] × [`STOCK_FRAMES`] (`flow_matching.py:36`, the generated
//!   contract's documented constants); after every call the kept frames are materialized into
//!   freshly allocated compact caches (the vendor's `torch.cat`: the region's shape at the kept
//!   extent) and the old ones freed, so cache addresses drift. The conv contexts sit in plain
//!   session buffers of the regions' shapes.
//!
//! What each cache keeps is the contract's [`Keep`] of its region ([`Keeps`]), on the region's
//! own clock and storage order, handed to the carry as declared.

use dcc_runtime::DevPtr;
use dcc_runtime::arena::{Arena, packed_strides};
use dcc_runtime::backend::DeviceBuffer;
use dcc_runtime::contract::{ArenaLayout, CacheOrder, DType, Keep, RegionInfo};
use dcc_runtime::ops::RawTensor;
use half::f16;

use super::FlowError;
use super::flow::SolverParams;

pub use dcc_generated::token2wav::{STOCK_FRAMES, STOCK_STEPS};

/// An estimator cache (the carry, the solver workspace) as the contract types its region: f32,
/// or binary16 where the operating point stores it so (the `half` point: the vendor's fp16
/// mode keeps f16 keys and values, so the port stores them in half the bytes with the same
/// values; see [`crate::nn::KvElem`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KvRaw {
    F32(RawTensor),
    F16(RawTensor<f16>),
}

impl KvRaw {
    pub fn ptr(&self) -> DevPtr {
        match self {
            KvRaw::F32(t) => t.ptr(),
            KvRaw::F16(t) => t.ptr(),
        }
    }

    pub fn dims(&self) -> &[usize] {
        match self {
            KvRaw::F32(t) => t.dims(),
            KvRaw::F16(t) => t.dims(),
        }
    }

    pub fn strides(&self) -> &[usize] {
        match self {
            KvRaw::F32(t) => t.strides(),
            KvRaw::F16(t) => t.strides(),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            KvRaw::F32(_) => DType::F32,
            KvRaw::F16(_) => DType::F16,
        }
    }

    /// Bytes from the first element to one past the last the view reaches.
    pub fn span_bytes(&self) -> usize {
        match self {
            KvRaw::F32(t) => 4 * t.span(),
            KvRaw::F16(t) => 2 * t.span(),
        }
    }

    /// The same layout and element type at `ptr`.
    pub fn with_ptr(self, ptr: DevPtr) -> Self {
        match self {
            KvRaw::F32(t) => KvRaw::F32(t.with_ptr(ptr)),
            KvRaw::F16(t) => KvRaw::F16(t.with_ptr(ptr)),
        }
    }

    /// A packed view of `dims` at `ptr` in element type `dtype` (f32 or f16).
    pub fn packed(ptr: DevPtr, dims: &[usize], dtype: DType) -> Result<KvRaw, FlowError> {
        match dtype {
            DType::F32 => Ok(KvRaw::F32(RawTensor::packed(ptr, dims)?)),
            DType::F16 => Ok(KvRaw::F16(RawTensor::packed(ptr, dims)?)),
            d => Err(FlowError::Config(format!(
                "an estimator cache of {}: the port stores it as f32 or f16",
                d.name()
            ))),
        }
    }
}

/// What each cache keeps after a call: the `keep` its contract region declares, on the region's
/// clock (frames, or tokens for the conformer cache) and storage order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Keeps {
    /// The estimator carry (region `carry`, prepend storage).
    pub carry: Keep,
    /// The encoder blocks' cache (region `conformer_cache`, token clock, append storage).
    pub conformer: Keep,
    /// The up-blocks' cache (region `upsample_cache`, frame clock, append storage).
    pub upsample: Keep,
}

impl Keeps {
    /// The keeps a contract declares, each region's storage order checked against the port's
    /// (the estimator cache prepend-ordered, the conformer caches append-ordered).
    pub fn of(layout: &ArenaLayout) -> Result<Keeps, FlowError> {
        Ok(Keeps {
            carry: keep_of(layout, "carry", CacheOrder::Prepend)?,
            conformer: keep_of(layout, "conformer_cache", CacheOrder::Append)?,
            upsample: keep_of(layout, "upsample_cache", CacheOrder::Append)?,
        })
    }
}

fn keep_of(layout: &ArenaLayout, name: &str, order: CacheOrder) -> Result<Keep, FlowError> {
    let r = layout
        .region(name)
        .ok_or_else(|| FlowError::Config(format!("the contract has no `{name}` region")))?;
    let keep = r.keep.ok_or_else(|| {
        FlowError::Config(format!(
            "region `{name}` declares no prompt + history retention"
        ))
    })?;
    if r.order != Some(order) {
        return Err(FlowError::Config(format!(
            "region `{name}` is declared {:?}, but the port stores it {order:?}-ordered",
            r.order
        )));
    }
    Ok(keep)
}

/// The envelope extent of `info` along its axis `axis` (looked up by name).
pub(super) fn axis_extent(info: &RegionInfo, axis: &str) -> Result<usize, FlowError> {
    info.axis(axis).map(|i| info.dims[i]).ok_or_else(|| {
        FlowError::Config(format!(
            "region `{}` has no `{axis}` axis (dims {:?})",
            info.name, info.dim_names
        ))
    })
}

/// The dims of region `info` with its named axes set to `extents` (the shape a compact copy
/// of the region at those extents has: the vendor's `torch.cat`).
pub fn region_shape(info: &RegionInfo, extents: &[(&str, usize)]) -> Result<Vec<usize>, FlowError> {
    let mut dims = info.dims.to_vec();
    for &(axis, n) in extents {
        let i = info.axis(axis).ok_or_else(|| {
            FlowError::Config(format!("region `{}` has no `{axis}` axis", info.name))
        })?;
        dims[i] = n;
    }
    Ok(dims)
}

/// How the port stores a region: `dims[i]` is `Some(n)` for a model dimension, `None` for a
/// clock axis, named in `axes` at its position.
pub(super) struct Storage<'a> {
    pub name: &'static str,
    pub dims: &'a [Option<usize>],
    pub axes: &'a [(&'static str, usize)],
    pub what: &'static str,
}

impl Storage<'_> {
    /// The region of `layout` this describes, checked: its clock axes by name where the port
    /// has them, packed, its other dims the model's.
    pub fn region(&self, layout: &ArenaLayout) -> Result<&'static RegionInfo, FlowError> {
        let info = layout.region(self.name).ok_or_else(|| {
            FlowError::Config(format!("the contract has no `{}` region", self.name))
        })?;
        let placed = self.axes.iter().all(|(a, at)| info.axis(a) == Some(*at));
        let dims_ok = info.dims.len() == self.dims.len()
            && info
                .dims
                .iter()
                .zip(self.dims)
                .all(|(d, want)| want.is_none_or(|w| w == *d));
        if !placed || !dims_ok || info.strides() != packed_strides(info.dims) {
            return Err(FlowError::Config(format!(
                "the contract lays `{}` out as {:?} = {:?}, the port stores it as {} = {:?}",
                info.name, info.dim_names, info.dims, self.what, self.dims
            )));
        }
        Ok(info)
    }
}

/// A session's state as tensors (layouts and addresses, fixed under the state rule, replaced
/// after every call under the stock store for the caches).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StateTensors {
    /// Estimator carry `[step, layer, cfg, head, frame, k‖v]` (frame capacity: the region's
    /// envelope under the state rule, the kept extent under stock), in the region's dtype.
    pub carry: KvRaw,
    /// Solver workspace, same axes and dtype.
    pub workspace: KvRaw,
    /// Conformer cache `[block, head, token, k‖v]`.
    pub conformer: RawTensor,
    /// Upsample cache `[up_block, head, frame, k‖v]`.
    pub upsample: RawTensor,
    /// Estimator conv contexts `[step, layer, cfg, conv, frame, hidden]`.
    pub estimator_conv: RawTensor,
    /// Pre-lookahead context `[token, dim]`.
    pub pre_lookahead: RawTensor,
    /// Upsampling context `[frame, dim]`.
    pub up_layer: RawTensor,
}

/// What owns a session's memory (see the module docs).
pub enum StateStore {
    /// The state rule: the contract's arena.
    Fixed { arena: Arena, mask: DevPtr },
    /// Stock: compact caches reallocated after every call, the vendor's workspace envelope.
    Stock(Box<StockBuffers>),
}

/// The stock store's buffers.
pub struct StockBuffers {
    pub carry: DeviceBuffer,
    pub workspace: DeviceBuffer,
    pub conformer: DeviceBuffer,
    pub upsample: DeviceBuffer,
    pub mask: DeviceBuffer,
    /// The conv contexts (estimator, pre-lookahead, upsampling).
    pub contexts: [DeviceBuffer; 3],
}

impl StateStore {
    /// Whether this is the state rule's store.
    pub fn is_fixed(&self) -> bool {
        matches!(self, StateStore::Fixed { .. })
    }
}

/// The conv contexts' addresses (fixed for a session's life in both stores).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Contexts {
    pub est_cnn: DevPtr,
    pub pre_cnn: DevPtr,
    pub up_cnn: DevPtr,
}

/// One session's streaming state on the device.
pub struct DeviceState {
    /// The `DeviceFlow` that created this state (its shapes are that flow's).
    pub(super) flow: u64,
    pub(super) solver: SolverParams,
    pub(super) keeps: Keeps,
    pub(super) tensors: StateTensors,
    pub(super) store: StateStore,
    pub(super) est_extent: usize,
    pub(super) t_tok: usize,
    pub(super) primed: bool,
}

impl DeviceState {
    /// Whether the prompt-priming pass completed since the state was created or last reset.
    pub fn primed(&self) -> bool {
        self.primed
    }

    /// Estimator cache extent (frames attended; the noise offset of the next call).
    pub fn estimator_extent(&self) -> usize {
        self.est_extent
    }

    /// Conformer cache extent on the token clock.
    pub fn conformer_tokens(&self) -> usize {
        self.t_tok
    }

    pub fn keeps(&self) -> Keeps {
        self.keeps
    }

    pub fn solver(&self) -> SolverParams {
        self.solver
    }

    pub fn store(&self) -> &StateStore {
        &self.store
    }

    /// The state's tensors now.
    pub fn tensors(&self) -> &StateTensors {
        &self.tensors
    }

    /// Address of the estimator carry now (fixed under the state rule, new after every call
    /// under the stock store).
    pub fn estimator_carry(&self) -> DevPtr {
        self.tensors.carry.ptr()
    }

    /// Address of solver step `step`'s slice of the estimator carry now (`[layer, cfg, head,
    /// frame, k‖v]`).
    pub fn estimator_carry_step(&self, step: usize) -> Result<DevPtr, FlowError> {
        // SAFETY: the carry tensor lies in this state's own store (its arena or buffer), alive
        // while `self` is; the view is only used for its address.
        Ok(match self.tensors.carry {
            KvRaw::F32(c) => unsafe { c.bind() }.index(0, step)?.ptr(),
            KvRaw::F16(c) => unsafe { c.bind() }.index(0, step)?.ptr(),
        })
    }

    /// Address of the conformer cache now.
    pub fn conformer_carry(&self) -> DevPtr {
        self.tensors.conformer.ptr()
    }

    /// Address of the upsample cache now.
    pub fn upsample_carry(&self) -> DevPtr {
        self.tensors.upsample.ptr()
    }

    /// Address of the solver workspace (fixed in both stores).
    pub fn solver_workspace(&self) -> DevPtr {
        self.tensors.workspace.ptr()
    }

    /// Address of the attention-mask region (the port attends every frame; never read).
    pub fn mask(&self) -> DevPtr {
        match &self.store {
            StateStore::Fixed { mask, .. } => *mask,
            StateStore::Stock(b) => b.mask.ptr(),
        }
    }

    /// The conv contexts' fixed addresses.
    pub fn contexts(&self) -> Contexts {
        Contexts {
            est_cnn: self.tensors.estimator_conv.ptr(),
            pre_cnn: self.tensors.pre_lookahead.ptr(),
            up_cnn: self.tensors.up_layer.ptr(),
        }
    }
}

impl super::DeviceFlow {
    /// Checks that a call of `n_tokens` tokens fits `st` as it stands, touching nothing: the
    /// capacity checks [`encoder_call`], [`flow_call`] and [`finish_call`] make once the call's
    /// work is under way (the later ones after the encoder has written the caches), made up
    /// front with the same bounds so that a stream grown past them is refused with its state
    /// intact instead of half-written.
    ///
    /// [`encoder_call`]: super::DeviceFlow::encoder_call
    /// [`flow_call`]: super::DeviceFlow::flow_call
    /// [`finish_call`]: super::DeviceFlow::finish_call
    pub fn check_call(
        &self,
        st: &DeviceState,
        n_tokens: usize,
        last_chunk: bool,
    ) -> Result<(), FlowError> {
        let e = &self.cfg.encoder;
        let (la, s) = (e.pre_lookahead, e.up_stride);
        let t = &st.tensors;
        let fixed = st.store.is_fixed();
        let refuse = |what: String| Err(FlowError::Input(format!("{n_tokens} tokens: {what}")));
        // the encoder's: the conformer caches and workspaces
        let (cap_tok, cap_up) = (t.conformer.dims()[2], t.upsample.dims()[2]);
        let tn = if last_chunk {
            Some(n_tokens)
        } else {
            n_tokens.checked_sub(la)
        };
        let (kept_tok, kept_up) = (st.keeps.conformer.bound(), st.keeps.upsample.bound());
        if st.t_tok > cap_tok
            || st.t_tok * s > cap_up
            || n_tokens > self.limits.max_call_tokens
            || tn.is_none_or(|tn| {
                st.t_tok + tn > self.caps.work_tok
                    || (st.t_tok + tn) * s > self.caps.work_up
                    || (fixed && (kept_tok > cap_tok || kept_up > cap_up))
            })
        {
            return refuse(format!(
                "over a conformer extent of {} tokens the call exceeds the workspace ({} tokens) \
                 or the caches ({cap_tok} tokens, {cap_up} frames)",
                st.t_tok, self.caps.work_tok
            ));
        }
        // the flow's: the noise table, the estimator workspace and carry
        let frames = self.call_frames(n_tokens, last_chunk);
        let l_old = st.est_extent;
        let tk = l_old + frames;
        let (cap, work) = (t.carry.dims()[4], t.workspace.dims()[4]);
        if tk > self.noise_frames()
            || tk > work
            || l_old > cap
            || frames > self.caps.t_up
            || (fixed && st.keeps.carry.bound() > cap)
        {
            return refuse(format!(
                "{l_old} + {frames} frames exceed the noise table ({}), the workspace ({work}) \
                 or the carry ({cap})",
                self.noise_frames()
            ));
        }
        // the stock store's materialization
        if !fixed && l_old + frames > STOCK_FRAMES {
            return refuse(format!(
                "{l_old} + {frames} frames exceed the stock envelope of {STOCK_FRAMES}"
            ));
        }
        Ok(())
    }
}
