//! The end-to-end pipeline's typed errors.

use crate::token2wav::FlowError;
use crate::vocoder::VocoderError;

/// Why loading the pipeline, opening a stream or streaming a chunk failed. The flow's and the
/// vocoder's own errors are kept whole as sources; the variants of this type name what only the
/// composition can get wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpeechError {
    /// The flow decoder (tokens → mel) failed: its weights, its configuration, an input it
    /// refused, or its device work.
    #[error("flow: {0}")]
    Flow(#[from] FlowError),
    /// The vocoder (mel → PCM) failed: its weights, its configuration, or its device work.
    #[error("vocoder: {0}")]
    Vocoder(#[from] VocoderError),
    /// The flow emits another number of mel bins per frame than the vocoder reads.
    #[error(
        "the flow emits {flow} mel bins per frame, the vocoder reads {vocoder}: the two weights \
         files are not one model"
    )]
    MelBins { flow: usize, vocoder: usize },
    /// The prompt does not have the size the contract lays the stream out for (the state rule's
    /// arena and the carry's kept prompt frames are fixed by it).
    #[error("prompt {what}: the contract `{contract}` expects {expected}, found {found}")]
    Prompt {
        contract: &'static str,
        what: &'static str,
        expected: usize,
        found: usize,
    },
    /// The flow emitted a mel frame holding NaN or ±∞ for chunk `chunk` (counted from the
    /// stream's start): no audio can be made from it.
    #[error(
        "the flow's mel of chunk {chunk}: {count} of {len} values are not finite, the first at \
         index {index} ({value})"
    )]
    NonFiniteMel {
        chunk: usize,
        count: usize,
        len: usize,
        index: usize,
        value: f32,
    },
    /// A chunk after the stream's final one ([`SpeechStream::finish`]).
    ///
    /// [`SpeechStream::finish`]: super::SpeechStream::finish
    #[error("the stream was finished; `restart` it with a prompt to stream another utterance")]
    Finished,
    /// A call on a stream that failed after its work had begun: the flow and the vocoder may no
    /// longer agree on where the stream is, so every call but `restart` is refused. Holds the
    /// error that failed it.
    #[error("the stream failed ({0}); `restart` it with a prompt")]
    Failed(Box<SpeechError>),
}
