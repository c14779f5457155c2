//! RIFF/WAVE output of the vocoder's PCM: mono, 16-bit integer (as the vendor's
//! `Token2wav.stream` bytes) or 32-bit float.

use std::io::{self, Write};

/// The sample format of a WAV file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WavFormat {
    /// 16-bit PCM, converted as the vendor does: clip to `[−1, 1]`, times 32767 in float,
    /// truncated toward zero ([`pcm16`]).
    Pcm16,
    /// IEEE 32-bit float, the samples as they are.
    Float32,
}

/// The vendor's int16 conversion (`np.clip(wav, −1, 1) * 32767.0` then `.astype('<i2')`, which
/// truncates toward zero), one sample.
pub fn pcm16(x: f32) -> i16 {
    (x.clamp(-1.0, 1.0) * 32767.0) as i16
}

/// The little-endian int16 bytes `Token2wav.stream` returns for `pcm`.
pub fn pcm16_bytes(pcm: &[f32]) -> Vec<u8> {
    pcm.iter().flat_map(|&x| pcm16(x).to_le_bytes()).collect()
}

/// Writes `pcm` as a mono WAV file at `sample_rate` Hz: the `RIFF` header, a 16-byte `fmt `
/// chunk (format 1 for [`WavFormat::Pcm16`], 3 for [`WavFormat::Float32`]) and the `data`
/// chunk. Fails with `InvalidInput` when the data would not fit the format's 32-bit sizes.
pub fn write_wav(
    mut out: impl Write,
    pcm: &[f32],
    sample_rate: u32,
    format: WavFormat,
) -> io::Result<()> {
    let (tag, bytes_per_sample): (u16, u32) = match format {
        WavFormat::Pcm16 => (1, 2),
        WavFormat::Float32 => (3, 4),
    };
    let data_len = u32::try_from(pcm.len())
        .ok()
        .and_then(|n| n.checked_mul(bytes_per_sample))
        .filter(|n| n.checked_add(36).is_some())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} samples do not fit a WAV file", pcm.len()),
            )
        })?;
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data_len).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&tag.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // mono
    h.extend_from_slice(&sample_rate.to_le_bytes());
    h.extend_from_slice(&(sample_rate * bytes_per_sample).to_le_bytes()); // byte rate
    h.extend_from_slice(&(bytes_per_sample as u16).to_le_bytes()); // block align
    h.extend_from_slice(&(8 * bytes_per_sample as u16).to_le_bytes()); // bits per sample
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data_len.to_le_bytes());
    out.write_all(&h)?;
    let data: Vec<u8> = match format {
        WavFormat::Pcm16 => pcm16_bytes(pcm),
        WavFormat::Float32 => pcm.iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    out.write_all(&data)?;
    out.flush()
}

/// [`write_wav`] into the file `path`, written whole or not at all
/// ([`crate::fsio::write_atomic`]).
pub fn write_wav_file(
    path: &std::path::Path,
    pcm: &[f32],
    sample_rate: u32,
    format: WavFormat,
) -> io::Result<()> {
    let mut bytes = Vec::new();
    write_wav(&mut bytes, pcm, sample_rate, format)?;
    crate::fsio::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], i: usize) -> u32 {
        u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
    }

    fn u16_at(b: &[u8], i: usize) -> u16 {
        u16::from_le_bytes([b[i], b[i + 1]])
    }

    #[test]
    fn pcm16_header_and_samples() {
        let pcm = [0.0f32, 0.5, -0.5, 1.5, -2.0, 0.99999, -0.00002];
        let mut b = Vec::new();
        write_wav(&mut b, &pcm, 24000, WavFormat::Pcm16).unwrap();
        assert_eq!(b.len(), 44 + 2 * pcm.len());
        assert_eq!(&b[0..4], b"RIFF");
        assert_eq!(u32_at(&b, 4) as usize, b.len() - 8);
        assert_eq!(&b[8..16], b"WAVEfmt ");
        assert_eq!((u32_at(&b, 16), u16_at(&b, 20), u16_at(&b, 22)), (16, 1, 1));
        assert_eq!((u32_at(&b, 24), u32_at(&b, 28)), (24000, 48000));
        assert_eq!((u16_at(&b, 32), u16_at(&b, 34)), (2, 16));
        assert_eq!(&b[36..40], b"data");
        assert_eq!(u32_at(&b, 40) as usize, 2 * pcm.len());
        let s: Vec<i16> = b[44..]
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        // 0.5 · 32767 = 16383.5 truncates to 16383; clipped to ±32767; −0.65 truncates to 0
        assert_eq!(s, [0, 16383, -16383, 32767, -32767, 32766, 0]);
    }

    #[test]
    fn float_samples_are_kept_exactly() {
        let pcm = [0.25f32, -0.125, 3.0];
        let mut b = Vec::new();
        write_wav(&mut b, &pcm, 24000, WavFormat::Float32).unwrap();
        assert_eq!((u16_at(&b, 20), u16_at(&b, 32), u16_at(&b, 34)), (3, 4, 32));
        assert_eq!(u32_at(&b, 28), 96000);
        let s: Vec<f32> = b[44..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(s, pcm);
    }
}
