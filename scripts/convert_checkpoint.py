#!/usr/bin/env python3
"""Turns the vendor's released `flow.pt` and `hift.pt` into the safetensors dcc loads.

    convert_checkpoint.py --vendor DIR --model MODEL_DIR --out OUT_DIR
                          [--flow-noise FILE | --flow-noise-seed N] [--flow-noise-frames N]
                          [--hift-noise FILE | --hift-noise-seed N] [--hift-noise-rows N]
    convert_checkpoint.py --vendor DIR --self-test

`MODEL_DIR` is the vendor's model folder (it holds `flow.pt` and `hift.pt`, torch state dicts);
`DIR` for --vendor contains `stepaudio2/` (minicpmo-utils 1.0.7). Writes into OUT_DIR:

- `weights.safetensors` — the flow (models/src/token2wav): every tensor of `flow.pt` under its
  own name, float32, plus `decoder.rand_noise` [1, 80, frames], the CFM noise table.
  `CausalConditionalCFM.__init__` (cosyvoice2/flow/flow_matching.py:33) draws it as
  `torch.randn([1, 80, 50 * 600])` from torch's global generator and registers it as a
  non-persistent buffer, so it is not in `flow.pt`: pass the table your vendor process used
  (--flow-noise: a safetensors file holding `decoder.rand_noise`, or a torch file holding the
  tensor) or let the script draw it (--flow-noise-seed N, default 0: `torch.manual_seed(N)` then
  the vendor's own call; a vendor process that constructed other modules first drew different
  numbers).
- `vocoder.safetensors` — the streaming vocoder (CosyVoice3's causal HiFT): every tensor of
  `hift.pt` under the vendor's state_dict names with weight norm folded (`<m>.weight` =
  g · v / ‖v‖, both the `parametrizations.weight.original0/1` and the `weight_g/weight_v`
  spellings), `f0_predictor.*` in float64 (the vendor runs the F0 predictor with `.double()` and
  folds there), plus `noise_table` [1, rows, 9] f32, the table `SineGen2(causal=True)` draws at
  construction (`torch.rand(1, 300 * 24000, 9)`, causal_vocoder/generator.py:226), also not in
  `hift.pt`. --hift-noise FILE (`noise_table` in a safetensors file, or a torch file holding the
  tensor) or --hift-noise-seed N (default 1986): the script seeds torch's global generator with
  N, builds the vendor's F0 predictor and CausalHiFTGenerator in the order hyperpyyaml builds
  the `hift` section, and takes the table off the module. CosyVoice3's config starts with
  `torch.manual_seed(1986)`, so with a config.yaml that keeps those lines and builds nothing
  before `hift` this is the table the vendor process uses. The vendor checkpoint is loaded into
  that model with `strict=True` first, so a checkpoint of another shape is refused.

--self-test builds the vendor's tiny flow and the tiny vocoder of scripts/vocoder_golden.py with
random weights, saves them with `torch.save` as the vendor's files, converts them, and checks the
result against the committed test data (models/testdata/token2wav_tiny): the flow file has
exactly the names, shapes and dtypes of `weights.safetensors` and the saved values; the vocoder
file equals `vocoder.safetensors` tensor for tensor, bit for bit, from either weight-norm
spelling, and its noise table drawn from seed 0 equals the committed one.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dcc_vendor import (COSYVOICE3_YAML_SEED, NOISE_TABLE_PERIOD, import_vendor,  # noqa: E402
                        metadata, save_safetensors)

REPO = Path(__file__).resolve().parent.parent
TINY_DATA = REPO / 'models' / 'testdata' / 'token2wav_tiny'
CFM_NOISE_FRAMES = 50 * 600  # flow_matching.py:33, "a maximum of 600s" of 50 Hz mel frames


def load_state(path):
    """A torch state dict: a flat mapping of names to tensors (`weights_only`, as the vendor
    loads it, token2wav.py:77 and :115)."""
    state = torch.load(path, map_location='cpu', weights_only=True)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise SystemExit(f'{path}: expected a state dict of tensors')
    return state


def load_tensor(path, name):
    """`name` from a safetensors file, or the single tensor of a torch file."""
    path = Path(path)
    if path.suffix == '.safetensors':
        from safetensors import safe_open
        with safe_open(str(path), 'pt') as f:
            if name not in f.keys():
                raise SystemExit(f'{path}: no tensor `{name}`')
            return f.get_tensor(name)
    value = torch.load(path, map_location='cpu', weights_only=True)
    if isinstance(value, dict):
        if name not in value:
            raise SystemExit(f'{path}: no tensor `{name}`')
        value = value[name]
    if not isinstance(value, torch.Tensor):
        raise SystemExit(f'{path}: expected a tensor')
    return value


def convert_flow(state, noise=None, noise_seed=0, noise_frames=CFM_NOISE_FRAMES):
    """The flow's tensors (names unchanged, float32) and `decoder.rand_noise`."""
    if 'decoder.rand_noise' in state:
        raise SystemExit('flow.pt carries decoder.rand_noise; the vendor never saves it '
                         '(a non-persistent buffer): is this the vendor checkpoint?')
    out = {}
    for name, t in state.items():
        if not t.is_floating_point():
            raise SystemExit(f'flow.pt: {name} is {t.dtype}; the flow loader reads float32 only')
        out[name] = t.float().contiguous()
    mel = out['decoder.estimator.final_layer.linear.weight'].shape[0]
    origin = None
    if noise is None:
        torch.manual_seed(noise_seed)
        noise = torch.randn([1, mel, CFM_NOISE_FRAMES])  # flow_matching.py:33
        origin = (f'torch.manual_seed({noise_seed}); torch.randn([1, {mel}, {CFM_NOISE_FRAMES}]) '
                  '(the call of flow_matching.py:33)')
    if noise.dim() != 3 or noise.shape[0] != 1 or noise.shape[1] != mel:
        raise SystemExit(f'decoder.rand_noise: expected [1, {mel}, frames], got {list(noise.shape)}')
    if not 0 < noise_frames <= noise.shape[2]:
        raise SystemExit(f'--flow-noise-frames {noise_frames}: the table has {noise.shape[2]}')
    out['decoder.rand_noise'] = noise[:, :, :noise_frames].float().contiguous()
    return out, metadata(format='dcc-flow-1', rand_noise_origin=origin or 'supplied by the user',
                         rand_noise_frames=noise_frames)


def hift_config(state):
    """CosyVoice3's causal HiFT config with the channel counts of `state` (the rest is fixed by
    the vendor's checks or is not visible in weight shapes: see vocoder_golden.FULL)."""
    from vocoder_golden import FULL

    def out_channels(prefix):
        for suffix in ('.parametrizations.weight.original1', '.weight_v', '.weight'):
            if prefix + suffix in state:
                return state[prefix + suffix].shape[0]
        raise SystemExit(f'hift.pt: no weight for {prefix}')

    return dict(FULL, base_channels=out_channels('conv_pre'),
                f0_cond_channels=out_channels('f0_predictor.condnet.0'))


def convert_hift(vendor, state, noise=None, noise_seed=COSYVOICE3_YAML_SEED, rows=None):
    """The vocoder's tensors and metadata (see the module doc)."""
    import_vendor(vendor)
    from stepaudio2.causal_vocoder.bounded_vocoder import BoundedVocoder
    from vocoder_golden import build, vocoder_file
    model = build(vendor, hift_config(state), noise_seed)
    model.load_state_dict(state, strict=True)  # as load_causal_vocoder, token2wav.py:78
    model = model.float().eval()
    bv = BoundedVocoder(model)  # makes the F0 predictor float64 (bounded_vocoder.py:343)
    if noise is None:
        noise = model.m_source.l_sin_gen.sine_waves
        origin = (f'drawn by the vendor code: torch.manual_seed({noise_seed}), then the F0 '
                  'predictor and CausalHiFTGenerator built (SineGen2.sine_waves)')
    else:
        origin = 'supplied by the user'
    rows = rows or noise.shape[1]
    if not 0 < rows <= min(noise.shape[1], NOISE_TABLE_PERIOD):
        raise SystemExit(f'--hift-noise-rows {rows}: the table has {noise.shape[1]}')
    return vocoder_file(model, bv, noise[:, :rows].float(), origin)


def convert(args):
    model_dir = Path(args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    flow_noise = load_tensor(args.flow_noise, 'decoder.rand_noise') if args.flow_noise else None
    tensors, meta = convert_flow(load_state(model_dir / 'flow.pt'), flow_noise,
                                 args.flow_noise_seed, args.flow_noise_frames)
    save_safetensors(out / 'weights.safetensors', tensors, meta)
    hift_noise = load_tensor(args.hift_noise, 'noise_table') if args.hift_noise else None
    tensors, meta = convert_hift(args.vendor, load_state(model_dir / 'hift.pt'), hift_noise,
                                 args.hift_noise_seed, args.hift_noise_rows)
    save_safetensors(out / 'vocoder.safetensors', tensors, meta)
    print(f'wrote {out / "weights.safetensors"} and {out / "vocoder.safetensors"}')


def self_test(vendor):
    from self_test_convert import run
    run(vendor, sys.modules[__name__], TINY_DATA)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--vendor', required=True, help='folder containing stepaudio2/')
    ap.add_argument('--model', help='vendor model folder with flow.pt and hift.pt')
    ap.add_argument('--out', help='output folder')
    ap.add_argument('--flow-noise', help='decoder.rand_noise to use (safetensors or torch file)')
    ap.add_argument('--flow-noise-seed', type=int, default=0)
    ap.add_argument('--flow-noise-frames', type=int, default=CFM_NOISE_FRAMES)
    ap.add_argument('--hift-noise', help='noise_table to use (safetensors or torch file)')
    ap.add_argument('--hift-noise-seed', type=int, default=COSYVOICE3_YAML_SEED)
    ap.add_argument('--hift-noise-rows', type=int, help=f'default: all {NOISE_TABLE_PERIOD}')
    ap.add_argument('--self-test', action='store_true')
    args = ap.parse_args()
    if args.self_test:
        self_test(args.vendor)
    elif args.model and args.out:
        convert(args)
    else:
        ap.error('give --model and --out, or --self-test')


if __name__ == '__main__':
    main()
