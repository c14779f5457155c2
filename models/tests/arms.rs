//! The six arms of Table 5 on the tiny model (Host backend): every arm emits the mel of B0 bit
//! for bit, and once every catalog class is captured the replay arms replay every call (zero
//! eager fallbacks in steady state). Retention comes from the contract (tiny, paper order).

use std::sync::Arc;

use dcc_models::token2wav::serve::{Arm, ContractView, Session, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, SolverParams};
use dcc_runtime::contract::Granularity;
use dcc_runtime::replay::Fallback;
use safetensors::SafeTensors;

mod common;
use common::{Inputs, dir, floats, mel_sha, weights};

const CHUNKS: usize = 4;
/// SHA-256 of B0's four mels (f32 little-endian): what the port emitted before it was
/// restructured onto the nn layers.
const B0_SHA: &str = "1af8f62e541a79e151393474f8796a5fa05f0a0040a79d40324e74245c73a8bc";

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    dcc_models::token2wav::rel_l2(got, want).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_arm_emits_b0s_mel_and_replays_in_steady_state() {
    let bytes = std::fs::read(dir().join("io.safetensors")).unwrap();
    let io = SafeTensors::deserialize(&bytes).unwrap();
    let Inputs {
        prompt,
        mel,
        spk,
        stream,
    } = Inputs::of(&io);
    let (ws, cfg) = weights();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let limits = DeviceLimits {
        max_call_tokens: prompt.len(),
        carry_frames: contract.keeps.carry.bound(),
    };
    let dev = Arc::new(DeviceFlow::new(dcc_runtime::backend::host(), &ws, &cfg, limits).unwrap());
    let mut b0: Option<String> = None;
    for arm in Arm::ALL {
        let mut s = Session::new(dev.clone(), contract, arm, SolverParams::default()).unwrap();
        let carry0 = s.state().estimator_carry();
        // pass 1 captures every class (302, 352, 402); pass 2 is steady state
        let mut passes = Vec::new();
        for pass in 0..2 {
            s.prime(&prompt, &mel, &spk).unwrap();
            let before = s.fallbacks();
            let mut mels = Vec::new();
            for i in 0..CHUNKS {
                let toks = &stream[i * 25..i * 25 + 28];
                mels.push(s.chunk(toks, &spk, false).unwrap());
            }
            let after = s.fallbacks();
            let eager: u64 = after.values().sum::<u64>() - before.values().sum::<u64>();
            if arm.replay().is_some() && pass == 1 {
                assert_eq!(
                    eager, 0,
                    "{arm:?}: eager fallbacks in steady state: {after:?}"
                );
            }
            passes.push(mels);
        }
        assert_eq!(
            mel_sha(&passes[0]),
            mel_sha(&passes[1]),
            "{arm:?}: passes differ"
        );
        for (i, m) in passes[1].iter().enumerate() {
            let e = rel_l2(m, &floats(&io, &format!("feat_{i}")));
            assert!(
                e < 1e-4,
                "{arm:?}, chunk {i}: rel-L2 {e:.3e} to the vendor's golden mel"
            );
        }
        let h = mel_sha(&passes[1]);
        match &b0 {
            None => {
                assert_eq!(h, B0_SHA, "B0's mel stream moved");
                b0 = Some(h.clone())
            }
            Some(b) => assert_eq!(&h, b, "{arm:?} differs from B0"),
        }
        let reports = s.reports();
        match arm.replay() {
            None => assert!(reports.is_empty()),
            Some(g) => {
                let engines = if g == Granularity::Step { 11 } else { 2 };
                assert_eq!(reports.len(), engines, "{arm:?}");
                for rep in &reports {
                    assert_eq!(rep.classes_captured, 3, "{arm:?}: {rep}");
                    assert_eq!(rep.classes_dropped, 0, "{arm:?}: {rep}");
                    assert_eq!(rep.fallback(Fallback::Probation), 3, "{arm:?}: {rep}");
                    assert_eq!(rep.replays as usize, 2 * CHUNKS - 3, "{arm:?}: {rep}");
                }
                if !arm.state_rule() {
                    // the carry is staged (copied) before every replay
                    assert!(reports.iter().any(|r| r.staging_bytes > 0));
                }
            }
        }
        // the state rule keeps the carry at one address; stock reallocates it every chunk
        let same = s.state().estimator_carry() == carry0;
        assert_eq!(same, arm.state_rule(), "{arm:?}: carry address");
        println!("{:>3}: mel sha256 {h}, stats {:?}", arm.name(), s.stats());
    }
}
