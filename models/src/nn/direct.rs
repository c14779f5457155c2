//! Direct (im2col-free) convolution layers over channel-major `[c, t]` activations, and the
//! layers built from them: [`DirectConv1d`] (any padding side, dilation, stride, nearest
//! upsampling; float or double), [`Snake`] and the HiFi-GAN / BigVGAN [`ResBlock`].
//!
//! Each holds its weights in device buffers (in torch's `[out, in, k]` layout, as a vendor
//! state_dict stores them) and queues its forward pass over views the caller provides.

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer, Pod};
use dcc_runtime::ops::{ConvElem, ConvGeom, Residual};

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
        let g = ConvGeom {
            dil,
            pad: causal_padding(self.k, dil),
            ..ConvGeom::PLAIN
        };
        self.forward(cx, y, x, res, g)
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
