//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
//! counter-based generator behind device randomness. `kernels/cuda/rng.cu` implements the same
//! function; the two agree bit for bit (tested against the Random123 known-answer vectors here
//! and against the device on the GPU machine).
//!
//! Stream layout used by the runtime: the generator state is two `u64` words in device memory,
//! `[seed, offset]`. Element `i` of a draw comes from lane `i % 4` of
//! `philox(counter = [g_lo, g_hi, offset_lo, offset_hi], key = [seed_lo, seed_hi])` with
//! `g = i / 4`. A call that draws advances `offset` by its declared increment, so two draws never
//! share a counter.

pub const M0: u32 = 0xD251_1F53;
pub const M1: u32 = 0xCD9E_8D57;
pub const W0: u32 = 0x9E37_79B9;
pub const W1: u32 = 0xBB67_AE85;

#[inline]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = (a as u64) * (b as u64);
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32 with 10 rounds.
#[inline]
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = ctr;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The four words of group `g` of the stream `(seed, offset)`.
#[inline]
pub fn block(seed: u64, offset: u64, g: u64) -> [u32; 4] {
    philox4x32_10(
        [
            g as u32,
            (g >> 32) as u32,
            offset as u32,
            (offset >> 32) as u32,
        ],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// Word `i` of the stream `(seed, offset)`.
#[inline]
pub fn bits(seed: u64, offset: u64, i: u64) -> u32 {
    block(seed, offset, i / 4)[(i % 4) as usize]
}

/// Uniform float in `[0, 1)` from one word: the top 24 bits times 2^-24 (exact in f32).
#[inline]
pub fn uniform(x: u32) -> f32 {
    (x >> 8) as f32 * (1.0 / 16_777_216.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors of Random123 (kat_vectors, philox4x32 10 rounds).
    #[test]
    fn random123_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn uniform_is_in_unit_interval() {
        assert_eq!(uniform(0), 0.0);
        assert!(uniform(u32::MAX) < 1.0);
    }
}
