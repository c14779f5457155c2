//! The engine's admission arithmetic: signature keys, the write premises, alignment-mirroring
//! staging and the comparison of a probe's work with its capture's.

use crate::DevPtr;
use crate::backend::{AllocKind, Backend, DeviceBuffer, StreamOp};
use crate::contract::DType;
use crate::error::{Error, Result};

use super::{Fallback, Invocation, STAGING_ALIGN, SignatureRef, TensorArg};

/// FNV-1a over integers.
struct KeyHasher(u64);

impl KeyHasher {
    fn new() -> Self {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn dtype_code(d: DType) -> u64 {
    d as u8 as u64
}

/// The signature key: integers only, no tensor data.
pub(super) fn key<'a>(
    device: u32,
    inputs: impl ExactSizeIterator<Item = (&'a [usize], &'a [usize], DType)>,
    scalars: &[i64],
) -> u64 {
    let mut h = KeyHasher::new();
    h.add(device as u64);
    h.add(inputs.len() as u64);
    for (dims, strides, dt) in inputs {
        h.add(dtype_code(dt));
        h.add(dims.len() as u64);
        dims.iter().for_each(|&d| h.add(d as u64));
        h.add(strides.len() as u64);
        strides.iter().for_each(|&s| h.add(s as u64));
    }
    h.add(scalars.len() as u64);
    scalars.iter().for_each(|&s| h.add(s as u64));
    h.0
}

pub(super) fn matches(sig: SignatureRef<'_>, inv: &Invocation<'_>) -> bool {
    sig.inputs.len() == inv.inputs.len()
        && sig.scalars == inv.scalars
        && sig
            .inputs
            .iter()
            .zip(inv.inputs)
            .all(|(s, a)| s.dims == a.dims && s.strides == a.strides && s.dtype == a.dtype)
}

/// The inputs of `inv` the engine stages (not aliased in `sig`), with their catalog index.
fn staged<'s, 'a>(
    sig: SignatureRef<'s>,
    inv: &'s Invocation<'a>,
) -> impl Iterator<Item = (usize, &'s TensorArg<'a>)> + 's {
    sig.inputs
        .iter()
        .zip(inv.inputs)
        .enumerate()
        .filter(|(_, (s, _))| !s.aliased)
        .map(|(i, (_, a))| (i, a))
}

/// The write premises of one call (module docs, step 2): every written region inside one live
/// buffer over its extent, none overlapping a staged input's span or starting where one
/// starts. The reason and what broke it, when one does not hold.
pub(super) fn check_writes(
    backend: &dyn Backend,
    sig: SignatureRef<'_>,
    inv: &Invocation<'_>,
) -> Option<(Fallback, String)> {
    for (w, arg) in inv.writes.iter().enumerate() {
        if let Err(e) = backend.allocation(arg.ptr, arg.bytes) {
            return Some((
                Fallback::WriteOutOfBounds,
                format!(
                    "written region {w} ({} bytes at {}) is not inside one live buffer: {e}",
                    arg.bytes, arg.ptr
                ),
            ));
        }
        // Inside an allocation: the end does not overflow.
        let (ws, we) = (arg.ptr.0, arg.ptr.0 + arg.bytes as u64);
        for (i, a) in staged(sig, inv) {
            let (s, e) = (a.ptr.0, a.ptr.0.saturating_add(a.span_bytes() as u64));
            if ws == s || (ws < e && s < we) {
                return Some((
                    Fallback::WriteOverlapsStaged,
                    format!(
                        "written region {w} ({} bytes at {}) overlaps staged input `{}` ({} bytes at {})",
                        arg.bytes,
                        arg.ptr,
                        sig.inputs.get(i).map_or("?", |t| t.name),
                        a.span_bytes(),
                        a.ptr
                    ),
                ));
            }
        }
    }
    None
}

/// The first staged input of `inv` whose address differs modulo [`STAGING_ALIGN`] from the
/// address its copy is bound at in the graph (`bound`, per input).
pub(super) fn misaligned(
    sig: SignatureRef<'_>,
    inv: &Invocation<'_>,
    bound: &[DevPtr],
) -> Option<usize> {
    staged(sig, inv)
        .find(|&(i, a)| a.ptr.0 % STAGING_ALIGN != bound[i].0 % STAGING_ALIGN)
        .map(|(i, _)| i)
}

/// A staging buffer for `a` and the address its copy lives at: the caller's address modulo
/// [`STAGING_ALIGN`], so every operand the graph derives from it has the alignment eager
/// execution sees. Allocations of both backends are aligned to [`STAGING_ALIGN`].
pub(super) fn stage(backend: &dyn Backend, a: &TensorArg<'_>) -> Result<(DeviceBuffer, DevPtr)> {
    let pad = (a.ptr.0 % STAGING_ALIGN) as usize;
    let buf = backend.alloc(
        pad.saturating_add(a.span_bytes()).max(1),
        AllocKind::Staging,
    )?;
    let at = buf.at(pad)?;
    if at.0 % STAGING_ALIGN != a.ptr.0 % STAGING_ALIGN {
        return Err(Error::Capture(format!(
            "staging buffer at {} is not {STAGING_ALIGN}-byte aligned",
            buf.ptr()
        )));
    }
    Ok((buf, at))
}

/// Compares the probe's trace with the capture's, whose addresses inside a staging copy
/// (`bound[i]` for staged input `i`, over its span, one-past-the-end included) are first mapped
/// back to the caller's. A description of the first difference, if there is one.
pub(super) fn first_difference(
    sig: SignatureRef<'_>,
    inv: &Invocation<'_>,
    bound: &[DevPtr],
    probe: &[StreamOp],
    mut capture: Vec<StreamOp>,
) -> Option<String> {
    let copies: Vec<(u64, u64, u64)> = staged(sig, inv)
        .map(|(i, a)| (bound[i].0, a.span_bytes() as u64, a.ptr.0))
        .collect();
    let to_caller = |p: DevPtr| {
        copies
            .iter()
            .find(|&&(b, span, _)| p.0 >= b && p.0 - b <= span)
            .map_or(p, |&(b, _, caller)| DevPtr(caller + (p.0 - b)))
    };
    for op in &mut capture {
        op.map_ptrs(to_caller);
    }
    if let Some(k) = probe.iter().zip(&capture).position(|(p, c)| !p.same_as(c)) {
        return Some(format!(
            "operation {k}: probe {:?}, capture {:?}",
            probe[k], capture[k]
        ));
    }
    (probe.len() != capture.len()).then(|| {
        format!(
            "the probe issued {} operations, the capture {}",
            probe.len(),
            capture.len()
        )
    })
}
