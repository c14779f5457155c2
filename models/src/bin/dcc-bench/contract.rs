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
        let (view, sizes) = match choice {
            ContractChoice::Auto | ContractChoice::Token2wav => {
                same_spec::<Token2Wav>(generated::token2wav::SPEC_SHA256)?;
                (ContractView::of::<Token2Wav>(), sizes_of!(token2wav))
            }
            ContractChoice::Token2wavTiny => {
                same_spec::<Token2WavTiny>(generated::token2wav_tiny::SPEC_SHA256)?;
                (
                    ContractView::of::<Token2WavTiny>(),
                    sizes_of!(token2wav_tiny),
                )
            }
            ContractChoice::Token2wavTinyVendor => {
                same_spec::<Token2WavTinyVendor>(generated::token2wav_tiny_vendor::SPEC_SHA256)?;
                (
                    ContractView::of::<Token2WavTinyVendor>(),
                    sizes_of!(token2wav_tiny_vendor),
                )
            }
        };
        let view = view?;
        let family = view.family;
        if (cfg.mel, cfg.spk_dim) != (sizes.mel_bins, sizes.spk_dim) {
            return Err(BenchError::Width {
                family,
                mel_bins: sizes.mel_bins,
                spk_dim: sizes.spk_dim,
                weights_mel_bins: cfg.mel,
                weights_spk_dim: cfg.spk_dim,
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
        assert!(
            matches!(e, BenchError::Width { weights_mel_bins, .. } if weights_mel_bins == odd.mel),
            "{e}"
        );
        assert!(e.to_string().contains("mel bins"), "{e}");
    }
}
