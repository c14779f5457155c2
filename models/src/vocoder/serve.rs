//! The vocoder served by exact-shape replay: the contract's `vocoder` and `vocoder_flush` as
//! closures over [`call::run`](super::call::run), each wrapped by an [`ExactShapeReplay`]
//! engine keyed on the contract's catalog.
//!
//! A closure takes every address from the [`Call`] — the fresh mel (staged), the regions
//! (aliased, and written in place: their extents are the declared writes) and the constants —
//! and rebuilds the call's plan from the dims it is keyed on (the histories' extents and the
//! fresh frames), never from the stream's position, which lives in `voc_offsets`.

use std::sync::Arc;

use dcc_generated::token2wav::{VocoderFlushInputs, VocoderInputs, VocoderWrites};
use dcc_runtime::DevPtr;
use dcc_runtime::backend::Backend;
use dcc_runtime::contract::RegionInfo;
use dcc_runtime::kernels::signal::COUNTERS;
use dcc_runtime::ops::{Ctx, RawTensor};
use dcc_runtime::replay::{
    Call, EngineReport, ExactShapeReplay, Invocation, Outcome, ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;

use super::VocoderError;
use super::call::{self, Io};
use super::contract::VocoderContract;
use super::model::CausalHift;
use super::plan::{CallPlan, Caps};
use super::work::{Regions, Work};

/// What the stream and its callables share: the model, one call's activations, the capacities.
#[derive(Debug)]
pub(crate) struct Shared {
    pub model: Arc<CausalHift>,
    pub work: Work,
    pub caps: Caps,
}

/// A wrapped callable.
type Callable = Box<dyn Fn(&mut Call<'_>) -> dcc_runtime::Result<()> + Send>;

/// The two engines of a replayed stream.
pub(crate) struct Engines {
    vocoder: ExactShapeReplay<Callable>,
    flush: ExactShapeReplay<Callable>,
}

fn rt(e: VocoderError) -> dcc_runtime::Error {
    match e {
        VocoderError::Device(e) => e,
        e => dcc_runtime::Error::Invalid(e.to_string()),
    }
}

fn op(e: dcc_runtime::ops::OpError) -> dcc_runtime::Error {
    rt(e.into())
}

/// The histories' extents a call is keyed on: `voc_mel`'s frames (its `frame` dim) and
/// `voc_source`'s samples in frames.
fn extents(s: &Shared, mel: &[usize], src: &[usize]) -> dcc_runtime::Result<(usize, usize)> {
    let hop = s.model.cfg.hop();
    match (mel, src) {
        (&[_, m], &[n, 1]) if n.is_multiple_of(hop) => Ok((m, n / hop)),
        _ => Err(dcc_runtime::Error::Invalid(format!(
            "vocoder: history dims {mel:?} / {src:?} are not [mel_bins, frames] / [frames · {hop}, 1]"
        ))),
    }
}

/// The regions' full storage at the written regions' addresses (each write's extent checked,
/// each region read, `reads`, at the address it is written).
fn io(
    s: &Shared,
    call: &Call<'_>,
    reads: VocoderWrites<DevPtr>,
    mel: Option<RawTensor>,
    noise: (DevPtr, &[usize]),
    window: (DevPtr, &[usize]),
) -> dcc_runtime::Result<Io> {
    let c = &s.model.cfg;
    let w = VocoderWrites::try_from_fn(|i| call.write(i))?;
    if reads != w {
        return Err(dcc_runtime::Error::Invalid(format!(
            "vocoder: regions read at {reads:?} but written at {w:?} (they are updated in place)"
        )));
    }
    let sizes = [
        4 * c.in_channels * s.caps.mel,
        4 * s.caps.src * c.hop(),
        8 * c.harmonics,
        8 * COUNTERS,
    ];
    for (i, need) in sizes.into_iter().enumerate() {
        if call.write_bytes(i)? < need {
            return Err(dcc_runtime::Error::Invalid(format!(
                "vocoder: written region {} holds {} bytes, the call needs {need}",
                VocoderWrites::<()>::NAMES[i],
                call.write_bytes(i)?
            )));
        }
    }
    Ok(Io {
        mel,
        mel_history: RawTensor::packed(w.voc_mel, &[c.in_channels * s.caps.mel]).map_err(op)?,
        source_history: RawTensor::packed(w.voc_source, &[s.caps.src * c.hop()]).map_err(op)?,
        phase: RawTensor::packed(w.voc_phase, &[c.harmonics]).map_err(op)?,
        offsets: RawTensor::packed(w.voc_offsets, &[COUNTERS]).map_err(op)?,
        noise: RawTensor::packed(noise.0, noise.1).map_err(op)?,
        window: RawTensor::packed(window.0, window.1).map_err(op)?,
    })
}

/// Plans and queues one call.
fn queue(s: &Shared, call: &Call<'_>, io: &Io, plan: &CallPlan) -> dcc_runtime::Result<()> {
    let cx = Ctx::new(call.backend(), None);
    // SAFETY: the stream's `invoke` is the only caller of these engines: it binds the regions
    // to its own `Regions` (buffers of the contract's envelopes, checked above against the
    // write extents), the fresh mel to `Shared::work.mel_in` (or the engine's staging copy of
    // its span) and the constants to the model's noise table and window, all alive while the
    // engines are (the stream drops its engines first; the model and work live in `Shared`,
    // which the closures hold).
    unsafe { call::run(&cx, &s.model, &s.work, &s.caps, io, plan) }.map_err(rt)
}

/// One call of either callable, as its closure reads it from the [`Call`].
struct Step<'a> {
    /// Dims of the mel and source histories (the class: their extents).
    histories: (&'a [usize], &'a [usize]),
    /// Fresh mel frames (0 for the flush) and whether this is the final flush.
    frames: usize,
    last: bool,
    /// The fresh mel `[frames, mel_bins]` (none for the flush).
    mel: Option<(DevPtr, &'a [usize])>,
    /// The regions' addresses as inputs (each must be where it is written).
    reads: VocoderWrites<DevPtr>,
    noise: (DevPtr, &'a [usize]),
    window: (DevPtr, &'a [usize]),
}

/// Plans a call from its class and queues it.
fn step(s: &Shared, call: &Call<'_>, st: Step<'_>) -> dcc_runtime::Result<()> {
    let (mel_len, src_len) = extents(s, st.histories.0, st.histories.1)?;
    let m = &s.model;
    let plan = CallPlan::new(
        &m.limits,
        m.cfg.block_frames,
        &s.caps,
        mel_len,
        src_len,
        st.frames,
        st.last,
    )
    .map_err(rt)?;
    let mel = match st.mel {
        Some((ptr, dims)) => Some(RawTensor::packed(ptr, dims).map_err(op)?),
        None => None,
    };
    let io = io(s, call, st.reads, mel, st.noise, st.window)?;
    queue(s, call, &io, &plan)
}

/// A [`Step`] from a callable's generated input structs (`at`: addresses, `dims`): the chunk's
/// `VocoderInputs` and the flush's `VocoderFlushInputs` are distinct types with the same region
/// and constant fields, so one macro reads both.
macro_rules! step_of {
    ($at:ident, $dims:ident, $frames:expr, $last:expr, $mel:expr) => {
        Step {
            histories: ($dims.mel_history, $dims.source_history),
            frames: $frames,
            last: $last,
            mel: $mel,
            reads: VocoderWrites {
                voc_mel: $at.mel_history,
                voc_source: $at.source_history,
                voc_phase: $at.phase,
                voc_offsets: $at.offsets,
            },
            noise: ($at.noise, $dims.noise),
            window: ($at.window, $dims.window),
        }
    };
}

fn vocoder_callable(s: Arc<Shared>) -> Callable {
    Box::new(move |call: &mut Call<'_>| {
        let at = VocoderInputs::try_from_fn(|i| call.input(i))?;
        let dims = VocoderInputs::try_from_fn(|i| call.dims(i))?;
        let frames = match dims.mel {
            &[f, c] if c == s.model.cfg.in_channels => f,
            d => {
                return Err(dcc_runtime::Error::Invalid(format!(
                    "vocoder: mel dims {d:?}"
                )));
            }
        };
        step(
            &s,
            call,
            step_of!(at, dims, frames, false, Some((at.mel, dims.mel))),
        )
    })
}

fn flush_callable(s: Arc<Shared>) -> Callable {
    Box::new(move |call: &mut Call<'_>| {
        let at = VocoderFlushInputs::try_from_fn(|i| call.input(i))?;
        let dims = VocoderFlushInputs::try_from_fn(|i| call.dims(i))?;
        step(&s, call, step_of!(at, dims, 0, true, None))
    })
}

/// `(dims, strides)` of a region input: the growing axis at `extent`, or the whole (pinned)
/// region.
fn region_arg(r: &RegionInfo, axis: Option<(&str, usize)>) -> (Vec<usize>, Vec<usize>) {
    match axis.and_then(|(a, e)| r.view(a, e, &[])) {
        Some(v) => v,
        None => (r.dims.to_vec(), r.strides()),
    }
}

impl Engines {
    pub fn new(
        be: &Arc<dyn Backend>,
        contract: &VocoderContract,
        shared: &Arc<Shared>,
    ) -> Result<Engines, VocoderError> {
        let rng = Arc::new(HostRng::new(0));
        let spec = |info| ReplaySpec::from_callable(info, 0);
        Ok(Engines {
            vocoder: ExactShapeReplay::new(
                be.clone(),
                spec(contract.vocoder),
                rng.clone(),
                None,
                vocoder_callable(shared.clone()),
            )?,
            flush: ExactShapeReplay::new(
                be.clone(),
                spec(contract.flush),
                rng,
                None,
                flush_callable(shared.clone()),
            )?,
        })
    }

    /// The engines' counters (`vocoder`, then `vocoder_flush`).
    pub fn reports(&self) -> Vec<EngineReport> {
        vec![self.vocoder.report(), self.flush.report()]
    }

    /// Runs one call through its engine: `frames` fresh frames in `Shared::work.mel_in`
    /// (time-major), or the flush (`None`), over `regions` at the histories' extents.
    pub fn invoke(
        &mut self,
        contract: &VocoderContract,
        s: &Shared,
        regions: &Regions,
        extents: (usize, usize),
        frames: Option<usize>,
    ) -> Result<Outcome, VocoderError> {
        let m = &s.model;
        let c = &m.cfg;
        let (mel_len, src_len) = extents;
        let mel_in = [frames.unwrap_or(0), c.in_channels];
        let mel_strides = [c.in_channels, 1];
        let hist = region_arg(contract.mel, Some(("frame", mel_len)));
        let src = region_arg(contract.source, Some(("sample", src_len * c.hop())));
        let phase = region_arg(contract.phase, None);
        let offsets = region_arg(contract.offsets, None);
        let noise = [m.noise_rows(), c.harmonics];
        let noise_strides = [c.harmonics, 1];
        let window = [c.n_fft];
        let arg = |ptr, dims, strides, dtype| TensorArg {
            ptr,
            dims,
            strides,
            dtype,
        };
        use dcc_runtime::contract::DType::{F32, F64, I64};
        let state = [
            arg(regions.mel.ptr(), &hist.0[..], &hist.1[..], F32),
            arg(regions.src.ptr(), &src.0[..], &src.1[..], F32),
            arg(regions.phase.ptr(), &phase.0[..], &phase.1[..], F64),
            arg(regions.offsets.ptr(), &offsets.0[..], &offsets.1[..], I64),
            arg(m.noise_ptr(), &noise[..], &noise_strides[..], F32),
            arg(m.window_ptr(), &window[..], &[1][..], F32),
        ];
        let writes = VocoderWrites {
            voc_mel: &regions.mel,
            voc_source: &regions.src,
            voc_phase: &regions.phase,
            voc_offsets: &regions.offsets,
        }
        .map(|b| WriteArg {
            ptr: b.ptr(),
            bytes: b.bytes(),
        })
        .into_array();
        let scalars = [mel_len as i64, (src_len * c.hop()) as i64];
        let out = match frames {
            Some(_) => {
                let mut inputs = vec![arg(s.work.mel_in.ptr(), &mel_in[..], &mel_strides[..], F32)];
                inputs.extend(state);
                self.vocoder.call(&Invocation {
                    inputs: &inputs,
                    writes: &writes,
                    scalars: &scalars,
                })?
            }
            None => self.flush.call(&Invocation {
                inputs: &state,
                writes: &writes,
                scalars: &scalars,
            })?,
        };
        Ok(out)
    }
}
