"""CUDA autocast's fp16 casts, reproduced on the CPU.

The vendor's fp16 mode runs the flow under `torch.amp.autocast('cuda', dtype=float16)` with half
weights. CPU autocast fp16 casts the same ops DOWN to f16 (linear, conv1d, matmul,
scaled_dot_product_attention: its lower-precision list covers them), but it has no counterpart
of CUDA's fp32 list: on CUDA `layer_norm`, `softmax`, `linalg_vector_norm` (F.normalize) and
the other ops of that list cast f16 inputs UP to f32 and return f32, so a LayerNorm's output,
the modulate after it, the conv block's Mish, the encoder's attention softmax and the residual
adds that meet an f32 tensor all stay f32 on CUDA, where CPU autocast keeps them f16.
`scripts/half_trace.py` shows the difference op by op (fake CUDA tensors, no GPU needed).

`CudaFp32Casts` closes it: a dispatch mode, active inside a CPU autocast region, that runs the
ops of CUDA autocast's fp32 list in f32 (f16 floating inputs cast up, as CUDA's `cached_cast`
does; reductions with an optional dtype get f32). Everything else is left to CPU autocast and
ordinary type promotion. `half_trace.py --mode emulated` checks that the result casts exactly as
fake-CUDA autocast does for every op of the flow.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# CUDA autocast's fp32 policy (PyTorch's autocast op reference, "CUDA Ops that can autocast to
# float32"), as aten overload packets; the dispatch mode sees them before decomposition.
CUDA_FP32 = {
    'acos', 'asin', 'cosh', 'erfinv', 'exp', 'expm1', 'log', 'log10', 'log2', 'log1p',
    'reciprocal', 'rsqrt', 'sinh', 'tan', 'pow', 'softplus', 'layer_norm', 'native_layer_norm',
    'group_norm', 'frobenius_norm', 'nuclear_norm', 'cosine_similarity', 'poisson_nll_loss',
    'cosine_embedding_loss', 'nll_loss', 'nll_loss2d', 'hinge_embedding_loss', 'kl_div',
    'l1_loss', 'smooth_l1_loss', 'huber_loss', 'mse_loss', 'margin_ranking_loss',
    'multilabel_margin_loss', 'soft_margin_loss', 'triplet_margin_loss', 'multi_margin_loss',
    'binary_cross_entropy_with_logits', 'dist', 'pdist', 'cdist', 'renorm', 'logsumexp',
    # fp32_set_opt_dtype / fp32_append_dtype: reductions whose output dtype autocast sets to f32
    'softmax', 'log_softmax', 'cumprod', 'cumsum', 'prod', 'sum', 'norm', 'linalg_vector_norm',
}


def _up(x):
    if isinstance(x, torch.Tensor) and x.dtype == torch.float16:
        return x.float()
    if isinstance(x, (list, tuple)):
        return type(x)(_up(y) for y in x)
    return x


class CudaFp32Casts(TorchDispatchMode):
    """Runs CUDA autocast's fp32-list ops in f32 (see the module doc)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ in CUDA_FP32:
            args, kwargs = _up(args), {k: _up(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)
