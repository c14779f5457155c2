//! What a model preloads is what it launches: on the tiny model (Host backend), on every GEMM
//! path, the two eager arms (B0: stock retention; S: arena and in-place carry) stream a prompt,
//! two chunks and the flush, and every kernel the backend saw launched (its trace of the stream
//! operations) is in [`DeviceFlow::kernels`] ∪ [`CausalHift::kernels`], the list
//! `SpeechModel::load` and `dcc-bench` preload (a CUDA process compiles the modules of that list
//! and of nothing else). The replay arms record the same callables' launches into graphs (their
//! engines trace the calls themselves, so they are not traced here). The backend path's list
//! holds no invariant-linear variant, so a cuBLAS process never compiles one.

use std::collections::BTreeSet;
use std::sync::Arc;

use dcc_models::nn::WeightStore;
use dcc_models::speech::{Prompt, SpeechModel};
use dcc_models::token2wav::serve::{Arm, ContractView, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, FlowConfig};
use dcc_models::vocoder::{CausalHift, VocoderWeights};
use dcc_runtime::backend::{Backend, StreamOp};
use dcc_runtime::ops::GemmPath;
use safetensors::SafeTensors;

mod common;
use common::{dir, floats, tokens};

/// The kernels launched while the model streams on `arm` (prompt, two chunks, the flush), and
/// the list the model preloads.
fn launched(path: GemmPath, arm: Arm) -> (BTreeSet<&'static str>, BTreeSet<&'static str>) {
    let be: Arc<dyn Backend> = dcc_runtime::backend::host();
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let limits = SpeechModel::flow_limits(&cfg, &contract).unwrap();
    let flow = DeviceFlow::new_on_path(be.clone(), &ws, &cfg, limits, path).unwrap();
    let vw = VocoderWeights::load(dir().join("vocoder.safetensors")).unwrap();
    let voc = CausalHift::load(be.as_ref(), &vw).unwrap();
    let mut list = flow.kernels();
    list.extend(voc.kernels());
    be.preload(&list).unwrap();
    let model = SpeechModel::from_parts(Arc::new(flow), Arc::new(voc), contract).unwrap();

    let bytes = std::fs::read(dir().join("io.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (prompt, mel, spk) = (
        tokens(&st, "prompt_tokens"),
        floats(&st, "prompt_mel"),
        floats(&st, "spk"),
    );
    let stream = tokens(&st, "stream_tokens");
    be.begin_trace();
    let mut s = model
        .open(
            arm,
            &Prompt {
                tokens: &prompt,
                mel: &mel,
                spk: &spk,
            },
        )
        .unwrap();
    for i in 0..2 {
        s.push_chunk(&stream[i * 25..i * 25 + 28]).unwrap();
    }
    s.finish(&[]).unwrap();
    let ops = be.end_trace();
    let seen = ops
        .iter()
        .filter_map(|op| match op {
            StreamOp::Launch { kernel, .. } => Some(kernel.name),
            _ => None,
        })
        .collect();
    (seen, list.iter().map(|k| k.name).collect())
}

#[test]
fn every_launched_kernel_is_preloaded_on_every_gemm_path() {
    for path in [
        GemmPath::Backend,
        GemmPath::Invariant,
        GemmPath::InvariantTf32x3,
        GemmPath::Half,
    ] {
        for arm in [Arm::B0, Arm::S] {
            let (seen, list) = launched(path, arm);
            let missing: Vec<_> = seen.difference(&list).collect();
            assert!(
                missing.is_empty(),
                "{path:?}, {arm:?}: launched but not listed: {missing:?}"
            );
            let gemm = |s: &BTreeSet<&str>| s.iter().filter(|k| k.starts_with("gemm.")).count();
            match path {
                // cuBLAS carries every linear: nothing of the invariant linear is compiled.
                GemmPath::Backend => assert_eq!((gemm(&seen), gemm(&list)), (0, 0), "{arm:?}"),
                // The flow's linears run on the variants `pick` chooses (or the 3xTF32 kernel,
                // or the half kernels), all of them listed.
                GemmPath::Invariant | GemmPath::InvariantTf32x3 | GemmPath::Half => {
                    assert!(gemm(&seen) > 0, "{arm:?}: no variant launched")
                }
            }
            assert!(seen.len() > 10, "{path:?}, {arm:?}: {seen:?}");
        }
    }
}
