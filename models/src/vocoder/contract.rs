//! The vocoder's part of a Token2Wav contract, as data: its four regions (whose envelopes size
//! the stream's buffers), its two callables (whose catalogs the replay engines key on), the
//! frames of one call and the noise table's rows. Read from any generated contract with the
//! vocoder's declarations (`specs/token2wav*.yaml`), checked once.

use dcc_generated::token2wav::{VocoderFlushInputs, VocoderInputs, VocoderWrites};
use dcc_runtime::contract::{CallableInfo, DType, NativeClock, RegionInfo};
use dcc_runtime::kernels::signal::COUNTERS;

use super::VocoderError;
use super::config::VocoderConfig;
use super::plan::{Caps, capacity};

/// The vocoder's declarations in one contract.
#[derive(Copy, Clone, Debug)]
pub struct VocoderContract {
    pub family: &'static str,
    /// `voc_mel` (`[mel_bins, frame]`), `voc_source` (`[sample, 1]`), `voc_phase`, `voc_offsets`.
    pub mel: &'static RegionInfo,
    pub source: &'static RegionInfo,
    pub phase: &'static RegionInfo,
    pub offsets: &'static RegionInfo,
    /// The callables `vocoder` and `vocoder_flush`.
    pub vocoder: &'static CallableInfo,
    pub flush: &'static CallableInfo,
    /// Fresh frames of one `vocoder` call (its `mel` input, `[f_chunk, mel_bins]`).
    pub chunk_frames: usize,
    /// Rows of `noise_table` (the `noise` input).
    pub noise_rows: usize,
}

fn contract_err(
    what: impl Into<String>,
    expected: impl ToString,
    found: impl ToString,
) -> VocoderError {
    VocoderError::Contract {
        what: what.into(),
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

fn region(
    regions: &'static [RegionInfo],
    name: &str,
    dtype: DType,
    dim_names: &[&str],
) -> Result<&'static RegionInfo, VocoderError> {
    let r = regions
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| contract_err(format!("region `{name}`"), "declared", "absent"))?;
    if r.dtype != dtype || r.dim_names != dim_names {
        return Err(contract_err(
            format!("region `{name}`"),
            format!("{} {dim_names:?}", dtype.name()),
            format!("{} {:?}", r.dtype.name(), r.dim_names),
        ));
    }
    Ok(r)
}

/// Checks that `info`'s inputs and writes are, by name and in order, the generated structs'.
fn callable(
    info: Option<&'static CallableInfo>,
    name: &str,
    inputs: &[&str],
) -> Result<&'static CallableInfo, VocoderError> {
    let c = info.ok_or_else(|| contract_err(format!("callable `{name}`"), "declared", "absent"))?;
    if c.writes != VocoderWrites::<()>::NAMES {
        return Err(contract_err(
            format!("`{name}` writes"),
            format!("{:?}", VocoderWrites::<()>::NAMES),
            format!("{:?}", c.writes),
        ));
    }
    for s in c.catalog {
        let names: Vec<&str> = s.inputs.iter().map(|t| t.name).collect();
        if names != inputs {
            return Err(contract_err(
                format!("`{name}` inputs"),
                format!("{inputs:?}"),
                format!("{names:?}"),
            ));
        }
    }
    Ok(c)
}

impl VocoderContract {
    /// The vocoder's declarations of contract `C`.
    pub fn of<C: NativeClock>() -> Result<VocoderContract, VocoderError> {
        let regions = C::ARENA.regions;
        let vocoder = callable(
            C::callable("vocoder"),
            "vocoder",
            &VocoderInputs::<()>::NAMES,
        )?;
        let flush = callable(
            C::callable("vocoder_flush"),
            "vocoder_flush",
            &VocoderFlushInputs::<()>::NAMES,
        )?;
        let sig = vocoder
            .catalog
            .first()
            .ok_or_else(|| contract_err("`vocoder` catalog", "at least one class", 0))?;
        let dims = |name: &str| {
            sig.inputs
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.dims)
                .unwrap_or(&[])
        };
        let (chunk_frames, noise_rows) = match (dims("mel"), dims("noise")) {
            (&[f, _], &[r, _]) => (f, r),
            (m, n) => {
                return Err(contract_err(
                    "`vocoder` inputs `mel` and `noise`",
                    "[frames, mel_bins] and [rows, harmonics]",
                    format!("{m:?} and {n:?}"),
                ));
            }
        };
        Ok(VocoderContract {
            family: C::FAMILY,
            mel: region(regions, "voc_mel", DType::F32, &["mel_bins", "frame"])?,
            source: region(regions, "voc_source", DType::F32, &["sample", "1"])?,
            phase: region(regions, "voc_phase", DType::F64, &["frame", "harmonics"])?,
            offsets: region(
                regions,
                "voc_offsets",
                DType::I64,
                &["chunk", "voc_counters"],
            )?,
            vocoder,
            flush,
            chunk_frames,
            noise_rows,
        })
    }

    /// The bundled full-size contract (`specs/token2wav.yaml`): what an eager stream sizes its
    /// buffers by.
    pub fn token2wav() -> Result<VocoderContract, VocoderError> {
        Self::of::<dcc_generated::token2wav::Contract>()
    }

    /// The buffers' capacities for model `c`: the histories at the regions' envelopes, each
    /// checked to hold the model's own bound (`Limits`), one call's frames at the `mel` input's.
    pub(crate) fn caps(&self, c: &VocoderConfig) -> Result<Caps, VocoderError> {
        let l = c.limits();
        let hop = c.hop();
        let (bins, mel) = (self.mel.dims[0], self.mel.dims[1]);
        if bins != c.in_channels {
            return Err(contract_err("`voc_mel` mel bins", c.in_channels, bins));
        }
        let samples = self.source.dims[0];
        if !samples.is_multiple_of(hop) {
            return Err(contract_err(
                "`voc_source` envelope",
                format!("a multiple of {hop} samples"),
                samples,
            ));
        }
        let src = samples / hop;
        capacity("mel history (the contract's `voc_mel`)", l.mel_buffer, mel)?;
        capacity(
            "source history (the contract's `voc_source`)",
            l.source_buffer,
            src,
        )?;
        if self.phase.elems != c.harmonics || self.offsets.elems != COUNTERS {
            return Err(contract_err(
                "`voc_phase` and `voc_offsets` elements",
                format!("{} and {COUNTERS}", c.harmonics),
                format!("{} and {}", self.phase.elems, self.offsets.elems),
            ));
        }
        if self.chunk_frames < c.block_frames {
            return Err(contract_err(
                "`vocoder` frames per call",
                format!("at least one block ({})", c.block_frames),
                self.chunk_frames,
            ));
        }
        Ok(Caps {
            mel,
            src,
            f0: l.f0_input,
            dec: l.decoder_input,
            input: self.chunk_frames,
            out: self.chunk_frames.max(l.delay),
        })
    }
}
