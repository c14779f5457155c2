//! Speech tokens to a WAV file through [`dcc_models::speech`], on the tiny test model:
//!
//! ```sh
//! cargo run --example stream -- out.wav                # 16-bit PCM, 2 chunks, arm SRc
//! cargo run --example stream -- out.wav float 2 B0     # 32-bit float, 2 chunks, arm B0
//! ```
//!
//! (from the workspace root; `cargo run -p dcc-models --example stream -- …` says the same from
//! anywhere.) The prompt (`prompt_tokens`, `prompt_mel`, `spk`) and the speech tokens
//! (`stream_tokens`) are the vendor's export in `testdata/token2wav_tiny/io.safetensors`; the
//! flow's weights are `weights.safetensors` beside it, the vocoder's `vocoder.safetensors`.
//! Each chunk is the contract's 25 new tokens and the 3 after them; the stream ends with an
//! empty final chunk, which flushes the vocoder. N chunks of 50 frames give
//! N · 50 · 480 + 3,840 samples at 24 kHz (2 chunks: 51,840). The tiny vocoder's noise table
//! holds 101 frames of excitation and is read modulo its rows (the vendor's rule for its own
//! table), so any chunk count the test data's 153 tokens hold (up to 6) streams.

use std::path::PathBuf;

use dcc_models::speech::{Prompt, SpeechModel};
use dcc_models::token2wav::serve::{Arm, ContractView, Token2WavTiny};
use dcc_models::vocoder::{WavFormat, write_wav_file};
use safetensors::SafeTensors;

const USAGE: &str = "usage: stream OUT.wav [pcm16|float] [CHUNKS] [B0|S|R|Rc|SR|SRc]";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or(USAGE)?);
    let format = match args.next().as_deref() {
        None | Some("pcm16") => WavFormat::Pcm16,
        Some("float") => WavFormat::Float32,
        Some(f) => return Err(format!("unknown format `{f}` (pcm16 or float)\n{USAGE}").into()),
    };
    let chunks: usize = match args.next() {
        None => 2,
        Some(n) => n
            .parse()
            .map_err(|e| format!("CHUNKS `{n}`: {e}\n{USAGE}"))?,
    };
    let arm = match args.next() {
        None => Arm::SRc,
        Some(a) => Arm::parse(&a).ok_or_else(|| format!("unknown arm `{a}`\n{USAGE}"))?,
    };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny");

    // the flow and the vocoder on a backend, under the tiny model's contract
    let model = SpeechModel::load(
        dcc_runtime::backend::host(),
        dir.join("weights.safetensors"),
        dir.join("vocoder.safetensors"),
        ContractView::of::<Token2WavTiny>()?,
    )?;
    println!(
        "vocoder noise table SHA-256 {}",
        model.vocoder().noise_sha256()
    );

    // the vendor's exported prompt and speech tokens
    let bytes = std::fs::read(dir.join("io.safetensors"))?;
    let io = SafeTensors::deserialize(&bytes)?;
    let words = |name: &str| -> Result<Vec<[u8; 4]>, safetensors::SafeTensorError> {
        Ok(io
            .tensor(name)?
            .data()
            .chunks_exact(4)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect())
    };
    let ids = |name| -> Result<Vec<u32>, safetensors::SafeTensorError> {
        Ok(words(name)?
            .into_iter()
            .map(|b| i32::from_le_bytes(b) as u32)
            .collect())
    };
    let floats = |name| -> Result<Vec<f32>, safetensors::SafeTensorError> {
        Ok(words(name)?.into_iter().map(f32::from_le_bytes).collect())
    };
    let (tokens, mel, spk) = (ids("prompt_tokens")?, floats("prompt_mel")?, floats("spk")?);
    let speech = ids("stream_tokens")?;

    // one stream: prime with the prompt, push each chunk, then finish with an empty chunk
    let prompt = Prompt {
        tokens: &tokens,
        mel: &mel,
        spk: &spk,
    };
    let mut stream = model.open(arm, &prompt)?;
    let (step, call) = (
        model.chunk_tokens(),
        model.chunk_tokens() + model.lookahead_tokens(),
    );
    let mut pcm = Vec::new();
    for i in 0..chunks {
        let toks = speech.get(i * step..i * step + call).ok_or_else(|| {
            format!(
                "the exported stream has no chunk {i} ({} tokens)",
                speech.len()
            )
        })?;
        let c = stream.push_chunk(toks)?;
        println!(
            "chunk {i}: {} tokens -> {} mel frames -> {} samples (flow {:.1} ms, vocoder {:.1} ms)",
            toks.len(),
            c.frames,
            c.pcm.len(),
            c.timing.flow.as_secs_f64() * 1e3,
            c.timing.vocoder.as_secs_f64() * 1e3,
        );
        pcm.extend(c.pcm);
    }
    let tail = stream.finish(&[])?;
    println!("final flush: {} samples", tail.len());
    pcm.extend(tail);

    write_wav_file(&out, &pcm, model.sample_rate(), format)?;
    println!(
        "{}: {} samples ({:.3} s at {} Hz, arm {})",
        out.display(),
        pcm.len(),
        pcm.len() as f64 / f64::from(model.sample_rate()),
        model.sample_rate(),
        arm.name(),
    );
    Ok(())
}
