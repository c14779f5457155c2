//! `dcc-bench attention`'s half-path kernel: `attention.sdpa_f16` (the f16 tensor-core SDPA that
//! `ops::attention_f16` launches over the half point's binary16 cache), its launch over the
//! bench's operands (the cache rounded to binary16; the kernel rounds `q` itself) and its check
//! against the fp32 twin over the same binary16 values, within `attention::f16::bound`.

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::attention::{self, AttnLayout, f16 as fa};
use dcc_runtime::{Arg, LaunchDims};
use half::f16;

use super::Res;
use super::attention::Shape;

/// The binary16 cache of `kv`'s values (round to nearest even), on `be`.
pub fn upload_kv16(be: &Arc<dyn Backend>, kv: &[f32]) -> Res<DeviceBuffer> {
    let kv16: Vec<f16> = kv.iter().map(|x| f16::from_f32(*x)).collect();
    Ok(be.alloc_from(&kv16, AllocKind::Other)?)
}

/// The launch of `attention.sdpa_f16` at shape `s` and its tiling: `tiling`, or (`None`)
/// `attention::f16::dims`'s pick, as `ops::attention_f16` launches it.
pub fn dims((b, h, tq, tk, d): Shape, tiling: Option<fa::Tiling>) -> Res<(LaunchDims, fa::Tiling)> {
    match tiling {
        None => fa::dims(b * h, tq, tk, d),
        Some(t) => fa::dims_with(t, b * h, tq, tk, d).map(|l| (l, t)),
    }
    .map_err(|e| dcc_runtime::Error::from(e).into())
}

/// Queues `attention.sdpa_f16` over `kv16` (`[b, h, tk, 2d]` binary16) into `out`.
pub fn launch(
    be: &dyn Backend,
    (out, q, kv16): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
    s: Shape,
    tiling: Option<fa::Tiling>,
    scale: f32,
) -> Res<()> {
    let (b, h, tq, tk, d) = s;
    let (launch, t) = dims(s, tiling)?;
    let int = |v: usize| Arg::I64(v as i64);
    let args = [
        Arg::Ptr(out.ptr()),
        Arg::Ptr(q.ptr()),
        Arg::Ptr(kv16.ptr()),
        int(b),
        int(h),
        int(tq),
        int(tk),
        int(d),
        int(tk),
        Arg::F32(scale),
        int(t.rows()),
    ];
    // SAFETY: q and out hold b·tq rows of h·d floats, kv16 b·h caches of tk frames of 2d
    // binary16 values (the bench's operand set): what the kernel reads and writes at these
    // arguments (cap = tk); `launch` and the rows argument come from `attention::f16`'s launch
    // functions; the buffers live as long as the operand set, past the timing's synchronize.
    unsafe { be.launch(&fa::SDPA_F16, launch, &args) }?;
    Ok(())
}

/// Checks `got` (`attention.sdpa_f16` over the operands `q`, `kv` as the bench uploaded them)
/// against the fp32 twin over the same binary16 values: `(every output within
/// attention::f16::bound, the largest |Δ| over the largest |output|)`.
pub fn check(s: Shape, q: &[f32], kv: &[f32], got: &[f32], scale: f32) -> (bool, f64) {
    let (b, h, tq, tk, d) = s;
    let rn = |v: &[f32]| -> Vec<f32> { v.iter().map(|x| f16::from_f32(*x).to_f32()).collect() };
    let (q, kv) = (rn(q), rn(kv));
    let rows = AttnLayout::rows(tq, h, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(h, tk, d, false),
        AttnLayout::kv_cache(h, tk, d, true),
    );
    let mut want = vec![0.0f32; q.len()];
    attention::attention(
        b, h, tq, tk, d, scale, &q, rows, &kv, kl, &kv, vl, &mut want, rows,
    );
    super::attention::within_bound(s, &q, &kv, got, &want, |t, vmax, a, f| {
        fa::bound(d, tk, scale, t, vmax, a, f)
    })
}
