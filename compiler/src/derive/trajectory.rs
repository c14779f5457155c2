//! The trajectory of a growing axis: the extent each call sees.
//!
//! A plain progression starts at `from` and adds `by` per call. Real caches do not always: the
//! first call may add something else (a cache that advances `0, 50, 75, …`), and hop schedules
//! change the stride a few times before it settles (`25 → 50 → 100`). A [`Trajectory`] is
//! `from`, a finite list of leading advances, then the steady `by`; the extent at call `k`
//! (0-based) is
//!
//! ```text
//! e(k) = min(from + a_0 + … + a_{k−1}, cap),   a_i = prefix[i] for i < |prefix|, else by
//! ```
//!
//! where `cap` is the retention bound A_r. Every derived number of the axis reads it: the
//! region's catalog is the distinct `e(k)`, `K_r` their count, and the reachable walk of a
//! callable ([`super::reach`]) steps every trajectory by one call at a time. With an empty
//! prefix all of it reduces to eq. 7: `K_r = ceil(W_r / s_r) + 1`.

/// One growing axis's trajectory (module docs). All values are in ticks of the axis's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trajectory {
    /// A_r⁻: the extent the first call sees.
    pub from: u64,
    /// The leading advances (`first`, then `schedule`); each may be 0.
    pub prefix: Vec<u64>,
    /// The steady advance (0 only after leading advances: the axis stops growing).
    pub by: u64,
    /// A_r: the retention bound (≥ `from`).
    pub cap: u64,
}

impl Trajectory {
    /// A plain progression: `from`, `from + by`, … up to `cap`.
    pub fn plain(from: u64, by: u64, cap: u64) -> Self {
        Trajectory {
            from,
            prefix: Vec::new(),
            by,
            cap,
        }
    }

    /// The uncapped extent after `k` calls (`None` past `u64`).
    pub fn uncapped(&self, k: u64) -> Option<u64> {
        let p = self.prefix.len() as u64;
        let lead = k.min(p);
        let mut e = self.from;
        for a in self.prefix.iter().take(usize::try_from(lead).ok()?) {
            e = e.checked_add(*a)?;
        }
        let steady = k.saturating_sub(p);
        e.checked_add(steady.checked_mul(self.by)?)
    }

    /// The extent the call `k` (0-based) sees.
    pub fn extent_at(&self, k: u64) -> u64 {
        self.uncapped(k).map_or(self.cap, |e| e.min(self.cap))
    }

    /// The calls `k ≥ 1` at which the extent changes: the leading calls whose advance is
    /// positive while below the bound (listed), then the interval of steady calls until the
    /// bound is reached (`(first, last)` inclusive, `None` when empty).
    pub fn moves(&self) -> Moves {
        let mut listed = Vec::new();
        let mut e = self.from;
        for (i, a) in self.prefix.iter().enumerate() {
            if e >= self.cap {
                return Moves {
                    listed,
                    steady: None,
                };
            }
            if *a > 0 {
                listed.push(i as u64 + 1);
            }
            e = e.saturating_add(*a);
        }
        if e >= self.cap || self.by == 0 {
            return Moves {
                listed,
                steady: None,
            };
        }
        let p = self.prefix.len() as u64;
        let m = (self.cap - e).div_ceil(self.by);
        Moves {
            listed,
            steady: Some((p + 1, p.saturating_add(m))),
        }
    }

    /// K_r: the distinct extents of the walk (1 + the calls that move it).
    pub fn width(&self) -> u64 {
        self.moves().count().saturating_add(1)
    }

    /// The largest single advance the walk makes (the stride a partial flush can cut short).
    pub fn max_advance(&self) -> u64 {
        self.prefix.iter().copied().fold(self.by, u64::max)
    }

    /// The distinct extents, ascending, when there are at most `limit` of them.
    pub fn catalog(&self, limit: u64) -> Option<Vec<u64>> {
        if self.width() > limit {
            return None;
        }
        let mut out = vec![self.from.min(self.cap)];
        for k in 1..=self.moves().last() {
            let e = self.extent_at(k);
            if out.last() != Some(&e) {
                out.push(e);
            }
        }
        Some(out)
    }
}

/// The calls (k ≥ 1) at which a trajectory moves (see [`Trajectory::moves`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moves {
    /// Moving calls among the leading advances, ascending.
    pub listed: Vec<u64>,
    /// The steady calls that move, inclusive.
    pub steady: Option<(u64, u64)>,
}

impl Moves {
    /// How many calls move.
    pub fn count(&self) -> u64 {
        let steady = self.steady.map_or(0, |(a, b)| b - a + 1);
        (self.listed.len() as u64).saturating_add(steady)
    }

    /// The last call that moves (the call at which the bound is reached), 0 if none.
    pub fn last(&self) -> u64 {
        self.steady
            .map(|(_, b)| b)
            .or(self.listed.last().copied())
            .unwrap_or(0)
    }

    /// |∪ moves|: how many calls move at least one of the trajectories (a lock-step group's
    /// walk reaches one more tuple than this).
    pub fn union_count(all: &[Moves]) -> u64 {
        let mut intervals: Vec<(u64, u64)> = all.iter().filter_map(|m| m.steady).collect();
        intervals.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (a, b) in intervals {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let mut listed: Vec<u64> = all.iter().flat_map(|m| m.listed.iter().copied()).collect();
        listed.sort_unstable();
        listed.dedup();
        let outside = listed
            .iter()
            .filter(|k| !merged.iter().any(|(a, b)| a <= *k && *k <= b))
            .count() as u64;
        merged
            .iter()
            .map(|(a, b)| b - a + 1)
            .fold(outside, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_progression_is_eq_7() {
        // The carry: 302, 352, 402 (K = ceil(100 / 50) + 1 = 3).
        let t = Trajectory::plain(302, 50, 402);
        assert_eq!(t.width(), 3);
        assert_eq!(t.catalog(64), Some(vec![302, 352, 402]));
        assert_eq!(t.moves().steady, Some((1, 2)));
        // A window the stride does not divide: 40, 50 (freeze_omni) and 0..2000 by 1.
        assert_eq!(Trajectory::plain(40, 10, 50).width(), 2);
        assert_eq!(Trajectory::plain(0, 1, 2000).width(), 2001);
        assert_eq!(Trajectory::plain(0, 1, 2000).catalog(64), None);
        // Starting at the bound: one extent.
        assert_eq!(Trajectory::plain(50, 10, 50).width(), 1);
    }

    #[test]
    fn first_call_advance_and_schedule() {
        // A cache that advances 0, 50, 75, then 25 per call, bounded at 200.
        let t = Trajectory {
            from: 0,
            prefix: vec![0, 50, 75],
            by: 25,
            cap: 200,
        };
        let seen: Vec<u64> = (0..8).map(|k| t.extent_at(k)).collect();
        assert_eq!(seen, [0, 0, 50, 125, 150, 175, 200, 200]);
        assert_eq!(t.catalog(64), Some(vec![0, 50, 125, 150, 175, 200]));
        assert_eq!(t.width(), 6);
        assert_eq!(
            t.moves(),
            Moves {
                listed: vec![2, 3],
                steady: Some((4, 6))
            }
        );
        // A hop schedule 25 → 50 → 100 within 400: 0, 25, 75, 175, 275, 375, 400.
        let hop = Trajectory {
            from: 0,
            prefix: vec![25, 50],
            by: 100,
            cap: 400,
        };
        assert_eq!(hop.catalog(64), Some(vec![0, 25, 75, 175, 275, 375, 400]));
        assert_eq!(hop.width(), 7);
        assert_eq!(hop.max_advance(), 100);
        // The schedule saturates before it ends: the steady part never runs.
        let short = Trajectory {
            from: 0,
            prefix: vec![60, 60],
            by: 1,
            cap: 100,
        };
        assert_eq!(short.catalog(64), Some(vec![0, 60, 100]));
        assert_eq!(short.moves().steady, None);
        assert_eq!(short.width(), 3);
    }

    #[test]
    fn a_zero_steady_advance_stops_the_walk() {
        // A cache empty on the first call that fills once (HiFT's mel cache): 0, then 8.
        let t = Trajectory {
            from: 0,
            prefix: vec![8],
            by: 0,
            cap: 8,
        };
        assert_eq!(t.catalog(64), Some(vec![0, 8]));
        // Stopping below the bound: the bound is never reached.
        let t = Trajectory {
            from: 0,
            prefix: vec![3, 2],
            by: 0,
            cap: 8,
        };
        assert_eq!(t.catalog(64), Some(vec![0, 3, 5]));
        assert_eq!((t.width(), t.extent_at(100)), (3, 5));
    }

    #[test]
    fn width_matches_the_walk() {
        for from in 0..4u64 {
            for a in 0..4u64 {
                for by in 0..4u64 {
                    for cap in from..from + 12 {
                        let t = Trajectory {
                            from,
                            prefix: vec![a, 0, a + 1],
                            by,
                            cap,
                        };
                        let mut seen: Vec<u64> = (0..64).map(|k| t.extent_at(k)).collect();
                        seen.dedup();
                        assert_eq!(t.width(), seen.len() as u64, "{t:?}");
                        assert_eq!(t.catalog(1000), Some(seen), "{t:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn union_of_moves() {
        let a = Trajectory::plain(0, 10, 20).moves(); // 1..=2
        let b = Trajectory::plain(0, 5, 20).moves(); // 1..=4
        assert_eq!(Moves::union_count(&[a.clone(), b]), 4);
        let c = Moves {
            listed: vec![1, 7],
            steady: None,
        };
        assert_eq!(Moves::union_count(&[a, c]), 3);
        assert_eq!(Moves::union_count(&[]), 0);
    }
}
