#!/usr/bin/env python3
"""Golden data for the streaming causal HiFT vocoder, made by the vendor's own code.

Builds the vendor's `CausalHiFTGenerator` (minicpmo-utils 1.0.7, `stepaudio2.causal_vocoder`)
with the tiny or the full configuration, seeded random weights, and streams a seeded log-mel-like
input through the vendor's `BoundedVocoder.stream` exactly as `Token2wav._stream_vocode` does:
the vocoder part of `Token2wav.__init__` and `set_stream_cache` and the whole of `_stream_vocode`
are compiled from the vendor's `token2wav.py` and run as they are (that module itself cannot be
imported without onnxruntime, s3tokenizer and torchaudio).

    vocoder_golden.py --vendor DIR --config {tiny,full} --out DIR
                      [--seconds S] [--device cpu|cuda] [--seed N] [--final {empty,last}]

`DIR` for --vendor contains `stepaudio2/`. Writes to --out:
  vocoder.safetensors         weights (vendor names, weight norm folded), `noise_table`, config
  vocoder_golden.safetensors  input `mel` [1, 80, frames], `pcm.<i>` [1, n_i] f32, `f0`, `phase.<i>`
  vocoder_trace.md            per chunk and per internal step: frames in, samples out, and why

The configuration values are confirmed against the vendor code where it checks them; the comments
in FULL say where each comes from.
"""

import argparse
import json
import math
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dcc_vendor import (NOISE_TABLE_COLUMNS, NOISE_TABLE_PERIOD, import_vendor,  # noqa: E402
                        fold_state_dict, metadata, save_safetensors, sha256_f32,
                        token2wav_vocoder, write_atomic)

# The streaming vocoder of MiniCPM-o 4.5 / Step-Audio2 is CosyVoice3's causal HiFT: the vendor
# loads the `hift` section of the model folder's config.yaml (token2wav.py:62-79,
# `load_causal_vocoder`), which is CosyVoice3's (FunAudioLLM/CosyVoice
# examples/libritts/cosyvoice3/conf/cosyvoice3.yaml, section `hift`). Values the vendor checks
# itself are marked "checked".
FULL = dict(
    in_channels=80,            # yaml `in_channels: 80`; the mel check token2wav.py:66-70 (num_mels=80)
    base_channels=512,         # yaml `base_channels: 512`
    nb_harmonics=8,            # yaml `nb_harmonics: 8`; forced: SineGen2's noise table has 9 columns
                               # (generator.py:224-226) and BoundedVocoder._source adds it to the
                               # nb_harmonics+1 sines (bounded_vocoder.py:110-123)
    sampling_rate=24000,       # yaml `sampling_rate: !ref <sample_rate>` = 24000; checked
                               # token2wav.py:75, bounded_vocoder.py:50
    nsf_alpha=0.1,             # yaml `nsf_alpha: 0.1` (SineGen2.sine_amp)
    nsf_sigma=0.003,           # yaml `nsf_sigma: 0.003` (SineGen2.noise_std)
    nsf_voiced_threshold=10,   # yaml `nsf_voiced_threshold: 10` (Hz; SineGen2.voiced_threshold)
    upsample_rates=[8, 5, 3],  # yaml; checked: prod * hop_len == 480 (token2wav.py:74-76,
                               # bounded_vocoder.py:56-58)
    upsample_kernel_sizes=[16, 11, 7],                  # yaml
    istft_params={'n_fft': 16, 'hop_len': 4},           # yaml `istft_params`; hop_len checked above
    resblock_kernel_sizes=[3, 7, 11],                   # yaml
    resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],         # yaml
    source_resblock_kernel_sizes=[7, 7, 11],            # yaml (the class default is [7, 11])
    source_resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],  # yaml
    lrelu_slope=0.1,           # yaml `lrelu_slope: 0.1`
    audio_limit=0.99,          # yaml `audio_limit: 0.99` (decode's final clamp)
    conv_pre_look_right=4,     # yaml `conv_pre_look_right: 4`; checked: the delay
                               # condnet[0].causal_padding 3 + 4 + 1 == 8 (token2wav.py:123-126)
    f0_num_class=1,            # yaml f0_predictor `num_class: 1`
    f0_in_channels=80,         # yaml f0_predictor `in_channels: 80`
    f0_cond_channels=512,      # yaml f0_predictor `cond_channels: 512`
)
# Tiny: every code path of FULL with small channels. Everything that shapes the streaming
# arithmetic (rates, kernels, dilations, look-right, n_fft, hop) is FULL's, so the history, delay
# and buffer sizes (context_sizes, BoundedVocoder.limits) are the full model's. nb_harmonics cannot
# shrink (see FULL). Channels per stage: 8, 4, 2.
TINY = dict(FULL, base_channels=16, f0_cond_channels=16)
CONFIGS = {'tiny': TINY, 'full': FULL}

HOP = 480          # samples per mel frame (token2wav.py:121 `hop_samples`)
CHUNK_FRAMES = 50  # mel frames per flow chunk: 25 tokens x token_mel_ratio 2 (README, flow)
LOG_MEL_FLOOR = math.log(1e-5)  # the log-mel clamp of the vendor's mel_spectrogram


def build(vendor, cfg, seed):
    """The vendor's modules, constructed as hyperpyyaml constructs the `hift` section: the global
    generator seeded, the f0 predictor (a nested argument) first, then the generator. Every
    module-level draw (init weights, SineGen2's rand_ini and noise table, SourceModuleHnNSF's uv)
    comes from the global generator, in that order."""
    import_vendor(vendor)
    from stepaudio2.causal_vocoder.f0_predictor import CausalConvRNNF0Predictor
    from stepaudio2.causal_vocoder.generator import CausalHiFTGenerator
    torch.manual_seed(seed)
    f0 = CausalConvRNNF0Predictor(num_class=cfg['f0_num_class'], in_channels=cfg['f0_in_channels'],
                                  cond_channels=cfg['f0_cond_channels'])
    keys = [k for k in cfg if not k.startswith('f0_')]
    model = CausalHiFTGenerator(**{k: cfg[k] for k in keys}, f0_predictor=f0)
    return model


# Effective-weight gains (std = gain / sqrt(fan_in)), chosen so that every stage carries
# activations of order 1 for the log-mel input (values -11.5 .. 1.5): the first convolution of
# each branch scales the mel down, residual branches are kept small so the resblock sums do not
# grow stage over stage, conv_post keeps exp(magnitude) of order 1..10 and the PCM mostly inside
# the vendor's +-0.99 clamp.
GAINS = [(r'^conv_pre$', 0.25), (r'^f0_predictor\.condnet\.0$', 0.3), (r'^f0_predictor\.', 1.4),
         (r'resblocks\.', 0.6), (r'^ups\.', 1.0),
         (r'^conv_post$', None)]
# conv_post's gain per config: its input grows with the channel count through the resblock sums.
# Full at 3.0 put 10% of the samples on the clamp; at 1.0 its PCM RMS is about 0.07 with none
# clamped (60 frames measured); the tiny stream at 3.0 has RMS 0.2 and a few clamped samples.
POST_GAIN = {'tiny': 3.0, 'full': 1.0}
F0_STD = 200.0  # Hz per unit of classifier input std: |F0| is unvoiced (< 10 Hz) for ~10% of frames


def _gain(name, post_gain):
    for pattern, gain in GAINS:
        if re.search(pattern, name):
            return post_gain if gain is None else gain
    raise SystemExit(f'no gain for weight-normalised {name}')


def reinit(model, seed, post_gain):
    """Draws every parameter anew from a private generator so that every path carries signal.

    The vendor initialises most conv weights N(0, 0.01) (common.py `init_weights`) with
    weight-norm g = ||v|| and every Snake alpha to exactly 1 (activation.py); activations then
    shrink stage by stage, F0 sits near 0 Hz and the ISTFT magnitudes near exp(0), so a stream of
    that would exercise neither voiced excitation nor the clamp, and per-channel alphas would
    all look alike. Drawn here: weight-norm v ~ N(0, 1) and g = ||v|| per output channel x
    gain / sqrt(fan_in) x (1 + 0.1 N), so the effective weights are N(0, gain^2 / fan_in) with
    per-channel scales (GAINS); plain convolutions and linears N(0, 1 / fan_in); biases 0.05 N;
    Snake alphas U(0.5, 1.5); the F0 classifier N(0, F0_STD^2 / fan_in) with bias 0, so that
    |F0| is voiced (> 10 Hz) for most frames and unvoiced for some. With these the tiny stream's
    PCM has RMS about 0.2, a few samples reach the 0.99 clamp, and replacing the noise table
    changes the PCM by about 3% (relative L2): the source path is not negligible."""
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std=1.0):
        return torch.randn(shape, generator=gen, dtype=torch.float64).mul_(std).float()

    with torch.no_grad():
        for name, module in model.named_modules():
            params = getattr(module, 'parametrizations', None)
            if params is not None and hasattr(params, 'weight'):
                g, v = params.weight.original0, params.weight.original1
                fan_in = v[0].numel()
                gain = _gain(name, post_gain)
                v.copy_(normal(v.shape))
                norms = v.flatten(1).norm(dim=1).view(g.shape)
                g.copy_(norms * (gain / math.sqrt(fan_in)) * (1 + 0.1 * normal(g.shape)))
            elif isinstance(module, (torch.nn.Conv1d, torch.nn.Linear)):
                fan_in = module.weight[0].numel()
                if name == 'f0_predictor.classifier':
                    module.weight.copy_(normal(module.weight.shape, F0_STD / math.sqrt(fan_in)))
                    module.bias.fill_(0.0)
                    continue
                module.weight.copy_(normal(module.weight.shape, 1 / math.sqrt(fan_in)))
            if getattr(module, 'bias', None) is not None and name != 'f0_predictor.classifier':
                module.bias.copy_(normal(module.bias.shape, 0.05))
            if hasattr(module, 'alpha') and isinstance(module.alpha, torch.nn.Parameter):
                module.alpha.copy_(0.5 + torch.rand(module.alpha.shape, generator=gen))


def random_vocoder(vendor, config, seed, device):
    """The vendor's vocoder of `config` ('tiny' or 'full') as this script's golden data has it:
    built with the global generator seeded `seed` (so its noise table is the one drawn then),
    every parameter drawn anew from `seed + 1` (`reinit`), cast and moved as
    `load_causal_vocoder` does last (token2wav.py:79). Returns `(model, noise_table)`; the table
    is SineGen2's plain attribute, which stays on the CPU after `.to(device)`."""
    cfg = CONFIGS[config]
    model = build(vendor, cfg, seed)
    if config_of(model) != cfg:
        raise SystemExit(f'the vendor model does not carry the config: {config_of(model)}')
    reinit(model, seed + 1, POST_GAIN[config])
    model = model.float().to(device).eval()
    table = model.m_source.l_sin_gen.sine_waves
    assert table.shape == (1, NOISE_TABLE_PERIOD, NOISE_TABLE_COLUMNS), table.shape
    return model, table


def log_mel(frames, channels, seed):
    """Seeded log-mel-like input [1, channels, frames]: a smooth spectral envelope (tilt plus
    formant-like bumps), a slow loudness contour with pauses, small frame noise, floored at
    log(1e-5) like the vendor's mel_spectrogram. Values span about -11.5 .. 1."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(frames, dtype=torch.float64)
    f = torch.arange(channels, dtype=torch.float64) / channels
    loud = torch.zeros(frames, dtype=torch.float64)
    for period in (37.0, 13.0, 7.0):
        phase = float(torch.rand(1, generator=gen, dtype=torch.float64)) * 2 * math.pi
        loud += torch.sin(2 * math.pi * t / period + phase) / period * 12
    env = -2.0 - 5.0 * f
    for _ in range(3):
        centre = float(torch.rand(1, generator=gen, dtype=torch.float64)) * 0.6
        env = env + 2.0 * torch.exp(-((f - centre) / 0.05) ** 2)
    noise = torch.randn(channels, frames, generator=gen, dtype=torch.float64) * 0.3
    mel = env[:, None] + 2.0 * loud[None, :] + noise
    return mel.clamp(min=LOG_MEL_FLOOR, max=1.5).float()[None]


class Trace:
    """Records what BoundedVocoder does per internal step, by wrapping its instance methods (the
    wrapped methods run unchanged)."""

    def __init__(self, bv):
        self.steps, self.f0 = [], {}
        process, source, decode = bv._process, bv._source, bv.model.decode
        f0_inputs = []

        def hook(_module, args, _output):
            f0_inputs.append(args[0].shape[-1])

        bv.model.f0_predictor.register_forward_hook(hook)

        def traced_source(part, frame_offset):
            for i, value in enumerate(part[0].tolist()):
                self.f0[frame_offset + i] = value
            self.steps[-1]['source_blocks'].append((frame_offset, part.shape[1]))
            return source(part, frame_offset)

        def traced_decode(x, s, finalize):
            self.steps[-1]['decoder_input_frames'] = x.shape[-1]
            self.steps[-1]['decoder_source_samples'] = s.shape[-1]
            return decode(x, s, finalize=finalize)

        def traced_process(finalize):
            c = bv.cache
            before = {k: int(c[k].item()) for k in ('mel_offset', 'source_end', 'speech_offset')}
            step = dict(finalize=finalize, mel_frames_held=c['mel'].shape[-1],
                        received=before['mel_offset'] + c['mel'].shape[-1],
                        source_end_before=before['source_end'],
                        emitted_before=before['speech_offset'] // HOP, source_blocks=[],
                        f0_input_frames=0, decoder_input_frames=0, decoder_source_samples=0)
            self.steps.append(step)
            f0_inputs.clear()
            speech = process(finalize)
            step['f0_input_frames'] = f0_inputs[0] if f0_inputs else 0
            step.update(samples=speech.shape[-1], source_end=int(c['source_end'].item()),
                        emitted=int(c['speech_offset'].item()) // HOP,
                        mel_offset=int(c['mel_offset'].item()), mel_cache=c['mel'].shape[-1],
                        source_offset=int(c['source_offset'].item()),
                        source_cache=c['source'].shape[-1] // HOP)
            return speech

        bv._source, bv._process, bv.model.decode = traced_source, traced_process, traced_decode


def config_of(model):
    """The constructor values of a vendor CausalHiFTGenerator, read off the module."""
    f0 = model.f0_predictor
    return dict(
        in_channels=model.conv_pre.in_channels, base_channels=model.conv_pre.out_channels,
        nb_harmonics=model.nb_harmonics, sampling_rate=model.sampling_rate,
        nsf_alpha=model.m_source.l_sin_gen.sine_amp, nsf_sigma=model.m_source.l_sin_gen.noise_std,
        nsf_voiced_threshold=model.m_source.l_sin_gen.voiced_threshold,
        upsample_rates=list(model.upsample_rates),
        upsample_kernel_sizes=[u.kernel_size[0] for u in model.ups],
        istft_params=dict(model.istft_params),
        resblock_kernel_sizes=[r.convs1[0].kernel_size[0] for r in model.resblocks[:model.num_kernels]],
        resblock_dilation_sizes=[[c.dilation[0] for c in r.convs1]
                                 for r in model.resblocks[:model.num_kernels]],
        source_resblock_kernel_sizes=[r.convs1[0].kernel_size[0] for r in model.source_resblocks],
        source_resblock_dilation_sizes=[[c.dilation[0] for c in r.convs1]
                                        for r in model.source_resblocks],
        lrelu_slope=model.lrelu_slope, audio_limit=model.audio_limit,
        conv_pre_look_right=model.conv_pre_look_right, f0_num_class=f0.num_class,
        f0_in_channels=f0.condnet[0].in_channels, f0_cond_channels=f0.condnet[0].out_channels)


def vocoder_file(model, bv, table, noise_origin):
    """Tensors and metadata of a `vocoder.safetensors`: the vendor's state_dict after
    BoundedVocoder made the F0 predictor float64 (bounded_vocoder.py:64), weight norm folded as
    the parametrization computes it on every forward (float64 for the F0 predictor, float32
    elsewhere), plus `noise_table` (the first rows of SineGen2's table)."""
    from stepaudio2.causal_vocoder.bounded_vocoder import context_sizes
    if table.dim() != 3 or table.shape[0] != 1 or table.shape[2] != NOISE_TABLE_COLUMNS \
            or not 0 < table.shape[1] <= NOISE_TABLE_PERIOD or table.dtype != torch.float32:
        raise SystemExit(f'noise table: expected f32 [1, rows <= {NOISE_TABLE_PERIOD}, '
                         f'{NOISE_TABLE_COLUMNS}], got {table.dtype} {list(table.shape)}')
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    weights = fold_state_dict(state, f64_prefixes=('f0_predictor.',))
    weights['noise_table'] = table.detach().cpu().contiguous().clone()
    cfg = dict(config_of(model), hop_samples=HOP, block_frames=bv.block_frames,
               context_sizes=list(context_sizes(model)), limits=bv.limits,
               delay_frames=bv.delay, source_cache_len=bv.delay * HOP)
    meta = metadata(format='dcc-vocoder-1', config=cfg,
                    weight_norm='folded: <m>.weight = g * v / ||v|| (torch._weight_norm, dim 0)',
                    f0_predictor_dtype='float64', noise_table_period=NOISE_TABLE_PERIOD,
                    noise_table_rows=table.shape[1],
                    noise_table_origin=noise_origin + '; the vendor reads row p % '
                    'noise_table_period for sample position p; rows past noise_table_rows are '
                    'not in this file')
    return weights, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--vendor', required=True, help='folder containing stepaudio2/')
    ap.add_argument('--config', choices=sorted(CONFIGS), required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--seconds', type=float, help='mel length (default: tiny 2, full 6)')
    ap.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    ap.add_argument('--seed', type=int, default=0,
                    help='seeds the global generator before construction (noise table), the '
                         'weights (seed+1) and the mel (seed+2)')
    ap.add_argument('--final', choices=['empty', 'last'],
                    help="'last': the last 50-frame chunk is sent with last_chunk=True; 'empty': "
                         "every chunk is sent with last_chunk=False, then an empty last_chunk=True "
                         "call flushes (token2wav.py:271-273). Default: tiny empty, full last")
    ap.add_argument('--noise-rows', type=int,
                    help='noise-table rows to save (default: full: all; tiny: the rows the '
                         'stream reads plus one frame)')
    args = ap.parse_args()
    cfg = CONFIGS[args.config]
    seconds = args.seconds if args.seconds is not None else (2.0 if args.config == 'tiny' else 6.0)
    final = args.final or ('empty' if args.config == 'tiny' else 'last')
    frames = int(round(seconds * 1000 / 20))  # 50 mel frames per second (480 / 24000 s)
    if frames < 1:
        raise SystemExit('--seconds gives no mel frame')
    device = torch.device(args.device)
    # Exact fp32 on a GPU: torch lets cuDNN convolutions use TF32 by default (10-bit mantissa
    # products), which moves the vendor's audio by ~1e-3 relative L2; the port computes in fp32.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    vendor_pkg = import_vendor(args.vendor)
    model, table = random_vocoder(args.vendor, args.config, args.seed, device)
    # Token2wav.__init__'s vocoder lines (token2wav.py:119-128) and set_stream_cache's
    # (token2wav.py:200-202) and _stream_vocode (206-218), compiled from the vendor file.
    shim, stream_vocode = token2wav_vocoder(vendor_pkg, model)
    bv = shim.bounded_vocoder
    trace = Trace(bv)

    mel = log_mel(frames, cfg['in_channels'], args.seed + 2)
    starts = list(range(0, frames, CHUNK_FRAMES))
    calls = [(mel[:, :, s:s + CHUNK_FRAMES], final == 'last' and i == len(starts) - 1)
             for i, s in enumerate(starts)]
    if final == 'empty':
        # token2wav.py:273: an empty final call passes `hift_cache_dict['mel'][:, :, :0]`.
        calls.append((None, True))
    pcm, chunks, phases = [], [], []
    with torch.inference_mode():
        for i, (chunk, last) in enumerate(calls):
            if chunk is None:
                chunk_mel = shim.hift_cache_dict['mel'][:, :, :0]
            else:
                chunk_mel = chunk.to(device)
            first_step = len(trace.steps)
            speech = stream_vocode(shim, chunk_mel, last)
            # Token2wav.stream(return_waveform=True) returns speech.cpu().numpy(): f32 [1, n].
            pcm.append(speech.detach().cpu().float().contiguous())
            phases.append(bv.cache['phase'].detach().cpu().clone())
            chunks.append(dict(index=i, mel_frames=chunk_mel.shape[-1], last_chunk=last,
                               samples=speech.shape[-1], steps=trace.steps[first_step:]))

    total = sum(p.shape[-1] for p in pcm)
    expected = frames * HOP + (shim.source_cache_len if len(calls) > 1 else 0)
    if total != expected:
        raise SystemExit(f'sample count {total} != frames*480 + silence prefix = {expected}')
    max_row = frames * HOP  # the stream reads rows [0, frames*480) (source up to `frames`)
    rows = args.noise_rows or (NOISE_TABLE_PERIOD if args.config == 'full' else max_row + HOP)
    rows = min(rows, NOISE_TABLE_PERIOD)
    if rows < min(max_row, NOISE_TABLE_PERIOD):
        raise SystemExit(f'--noise-rows {rows} is shorter than the {max_row} rows the stream reads')

    origin = ('SineGen2.sine_waves as constructed: torch.rand(1, 7200000, 9) from the global '
              f'generator seeded {args.seed} just before the F0 predictor and the generator were '
              'built')
    weights, meta = vocoder_file(model, bv, table[:, :rows], origin)
    f0_frames = sorted(trace.f0)
    assert f0_frames == list(range(frames)), 'F0 was not generated once per frame'
    f0 = torch.tensor([trace.f0[k] for k in f0_frames], dtype=torch.float32)
    voiced = float((f0 > cfg['nsf_voiced_threshold']).float().mean())
    limits = bv.limits
    save_safetensors(out / 'vocoder.safetensors', weights, dict(meta, seed=str(args.seed)))
    golden = {'mel': mel.contiguous(), 'f0': f0}
    for i, (p, ph) in enumerate(zip(pcm, phases)):
        golden[f'pcm.{i}'] = p
        golden[f'phase.{i}'] = ph
    sha = sha256_f32(pcm)
    summary = [dict(index=c['index'], mel_frames=c['mel_frames'], last_chunk=c['last_chunk'],
                    samples=c['samples']) for c in chunks]
    save_safetensors(out / 'vocoder_golden.safetensors', golden, metadata(
        format='dcc-vocoder-golden-1', chunks=summary, total_samples=total, pcm_sha256=sha,
        mel_layout='[1, 80, frames] (the vendor layout: [batch, mel bins, time])',
        frames=frames, final=final, device=str(device), torch=torch.__version__,
        voiced_fraction=voiced, seed=args.seed, steps=[c['steps'] for c in chunks]))
    write_trace(out / 'vocoder_trace.md', args, cfg, chunks, shim, limits, frames, total, sha,
                voiced, rows)
    print(json.dumps(dict(frames=frames, chunks=summary, total_samples=total, pcm_sha256=sha,
                          voiced_fraction=voiced, noise_rows=rows,
                          pcm_rms=float(torch.cat(pcm, 1).pow(2).mean().sqrt()),
                          pcm_absmax=float(torch.cat(pcm, 1).abs().max())), indent=1))


def write_trace(path, args, cfg, chunks, shim, limits, frames, total, sha, voiced, rows):
    lines = [
        f'# Vocoder stream trace ({args.config} config, seed {args.seed})',
        '',
        '<!-- Written by scripts/vocoder_golden.py; regenerate, do not edit. -->',
        '',
        f'{frames} mel frames in {len(chunks)} calls of `Token2wav._stream_vocode`; '
        f'{total} samples in all, PCM SHA-256 (f32 LE, concatenated) `{sha}`. '
        f'Voiced frames (F0 > {cfg["nsf_voiced_threshold"]} Hz): {voiced:.2f}. '
        f'Noise-table rows saved: {rows}.',
        '',
        '## The rules (vendor lines)',
        '',
        f'- Delay: `vocoder_delay_frames` = F0 right context '
        f'{shim.hift.f0_predictor.condnet[0].causal_padding} (condnet[0], kernel 4, causal_type '
        f"'right') + conv_pre look-right {shim.hift.conv_pre_look_right} + 1 ISTFT trim frame = "
        f'{shim.vocoder_delay_frames} (token2wav.py:123-126).',
        '- Each call splits its mel into blocks of `block_frames` = 16 (bounded_vocoder.py:180) '
        'and runs `_process(False)` per block; a final call then runs `_process(True)` once '
        '(186-188).',
        '- Per `_process(False)`: with R frames received, F0 and source exist up to '
        '`source_end` = R - 3 (133), speech up to `emitted` = `source_end` - 5 (147, '
        '`decoder_right` = look-right 4 + 1). It emits (`emitted` after - before) x 480 samples. '
        '`_process(True)` takes both to R and emits the rest.',
        '- So a stream of N frames that is not finished has emitted (N - 8) x 480 samples; the '
        'final call emits the last 8 x 480 = 3840.',
        f'- The first call that emits anything is prefixed with `source_cache_len` = '
        f'{shim.source_cache_len} zero samples unless it is also the last call '
        '(token2wav.py:213-217). In all: N x 480 + 3840 samples for a stream of more than one call.',
        '- F0 input frames per step: the frames from `source_end` - 8 (the F0 predictor\'s left '
        'context, 4 convolutions of kernel 3) to R (135-139). Decoder input frames: from '
        f'`emitted` - {limits["decoder_history_frames"]} (the history `context_sizes` derives) to '
        '`source_end` (150-153). Both are clamped at frame 0 at the start of the stream.',
        '- The noise table is read at rows `source_end x 480 ..` for each source block: the '
        'absolute sample position, modulo 7,200,000 (120-122).',
        '',
        '## Per call',
        '',
        '| call | mel in | last | samples | = | steps |',
        '|---:|---:|:---:|---:|:---|:---|',
    ]
    for c in chunks:
        emitted = sum(s['emitted'] - s['emitted_before'] for s in c['steps'])
        prefix = c['samples'] - emitted * HOP
        why = f'{emitted} frames x 480' + (f' + {prefix} silence' if prefix else '')
        steps = ', '.join(('final' if s['finalize'] else f"{s['received']}") for s in c['steps'])
        lines.append(f"| {c['index']} | {c['mel_frames']} | {'yes' if c['last_chunk'] else 'no'} "
                     f"| {c['samples']} | {why} | received after each block: {steps} |")
    lines += [
        '',
        '## Per internal step',
        '',
        'R = frames received; `source_end` and `emitted` after the step (frames); F0 in = frames '
        'fed to the F0 predictor; source blocks = (first frame, frames) per `_source` call; dec in '
        '= mel frames fed to `decode` (source samples in brackets); out = samples; mel / source '
        'cache = frames kept after the step (offset in brackets).',
        '',
        '| call | R | final | F0 in | source blocks | source_end | dec in | emitted | out | '
        'mel cache | source cache |',
        '|---:|---:|:---:|---:|:---|---:|---:|---:|---:|---:|---:|',
    ]
    for c in chunks:
        for s in c['steps']:
            blocks = ' '.join(f'({a},{n})' for a, n in s['source_blocks']) or '-'
            lines.append(
                f"| {c['index']} | {s['received']} | {'yes' if s['finalize'] else 'no'} "
                f"| {s['f0_input_frames']} | {blocks} | {s['source_end']} "
                f"| {s['decoder_input_frames']} ({s['decoder_source_samples']}) | {s['emitted']} "
                f"| {s['samples']} | {s['mel_cache']} ({s['mel_offset']}) "
                f"| {s['source_cache']} ({s['source_offset']}) |")
    lines += ['', '## Limits (`BoundedVocoder.limits`, bounded_vocoder.py:67-84)', '']
    lines += [f'- `{k}`: {v}' for k, v in limits.items()]
    write_atomic(path, [('\n'.join(lines) + '\n').encode()])


if __name__ == '__main__':
    main()
