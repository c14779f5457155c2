#!/usr/bin/env python3
"""The vendor's end-to-end streaming line, stock eager PyTorch: the flow, then the causal vocoder.

Per chunk it does what the vendor's `Token2wav.stream(tokens, return_waveform=True)` does
(minicpmo-utils 1.0.7, `stepaudio2/token2wav.py`): `flow.inference_chunk` on 25 tokens plus 3
lookahead, the cache retention, then `Token2wav._stream_vocode` on the chunk's mel (50 frames,
`BoundedVocoder.stream` in blocks of 16; the first chunk that emits audio is prefixed with
`source_cache_len` = 8 x 480 zero samples) and the PCM's copy to the host. After the last chunk
an empty `last_chunk=True` call flushes the vocoder's last 8 frames (token2wav.py:271-273).

    e2e_peer.py --peer PEER --vendor DIR [--config tiny|full] [--device cuda|cpu]
                [--chunks N] [--steps N] [--warmup N] [--prewarm N] [--export DIR]

- The flow is the stock peer's (PEER: the flow peer script, token2wav_stock.py, imported by path:
  its `build`, `trim`, `CONFIGS` and chunk constants); its inputs are drawn as that script draws
  them (generator seeded 1: prompt tokens, stream tokens, prompt mel, speaker embedding), so the
  mel of every chunk, and `mel_sha256`, equal the peer's for the same config, chunks, steps and
  device.
- The vocoder is scripts/vocoder_golden.py's for the same config (`random_vocoder`, seed 0:
  vendor construction with the global generator seeded 0, whose noise table the stream reads,
  then every parameter drawn anew from seed 1); `Token2wav`'s vocoder set-up and
  `_stream_vocode` are compiled from the vendor's token2wav.py (dcc_vendor.token2wav_vocoder).
- TF32 is off (cuBLAS and cuDNN), as in both scripts: exact fp32.
- DIR for --vendor contains `stepaudio2/` with `cosyvoice2/` and `causal_vocoder/` (and
  token2wav.py). Needs torch, numpy, scipy, einops; onnxruntime, which the vendor's
  flow_matching.py imports but never uses, is stubbed when absent.

Timing (synchronised around each part): `flow` = `inference_chunk` + retention, `vocoder` =
`_stream_vocode`, `e2e` = both plus the PCM's copy to the host; p50/p95 over the chunks from
--warmup on (the peer's convention). `ttfa_ms`: from the start of the stream's first chunk call
to the first non-empty PCM on the host. Before the measured stream, --prewarm chunks of a whole
throw-away utterance (fresh flow cache and vocoder reset, as `set_stream_cache` makes them) run,
so the first measured chunk and so `ttfa_ms` are warm, as in a server that has spoken before; the
measured stream's bits do not depend on it. On CUDA also: peak allocated MiB, and the device-busy
ms and kernel launches of one steady-state chunk (torch profiler, as the flow peer measures it),
for the flow and the vocoder separately, taken on a copy of the vocoder state after the measured
chunks so the measured stream is not disturbed.

Prints one JSON line: the p50/p95 of flow, vocoder and e2e, `ttfa_ms`, `pcm_sha256` (first 16
hex digits of the SHA-256 over the float32 little-endian bytes of the whole stream, chunk by
chunk, flush included), `mel_sha256` (the flow peer's hash of the chunk mels), `noise_sha256`
(SHA-256 of the exported noise-table rows, as the Rust loader reports it), device and counts.

--export DIR writes:
  weights.safetensors  the flow's state_dict (float32) + `decoder.rand_noise` (first 2000 frames),
                       the tensors the flow peer's --export writes
  io.safetensors       the flow peer's io tensors: prompt_tokens, stream_tokens, prompt_mel, spk,
                       feat_<i> [1, 80, 50], att_extent_<i>; metadata: the JSON line
  vocoder.safetensors  the vocoder in the layout models/src/vocoder loads (vendor names, weight
                       norm folded, F0 predictor float64, `config` metadata), with `noise_table`
                       [1, rows, 9]: the first rows of the table the vendor stream read. The stream
                       reads rows [0, chunks x 50 x 480); --noise-rows (default: full all
                       7,200,000 rows, 259 MB; tiny the rows read plus one frame)
  pcm.safetensors      `pcm_<i>` [1, n_i] f32, the PCM `_stream_vocode` returned for chunk i, and
                       `pcm_flush`; metadata: the JSON line and the per-chunk times and counts
"""

import argparse
import hashlib
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vocoder_golden  # noqa: E402
from dcc_vendor import (NOISE_TABLE_PERIOD, import_vendor, metadata, save_safetensors,  # noqa: E402
                        sha256_f32, stub_absent_module, token2wav_reset,
                        token2wav_vocoder)

HOP = vocoder_golden.HOP
PEER_NAMES = ('build', 'trim', 'CONFIGS', 'P_TOK', 'CHUNK', 'LOOK', 'RETAIN')


def load_peer(path):
    """The flow peer script as a module (its `main` does not run)."""
    path = Path(path).resolve()
    spec = importlib.util.spec_from_file_location('token2wav_stock_peer', path)
    if spec is None or not path.is_file():
        raise SystemExit(f'--peer {path}: not a Python file')
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    missing = [n for n in PEER_NAMES if not hasattr(peer, n)]
    if missing:
        raise SystemExit(f'--peer {path}: has no {", ".join(missing)}')
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


def percentiles(times):
    """p50 and p95 as the flow peer computes them (median; the sorted list's 0.95 (n-1)-th)."""
    if not times:
        return None, None
    times = sorted(times)
    return round(statistics.median(times), 2), round(times[int(0.95 * (len(times) - 1))], 2)


class Line:
    """The flow, the vocoder and the vendor's per-chunk code around them."""

    def __init__(self, peer, flow, vocoder, stream_vocode, retention, steps, sync):
        self.peer, self.flow, self.vocoder = peer, flow, vocoder
        self.stream_vocode, self.retention, self.steps, self.sync = \
            stream_vocode, retention, steps, sync

    def start(self, prompt, mel, spk):
        """`Token2wav.set_stream_cache`: the flow cache from the prompt, the vocoder reset."""
        look = self.peer.LOOK
        self.spk = spk
        self.cache = self.flow.setup_cache(torch.cat([prompt, prompt[:, :look]], 1), mel, spk,
                                           n_timesteps=self.steps)
        token2wav_reset(self.vocoder)

    def flow_chunk(self, tokens):
        feat, self.cache = self.flow.inference_chunk(token=tokens, spk=self.spk, cache=self.cache,
                                                     last_chunk=False, n_timesteps=self.steps)
        self.peer.trim(self.flow, self.cache, self.peer.P_TOK * 2, self.retention)
        return feat

    def vocode(self, feat, last_chunk):
        return self.stream_vocode(self.vocoder, feat, last_chunk)

    def flush(self):
        """The empty final call: the vocoder's last frames, no flow step."""
        return self.vocode(self.vocoder.hift_cache_dict['mel'][:, :, :0], True)

    def profile_steady_chunk(self, tokens):
        """Device-busy ms and kernel launches of one more chunk (the flow peer profiles the
        first tokens again), flow and vocoder apart. The vocoder runs on a copy of its state,
        so the stream goes on as if this chunk had not run; the flow's cache is not used again
        (the flush has no flow step)."""
        saved = {k: v.clone() for k, v in self.vocoder.hift_cache_dict.items()}
        held, out = {}, {}
        out['flow_busy_ms'], out['flow_launches'] = busy(
            lambda: held.update(feat=self.flow_chunk(tokens)), self.sync)
        out['vocoder_busy_ms'], out['vocoder_launches'] = busy(
            lambda: self.vocode(held['feat'], False), self.sync)
        self.vocoder.hift_cache_dict = saved
        return out

    def timed_chunk(self, tokens):
        """One chunk as `Token2wav.stream` runs it; returns (feat, pcm on the host, flow ms,
        vocoder ms, e2e ms, end time)."""
        self.sync()
        t0 = time.perf_counter()
        feat = self.flow_chunk(tokens)
        self.sync()
        t1 = time.perf_counter()
        speech = self.vocode(feat, False)
        self.sync()
        t2 = time.perf_counter()
        pcm = speech.cpu()  # Token2wav.stream returns speech.cpu().numpy()
        t3 = time.perf_counter()
        return feat, pcm, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t0) * 1e3, t0, t3


def busy(fn, sync):
    """Device-busy ms and kernel count of `fn()` (every CUDA event the profiler sees, copies
    included, as the flow peer counts them)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return round(sum(e.device_time for e in kernels) / 1e3, 2), len(kernels)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--peer', required=True, help='the flow peer script (token2wav_stock.py)')
    ap.add_argument('--vendor', required=True, help='folder containing stepaudio2/')
    ap.add_argument('--config', choices=['tiny', 'full'], default='full')
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--chunks', type=int, default=24)
    ap.add_argument('--steps', type=int, default=10)
    ap.add_argument('--warmup', type=int, default=4,
                    help='chunks of the measured stream left out of p50/p95 (none left: no '
                         'p50/p95 fields, as in the flow peer)')
    ap.add_argument('--prewarm', type=int, default=2,
                    help='chunks of a throw-away utterance run before the measured stream')
    ap.add_argument('--retention', choices=['paper', 'vendor'], default='paper',
                    help="the flow peer's --retention")
    ap.add_argument('--vocoder-seed', type=int, default=0,
                    help="vocoder_golden.py's --seed (its golden data: 0)")
    ap.add_argument('--noise-rows', type=int,
                    help='noise-table rows to export (default: full all; tiny the rows read + 480)')
    ap.add_argument('--export', default=None)
    args = ap.parse_args()
    if args.chunks < 1 or args.steps < 1 or args.warmup < 0 or args.prewarm < 0:
        raise SystemExit('--chunks and --steps must be positive, --warmup and --prewarm >= 0')

    vendor_pkg = import_vendor(args.vendor)
    stub_absent_module('onnxruntime')
    peer = load_peer(args.peer)
    if args.config not in peer.CONFIGS:
        raise SystemExit(f'the peer has no config {args.config}: {sorted(peer.CONFIGS)}')
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    cuda = dev.type == 'cuda'
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    flow = peer.build(peer.CONFIGS[args.config]).to(dev).eval()
    inputs = peer_inputs(peer, args.chunks)
    io = dict(zip(('prompt_tokens', 'stream_tokens', 'prompt_mel', 'spk'), inputs))
    prompt, stream, mel, spk = (t.to(dev) for t in inputs)
    model, table = vocoder_golden.random_vocoder(args.vendor, args.config, args.vocoder_seed, dev)
    vocoder, stream_vocode = token2wav_vocoder(vendor_pkg, model)
    line = Line(peer, flow, vocoder, stream_vocode, args.retention, args.steps, sync)
    chunk, look = peer.CHUNK, peer.LOOK

    def tokens(i):
        return stream[:, i * chunk: i * chunk + chunk + look]

    with torch.inference_mode():
        if args.prewarm:
            line.start(prompt, mel, spk)
            for i in range(args.prewarm):
                line.timed_chunk(tokens(i % args.chunks))
            line.flush()
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        line.start(prompt, mel, spk)
        mel_hash, pcm, feats = hashlib.sha256(), [], []
        flow_ms, voc_ms, e2e_ms = [], [], []
        t_first, ttfa, first_audio = None, None, None
        for i in range(args.chunks):
            feat, out, f, v, e, t0, t_end = line.timed_chunk(tokens(i))
            if t_first is None:
                t_first = t0
            if ttfa is None and out.shape[-1]:
                ttfa, first_audio = (t_end - t_first) * 1e3, i
            flow_ms.append(f)
            voc_ms.append(v)
            e2e_ms.append(e)
            mel_hash.update(feat.float().cpu().numpy().tobytes())
            feats.append(feat)
            pcm.append(out.float().contiguous())
            io[f'feat_{i}'] = feat.float().cpu().contiguous()
            io[f'att_extent_{i}'] = torch.tensor([line.cache['estimator_att_cache'].shape[4]],
                                                 dtype=torch.int32)
        profiled = {}
        if cuda:
            peak = torch.cuda.max_memory_allocated() / 2**20
            profiled = line.profile_steady_chunk(tokens(0))
        sync()
        t0 = time.perf_counter()
        out = line.flush().cpu()
        flush_ms = (time.perf_counter() - t0) * 1e3
        if ttfa is None and out.shape[-1]:
            ttfa, first_audio = (time.perf_counter() - t_first) * 1e3, 'flush'
        pcm.append(out.float().contiguous())

    frames = args.chunks * chunk * 2  # token_mel_ratio 2
    total = sum(p.shape[-1] for p in pcm)
    expected = frames * HOP + vocoder.source_cache_len
    if total != expected:
        raise SystemExit(f'sample count {total} != frames x 480 + silence prefix = {expected}')
    if any(f.shape[-1] != chunk * 2 for f in feats):
        raise SystemExit(f'a flow chunk gave {[f.shape[-1] for f in feats]} mel frames, not 50')
    rows = args.noise_rows or (NOISE_TABLE_PERIOD if args.config == 'full' else frames * HOP + HOP)
    rows = min(rows, NOISE_TABLE_PERIOD)
    if rows < min(frames * HOP, NOISE_TABLE_PERIOD):
        raise SystemExit(f'--noise-rows {rows} is shorter than the {frames * HOP} rows the '
                         'stream reads')
    noise = table[:, :rows].contiguous()
    steady = slice(args.warmup, None)
    result = dict(peer='stepaudio2 flow + Token2wav._stream_vocode (BoundedVocoder), '
                       'torch eager (stock)',
                  config=args.config, retention=args.retention, torch=torch.__version__,
                  device=torch.cuda.get_device_name(dev) if cuda else 'cpu', chunks=args.chunks,
                  steps=args.steps, warmup=args.warmup, prewarm=args.prewarm)
    for name, times in (('flow', flow_ms), ('vocoder', voc_ms), ('e2e', e2e_ms)):
        p50, p95 = percentiles(times[steady])
        if p50 is not None:
            result.update({f'{name}_p50_ms': p50, f'{name}_p95_ms': p95})
    result.update(ttfa_ms=round(ttfa, 2), first_audio_chunk=first_audio,
                  flush_ms=round(flush_ms, 2),
                  samples=total, pcm_sha256=sha256_f32(pcm)[:16],
                  mel_sha256=mel_hash.hexdigest()[:16], noise_rows=rows,
                  noise_sha256=hashlib.sha256(noise.numpy().astype('<f4').tobytes()).hexdigest(),
                  finite=bool(all(torch.isfinite(f).all() for f in feats)))
    if cuda:
        result.update(peak_mib=round(peak, 1), **profiled)

    if args.export:
        export(Path(args.export), args, flow, model, vocoder, noise, io, pcm, result,
               dict(flow_ms=flow_ms, vocoder_ms=voc_ms, e2e_ms=e2e_ms))
    print(json.dumps(result))


def export(out, args, flow, model, vocoder, noise, io, pcm, result, times):
    out.mkdir(parents=True, exist_ok=True)
    # The flow peer's export: its state_dict in float32 and the CFM noise frames the flow reads
    # (at most prompt + retained frames from the start: 2000 cover them).
    state = {k: v.detach().float().cpu().contiguous() for k, v in flow.state_dict().items()}
    state['decoder.rand_noise'] = flow.decoder.rand_noise[:, :, :2000].float().cpu().contiguous()
    save_safetensors(out / 'weights.safetensors', state, None)
    name = 'io.safetensors' if args.retention == 'paper' else 'io_vendor_retention.safetensors'
    save_safetensors(out / name, io, metadata(**result))
    origin = ('SineGen2.sine_waves as constructed: torch.rand(1, 7200000, 9) from the global '
              f'generator seeded {args.vocoder_seed} just before the F0 predictor and the '
              'generator were built')
    weights, meta = vocoder_golden.vocoder_file(model, vocoder.bounded_vocoder, noise, origin)
    save_safetensors(out / 'vocoder.safetensors', weights, dict(meta, seed=str(args.vocoder_seed)))
    tensors = {f'pcm_{i}': p for i, p in enumerate(pcm[:-1])}
    tensors['pcm_flush'] = pcm[-1]
    samples = [p.shape[-1] for p in pcm]
    save_safetensors(out / 'pcm.safetensors', tensors, metadata(
        **result, line=json.dumps(result), samples_per_call=samples,
        **{k: [round(t, 3) for t in v] for k, v in times.items()}))


if __name__ == '__main__':
    main()
