//! Streams the tiny test vocoder over the tiny golden mel and writes a WAV file:
//!
//! ```sh
//! cargo run -p dcc-models --example stream -- out.wav        # 16-bit PCM
//! cargo run -p dcc-models --example stream -- out.wav float  # 32-bit float
//! ```
//!
//! The mel (`testdata/token2wav_tiny/vocoder_golden.safetensors`, `[1, 80, 100]`) is pushed in
//! chunks of 50 frames and a final empty flush, as `Token2wav.stream` does; the output is
//! 100 frames · 480 samples + the first chunk's 3,840 samples of leading silence = 51,840
//! samples at 24 kHz. The weights and noise table are `vocoder.safetensors` beside it.

use std::path::PathBuf;
use std::sync::Arc;

use dcc_models::vocoder::{
    CausalHift, StreamingVocoder, VocoderWeights, WavFormat, write_wav_file,
};
use safetensors::SafeTensors;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: stream OUT.wav [pcm16|float]")?);
    let format = match args.next().as_deref() {
        None | Some("pcm16") => WavFormat::Pcm16,
        Some("float") => WavFormat::Float32,
        Some(f) => return Err(format!("unknown format `{f}` (pcm16 or float)").into()),
    };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny");

    // load the weights (vendor state_dict names, weight norm folded) onto a backend
    let be = dcc_runtime::backend::host();
    let weights = VocoderWeights::load(dir.join("vocoder.safetensors"))?;
    let model = Arc::new(CausalHift::load(be.as_ref(), &weights)?);
    println!("noise table SHA-256 {}", model.noise_sha256());

    // the mel to vocode: [80, frames], channel-major
    let bytes = std::fs::read(dir.join("vocoder_golden.safetensors"))?;
    let st = SafeTensors::deserialize(&bytes)?;
    let mel: Vec<f32> = st
        .tensor("mel")?
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let c = model.cfg.in_channels;
    let frames = mel.len() / c;

    // one stream: push 50-frame chunks, then flush with an empty last chunk
    let mut stream = StreamingVocoder::new(be, model)?;
    let mut pcm = Vec::new();
    for start in (0..frames).step_by(50) {
        let n = 50.min(frames - start);
        let chunk: Vec<f32> = (0..c)
            .flat_map(|ch| {
                mel[ch * frames + start..ch * frames + start + n]
                    .iter()
                    .copied()
            })
            .collect();
        let got = stream.push(&chunk, c, false)?;
        println!("chunk of {n} frames: {} samples", got.len());
        pcm.extend(got);
    }
    let tail = stream.push(&[], c, true)?;
    println!("final flush: {} samples", tail.len());
    pcm.extend(tail);

    write_wav_file(&out, &pcm, 24000, format)?;
    println!(
        "{}: {} samples ({:.3} s at 24 kHz)",
        out.display(),
        pcm.len(),
        pcm.len() as f64 / 24000.0
    );
    Ok(())
}
