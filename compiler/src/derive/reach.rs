//! The reachable catalog of a callable (paper eq. 7 is its upper bound).
//!
//! A callable that reads several growing regions sees one tuple of attended extents per call.
//! Eq. 7 bounds the tuples by the cross product `∏ K_r`; the tuples a session can actually reach
//! are fewer when regions *advance together*: on the same base clock, from the same start and by
//! the same stride once both are converted to base-clock ticks through the declared rates (for
//! Token2Wav's encoder, `conformer_cache` from 151 tokens by 25 and `upsample_cache` from 302
//! frames by 50 at 2 frames per token are both 151 + 25·k tokens). Such regions form one
//! *lock-step group*: the walk of its clock trajectory — every region at its `from`, advanced by
//! its `by` per call, capped by its retention bound `A_r` — visits
//!
//! ```text
//! tuple_k = (e_r(k))_{r ∈ group},   e_r(k) = min(A_r⁻ + k·s_r, A_r),   k = 0, 1, ...
//! ```
//!
//! until the tuple stabilises (every region truncated at its bound). A tuple changes exactly
//! at the calls that move some member, so a group reaches one tuple more than the calls that
//! move any of its members: `max_r K_r` for plain progressions (`K_r = ceil(W_r / s_r) + 1`,
//! eq. 7), not `∏ K_r`. Trajectories with a first-call advance or a schedule
//! ([`super::trajectory`]) walk the same way. Two regions also advance together when both reach
//! their bounds at the same single call (both saturate on the first call), whatever their
//! strides. Regions that do not advance together (another base clock, or different
//! trajectories in base ticks: nothing in the declaration fixes their relative phase) are
//! independent: the reachable set is the cross product of the groups' walks, as eq. 7 counts
//! it. Pinned regions contribute their one extent.
//!
//! [`reachable`] walks each group and enumerates the product while it stays within an explicit
//! limit; past it (the language backbone's unit stride over 2,000 tokens, if the limit were
//! lower), the count comes from the same arithmetic (`max_r K_r` per group, multiplied over
//! groups) and no tuple is listed.

use super::trajectory::{Moves, Trajectory};

/// One region a callable reads, as the walk sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    pub region: String,
    /// The clock of the growing axis (the region's driving clock).
    pub clock: String,
    /// The base clock `clock` derives from (empty for none: never in lock-step with anything).
    pub base: String,
    /// Ticks of `clock` per tick of `base` (≥ 1).
    pub per_base: u64,
    /// A_r⁻: the extent of the first call.
    pub from: u64,
    /// The leading advances before the steady stride (`first`, `schedule`).
    pub prefix: Vec<u64>,
    /// s_r, the steady advance per call; `None` when the retention pins the extent.
    pub by: Option<u64>,
    /// A_r: the retention bound (the pinned extent when `by` is `None`).
    pub cap: u64,
}

impl Track {
    /// The growing trajectory (`None` when pinned).
    pub fn trajectory(&self) -> Option<Trajectory> {
        self.by.map(|by| Trajectory {
            from: self.from,
            prefix: self.prefix.clone(),
            by,
            cap: self.cap,
        })
    }

    /// K_r: the distinct extents this region's own walk visits (1 when pinned).
    pub fn width(&self) -> u64 {
        self.trajectory().map_or(1, |t| t.width())
    }

    /// The extent after `k` calls.
    pub fn extent_at(&self, k: u64) -> u64 {
        self.trajectory().map_or(self.cap, |t| t.extent_at(k))
    }

    /// Whether the two regions advance together: on the same base clock, and either their
    /// trajectories coincide in base ticks (compared by cross-multiplication, exact) at every
    /// call until the earlier one reaches its bound — same start and same advances, whatever
    /// the bounds — or both reach their bounds at the same single call (both saturate on the
    /// first call, whatever their strides).
    pub fn advances_with(&self, other: &Track) -> bool {
        let (Some(a), Some(b)) = (self.trajectory(), other.trajectory()) else {
            return false;
        };
        if self.base.is_empty() || self.base != other.base {
            return false;
        }
        let (ma, mb) = (a.moves(), b.moves());
        if ma.count() == 1 && mb.count() == 1 && ma.last() == mb.last() {
            return true;
        }
        let same = |x: u64, y: u64| {
            u128::from(x) * u128::from(other.per_base) == u128::from(y) * u128::from(self.per_base)
        };
        let upto = ma.last().min(mb.last());
        // A plain pair is decided by its first two calls; a schedule by its listed calls.
        let horizon = upto.min(a.prefix.len().max(b.prefix.len()) as u64 + 1);
        (0..=horizon).all(|k| match (a.uncapped(k), b.uncapped(k)) {
            (Some(x), Some(y)) => same(x, y),
            _ => false,
        })
    }
}

/// A set of growing regions that advance together, and the tuples their walk reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockstepGroup {
    /// Regions of the group, in read order.
    pub regions: Vec<String>,
    /// Indices of the regions in the tracks given to [`reachable`].
    pub members: Vec<usize>,
    /// The base clock they advance on.
    pub base: String,
    /// Distinct tuples the walk reaches: one more than the calls that move any member
    /// (`max_r K_r` for plain progressions).
    pub count: u64,
}

/// The reachable catalog of extent tuples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachable {
    /// ∏ K_r over the tracks (eq. 7's bound); `None` on overflow.
    pub bound: Option<u64>,
    /// Distinct reachable tuples; `None` on overflow.
    pub count: Option<u64>,
    /// Groups of more than one growing region (each reaches fewer tuples than its ∏ K_r).
    pub lockstep: Vec<LockstepGroup>,
    /// Every reachable tuple (one extent per track, in track order), ascending
    /// lexicographically; `None` when `count` exceeds the enumeration limit.
    pub tuples: Option<Vec<Vec<u64>>>,
    /// The tuple of the first call (every track at its start).
    pub first: Vec<u64>,
    /// The tuples reached at calls after the first (ascending; a subset of `tuples`): exact
    /// for one group, every tuple when independent groups multiply (nothing fixes their
    /// relative phase). `None` when `tuples` is.
    pub later: Option<Vec<Vec<u64>>>,
}

/// The reachable tuples of attended extents of `tracks` (module docs); tuples are listed when
/// there are at most `max_enumerated` of them.
pub fn reachable(tracks: &[Track], max_enumerated: u64) -> Reachable {
    // Partition the moving tracks into lock-step groups.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, t) in tracks.iter().enumerate() {
        if t.width() <= 1 {
            continue; // pinned, or at its bound from the first call: one extent
        }
        match groups.iter_mut().find(|g| tracks[g[0]].advances_with(t)) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    let bound = tracks
        .iter()
        .try_fold(1u64, |a, t| a.checked_mul(t.width()));
    // Closed form per group: one tuple per call that moves a member, plus the start.
    let counts: Vec<u64> = groups
        .iter()
        .map(|g| {
            let moves: Vec<Moves> = g
                .iter()
                .filter_map(|&i| tracks[i].trajectory().map(|t| t.moves()))
                .collect();
            Moves::union_count(&moves).saturating_add(1)
        })
        .collect();
    let count = counts.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
    let lockstep = groups
        .iter()
        .zip(&counts)
        .filter(|(g, _)| g.len() > 1)
        .map(|(g, &c)| LockstepGroup {
            regions: g.iter().map(|&i| tracks[i].region.clone()).collect(),
            members: g.clone(),
            base: tracks[g[0]].base.clone(),
            count: c,
        })
        .collect();
    let first: Vec<u64> = tracks.iter().map(|t| t.extent_at(0)).collect();
    let walked = match count {
        Some(n) if n <= max_enumerated => enumerate(tracks, &groups, max_enumerated),
        _ => None,
    };
    let (tuples, later) = match walked {
        Some((t, l)) => (Some(t), Some(l)),
        None => (None, None),
    };
    Reachable {
        bound,
        count,
        lockstep,
        tuples,
        first,
        later,
    }
}

/// Extent tuples, one extent per track.
type Tuples = Vec<Vec<u64>>;

/// Walk each group call by call until every member reaches its bound (at most `limit` distinct
/// tuples), then take the product of the groups' walks; other tracks keep their one extent.
/// Returns every tuple and the tuples reached after the first call.
fn enumerate(tracks: &[Track], groups: &[Vec<usize>], limit: u64) -> Option<(Tuples, Tuples)> {
    let base: Vec<u64> = tracks.iter().map(|t| t.extent_at(0)).collect();
    let mut out: Vec<Vec<u64>> = vec![base.clone()];
    // Whether the first tuple is seen again after the first call (no group moves at call 1).
    let mut first_again = true;
    for g in groups {
        let last = g
            .iter()
            .filter_map(|&i| tracks[i].trajectory().map(|t| t.moves().last()))
            .max()
            .unwrap_or(0);
        let mut walk: Vec<Vec<u64>> = Vec::new();
        let mut k: u64 = 0;
        while k <= last {
            let t: Vec<u64> = g.iter().map(|&i| tracks[i].extent_at(k)).collect();
            if k == 1 && walk.last() != Some(&t) {
                first_again = false;
            }
            if walk.last() != Some(&t) {
                if walk.len() as u64 >= limit {
                    return None;
                }
                walk.push(t);
            }
            k += 1;
        }
        if (out.len() as u64).checked_mul(walk.len() as u64)? > limit {
            return None;
        }
        out = out
            .iter()
            .flat_map(|prefix| {
                walk.iter().map(move |w| {
                    let mut v = prefix.clone();
                    for (&i, &x) in g.iter().zip(w) {
                        v[i] = x;
                    }
                    v
                })
            })
            .collect();
    }
    out.sort_unstable();
    out.dedup();
    let later: Vec<Vec<u64>> = if groups.len() > 1 || first_again {
        out.clone()
    } else {
        out.iter().filter(|t| **t != base).cloned().collect()
    };
    Some((out, later))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grow(region: &str, clock: &str, per_base: u64, from: u64, by: u64, cap: u64) -> Track {
        Track {
            region: region.into(),
            clock: clock.into(),
            base: "token".into(),
            per_base,
            from,
            prefix: Vec::new(),
            by: Some(by),
            cap,
        }
    }

    fn pinned(region: &str, cap: u64) -> Track {
        Track {
            region: region.into(),
            clock: "frame".into(),
            base: "token".into(),
            per_base: 2,
            from: cap,
            prefix: Vec::new(),
            by: None,
            cap,
        }
    }

    #[test]
    fn lock_step_pair_reaches_three() {
        // Token2Wav's encoder: 151 + 25k tokens and 302 + 50k frames at 2 frames per token.
        let t = [
            grow("conformer_cache", "token", 1, 151, 25, 201),
            grow("upsample_cache", "frame", 2, 302, 50, 402),
        ];
        let r = reachable(&t, 64);
        assert_eq!(r.bound, Some(9));
        assert_eq!(r.count, Some(3));
        assert_eq!(
            r.tuples,
            Some(vec![vec![151, 302], vec![176, 352], vec![201, 402]])
        );
        assert_eq!(r.lockstep.len(), 1);
        assert_eq!(r.lockstep[0].regions, ["conformer_cache", "upsample_cache"]);
        assert_eq!(
            (r.lockstep[0].base.as_str(), r.lockstep[0].count),
            ("token", 3)
        );
    }

    #[test]
    fn lock_step_with_different_bounds_stops_at_the_longest_walk() {
        // Same start and stride in base ticks, the second retains more: K 3 and K 5 → 5 tuples.
        let t = [
            grow("a", "token", 1, 151, 25, 201),
            grow("b", "frame", 2, 302, 50, 502),
        ];
        let r = reachable(&t, 64);
        assert_eq!((r.bound, r.count), (Some(15), Some(5)));
        let tuples = r.tuples.unwrap();
        assert_eq!(tuples.len(), 5);
        assert_eq!(tuples.last(), Some(&vec![201, 502]));
    }

    #[test]
    fn independent_pairs_keep_the_product() {
        // A different stride in base ticks (25 tokens vs 30 frames = 15 tokens).
        let t = [
            grow("a", "token", 1, 151, 25, 201),
            grow("b", "frame", 2, 302, 30, 362),
        ];
        let r = reachable(&t, 64);
        assert_eq!((r.bound, r.count), (Some(9), Some(9)));
        assert!(r.lockstep.is_empty());
        assert_eq!(r.tuples.as_ref().map(Vec::len), Some(9));
        // A different start in base ticks (151 tokens vs 300 frames = 150 tokens).
        let t = [
            grow("a", "token", 1, 151, 25, 201),
            grow("b", "frame", 2, 300, 50, 400),
        ];
        assert_eq!(reachable(&t, 64).count, Some(9));
        // Another base clock: nothing relates their phases.
        let mut other = grow("b", "chunk", 1, 151, 25, 201);
        other.base = "chunk".into();
        let t = [grow("a", "token", 1, 151, 25, 201), other];
        let r = reachable(&t, 64);
        assert_eq!(r.count, Some(9));
        assert_eq!(
            r.tuples.unwrap()[..3],
            [vec![151, 151], vec![151, 176], vec![151, 201]]
        );
    }

    #[test]
    fn pinned_and_growing_reach_k() {
        let t = [
            pinned("attention_mask", 56),
            grow("carry", "frame", 2, 302, 50, 402),
        ];
        let r = reachable(&t, 64);
        assert_eq!((r.bound, r.count), (Some(3), Some(3)));
        assert_eq!(
            r.tuples,
            Some(vec![vec![56, 302], vec![56, 352], vec![56, 402]])
        );
    }

    #[test]
    fn ring_reaches_one() {
        let t = [pinned("temporal_kv", 3000)];
        let r = reachable(&t, 64);
        assert_eq!((r.bound, r.count), (Some(1), Some(1)));
        assert_eq!(r.tuples, Some(vec![vec![3000]]));
        // No region at all: one class.
        let r = reachable(&[], 64);
        assert_eq!(
            (r.bound, r.count, r.tuples),
            (Some(1), Some(1), Some(vec![vec![]]))
        );
    }

    #[test]
    fn unit_stride_is_counted_without_walking_past_the_limit() {
        // The language backbone: from 0 by 1 within a 2,000-token window.
        let t = [grow("kv_cache", "token", 1, 0, 1, 2000)];
        let r = reachable(&t, 64);
        assert_eq!((r.bound, r.count, r.tuples), (Some(2001), Some(2001), None));
        let r = reachable(&t, 100_000);
        assert_eq!(r.tuples.as_ref().map(Vec::len), Some(2001));
        // A window no walk could finish: the arithmetic still answers, nothing is listed.
        let t = [
            grow("a", "token", 1, 0, 1, u64::MAX / 4),
            grow("b", "frame", 2, 0, 2, u64::MAX / 2),
        ];
        let r = reachable(&t, 100_000);
        assert_eq!(r.count, Some((1u64 << 62) + 1)); // b's walk: ceil((2^63 - 1) / 2) + 1
        assert_eq!(r.bound, None);
        assert_eq!(r.tuples, None);
    }

    #[test]
    fn walk_matches_the_closed_form() {
        // Every small lock-step / independent configuration: enumeration and count agree, and
        // the count never exceeds the eq. 7 bound.
        for s2 in 1..4u64 {
            for f2 in 0..3u64 {
                for cap2 in 0..7u64 {
                    let t = [
                        grow("a", "token", 1, 1, 1, 4),
                        grow("b", "frame", 2, 2 * f2, 2 * s2, 2 * f2 + cap2),
                    ];
                    let r = reachable(&t, 1000);
                    let tuples = r.tuples.unwrap();
                    assert_eq!(Some(tuples.len() as u64), r.count);
                    assert!(r.count <= r.bound);
                    // Brute force: every call index until both stabilise.
                    let mut seen: Vec<Vec<u64>> = (0..64)
                        .map(|k| vec![t[0].extent_at(k), t[1].extent_at(k)])
                        .collect();
                    seen.sort_unstable();
                    seen.dedup();
                    if t[0].advances_with(&t[1]) {
                        assert_eq!(seen, tuples);
                    } else {
                        assert_eq!(r.count, r.bound);
                    }
                }
            }
        }
    }

    #[test]
    fn saturating_on_the_first_call_is_lock_step_whatever_the_strides() {
        // 40 → 50 by 10 and 100 → 150 by 100: both at their bound after one call.
        let t = [
            grow("a", "frame", 1, 40, 10, 50),
            grow("b", "frame", 1, 100, 100, 150),
        ];
        let r = reachable(&t, 64);
        assert_eq!((r.bound, r.count), (Some(4), Some(2)));
        assert_eq!(r.tuples, Some(vec![vec![40, 100], vec![50, 150]]));
        assert_eq!(r.first, vec![40, 100]);
        assert_eq!(r.later, Some(vec![vec![50, 150]]));
        // One saturates after one call, the other after two: independent.
        let t = [
            grow("a", "frame", 1, 40, 10, 50),
            grow("b", "frame", 1, 100, 30, 150),
        ];
        assert_eq!(reachable(&t, 64).count, Some(6));
    }

    #[test]
    fn schedules_walk_call_by_call() {
        // The same schedule in base ticks (frames at 2 per token): lock-step, the longer walk.
        let mut a = grow("a", "token", 1, 0, 25, 150);
        a.prefix = vec![0, 25];
        let mut b = grow("b", "frame", 2, 0, 50, 400);
        b.prefix = vec![0, 50];
        let r = reachable(&[a.clone(), b.clone()], 64);
        // a: 0, 0, 25, 50, ..., 150 (7 extents); b: 0, 0, 50, ..., 400 (9 extents).
        assert_eq!((a.width(), b.width()), (7, 9));
        assert_eq!(r.count, Some(9));
        assert_eq!(r.lockstep.len(), 1);
        // The first tuple is seen again at the second call (advance 0).
        assert_eq!(r.later.as_ref().map(Vec::len), Some(9));
        // A different schedule: independent, the product.
        b.prefix = vec![50];
        let r = reachable(&[a, b], 1000);
        assert!(r.lockstep.is_empty());
        assert_eq!(r.count, r.bound);
    }
}
