//! Direct (im2col-free) convolution layers over channel-major `[c, t]` activations, and the
//! layers built from them: [`DirectConv1d`] (any padding side, dilation, stride, nearest
//! upsampling; float or double), [`Snake`] and the HiFi-GAN / BigVGAN [`ResBlock`].
//!
//! Each holds its weights in device buffers (in torch's `[out, in, k]` layout, as a vendor
//! state_dict stores them) and queues its forward pass over views the caller provides.

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer, Pod};
use dcc_runtime::ops::{Conv, ConvElem, ConvGeom, Residual};

use super::{Ctx, LoadError, OpError, Tensor, ops};

/// `CausalConv1d.causal_padding` of the vendor's vocoder for kernel `k` and dilation `d`:
/// `⌊(k·d − d) / 2⌋ · 2 + (k + 1) mod 2` (`k − 1` times `d` for odd `k`, `k − 1` for even `k`
/// at `d = 1`).
pub fn causal_padding(k: usize, d: usize) -> usize {
    (k * d).saturating_sub(d) / 2 * 2 + (k + 1) % 2
}

/// A 1-D convolution with bias whose geometry (padding, dilation, stride, upsampling) the caller
/// gives per call through [`ConvGeom`].
#[derive(Debug)]
pub struct DirectConv1d<T: ConvElem + Pod> {
    w: DeviceBuffer,
    b: DeviceBuffer,
    c_in: usize,
    c_out: usize,
    k: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: ConvElem + Pod> DirectConv1d<T> {
    /// The weight `[c_out, c_in, k]` and bias `[c_out]` (host values, already checked against
    /// these shapes by the caller) uploaded to `be`.
    pub fn from_host(
        be: &dyn Backend,
        w: &[T],
        b: &[T],
        c_out: usize,
        c_in: usize,
        k: usize,
    ) -> Result<Self, LoadError> {
        if w.len() != c_out * c_in * k || b.len() != c_out || k == 0 {
            return Err(LoadError::Device(dcc_runtime::Error::Invalid(format!(
                "DirectConv1d: weight of {} and bias of {} values for [{c_out}, {c_in}, {k}]",
                w.len(),
                b.len()
            ))));
        }
        Ok(DirectConv1d {
            w: be.alloc_from(w, AllocKind::Other)?,
            b: be.alloc_from(b, AllocKind::Other)?,
            c_in,
            c_out,
            k,
            _t: std::marker::PhantomData,
        })
    }

    pub fn c_in(&self) -> usize {
        self.c_in
    }

    pub fn c_out(&self) -> usize {
        self.c_out
    }

    pub fn kernel(&self) -> usize {
        self.k
    }

    /// `y = conv(x) (+ res)` (see [`ops::conv1d`]).
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        y: Tensor<'_, T>,
        x: Tensor<'_, T>,
        res: Residual<'_, T>,
        g: ConvGeom,
    ) -> Result<(), OpError> {
        let w = Tensor::<T>::of(&self.w)?.view(&[self.c_out, self.c_in, self.k])?;
        let b = Tensor::<T>::of(&self.b)?.view(&[self.c_out])?;
        ops::conv1d(cx, y, x, w, b, res, g)
    }

    /// The operands of `y = conv(x) (+ res)` for a grouped launch ([`ops::conv1d_group`]).
    pub fn conv<'a>(
        &'a self,
        y: Tensor<'a, T>,
        x: Tensor<'a, T>,
        res: Residual<'a, T>,
        geom: ConvGeom,
    ) -> Result<Conv<'a, T>, OpError> {
        Ok(Conv {
            y,
            x,
            w: Tensor::<T>::of(&self.w)?.view(&[self.c_out, self.c_in, self.k])?,
            bias: Tensor::<T>::of(&self.b)?.view(&[self.c_out])?,
            res,
            geom,
        })
    }

    /// The geometry of [`DirectConv1d::causal_left`] at dilation `dil`.
    pub fn causal_left_geom(&self, dil: usize) -> ConvGeom {
        ConvGeom {
            dil,
            pad: causal_padding(self.k, dil),
            ..ConvGeom::PLAIN
        }
    }

    /// The vendor's left-causal convolution (`CausalConv1d(causal_type="left")`, zero history):
    /// `causal_padding(k, dil)` zero frames before `x`, output frames = input frames.
    pub fn causal_left(
        &self,
        cx: &Ctx<'_>,
        y: Tensor<'_, T>,
        x: Tensor<'_, T>,
        res: Residual<'_, T>,
        dil: usize,
    ) -> Result<(), OpError> {
        self.forward(cx, y, x, res, self.causal_left_geom(dil))
    }
}

/// Snake with one `alpha` per channel (`alpha_logscale=False`).
#[derive(Debug)]
pub struct Snake {
    alpha: DeviceBuffer,
    c: usize,
}

impl Snake {
    pub fn from_host(be: &dyn Backend, alpha: &[f32]) -> Result<Self, LoadError> {
        Ok(Snake {
            alpha: be.alloc_from(alpha, AllocKind::Other)?,
            c: alpha.len(),
        })
    }

    /// `y = snake(x)`; `y` may be `x` itself (in place).
    pub fn forward(&self, cx: &Ctx<'_>, y: Tensor<'_>, x: Tensor<'_>) -> Result<(), OpError> {
        let a = Tensor::<f32>::of(&self.alpha)?.view(&[self.c])?;
        ops::snake(cx, y, x, a)
    }
}

/// The causal HiFi-GAN residual block with Snake activations: for each dilation `d`,
/// `x = conv2(snake2(conv1_d(snake1(x)))) + x`, both convolutions left-causal.
#[derive(Debug)]
pub struct ResBlock {
    pub convs1: Vec<DirectConv1d<f32>>,
    pub convs2: Vec<DirectConv1d<f32>>,
    pub acts1: Vec<Snake>,
    pub acts2: Vec<Snake>,
    pub dilations: Vec<usize>,
}

impl ResBlock {
    /// `y = block(x)` over `[c, t]` views; `s1`, `s2` are `[c, t]` scratch. `y` must not overlap
    /// `x` or the scratch.
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        y: Tensor<'_>,
        x: Tensor<'_>,
        s1: Tensor<'_>,
        s2: Tensor<'_>,
    ) -> Result<(), OpError> {
        for (i, &d) in self.dilations.iter().enumerate() {
            let cur = if i == 0 { x } else { y };
            self.acts1[i].forward(cx, s1, cur)?;
            self.convs1[i].causal_left(cx, s2, s1, Residual::None, d)?;
            self.acts2[i].forward(cx, s2, s2)?;
            let res = if i == 0 {
                Residual::Add(x)
            } else {
                Residual::InPlace
            };
            self.convs2[i].causal_left(cx, y, s2, res, 1)?;
        }
        Ok(())
    }
}

/// One [`ResBlock`] of a group run in lock-step ([`ResBlock::forward_group`]): its output and
/// its two `[c, t]` scratch views.
#[derive(Copy, Clone, Debug)]
pub struct ResBlockRun<'a> {
    pub block: &'a ResBlock,
    pub y: Tensor<'a>,
    pub s1: Tensor<'a>,
    pub s2: Tensor<'a>,
}

impl ResBlock {
    /// `run.y = run.block(x)` for every run, the blocks in lock-step: per dilation, every
    /// block's first Snake, one grouped launch of their first convolutions, every second Snake,
    /// one grouped launch of their second convolutions ([`ops::conv1d_group`]). Each output
    /// gets the bits [`ResBlock::forward`] gives it (the same launches per value, only queued
    /// side by side). The blocks must have as many dilations, and no view of one run may
    /// overlap `x` or another run's views.
    pub fn forward_group(
        cx: &Ctx<'_>,
        runs: &[ResBlockRun<'_>],
        x: Tensor<'_>,
    ) -> Result<(), OpError> {
        let Some(first) = runs.first() else {
            return Ok(());
        };
        let n = first.block.dilations.len();
        if let Some(r) = runs.iter().find(|r| r.block.dilations.len() != n) {
            return Err(OpError::Arg {
                op: "resblock group",
                arg: "dilations",
                detail: format!(
                    "{} dilations in one block, {n} in another",
                    r.block.dilations.len()
                ),
            });
        }
        for i in 0..n {
            for r in runs {
                let cur = if i == 0 { x } else { r.y };
                r.block.acts1[i].forward(cx, r.s1, cur)?;
            }
            let convs = runs
                .iter()
                .map(|r| {
                    let c = &r.block.convs1[i];
                    c.conv(
                        r.s2,
                        r.s1,
                        Residual::None,
                        c.causal_left_geom(r.block.dilations[i]),
                    )
                })
                .collect::<Result<Vec<_>, _>>()?;
            ops::conv1d_group(cx, &convs)?;
            for r in runs {
                r.block.acts2[i].forward(cx, r.s2, r.s2)?;
            }
            let convs = runs
                .iter()
                .map(|r| {
                    let res = if i == 0 {
                        Residual::Add(x)
                    } else {
                        Residual::InPlace
                    };
                    let c = &r.block.convs2[i];
                    c.conv(r.y, r.s2, res, c.causal_left_geom(1))
                })
                .collect::<Result<Vec<_>, _>>()?;
            ops::conv1d_group(cx, &convs)?;
        }
        Ok(())
    }
}
