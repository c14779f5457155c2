#!/usr/bin/env python3
"""Where the vendor's fp16 mode rounds to f16: a per-op dtype trace of one streaming flow chunk.

The vendor's speed option (`Token2wav(float16=True)`, minicpmo-utils 1.0.7 `token2wav.py`) calls
`self.flow.half()` and runs every flow call under `torch.amp.autocast('cuda', dtype=float16)`.
This script builds the tiny flow as the stock peer builds it (`--peer`: `token2wav_stock.py`, its
`build` and chunk constants), halves it, primes it with `setup_cache` and runs one
`inference_chunk` (encoder + estimator + Euler solver, the calls the peer makes), twice:

- `cpu`: real tensors under CPU autocast fp16 (`--mode autocast`), or under CPU autocast plus
  `half_casts.CudaFp32Casts` (`--mode emulated`: how the tiny fp16 golden was made);
- `cuda`: fake CUDA tensors (`FakeTensorMode`, no GPU needed, no values) under CUDA autocast
  fp16, switched on directly (`torch.set_autocast_enabled('cuda', True)`), so that the dtypes are
  the ones CUDA autocast's own op lists give (the device the vendor runs on).

A `TorchDispatchMode` sees every aten op after autocast has cast its inputs; forward hooks keep
the module path. Each (module path with layer indices collapsed, op, input dtypes, output dtype)
is printed once, in first-seen order, with the modes that produced it, so a row only one mode
shows is a place CPU and CUDA autocast cast differently.

    half_trace.py --peer PEER --vendor DIR [--mode autocast|emulated] [--steps N] [--out FILE.md]
"""

import argparse
import contextlib
import importlib.util
import re
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dcc_vendor import import_vendor, stub_absent_module  # noqa: E402
from half_casts import CudaFp32Casts  # noqa: E402

SHORT = {torch.float16: 'f16', torch.float32: 'f32', torch.float64: 'f64', torch.bool: 'b',
         torch.int32: 'i32', torch.int64: 'i64', torch.bfloat16: 'bf16'}
# Ops that only move, view or allocate: they never round, so the table leaves them out.
QUIET = re.compile(r'^(aten\.)?(view|_unsafe_view|t|transpose|permute|expand|slice|select|split|'
                   r'split_with_sizes|unsqueeze|squeeze|clone|detach|alias|reshape|'
                   r'_reshape_alias|as_strided|empty|zeros|ones|new_zeros|new_empty|'
                   r'lift_fresh|unbind|chunk|contiguous|copy_|fill_|zero_|'
                   r'empty_strided|full|scalar_tensor|arange|_to_copy_noop)\.')


def load_peer(path):
    path = Path(path).resolve()
    spec = importlib.util.spec_from_file_location('token2wav_stock_peer', path)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    return peer


class Trace(TorchDispatchMode):
    def __init__(self, stack, rows, mode):
        super().__init__()
        self.stack, self.rows, self.mode = stack, rows, mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket.__name__)
        op = f'{name}.{func._overloadname}'
        if not QUIET.match(name + '.') or name == 'copy_':
            ins = [SHORT.get(a.dtype, str(a.dtype)) for a in _tensors(args, kwargs)]
            outs = [SHORT.get(o.dtype, str(o.dtype)) for o in _tensors((out,), None)]
            where = re.sub(r'\.\d+(?=\.|$)', '.*', self.stack[-1] if self.stack else '(flow)')
            key = (where, op, ' '.join(ins), ' '.join(outs))
            self.rows.setdefault(key, set()).add(self.mode)
        return out


def _tensors(args, kwargs):
    found = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
    walk(list(args))
    if kwargs:
        walk(list(kwargs.values()))
    return found


def hook_paths(model, stack):
    def enter(label):
        stack.append(label)

    def leave():
        stack.pop()  # a forward hook that returns a value would replace the output

    for name, module in model.named_modules():
        label = name or '(flow)'
        module.register_forward_pre_hook(lambda m, a, label=label: enter(label))
        module.register_forward_hook(lambda m, a, o: leave())


def run_chunk(peer, flow, dev, steps, mode, rows):
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 6561, (1, peer.P_TOK), generator=g).to(torch.int32)
    stream = torch.randint(0, 6561, (1, peer.CHUNK + peer.LOOK), generator=g).to(torch.int32)
    mel = (torch.randn(1, peer.P_TOK * 2, 80, generator=g) * 0.5).half()
    spk = torch.randn(1, 192, generator=g).half()
    prompt, stream, mel, spk = (t.to(dev) for t in (prompt, stream, mel, spk))
    cache = flow.setup_cache(torch.cat([prompt, prompt[:, :peer.LOOK]], 1), mel, spk,
                             n_timesteps=steps)
    stack = []
    hook_paths(flow, stack)
    with Trace(stack, rows, mode):
        feat, cache = flow.inference_chunk(token=stream, spk=spk, cache=cache, last_chunk=False,
                                           n_timesteps=steps)
    return feat


def to_fake_cuda(model, mode):
    """Replaces every parameter and buffer of `model` by a fake CUDA tensor of its dtype and
    shape (`Module.to('cuda')` would copy the real values to a device this machine lacks)."""
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                fake = mode.from_tensor(p.detach()).to('cuda')
                module._parameters[name] = torch.nn.Parameter(fake, requires_grad=False)
        for name, b in list(module._buffers.items()):
            if b is not None:
                module._buffers[name] = mode.from_tensor(b).to('cuda')
        for name, t in list(vars(module).items()):  # plain tensor attributes (positional tables)
            if isinstance(t, torch.Tensor):
                setattr(module, name, mode.from_tensor(t).to('cuda'))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--peer', required=True, help='the flow peer script (token2wav_stock.py)')
    ap.add_argument('--vendor', required=True, help='folder containing stepaudio2/')
    ap.add_argument('--steps', type=int, default=2, help='Euler steps (every step casts alike)')
    ap.add_argument('--mode', choices=['autocast', 'emulated'], default='autocast',
                    help='the cpu run: plain CPU autocast, or CPU autocast with CUDA autocast\'s '
                         'fp32 casts (half_casts.CudaFp32Casts, as the fp16 golden is made)')
    ap.add_argument('--out', help='write the table here (markdown) as well as to stdout')
    args = ap.parse_args()
    # The encoder's forward_chunk is wrapped in torch.compile(backend="eager"): the same aten ops,
    # run eagerly. Dynamo is switched off so the dispatch mode and the hooks see them one by one.
    torch._dynamo.config.disable = True
    import_vendor(args.vendor)
    stub_absent_module('onnxruntime')
    peer = load_peer(args.peer)
    rows = {}

    flow = peer.build(peer.CONFIGS['tiny']).eval().half()
    emulated = CudaFp32Casts() if args.mode == 'emulated' else contextlib.nullcontext()
    with torch.inference_mode(), torch.autocast('cpu', dtype=torch.float16), emulated:
        feat = run_chunk(peer, flow, torch.device('cpu'), args.steps, 'cpu', rows)
    cpu_dtype = feat.dtype

    from torch._subclasses.fake_tensor import FakeTensorMode
    flow = peer.build(peer.CONFIGS['tiny']).eval().half()
    torch.set_autocast_enabled('cuda', True)
    torch.set_autocast_dtype('cuda', torch.float16)
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with mode, torch.inference_mode():
            to_fake_cuda(flow, mode)
            feat = run_chunk(peer, flow, torch.device('cuda'), args.steps, 'cuda', rows)
            cuda_dtype = feat.dtype
    finally:
        torch.set_autocast_enabled('cuda', False)

    lines = ['| module | op | inputs | output | modes |', '|---|---|---|---|---|']
    for (where, op, ins, outs), modes in rows.items():
        tag = 'both' if modes == {'cpu', 'cuda'} else f'**{"".join(sorted(modes))} only**'
        lines.append(f'| {where} | {op} | {ins} | {outs} | {tag} |')
    lines.append('')
    lines.append(f'output mel: cpu {SHORT[cpu_dtype]}, cuda {SHORT[cuda_dtype]}; '
                 f'torch {torch.__version__}, {args.steps} Euler steps')
    text = '\n'.join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + '\n')


if __name__ == '__main__':
    main()
