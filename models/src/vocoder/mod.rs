//! The streaming causal HiFT vocoder of the vendor's Token2Wav (minicpmo-utils 1.0.7,
//! `stepaudio2.causal_vocoder`: CosyVoice3's `CausalHiFTGenerator` run by `BoundedVocoder`),
//! ported layer for layer: mel frames in, 24 kHz PCM out, chunk by chunk.
//!
//! - [`weights`] reads the vendor's state_dict (weight norm folded, the F0 predictor in
//!   float64, the noise table the vendor's `SineGen2` drew) from safetensors;
//! - [`config`] derives the configuration from the weight shapes and the file's metadata, and
//!   the bounded-stream sizes (`context_sizes`, `limits`);
//! - `model` loads the layers ([`CausalHift`]); `source` is the F0 predictor and the harmonic
//!   excitation; `generator` is `decode`; `work` the fixed-size device buffers;
//! - `plan` is the vendor's stream bookkeeping as the plan of one call, made from the call's
//!   class (the histories' extents) alone; `call` queues a plan as stream work only;
//! - [`StreamingVocoder`] is `BoundedVocoder.stream` with `Token2wav._stream_vocode` around it,
//!   run eagerly ([`StreamingVocoder::new`]) or through the replay engines of the contract's
//!   `vocoder` and `vocoder_flush` ([`StreamingVocoder::with_replay`], `serve`), whose
//!   declarations [`VocoderContract`] reads;
//! - [`wav`] writes the PCM as a WAV file.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use dcc_models::vocoder::{CausalHift, StreamingVocoder, VocoderWeights};
//!
//! let be = dcc_runtime::backend::host();
//! let w = VocoderWeights::load("models/testdata/token2wav_tiny/vocoder.safetensors")?;
//! let model = Arc::new(CausalHift::load(be.as_ref(), &w)?);
//! let mut stream = StreamingVocoder::new(be.clone(), model)?;
//! let mel = vec![0.0f32; 80 * 50]; // [80 mel bins, 50 frames], channel-major
//! let pcm: Vec<f32> = stream.push(&mel, 80, false)?; // first chunk: 8 frames of silence first
//! let tail = stream.push(&[], 80, true)?; // the final flush
//! # Ok::<(), dcc_models::vocoder::VocoderError>(())
//! ```

mod call;
pub mod config;
mod contract;
mod error;
mod generator;
mod model;
mod plan;
mod serve;
mod source;
mod stream;
pub mod wav;
pub mod weights;
mod work;

pub use config::{Limits, Stage, VocoderConfig};
pub use contract::VocoderContract;
pub use error::VocoderError;
pub use model::{CausalHift, hann_window};
pub use stream::StreamingVocoder;
pub use wav::{WavFormat, pcm16_bytes, write_wav, write_wav_file};
pub use weights::VocoderWeights;
