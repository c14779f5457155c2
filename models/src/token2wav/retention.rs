//! Which frames of the streaming caches survive a chunk: the retention rule a native-clock
//! contract declares (DESIGN.md §5, paper eq. 2), as a plain parameter.

use std::ops::Range;

use dcc_runtime::contract::{CacheOrder, Keep, RegionInfo};

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

    /// The retention a native-clock contract declares for the port's caches: the estimator
    /// carry `carry` (prepend storage, as the port keeps it) with its keep rule — the prepend
    /// order's natural rule is the paper's eq. 2, the append rule on prepend storage is the
    /// vendor's slicing — and the append-ordered conformer cache `conformer` (natural rule,
    /// the same prompt and retained frames: the port trims both caches with one retention).
    pub fn from_contract(carry: &RegionInfo, conformers: &[&RegionInfo]) -> Result<Self, String> {
        let name = carry.name;
        let keep = carry
            .keep
            .ok_or_else(|| format!("region `{name}` declares no prompt + history retention"))?;
        if carry.order != Some(CacheOrder::Prepend) {
            return Err(format!(
                "region `{name}` is declared {:?}, but the port stores the estimator cache \
                 prepend-ordered (newest frames first)",
                carry.order
            ));
        }
        let vendor = Keep::natural(CacheOrder::Append, keep.prompt, keep.retained);
        let r = match (keep.head, keep.tail) {
            _ if keep.is_natural(CacheOrder::Prepend) => {
                Retention::paper(keep.prompt, keep.retained)
            }
            ht if ht == (vendor.head, vendor.tail) => Retention::vendor(keep.prompt, keep.retained),
            _ => {
                return Err(format!(
                    "region `{name}` keeps head {} ‖ tail {} of prepend storage: the port \
                     implements head = retained ‖ tail = prompt (paper) and head = prompt ‖ \
                     tail = retained (vendor)",
                    keep.head, keep.tail
                ));
            }
        };
        for c in conformers {
            let ck = c.keep.ok_or_else(|| {
                format!("region `{}` declares no prompt + history retention", c.name)
            })?;
            if c.order != Some(CacheOrder::Append) || !ck.is_natural(CacheOrder::Append) {
                return Err(format!(
                    "region `{}` must be append-ordered with the append rule (the port's \
                     conformer caches), found {:?} keeping head {} ‖ tail {}",
                    c.name, c.order, ck.head, ck.tail
                ));
            }
            // on its own clock: frames, or tokens (`k` frames each)
            let k = keep.prompt.checked_div(ck.prompt).unwrap_or(0);
            if k == 0 || (ck.prompt * k, ck.retained * k) != (keep.prompt, keep.retained) {
                return Err(format!(
                    "regions `{name}` and `{}` keep {} + {} and {} + {}: the port trims both \
                     caches with one retention (the same frames, on the conformer's clock)",
                    c.name, keep.prompt, keep.retained, ck.prompt, ck.retained
                ));
            }
        }
        Ok(r)
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

    #[test]
    fn retention_from_a_contract() {
        use dcc_runtime::contract::{Keep, Lifetime};
        let region = |name, order, keep| RegionInfo {
            name,
            dtype: dcc_runtime::contract::DType::F32,
            dims: &[],
            dim_names: &[],
            elems: 0,
            bytes: 0,
            align: 256,
            offset: 0,
            attended: 402,
            lifetime: Lifetime::Session,
            order: Some(order),
            keep: Some(keep),
        };
        let (pre, app) = (CacheOrder::Prepend, CacheOrder::Append);
        // the blocks' cache on the token clock (2 frames a token), the up-blocks' on the frames
        let conf = region("conformer_cache", app, Keep::natural(app, 151, 50));
        let up = region("upsample_cache", app, Keep::natural(app, 302, 100));
        let paper = region("carry", pre, Keep::natural(pre, 302, 100));
        let vendor = region("carry", pre, Keep::natural(app, 302, 100));
        assert_eq!(
            Retention::from_contract(&paper, &[&conf, &up]),
            Ok(Retention::paper(302, 100))
        );
        assert_eq!(
            Retention::from_contract(&vendor, &[&conf, &up]),
            Ok(Retention::vendor(302, 100))
        );
        // append storage is not how the port keeps the estimator cache
        assert!(
            Retention::from_contract(&region("carry", app, Keep::natural(app, 302, 100)), &[])
                .is_err()
        );
        // the conformer cache must share the estimator's prompt and retained frames
        let short = region("upsample_cache", app, Keep::natural(app, 302, 50));
        assert!(Retention::from_contract(&paper, &[&conf, &short]).is_err());
        let odd = region("conformer_cache", app, Keep::natural(app, 151, 40));
        assert!(Retention::from_contract(&paper, &[&odd, &up]).is_err());
    }
}
