//! Bits of the `conv`, `signal` and new `act` twins (Snake, float64 ELU, division) over fixed
//! inputs, hashed (FNV-1a over the float bits, doubles as two words, low first). The expected
//! value comes from compiling the CUDA source of those kernels (`common.cuh`, `conv.cu`,
//! `signal.cu`, the new entries of `act.cu`) as C++ on a CPU (`g++ -ffp-contract=off`, a shim
//! defining the CUDA builtins, one thread per launch) and running the same launches: the CUDA
//! source and the twins agree bit for bit.

use super::*;
use crate::act::{div_inplace, elu_f64_inplace, snake};
use crate::conv::{Conv1dGeom, Residual, conv1d};

struct Fnv(u64);
impl Fnv {
    fn word(&mut self, b: u32) {
        self.0 = (self.0 ^ b as u64).wrapping_mul(1_099_511_628_211);
    }
    fn f(&mut self, v: &[f32]) {
        v.iter().for_each(|x| self.word(x.to_bits()));
    }
    fn d(&mut self, v: &[f64]) {
        for x in v {
            let b = x.to_bits();
            self.word(b as u32);
            self.word((b >> 32) as u32);
        }
    }
}

fn lcg(i: u32) -> f32 {
    let u = i.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (u >> 8) as f32 / 16_777_216.0 * 2.0 - 1.0
}

fn vf(n: usize, seed: u32, s: f32) -> Vec<f32> {
    (0..n as u32).map(|i| lcg(seed * 1000 + i) * s).collect()
}

fn geom(
    t_out: usize,
    ld: usize,
    k: usize,
    stride: usize,
    dil: usize,
    pad: usize,
    up: usize,
) -> Conv1dGeom {
    Conv1dGeom {
        c_in: 3,
        t_in: 10,
        sxc: 10,
        sxt: 1,
        c_out: 2,
        t_out,
        ldy: ld,
        ldr: ld,
        k,
        stride,
        dil,
        pad,
        up,
    }
}

#[test]
fn twins_match_the_cuda_source_run_on_cpu() {
    let mut h = Fnv(1_469_598_103_934_665_603);
    let (x, w, b, r) = (
        vf(30, 1, 1.0),
        vf(24, 2, 0.5),
        vf(2, 3, 0.1),
        vf(24, 4, 1.0),
    );
    let mut y = vec![0.0f32; 24];
    conv1d(
        &geom(12, 12, 4, 1, 2, 3, 2),
        &mut y,
        &x,
        &w,
        &b,
        Residual::Separate(&r),
    );
    h.f(&y);
    let mut y2 = vec![0.0f32; 6];
    conv1d(
        &geom(3, 3, 4, 3, 1, 2, 1),
        &mut y2,
        &x,
        &w,
        &b,
        Residual::None,
    );
    h.f(&y2);
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let wd: Vec<f64> = w.iter().map(|&v| v as f64 / 3.0).collect();
    let bd: Vec<f64> = b.iter().map(|&v| v as f64).collect();
    let mut yd = vec![0.5f64; 24];
    let g = Conv1dGeom {
        sxc: 1,
        sxt: 3,
        ..geom(12, 12, 4, 1, 2, 3, 2)
    };
    conv1d(&g, &mut yd, &xd, &wd, &bd, Residual::InPlace);
    h.d(&yd);

    let mut xs = vf(21, 5, 3.0);
    let a: Vec<f32> = vf(3, 6, 1.0).iter().map(|v| v + 1.2).collect();
    let mut ys = vec![0.0f32; 21];
    snake(Some(&mut ys), &mut xs, &a, 3, 7, 7, 7);
    h.f(&ys);
    let mut e: Vec<f64> = (0..40).map(|i| lcg(700 + i) as f64 * 3.0).collect();
    elu_f64_inplace(&mut e);
    h.d(&e);
    let mut d = vf(9, 8, 5.0);
    div_inplace(&mut d, 3.0);
    h.f(&d);

    let x = vf(12, 9, 2.0);
    let mut yw = vec![0.0f64; 8];
    widen(&mut yw, &x, 2, 4, 6);
    h.d(&yw);
    yw.iter_mut().for_each(|v| *v *= -1.7);
    let mut z = vec![0.0f32; 8];
    abs_narrow(&mut z, &yw);
    h.f(&z);

    let f0: Vec<f32> = (0..5)
        .map(|i| if i == 2 { 3.0 } else { 50.0 + 87.3 * i as f32 })
        .collect();
    let mut ph = vec![0.3f64; 9];
    let mut sine = vec![0.0f32; 45];
    harmonic_phase(&mut sine, &mut ph, &f0, 5, 9, 24000.0, 480);
    h.f(&sine);
    h.d(&ph);
    let table: Vec<f32> = vf(180, 10, 1.0).iter().map(|v| v * 0.5 + 0.5).collect();
    let (lw, lb) = (vf(9, 11, 1.0), vf(1, 12, 0.1));
    let p = SourceParams {
        harmonics: 9,
        hop: 7,
        table_len: 20,
        sine_amp: 0.1,
        noise_std: 0.003,
        threshold: 10.0,
    };
    let mut ysrc = vec![0.0f32; 14];
    // frame 19: row (19 · 7) mod 20 = 13, the offset the expected hash was computed at
    harmonic_source(&mut ysrc, &sine, &f0[1..], &table, &lw, &lb, 19, 2, &p);
    h.f(&ysrc);

    let tw = twiddles(16);
    let win: Vec<f32> = (0..16)
        .map(|n| (0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / 16.0).cos()) as f32)
        .collect();
    let x = vf(40, 13, 1.0);
    let mut st = vec![0.0f32; 18 * 11];
    stft(&mut st, &x, &win, &tw, 11, 11, 16, 4);
    h.f(&st);
    let lp = vf(18 * 11, 14, 2.0);
    let mut spec = vec![0.0f32; 18 * 11];
    polar(&mut spec, &lp, 9, 11, 11, 11, 5.0);
    h.f(&spec);
    let mut y = vec![0.0f32; 40];
    istft(&mut y, &spec, &win, &tw, 11, 11, 16, 4, 0.99);
    h.f(&y);
    assert_eq!(h.0, 0xa03b_d4c0_7967_4a13);
}
