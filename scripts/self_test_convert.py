"""`convert_checkpoint.py --self-test`: converts checkpoints the vendor code saves from random
weights and checks the result against the committed tiny test data (see that script's doc)."""

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from dcc_vendor import import_vendor, save_safetensors, stub_absent_module


def tiny_flow(vendor):
    """The vendor's flow with the tiny config of models/testdata/token2wav_tiny/README.md."""
    import_vendor(vendor)
    # Builds and saves only: neither onnxruntime nor einops is used (see stub_absent_module).
    stub_absent_module('onnxruntime')
    stub_absent_module('einops', ('pack', 'rearrange', 'repeat'))
    from stepaudio2.cosyvoice2.flow.decoder_dit import DiT
    from stepaudio2.cosyvoice2.flow.flow import CausalMaskedDiffWithXvec
    from stepaudio2.cosyvoice2.flow.flow_matching import CausalConditionalCFM
    from stepaudio2.cosyvoice2.transformer.upsample_encoder_v2 import UpsampleConformerEncoderV2
    torch.manual_seed(5)
    encoder = UpsampleConformerEncoderV2(input_size=64, output_size=64, attention_heads=2,
                                         linear_units=128, num_blocks=2, num_up_blocks=1)
    dit = DiT(in_channels=320, out_channels=80, mlp_ratio=4.0, depth=2, num_heads=2, head_dim=32,
              hidden_size=64)
    flow = CausalMaskedDiffWithXvec(input_size=64, output_size=80, spk_embed_dim=192,
                                    vocab_size=6561, encoder=encoder,
                                    decoder=CausalConditionalCFM(dit, inference_cfg_rate=0.7))
    with torch.no_grad():  # the vendor zero-initialises some layers: make every value distinct
        for p in flow.parameters():
            p.add_(torch.randn(p.shape) * 0.01)
    return flow


def old_spelling(state):
    """The same state dict with weight norm spelled as old torch checkpoints spell it."""
    out = {}
    for name, t in state.items():
        name = name.replace('.parametrizations.weight.original0', '.weight_g')
        out[name.replace('.parametrizations.weight.original1', '.weight_v')] = t
    return out


def check(cond, what):
    if not cond:
        raise SystemExit(f'self-test FAILED: {what}')
    print(f'ok: {what}')


def same_file(path, expected_path, skip_meta=()):
    got = load_file(str(path))
    want = load_file(str(expected_path))
    check(sorted(got) == sorted(want), f'{path.name}: the tensor names of {expected_path.name}')
    bad = [k for k in want if got[k].dtype != want[k].dtype or got[k].shape != want[k].shape
           or not torch.equal(got[k], want[k])]
    check(not bad, f'{path.name}: every tensor equals {expected_path.name} bit for bit {bad[:3]}')
    with safe_open(str(path), 'pt') as a, safe_open(str(expected_path), 'pt') as b:
        ma, mb = a.metadata(), b.metadata()
    keys = [k for k in mb if k not in skip_meta]
    check(all(ma.get(k) == mb[k] for k in keys), f'{path.name}: metadata {keys} equal')


def run(vendor, conv, tiny_data):
    import vocoder_golden as vg
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # The flow: names, shapes and dtypes the Rust loader reads (the committed tiny weights).
        flow = tiny_flow(vendor)
        torch.save(flow.state_dict(), tmp / 'flow.pt')
        state = conv.load_state(tmp / 'flow.pt')
        tensors, meta = conv.convert_flow(state, noise_seed=0, noise_frames=2000)
        save_safetensors(tmp / 'weights.safetensors', tensors, meta)
        got = load_file(str(tmp / 'weights.safetensors'))
        with safe_open(str(tiny_data / 'weights.safetensors'), 'pt') as want:
            layout = {k: (want.get_slice(k).get_dtype(), want.get_slice(k).get_shape())
                      for k in want.keys()}
        names = {'F32': torch.float32}
        check({k: (next(n for n, d in names.items() if d == t.dtype), list(t.shape))
               for k, t in got.items()} == layout,
              'flow: names, dtypes and shapes equal the committed weights.safetensors')
        check(all(torch.equal(got[k], state[k].float()) for k in state),
              'flow: every tensor equals flow.pt')

        # The vocoder: the golden script's tiny model saved as the vendor saves hift.pt.
        model = vg.build(vendor, vg.TINY, 0)
        vg.reinit(model, 1, vg.POST_GAIN['tiny'])
        torch.save(model.state_dict(), tmp / 'hift.pt')
        torch.save(old_spelling(model.state_dict()), tmp / 'hift_old.pt')
        committed = tiny_data / 'vocoder.safetensors'
        with safe_open(str(committed), 'pt') as f:
            table = f.get_tensor('noise_table')
        for src in ('hift.pt', 'hift_old.pt'):
            tensors, meta = conv.convert_hift(vendor, conv.load_state(tmp / src), noise=table)
            save_safetensors(tmp / 'vocoder.safetensors', tensors, meta)
            same_file(tmp / 'vocoder.safetensors', committed,
                      skip_meta=('noise_table_origin', 'seed'))
        tensors, _ = conv.convert_hift(vendor, conv.load_state(tmp / 'hift.pt'), noise_seed=0,
                                       rows=table.shape[1])
        check(torch.equal(tensors['noise_table'], table),
              'vocoder: the noise table drawn from seed 0 equals the committed one')
        # The command line, end to end: flow.pt + hift.pt in a model folder -> two files.
        out = tmp / 'out'
        conv.convert(argparse.Namespace(
            vendor=vendor, model=tmp, out=out, flow_noise=None, flow_noise_seed=0,
            flow_noise_frames=2000, hift_noise=None, hift_noise_seed=0,
            hift_noise_rows=table.shape[1]))
        same_file(out / 'vocoder.safetensors', committed, skip_meta=('noise_table_origin', 'seed'))
        check(torch.equal(load_file(str(out / 'weights.safetensors'))['encoder_proj.weight'],
                          state['encoder_proj.weight']), 'command line: the flow file is written')
        bad = dict(conv.load_state(tmp / 'hift.pt'))
        bad.pop('conv_post.bias')
        try:
            conv.convert_hift(vendor, bad)
        except RuntimeError as e:
            check('conv_post.bias' in str(e), 'vocoder: a checkpoint missing a tensor is refused')
        else:
            check(False, 'vocoder: a checkpoint missing a tensor is refused')
    print('self-test passed')
