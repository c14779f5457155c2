//! The selected contract: the adapter's [`ContractView`] (regions, catalog, retention) at the
//! operating point the run asks for (`--point`), and the stream sizes of its generated module
//! (`dcc_generated::<family>`), so no size is typed here.

use dcc_generated as generated;
use dcc_models::token2wav::serve::{
    BASE_POINT, ContractView, Token2Wav, Token2WavAdapter, Token2WavTiny, Token2WavTinyVendor,
};
use dcc_models::token2wav::{FlowConfig, FlowError, SolverParams};
use dcc_runtime::contract::{DType, NativeClock, NativeClockAdapter};

use super::Res;
use super::cli::{ContractChoice, GemmChoice};
use super::error::BenchError;

/// The point `--gemm f16` lays sessions out at by default, where the contract declares it: the
/// vendor's fp16 mode, whose carry and solver workspace hold f16 (the values the half path
/// rounds them to anyway, in half the bytes).
pub const HALF_POINT: &str = "half";

/// The contracts `choice` may resolve to (`auto`: by the weights, either bundled family).
fn candidates(choice: ContractChoice) -> &'static [ContractChoice] {
    match choice {
        ContractChoice::Auto => &[ContractChoice::Token2wav, ContractChoice::Token2wavTiny],
        ContractChoice::Token2wav => &[ContractChoice::Token2wav],
        ContractChoice::Token2wavTiny => &[ContractChoice::Token2wavTiny],
        ContractChoice::Token2wavTinyVendor => &[ContractChoice::Token2wavTinyVendor],
    }
}

/// The operating points of contract `choice` (not `auto`): `base`, then the spec's.
fn points(choice: ContractChoice) -> Vec<&'static str> {
    match choice {
        ContractChoice::Auto | ContractChoice::Token2wav => ContractView::points::<Token2Wav>(),
        ContractChoice::Token2wavTiny => ContractView::points::<Token2WavTiny>(),
        ContractChoice::Token2wavTinyVendor => ContractView::points::<Token2WavTinyVendor>(),
    }
}

/// The view of contract `choice` (not `auto`) at `point`.
fn view_at(choice: ContractChoice, point: &str) -> Result<ContractView, FlowError> {
    fn at<A: Token2WavAdapter>(point: &str) -> Result<ContractView, FlowError> {
        ContractView::at_point::<A>(point)
    }
    match choice {
        ContractChoice::Auto | ContractChoice::Token2wav => at::<Token2Wav>(point),
        ContractChoice::Token2wavTiny => at::<Token2WavTiny>(point),
        ContractChoice::Token2wavTinyVendor => at::<Token2WavTinyVendor>(point),
    }
}

/// The point a run of contract `choice` (not `auto`) lays its sessions out at: `point` when
/// given; else [`HALF_POINT`] on `--gemm f16` where the contract declares it; else the base.
pub fn point_of(choice: ContractChoice, point: Option<&str>, gemm: GemmChoice) -> String {
    match point {
        Some(p) => p.to_string(),
        None if gemm == GemmChoice::F16 && points(choice).contains(&HALF_POINT) => {
            HALF_POINT.to_string()
        }
        None => BASE_POINT.to_string(),
    }
}

/// Checks `--point` against every contract `choice` may resolve to, before anything is loaded:
/// the point must exist there, hold the solver steps the bench runs (10: `duplex`'s 5 are
/// refused), and a point whose carry is f16 needs `--gemm f16` (the only path whose attention
/// keys and values are f16 values).
pub fn check_point(
    choice: ContractChoice,
    point: Option<&str>,
    gemm: GemmChoice,
) -> Result<(), String> {
    for &c in candidates(choice) {
        let p = point_of(c, point, gemm);
        let view = view_at(c, &p).map_err(|e| match e {
            FlowError::UnknownPoint { family, known, .. } => format!(
                "--point {p}: contract `{family}` has no operating point `{p}` (its points: \
                 {known})"
            ),
            e => format!("--point {p}: {e}"),
        })?;
        // every session of the bench runs the vendor's solver (`SolverParams::default()`)
        let steps = SolverParams::default().n_steps;
        let held = (view.carry.dim_names.iter().zip(view.carry.dims))
            .find(|(n, _)| **n == "step")
            .map(|(_, d)| *d);
        if let Some(d) = held
            && d != steps
        {
            return Err(format!(
                "--point {p}: contract `{}` holds {d} solver steps at `{p}`; the bench runs {steps}",
                view.family,
            ));
        }
        if view.carry.dtype == DType::F16 && gemm != GemmChoice::F16 {
            return Err(format!(
                "--point {p}: contract `{}` stores the carry as f16 at `{p}`, which only --gemm f16 \
                 computes (--gemm {} keeps f32 keys and values); pass --gemm f16 or --point {}",
                view.family,
                gemm.name(),
                BASE_POINT
            ));
        }
    }
    Ok(())
}

/// The streaming sizes a contract declares (its `quantities:`), as generated.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Prompt tokens (`PROMPT_TOKENS`); the prompt's mel has `prompt_frames` frames.
    pub prompt_tokens: usize,
    /// Prompt mel frames (`F_PROMPT`, the up-sampled prompt).
    pub prompt_frames: usize,
    /// Retained frames after every chunk (`F_RETAINED`).
    pub retained_frames: usize,
    /// New tokens per chunk (`CHUNK_TOKENS`).
    pub chunk_tokens: usize,
    /// Tokens after the chunk the encoder looks ahead at (`LOOKAHEAD_TOKENS`): a chunk call
    /// reads `chunk_tokens + lookahead_tokens` tokens, and the prompt call appends as many.
    pub lookahead_tokens: usize,
    /// Mel bins per frame (`MEL_BINS`).
    pub mel_bins: usize,
    /// Speaker embedding width (`SPK_DIM`).
    pub spk_dim: usize,
}

macro_rules! sizes_of {
    ($m:ident) => {
        Sizes {
            prompt_tokens: generated::$m::PROMPT_TOKENS,
            prompt_frames: generated::$m::F_PROMPT,
            retained_frames: generated::$m::F_RETAINED,
            chunk_tokens: generated::$m::CHUNK_TOKENS,
            lookahead_tokens: generated::$m::LOOKAHEAD_TOKENS,
            mel_bins: generated::$m::MEL_BINS,
            spk_dim: generated::$m::SPK_DIM,
        }
    };
}

/// The model dimensions a contract's generated module declares, each with the weights'
/// value it must equal: `(constant, contract, weights)`.
macro_rules! dims_of {
    ($m:ident, $cfg:expr) => {
        [
            ("ENC_DIM", generated::$m::ENC_DIM, $cfg.encoder.dim),
            ("CONF_HEADS", generated::$m::CONF_HEADS, $cfg.encoder.heads),
            (
                "CONF_BLOCKS",
                generated::$m::CONF_BLOCKS,
                $cfg.encoder.blocks,
            ),
            (
                "CONF_UP_BLOCKS",
                generated::$m::CONF_UP_BLOCKS,
                $cfg.encoder.up_blocks,
            ),
            ("UP_RATE", generated::$m::UP_RATE, $cfg.encoder.up_stride),
            (
                "LOOKAHEAD_TOKENS",
                generated::$m::LOOKAHEAD_TOKENS,
                $cfg.encoder.pre_lookahead,
            ),
            ("EST_HIDDEN", generated::$m::EST_HIDDEN, $cfg.dit.hidden),
            ("EST_LAYERS", generated::$m::EST_LAYERS, $cfg.dit.depth),
            ("EST_HEADS", generated::$m::EST_HEADS, $cfg.dit.heads),
            ("MEL_BINS", generated::$m::MEL_BINS, $cfg.mel),
            ("SPK_DIM", generated::$m::SPK_DIM, $cfg.spk_dim),
        ]
    };
}

/// A bundled Token2Wav contract, `auto` resolved.
pub struct Contract {
    pub view: ContractView,
    pub sizes: Sizes,
}

/// Checks that the adapter (expanded by `#[native_clock]` from the spec at build time) and the
/// committed generated module were produced from the same spec bytes.
fn same_spec<A: NativeClockAdapter>(generated_sha: &'static str) -> Res<()> {
    let adapter = <A::Contract as NativeClock>::SPEC_SHA256;
    if adapter == generated_sha {
        Ok(())
    } else {
        Err(BenchError::StaleContract {
            family: <A::Contract as NativeClock>::FAMILY,
            generated: generated_sha,
            adapter,
        })
    }
}

impl Contract {
    /// The contract `choice` names, at the point `point` ([`point_of`]: by default the half
    /// point on `--gemm f16`, else the base); `auto` picks `token2wav_tiny` for the tiny
    /// configuration and `token2wav` otherwise. Refuses weights whose mel or speaker width
    /// differs from the contract's, a retention that disagrees with the generated frame counts,
    /// and a point the contract does not declare.
    pub fn select(
        choice: ContractChoice,
        cfg: &FlowConfig,
        point: Option<&str>,
        gemm: GemmChoice,
    ) -> Res<Contract> {
        let choice = match choice {
            ContractChoice::Auto if *cfg == FlowConfig::tiny() => ContractChoice::Token2wavTiny,
            ContractChoice::Auto => ContractChoice::Token2wav,
            c => c,
        };
        let point = point_of(choice, point, gemm);
        let (view, sizes, dims) = match choice {
            ContractChoice::Auto | ContractChoice::Token2wav => {
                same_spec::<Token2Wav>(generated::token2wav::SPEC_SHA256)?;
                (
                    ContractView::at_point::<Token2Wav>(&point),
                    sizes_of!(token2wav),
                    dims_of!(token2wav, cfg),
                )
            }
            ContractChoice::Token2wavTiny => {
                same_spec::<Token2WavTiny>(generated::token2wav_tiny::SPEC_SHA256)?;
                (
                    ContractView::at_point::<Token2WavTiny>(&point),
                    sizes_of!(token2wav_tiny),
                    dims_of!(token2wav_tiny, cfg),
                )
            }
            ContractChoice::Token2wavTinyVendor => {
                same_spec::<Token2WavTinyVendor>(generated::token2wav_tiny_vendor::SPEC_SHA256)?;
                (
                    ContractView::at_point::<Token2WavTinyVendor>(&point),
                    sizes_of!(token2wav_tiny_vendor),
                    dims_of!(token2wav_tiny_vendor, cfg),
                )
            }
        };
        let view = view?;
        let family = view.family;
        let mismatches: Vec<String> = dims
            .iter()
            .filter(|(_, c, w)| c != w)
            .map(|(n, c, w)| format!("{n} = {c}, the weights have {w}"))
            .collect();
        if !mismatches.is_empty() {
            return Err(BenchError::Dims {
                family,
                mismatches: mismatches.join("; "),
            });
        }
        let k = view.keeps.carry;
        if (k.prompt, k.retained) != (sizes.prompt_frames, sizes.retained_frames) {
            return Err(BenchError::Retention {
                family,
                kept_prompt: k.prompt,
                kept_retained: k.retained,
                f_prompt: sizes.prompt_frames,
                f_retained: sizes.retained_frames,
            });
        }
        Ok(Contract { view, sizes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_contract_resolves_with_its_generated_sizes() {
        let tiny = FlowConfig::tiny();
        let full = FlowConfig::full();
        for (choice, cfg, family) in [
            (ContractChoice::Auto, &tiny, "token2wav_tiny"),
            (ContractChoice::Auto, &full, "token2wav"),
            (ContractChoice::Token2wav, &full, "token2wav"),
            (ContractChoice::Token2wavTiny, &tiny, "token2wav_tiny"),
            (
                ContractChoice::Token2wavTinyVendor,
                &tiny,
                "token2wav_tiny_vendor",
            ),
        ] {
            let c = Contract::select(choice, cfg, None, GemmChoice::Backend).unwrap();
            assert_eq!(c.view.family, family);
        }
        assert_eq!(
            Contract::select(
                ContractChoice::Token2wavTinyVendor,
                &tiny,
                None,
                GemmChoice::Backend,
            )
            .unwrap()
            .sizes,
            sizes_of!(token2wav_tiny_vendor)
        );
    }

    #[test]
    fn weights_of_another_width_are_refused() {
        let mut odd = FlowConfig::tiny();
        odd.mel += 1;
        let e = Contract::select(
            ContractChoice::Token2wavTiny,
            &odd,
            None,
            GemmChoice::Backend,
        )
        .err()
        .unwrap();
        assert!(matches!(e, BenchError::Dims { .. }), "{e}");
        assert!(
            e.to_string().contains("MEL_BINS = 80, the weights have 81"),
            "{e}"
        );
        // The tiny weights against the full contract: every differing dimension is named.
        let e = Contract::select(
            ContractChoice::Token2wav,
            &FlowConfig::tiny(),
            None,
            GemmChoice::Backend,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("ENC_DIM = 512, the weights have 64"), "{e}");
        assert!(e.contains("EST_LAYERS = 16, the weights have 2"), "{e}");
    }

    /// `--gemm f16` lays sessions out at the half point where the contract has one; `--point`
    /// forces a point; a point the contract lacks, or an f16 carry on an f32 path, is refused.
    #[test]
    fn the_point_follows_the_gemm_path_unless_forced() {
        let (tiny, f16, inv) = (FlowConfig::tiny(), GemmChoice::F16, GemmChoice::Invariant);
        let at = |choice, point, gemm| {
            let c = Contract::select(choice, &tiny, point, gemm).unwrap();
            (c.view.point, c.view.carry.dtype)
        };
        let tiny_c = ContractChoice::Token2wavTiny;
        assert_eq!(at(tiny_c, None, f16), (HALF_POINT, DType::F16));
        assert_eq!(at(tiny_c, Some("base"), f16), (BASE_POINT, DType::F32));
        assert_eq!(at(tiny_c, None, inv), (BASE_POINT, DType::F32));
        // no half point: the base
        let vendor = ContractChoice::Token2wavTinyVendor;
        assert_eq!(at(vendor, None, f16), (BASE_POINT, DType::F32));
        assert!(check_point(ContractChoice::Auto, None, f16).is_ok());
        let e = check_point(ContractChoice::Auto, Some("duplex"), inv).unwrap_err();
        assert!(
            e.contains("holds 5 solver steps at `duplex`; the bench runs 10"),
            "{e}"
        );
        let e = check_point(vendor, Some("half"), f16).unwrap_err();
        assert!(
            e.contains("has no operating point `half` (its points: base, duplex)"),
            "{e}"
        );
        let e = check_point(ContractChoice::Auto, Some("fast"), f16).unwrap_err();
        assert!(e.contains("no operating point `fast`"), "{e}");
        let e = check_point(tiny_c, Some("half"), inv).unwrap_err();
        assert!(e.contains("only --gemm f16"), "{e}");
        let e = Contract::select(vendor, &tiny, Some("half"), f16)
            .err()
            .unwrap();
        assert!(e.to_string().contains("no operating point `half`"), "{e}");
    }
}
