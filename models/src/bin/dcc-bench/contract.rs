//! The selected contract: the adapter's [`ContractView`] (regions, catalog, retention) and the
//! stream sizes of its generated module (`dcc_generated::<family>`), so no size is typed here.

use dcc_generated as generated;
use dcc_models::token2wav::FlowConfig;
use dcc_models::token2wav::serve::{ContractView, Token2Wav, Token2WavTiny, Token2WavTinyVendor};
use dcc_runtime::contract::{NativeClock, NativeClockAdapter};

use super::Res;
use super::cli::ContractChoice;
use super::error::BenchError;

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
    /// The contract `choice` names; `auto` picks `token2wav_tiny` for the tiny configuration
    /// and `token2wav` otherwise. Refuses weights whose mel or speaker width differs from the
    /// contract's, and a retention that disagrees with the generated frame counts.
    pub fn select(choice: ContractChoice, cfg: &FlowConfig) -> Res<Contract> {
        let choice = match choice {
            ContractChoice::Auto if *cfg == FlowConfig::tiny() => ContractChoice::Token2wavTiny,
            ContractChoice::Auto => ContractChoice::Token2wav,
            c => c,
        };
        let (view, sizes, dims) = match choice {
            ContractChoice::Auto | ContractChoice::Token2wav => {
                same_spec::<Token2Wav>(generated::token2wav::SPEC_SHA256)?;
                (
                    ContractView::of::<Token2Wav>(),
                    sizes_of!(token2wav),
                    dims_of!(token2wav, cfg),
                )
            }
            ContractChoice::Token2wavTiny => {
                same_spec::<Token2WavTiny>(generated::token2wav_tiny::SPEC_SHA256)?;
                (
                    ContractView::of::<Token2WavTiny>(),
                    sizes_of!(token2wav_tiny),
                    dims_of!(token2wav_tiny, cfg),
                )
            }
            ContractChoice::Token2wavTinyVendor => {
                same_spec::<Token2WavTinyVendor>(generated::token2wav_tiny_vendor::SPEC_SHA256)?;
                (
                    ContractView::of::<Token2WavTinyVendor>(),
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
            let c = Contract::select(choice, cfg).unwrap();
            assert_eq!(c.view.family, family);
        }
        assert_eq!(
            Contract::select(ContractChoice::Token2wavTinyVendor, &tiny)
                .unwrap()
                .sizes,
            sizes_of!(token2wav_tiny_vendor)
        );
    }

    #[test]
    fn weights_of_another_width_are_refused() {
        let mut odd = FlowConfig::tiny();
        odd.mel += 1;
        let e = Contract::select(ContractChoice::Token2wavTiny, &odd)
            .err()
            .unwrap();
        assert!(matches!(e, BenchError::Dims { .. }), "{e}");
        assert!(
            e.to_string().contains("MEL_BINS = 80, the weights have 81"),
            "{e}"
        );
        // The tiny weights against the full contract: every differing dimension is named.
        let e = Contract::select(ContractChoice::Token2wav, &FlowConfig::tiny())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ENC_DIM = 512, the weights have 64"), "{e}");
        assert!(e.contains("EST_LAYERS = 16, the weights have 2"), "{e}");
    }
}
