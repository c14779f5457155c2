#!/usr/bin/env python3
"""The vendor's fp16 mode beside its fp32 mode, from the same seeded inputs, and its export.

    half_peer.py --peer PEER --vendor DIR [--config tiny|full] [--device cpu|cuda] [--chunks N]
                 [--steps N] [--retention paper|vendor] [--casts cuda|cpu] [--export DIR]

Runs the stock flow peer's stream (PEER: `token2wav_stock.py`, imported by path: its `build`,
`trim`, configs and chunk constants; inputs drawn as it draws them, generator seeded 1) twice:

- fp32: as the peer's `--dtype fp32` (TF32 off);
- fp16: as the peer's `--dtype fp16`, the vendor's `Token2wav(float16=True)`: `flow.half()`, the
  prompt mel and speaker embedding halved, every flow call under
  `torch.amp.autocast(device, dtype=float16)`. On the CPU, `--casts cuda` (the default) adds
  `half_casts.CudaFp32Casts`, so the CPU run casts as CUDA autocast does (CPU autocast alone
  keeps LayerNorm, softmax and F.normalize in f16: `--casts cpu`; see `half_trace.py`).

and prints one JSON line: per chunk the fp16 mel's relative L2 to the fp32 mel (`rel_l2`, summed
in float64, the metric `dcc-bench check` reports), their maximum, the mel hashes, the casts.

--export DIR writes, in the layout of the fp32 export (`token2wav_stock.py --export`):
  weights_half.safetensors  the halved flow's state_dict as float32 (the f16 values, so rounding
                            them to f16 again is exact) + `decoder.rand_noise` (first 2000
                            frames, f16 values); checked equal to weights.safetensors' values
                            rounded to f16 (`flow.half()` is a plain round to nearest)
  io_half.safetensors       prompt_tokens, stream_tokens, prompt_mel and spk (the f16-rounded
                            values the fp16 run read, as float32), feat_<i> [1, 80, 50] (the
                            fp16 run's mel, float32), att_extent_<i>, rel_l2_fp32 [chunks]
                            (float64: the fp16 mel's distance to the fp32 mel per chunk);
                            metadata: the JSON line
(`io_vendor_retention_half.safetensors` with --retention vendor.)
"""

import argparse
import contextlib
import hashlib
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dcc_vendor import import_vendor, metadata, save_safetensors, stub_absent_module  # noqa: E402
from half_casts import CudaFp32Casts  # noqa: E402


def load_peer(path):
    import importlib.util
    path = Path(path).resolve()
    spec = importlib.util.spec_from_file_location('token2wav_stock_peer', path)
    if spec is None or not path.is_file():
        raise SystemExit(f'--peer {path}: not a Python file')
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    for name in ('build', 'trim', 'CONFIGS', 'P_TOK', 'CHUNK', 'LOOK'):
        if not hasattr(peer, name):
            raise SystemExit(f'--peer {path}: has no {name}')
    return peer


def peer_inputs(peer, chunks):
    """The flow peer's inputs, drawn in its order from its generator (seed 1)."""
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 6561, (1, peer.P_TOK), generator=g).to(torch.int32)
    stream = torch.randint(0, 6561, (1, chunks * peer.CHUNK + peer.LOOK),
                           generator=g).to(torch.int32)
    mel = torch.randn(1, peer.P_TOK * 2, 80, generator=g) * 0.5
    spk = torch.randn(1, 192, generator=g)
    return prompt, stream, mel, spk


def stream(peer, flow, inputs, args, dev, half):
    """The peer's stream: the flow cache from the prompt, then `chunks` chunks with retention.
    Returns (per-chunk mel as float32 on the host, per-chunk estimator extents)."""
    prompt, tokens, mel, spk = (t.to(dev) for t in inputs)
    if half:
        mel, spk = mel.half(), spk.half()
    amp = torch.amp.autocast(dev.type, dtype=torch.float16, enabled=half)
    casts = (CudaFp32Casts() if half and dev.type == 'cpu' and args.casts == 'cuda'
             else contextlib.nullcontext())
    feats, extents = [], []
    with torch.inference_mode(), amp, casts:
        cache = flow.setup_cache(torch.cat([prompt, prompt[:, :peer.LOOK]], 1), mel, spk,
                                 n_timesteps=args.steps)
        for i in range(args.chunks):
            toks = tokens[:, i * peer.CHUNK: i * peer.CHUNK + peer.CHUNK + peer.LOOK]
            feat, cache = flow.inference_chunk(token=toks, spk=spk, cache=cache,
                                               last_chunk=False, n_timesteps=args.steps)
            peer.trim(flow, cache, peer.P_TOK * 2, args.retention)
            feats.append(feat.float().cpu().contiguous())
            extents.append(int(cache['estimator_att_cache'].shape[4]))
    return feats, extents


def rel_l2(got, want):
    got, want = got.double().flatten(), want.double().flatten()
    return float(((got - want) ** 2).sum().sqrt() / (want ** 2).sum().sqrt())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--peer', required=True, help='the flow peer script (token2wav_stock.py)')
    ap.add_argument('--vendor', required=True, help='folder containing stepaudio2/')
    ap.add_argument('--config', choices=['tiny', 'full'], default='tiny')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--chunks', type=int, default=6)
    ap.add_argument('--steps', type=int, default=10)
    ap.add_argument('--retention', choices=['paper', 'vendor'], default='paper')
    ap.add_argument('--casts', choices=['cuda', 'cpu'], default='cuda',
                    help="on the CPU: CUDA autocast's casts (default) or CPU autocast's")
    ap.add_argument('--export', default=None)
    args = ap.parse_args()
    if args.chunks < 1 or args.steps < 1:
        raise SystemExit('--chunks and --steps must be positive')

    import_vendor(args.vendor)
    stub_absent_module('onnxruntime')
    peer = load_peer(args.peer)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    inputs = peer_inputs(peer, args.chunks)

    flow32 = peer.build(peer.CONFIGS[args.config]).to(dev).eval()
    feats32, _ = stream(peer, flow32, inputs, args, dev, half=False)
    flow16 = peer.build(peer.CONFIGS[args.config]).to(dev).eval().half()
    feats16, extents = stream(peer, flow16, inputs, args, dev, half=True)

    dists = [rel_l2(a, b) for a, b in zip(feats16, feats32)]
    h32, h16 = hashlib.sha256(), hashlib.sha256()
    for a, b in zip(feats32, feats16):
        h32.update(a.numpy().tobytes())
        h16.update(b.numpy().tobytes())
    casts = args.casts if dev.type == 'cpu' else 'cuda (device)'
    result = dict(peer='stepaudio2 flow, fp16 mode (flow.half() + autocast) vs fp32, torch eager',
                  config=args.config, retention=args.retention, torch=torch.__version__,
                  device=torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu',
                  casts=casts, chunks=args.chunks, steps=args.steps,
                  rel_l2=[float(f'{d:.4e}') for d in dists], rel_l2_max=float(f'{max(dists):.4e}'),
                  mel_sha256_fp32=h32.hexdigest()[:16], mel_sha256_fp16=h16.hexdigest()[:16],
                  finite=bool(all(torch.isfinite(f).all() for f in feats16)))

    if not result['finite'] or not all(math.isfinite(d) for d in dists):
        print(json.dumps(result))
        raise SystemExit('the fp16 mel or its distance to fp32 is not finite: nothing exported')

    if args.export:
        out = Path(args.export)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().float().cpu().contiguous() for k, v in flow16.state_dict().items()}
        state['decoder.rand_noise'] = \
            flow16.decoder.rand_noise[:, :, :2000].float().cpu().contiguous()
        ref = {k: v.detach().cpu() for k, v in flow32.state_dict().items()}
        ref['decoder.rand_noise'] = flow32.decoder.rand_noise[:, :, :2000].cpu()
        for name, t in state.items():
            if not torch.equal(t, ref[name].half().float()):
                raise SystemExit(f'{name}: the halved flow is not the fp32 flow rounded to f16')
        save_safetensors(out / 'weights_half.safetensors', state, None)
        prompt, tokens, mel, spk = inputs
        io = dict(prompt_tokens=prompt, stream_tokens=tokens, prompt_mel=mel.half().float(),
                  spk=spk.half().float(), rel_l2_fp32=torch.tensor(dists, dtype=torch.float64))
        for i, (f, e) in enumerate(zip(feats16, extents)):
            io[f'feat_{i}'] = f
            io[f'att_extent_{i}'] = torch.tensor([e], dtype=torch.int32)
        name = 'io_half.safetensors' if args.retention == 'paper' \
            else 'io_vendor_retention_half.safetensors'
        save_safetensors(out / name, io, metadata(**result))
    print(json.dumps(result))


if __name__ == '__main__':
    main()
