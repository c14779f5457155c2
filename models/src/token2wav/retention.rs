//! Which frames of the streaming caches survive a chunk: the retention rule a native-clock
//! contract declares (DESIGN.md §5, paper eq. 2), as a plain parameter.

use std::ops::Range;

/// Two kept segments along one time axis, in output order.
pub type Segments = [Range<usize>; 2];

/// How the estimator cache is sliced once it exceeds `prompt_frames + retained_frames`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetentionOrder {
    /// The paper's eq. 2 on the prepend-ordered estimator cache: keep the newest
    /// `retained_frames` (at the head) and the `prompt_frames` prompt-derived frames (at the tail):
    /// `[:retained] ‖ [ℓ − prompt : ℓ]`.
    Paper,
    /// minicpmo-utils 1.0.7: `[:prompt] ‖ [−retained:]`, i.e. the append-ordered rule applied to
    /// the prepend-ordered cache (keeps the newest `prompt_frames` and the oldest `retained_frames`).
    Vendor,
}

/// The retention parameter of a stream: prompt frames, retained frames, estimator slicing.
/// The conformer caches are append-ordered and are trimmed the same way under both orders:
/// `[:prompt] ‖ [ℓ − retained : ℓ]` on the frame clock (÷ stride on the token clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Retention {
    pub prompt_frames: usize,
    pub retained_frames: usize,
    pub order: RetentionOrder,
}

impl Retention {
    pub fn paper(prompt_frames: usize, retained_frames: usize) -> Self {
        Self {
            prompt_frames,
            retained_frames,
            order: RetentionOrder::Paper,
        }
    }

    pub fn vendor(prompt_frames: usize, retained_frames: usize) -> Self {
        Self {
            prompt_frames,
            retained_frames,
            order: RetentionOrder::Vendor,
        }
    }

    /// The attended extent bound `L = prompt + retained`: a cache longer than this is trimmed.
    pub fn limit(&self) -> usize {
        self.prompt_frames + self.retained_frames
    }

    /// Segments of the prepend-ordered estimator cache of extent `extent` to keep, in order, or
    /// `None` when `extent ≤ limit` (no trim).
    pub fn estimator_segments(&self, extent: usize) -> Option<Segments> {
        if extent <= self.limit() {
            return None;
        }
        let (p, r) = (self.prompt_frames, self.retained_frames);
        Some(match self.order {
            RetentionOrder::Paper => [0..r, extent - p..extent],
            RetentionOrder::Vendor => [0..p, extent - r..extent],
        })
    }

    /// Segments of the append-ordered conformer caches, `(token clock, frame clock)`, for a frame
    /// extent `extent = stride · tokens`, or `None` when `extent ≤ limit`.
    pub fn conformer_segments(&self, extent: usize, stride: usize) -> Option<(Segments, Segments)> {
        if extent <= self.limit() {
            return None;
        }
        let (p, r) = (self.prompt_frames, self.retained_frames);
        let tok = extent / stride;
        Some((
            [0..p / stride, tok - r / stride..tok],
            [0..p, extent - r..extent],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_and_vendor_slices() {
        let p = Retention::paper(302, 100);
        let v = Retention::vendor(302, 100);
        assert_eq!(p.limit(), 402);
        assert_eq!(p.estimator_segments(402), None);
        assert_eq!(p.estimator_segments(452), Some([0..100, 150..452]));
        assert_eq!(v.estimator_segments(452), Some([0..302, 352..452]));
        assert_eq!(
            p.conformer_segments(452, 2),
            Some(([0..151, 176..226], [0..302, 352..452]))
        );
        assert_eq!(v.conformer_segments(452, 2), p.conformer_segments(452, 2));
        assert_eq!(p.conformer_segments(400, 2), None);
    }
}
