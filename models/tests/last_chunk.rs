//! The final chunk (`last_chunk = true`: lookahead replaced by zero padding) after a stream past
//! the retention bound, in both stores (state rule: caches written back in place; stock: fresh
//! compact caches after every call) of both tiny contracts (the paper's retention, the vendor's
//! slicing), with 3 solver steps. The vendor golden data has no last chunk: the two stores must
//! agree bit for bit, and each contract's mel stream is pinned (SHA-256) to what the port
//! emitted before it was restructured onto the nn layers (then checked bit-identical to a
//! separate CPU port).

use dcc_models::token2wav::serve::{ContractView, Token2WavTiny, Token2WavTinyVendor};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, SolverParams};

mod common;
use common::{Inputs, mel_sha, weights};

const PAPER_SHA: &str = "984f927cd5f9325c0624c6617169cd08ed022e503fc9bc9335a3feb9d9cf7969";
const VENDOR_SHA: &str = "41b824075cb608793168e44bb180477b5fdd49ce49c46848cecda2c8577a2869";

#[test]
fn last_chunk_past_the_retention_bound_in_both_stores() {
    let Inputs {
        prompt,
        mel,
        spk,
        stream,
    } = Inputs::load("io.safetensors");
    let (ws, cfg) = weights();
    let paper = ContractView::of::<Token2WavTiny>().unwrap();
    let vendor = ContractView::of::<Token2WavTinyVendor>().unwrap();
    let limits = DeviceLimits {
        max_call_tokens: prompt.len(),
        carry_frames: paper.keeps.carry.bound().max(vendor.keeps.carry.bound()),
    };
    let dev = DeviceFlow::new(dcc_runtime::backend::host(), &ws, &cfg, limits).unwrap();
    let s = SolverParams {
        n_steps: 3,
        ..SolverParams::default()
    };
    for (name, c, pin) in [("paper", paper, PAPER_SHA), ("vendor", vendor, VENDOR_SHA)] {
        let mut runs = Vec::new();
        for stock in [false, true] {
            let mut st = if stock {
                dev.new_state_stock(s, &c.arena).unwrap()
            } else {
                dev.new_state_in_arena(s, &c.arena).unwrap()
            };
            dev.setup_cache(&mut st, &prompt, &mel, &spk).unwrap();
            let mut mels = Vec::new();
            for i in 0..3 {
                let toks = &stream[i * 25..i * 25 + 28];
                mels.push(dev.inference_chunk(&mut st, toks, &spk, false).unwrap());
            }
            // 302 + 3·50 frames: past the 402-frame bound since the third chunk
            assert_eq!(st.estimator_extent(), 402);
            let last = dev
                .inference_chunk(&mut st, &stream[75..85], &spk, true)
                .unwrap();
            // the last chunk decodes its lookahead too: 2 frames a token
            assert_eq!(last.len(), 80 * 2 * 10);
            assert!(last.iter().all(|v| v.is_finite()));
            mels.push(last);
            assert_eq!((st.estimator_extent(), st.conformer_tokens()), (402, 201));
            let h = mel_sha(&mels);
            println!("{name}, stock store {stock}: mel sha256 {h}");
            runs.push(h);
        }
        assert_eq!(runs[0], runs[1], "{name}: the stores differ");
        assert_eq!(runs[0], pin, "{name}: the mel stream moved");
    }
}
