use super::*;

/// The vendor's limits for the causal HiFT (`vocoder_trace.md`, `BoundedVocoder.limits`).
fn limits() -> Limits {
    Limits {
        f0_left: 8,
        f0_right: 3,
        history: 31,
        decoder_right: 5,
        delay: 8,
        mel_buffer: 55,
        source_buffer: 52,
        f0_input: 27,
        decoder_input: 52,
    }
}

fn caps(input: usize) -> Caps {
    let l = limits();
    Caps {
        mel: l.mel_buffer,
        src: l.source_buffer,
        f0: l.f0_input,
        dec: l.decoder_input,
        input,
        out: input + l.delay,
    }
}

/// The same stream with the vendor's absolute counters kept across calls.
struct Reference {
    c: Counters,
}

impl Reference {
    fn call(&mut self, frames: usize, finalize: bool) -> Vec<Step> {
        let l = limits();
        let caps = caps(64);
        let mut steps = Vec::new();
        let mut out = 0;
        let mut start = 0;
        while start < frames {
            let n = 16.min(frames - start);
            let col = self.c.mel_len();
            self.c.received += n;
            let mut s = self.c.process(&l, Some(&caps), 16, false, out).unwrap();
            s.append = Some(Append { row: start, n, col });
            out += s.decode.map_or(0, |d| d.want);
            steps.push(s);
            start += n;
        }
        if finalize {
            steps.push(self.c.process(&l, Some(&caps), 16, true, out).unwrap());
        }
        steps
    }
}

/// The trace of `models/testdata/token2wav_tiny/vocoder_trace.md`: F0 and decoder inputs of
/// every step of 50 + 50 frames and the final flush, and the histories left after each call.
#[test]
fn plans_follow_the_vendor_trace() {
    let l = limits();
    let f0_dec = |p: &CallPlan| -> Vec<(usize, usize)> {
        p.steps
            .iter()
            .map(|s| (s.f0.as_ref().unwrap().frames, s.decode.unwrap().frames))
            .collect()
    };
    let p0 = CallPlan::new(&l, 16, &caps(64), 0, 0, 50, false).unwrap();
    assert_eq!(f0_dec(&p0), [(16, 13), (27, 29), (27, 45), (13, 38)]);
    assert_eq!((p0.out, p0.mel_len, p0.src_len), (42, 39, 36));
    let p1 = CallPlan::new(&l, 16, &caps(64), 39, 36, 50, false).unwrap();
    assert_eq!(f0_dec(&p1), [(27, 52), (27, 52), (27, 52), (13, 38)]);
    assert_eq!((p1.out, p1.mel_len, p1.src_len), (50, 39, 36));
    let f = CallPlan::new(&l, 16, &caps(64), 39, 36, 0, true).unwrap();
    assert_eq!(f0_dec(&f), [(11, 39)]);
    assert_eq!(f.steps[0].f0.as_ref().unwrap().blocks.len(), 1);
    assert_eq!(f.out, 8);
    // the steady call's counters: +50 on every offset, source_end by its blocks
    let adv: i64 = p1.steps.iter().map(|s| s.deltas[0]).sum();
    let src: usize = p1
        .steps
        .iter()
        .flat_map(|s| s.f0.as_ref().unwrap().blocks.iter().map(|b| b.n))
        .sum();
    assert_eq!((adv, src), (50, 50));
    assert_eq!(f.steps[0].deltas[4], 1);
}

/// Plans made from the history extents alone equal the steps of the vendor's absolute
/// counters, for streams of uneven chunks far past the windows: the class fixes the work.
#[test]
fn the_class_fixes_the_plan_at_every_position() {
    let l = limits();
    let mut seed = 7u64;
    for _ in 0..50 {
        let mut r = Reference {
            c: Counters::default(),
        };
        let (mut mel, mut src) = (0, 0);
        for _ in 0..12 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let frames = 1 + (seed >> 33) as usize % 64;
            let want = r.call(frames, false);
            let p = CallPlan::new(&l, 16, &caps(64), mel, src, frames, false).unwrap();
            assert_eq!(p.steps, want, "{frames} frames after {mel}/{src}");
            (mel, src) = (p.mel_len, p.src_len);
            assert_eq!((mel, src), (r.c.mel_len(), r.c.src_len()));
        }
        let want = r.call(0, true);
        let p = CallPlan::new(&l, 16, &caps(64), mel, src, 0, true).unwrap();
        assert_eq!(p.steps, want);
    }
}

/// Histories the vendor never holds together are refused, and so is a call past a capacity.
#[test]
fn unreachable_states_and_capacities_are_errors() {
    let l = limits();
    assert_eq!(
        CallPlan::new(&l, 16, &caps(64), 39, 20, 50, false),
        Err(VocoderError::State { mel: 39, src: 20 })
    );
    assert!(matches!(
        CallPlan::new(&l, 16, &caps(64), 40, 36, 50, false),
        Err(VocoderError::State { .. })
    ));
    assert!(matches!(
        CallPlan::new(&l, 16, &caps(48), 39, 36, 50, false),
        Err(VocoderError::Capacity {
            what: "call input",
            ..
        })
    ));
    let small = Caps {
        mel: 54,
        ..caps(64)
    };
    assert!(matches!(
        CallPlan::new(&l, 16, &small, 39, 36, 50, false),
        Err(VocoderError::Capacity {
            what: "mel history",
            needed: 55,
            capacity: 54
        })
    ));
}
