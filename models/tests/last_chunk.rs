//! The final chunk (`last_chunk = true`: lookahead replaced by zero padding) and a short stream
//! past the retention bound, on both implementations: they must agree bit for bit. The vendor
//! golden data has no last chunk; this pins the two ports to each other.

use std::path::PathBuf;

use dcc_models::token2wav::{DeviceFlow, DeviceLimits, Flow, Retention, SolverParams, WeightStore};

#[test]
fn last_chunk_and_retention_agree_between_ports() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/token2wav_tiny/weights.safetensors");
    let flow = Flow::from_store(&WeightStore::load(p).unwrap()).unwrap();
    let s = SolverParams {
        n_steps: 3,
        ..SolverParams::default()
    };
    let spk: Vec<f32> = (0..192)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1)
        .collect();
    let mel: Vec<f32> = (0..8 * 80)
        .map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.2)
        .collect();
    let prompt = [5u32, 17, 400, 6560, 3, 99, 12];
    for retention in [Retention::paper(8, 4), Retention::vendor(8, 4)] {
        let dev = DeviceFlow::new(
            dcc_runtime::backend::host(),
            &flow,
            DeviceLimits {
                max_call_tokens: 8,
                carry_frames: 12,
            },
        )
        .unwrap();
        let mut st = dev.new_state(s, retention).unwrap();
        dev.setup_cache(&mut st, &prompt, &mel, &spk).unwrap();
        let mut cache = flow.setup_cache(&prompt, &mel, &spk, &s).unwrap();
        let chunks: [&[u32]; 4] = [
            &[1, 2, 3, 4, 5],
            &[6, 7, 8, 9, 10],
            &[11, 12, 13, 14, 15],
            &[16, 17, 18],
        ];
        for (i, toks) in chunks.iter().enumerate() {
            let last = i == chunks.len() - 1;
            let a = flow
                .inference_chunk(toks, &spk, &mut cache, last, &s)
                .unwrap();
            cache.retain(flow.config(), &retention);
            let b = dev.inference_chunk(&mut st, toks, &spk, last).unwrap();
            let frames = if last {
                2 * toks.len()
            } else {
                2 * (toks.len() - 3)
            };
            assert_eq!(a.len(), 80 * frames);
            assert!(a.iter().all(|v| v.is_finite()));
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{retention:?} chunk {i}"
            );
            assert_eq!(cache.estimator.extent, st.estimator_extent());
            assert_eq!(cache.conformer.t_tok, st.conformer_tokens());
        }
        assert_eq!(st.estimator_extent(), 12);
    }
}
