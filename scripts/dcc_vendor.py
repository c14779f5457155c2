"""Shared helpers for the scripts that run the vendor's Python code.

The vendor package is `stepaudio2` from PyPI `minicpmo-utils==1.0.7`. Its `__init__.py` imports
`token2wav.py`, which imports onnxruntime, s3tokenizer, torchaudio and hyperpyyaml at module level;
none of them is needed by the vocoder or the flow. `import_vendor` therefore registers `stepaudio2`
as a bare namespace over the vendor folder (its `__init__.py` is not executed) so that
`stepaudio2.causal_vocoder.*` and `stepaudio2.cosyvoice2.*` import with torch, numpy and scipy
only. `vendor_method` reads a method of a vendor class from the source text and compiles it, so
code the scripts cannot import is still the vendor's own code, not a transcription.
"""

import ast
import hashlib
import importlib.machinery
import json
import sys
import types
from pathlib import Path

import torch

# SineGen2(causal=True) (causal_vocoder/generator.py, SineGen2.__init__) draws its noise table as
# `torch.rand(1, 300 * 24000, 9)`: 300 s of 24 kHz samples, one column per harmonic (9 columns
# whatever nb_harmonics is). BoundedVocoder._source (bounded_vocoder.py) reads row
# `p % sine_waves.shape[1]` for absolute sample position p, i.e. it wraps after 300 s.
NOISE_TABLE_PERIOD = 300 * 24000
NOISE_TABLE_COLUMNS = 9

# CosyVoice3's config (FunAudioLLM/CosyVoice examples/libritts/cosyvoice3/conf/cosyvoice3.yaml)
# starts with `__set_seed3: !apply:torch.manual_seed [1986]`; hyperpyyaml applies it while loading,
# before it constructs `hift` (its f0_predictor argument first, then CausalHiFTGenerator).
COSYVOICE3_YAML_SEED = 1986


def import_vendor(vendor_dir):
    """Makes `stepaudio2` importable from `vendor_dir` (the folder that contains `stepaudio2/`)."""
    root = Path(vendor_dir).resolve()
    package = root / 'stepaudio2'
    if not (package / 'causal_vocoder' / 'bounded_vocoder.py').is_file():
        raise SystemExit(f'{root} does not contain stepaudio2/causal_vocoder/bounded_vocoder.py')
    existing = sys.modules.get('stepaudio2')
    if existing is not None:
        if list(getattr(existing, '__path__', [])) != [str(package)]:
            raise SystemExit(f'stepaudio2 is already imported from {existing.__path__}')
        return package
    module = types.ModuleType('stepaudio2')
    module.__path__ = [str(package)]
    sys.modules['stepaudio2'] = module
    return package


def stub_absent_module(name, names=()):
    """Registers an empty module `name` when the real package cannot be imported.

    The vendor's flow_matching.py imports onnxruntime and decoder_dit.py imports einops at module
    level; onnxruntime is never used by the flow, einops only when the DiT runs. A script that
    only builds the modules or saves their state dicts may stub both; one that runs the flow
    stubs onnxruntime only. The stub carries a module spec (torch's import machinery asks for
    one), and each attribute in `names` raises when called, so any use of a stub fails loudly."""
    if name in sys.modules:
        return
    try:
        __import__(name)
        return
    except ImportError:
        pass
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)

    for attr in names:
        def absent(*_args, _attr=attr, **_kwargs):
            raise RuntimeError(f'{name}.{_attr} called, but {name} is a stub here')
        setattr(module, attr, absent)
    sys.modules[name] = module


def _class_def(source, class_name):
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return node
    raise SystemExit(f'class {class_name} not found')


def _method_def(source, class_name, method):
    for node in _class_def(source, class_name).body:
        if isinstance(node, ast.FunctionDef) and node.name == method:
            return node
    raise SystemExit(f'{class_name}.{method} not found')


def vendor_method(path, class_name, method, namespace):
    """The vendor's `class_name.method` from `path`, compiled as a plain function.

    Decorators are dropped (the callers run under `torch.inference_mode` themselves); line numbers
    are kept so tracebacks point into the vendor file."""
    source = Path(path).read_text()
    node = _method_def(source, class_name, method)
    node.decorator_list = []
    module = ast.Module(body=[node], type_ignores=[])
    code = compile(module, str(path), 'exec')
    scope = dict(namespace)
    exec(code, scope)
    return scope[method]


def vendor_statements(path, class_name, method, first, last, namespace, target):
    """Runs statements `first`..`last` (inclusive, as source lines of the vendor file) of
    `class_name.method` with `self` bound to `target`. Returns the source text that ran."""
    source = Path(path).read_text()
    node = _method_def(source, class_name, method)
    body = [s for s in node.body if s.lineno >= first and s.end_lineno <= last]
    if not body or body[0].lineno != first or body[-1].end_lineno != last:
        raise SystemExit(f'{path}:{first}-{last} is not a run of whole statements of {method}')
    code = compile(ast.Module(body=body, type_ignores=[]), str(path), 'exec')
    scope = dict(namespace)
    scope['self'] = target
    exec(code, scope)
    lines = source.splitlines()[first - 1:last]
    return '\n'.join(lines)


def token2wav_vocoder(vendor_package, model):
    """The vocoder half of the vendor's `Token2wav` around `model` (a `CausalHiFTGenerator`,
    already on its device), run from the vendor's own `token2wav.py`, which cannot be imported
    (see the module doc): `__init__`'s vocoder lines (119-128: the `BoundedVocoder`, the 8-frame
    delay check, `source_cache_len`) and `set_stream_cache`'s (200-202: reset, `hift_cache_dict`,
    `first_chunk`) run with `self` bound to a bare object, and `_stream_vocode` (206-218) is
    compiled as a function. Returns `(token2wav, stream_vocode)`: one chunk of the stream is
    `stream_vocode(token2wav, chunk_mel, last_chunk)`, the final empty flush passes
    `token2wav.hift_cache_dict['mel'][:, :, :0]` with `last_chunk=True` (token2wav.py:271-273)."""
    from stepaudio2.causal_vocoder.bounded_vocoder import BoundedVocoder
    token2wav_py = Path(vendor_package) / 'token2wav.py'
    token2wav = type('Token2wavVocoder', (), {})()
    token2wav.hift = model
    ran = vendor_statements(token2wav_py, 'Token2wav', '__init__', 119, 128,
                            {'BoundedVocoder': BoundedVocoder, 'torch': torch}, token2wav)
    if 'self.source_cache_len = self.vocoder_delay_samples' not in ran:
        raise SystemExit('token2wav.py lines 119-128 are not the vocoder set-up expected here')
    token2wav.vendor_package = Path(vendor_package)
    token2wav_reset(token2wav)
    stream_vocode = vendor_method(token2wav_py, 'Token2wav', '_stream_vocode', {'torch': torch})
    return token2wav, stream_vocode


def token2wav_reset(token2wav):
    """`Token2wav.set_stream_cache`'s vocoder lines (token2wav.py:200-202) on an object made by
    `token2wav_vocoder`: a new utterance (`BoundedVocoder.reset`, a fresh `hift_cache_dict` with
    `first_chunk` set)."""
    vendor_statements(token2wav.vendor_package / 'token2wav.py', 'Token2wav', 'set_stream_cache',
                      200, 202, {'torch': torch}, token2wav)


def fold_weight_norm(v, g):
    """The effective weight of a weight-normalised layer, as torch computes it on every forward
    (`torch.nn.utils.parametrizations.weight_norm`, dim 0): g * v / ||v|| over all dims but 0."""
    return torch._weight_norm(v, g, 0)


def fold_state_dict(state, f64_prefixes=()):
    """State dict with weight norm folded into plain `<module>.weight` tensors.

    Accepts both spellings torch has used: `<m>.parametrizations.weight.original0/1` (g, v; the
    parametrization the vendor's modules use) and `<m>.weight_g/weight_v` (old checkpoints, which
    torch's load hook renames to the former). Tensors under `f64_prefixes` are converted to
    float64 BEFORE folding, because the vendor casts those modules with `.double()` and the
    parametrization then computes g * v / ||v|| in float64."""
    out = {}
    pairs = {}
    for name, tensor in state.items():
        for suffix, slot in (('.parametrizations.weight.original0', 'g'),
                             ('.parametrizations.weight.original1', 'v'),
                             ('.weight_g', 'g'), ('.weight_v', 'v')):
            if name.endswith(suffix):
                pairs.setdefault(name[:-len(suffix)], {})[slot] = tensor
                break
        else:
            out[name] = tensor
    for prefix, pair in pairs.items():
        if set(pair) != {'g', 'v'}:
            raise SystemExit(f'{prefix}: weight norm needs both g and v, found {sorted(pair)}')
        if prefix + '.weight' in out:
            raise SystemExit(f'{prefix}.weight present beside its weight-norm parameters')
        g, v = pair['g'], pair['v']
        if any(prefix.startswith(p) for p in f64_prefixes):
            g, v = g.double(), v.double()
        out[prefix + '.weight'] = fold_weight_norm(v, g)
    for name in list(out):
        if any(name.startswith(p) for p in f64_prefixes):
            out[name] = out[name].double()
    return {name: t.detach().contiguous() for name, t in sorted(out.items())}


def sha256_f32(tensors):
    """SHA-256 of the little-endian float32 bytes of the tensors, concatenated."""
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.detach().cpu().to(torch.float32).contiguous().numpy().astype('<f4').tobytes())
    return digest.hexdigest()


def metadata(**values):
    """Safetensors metadata: every value a string (JSON for anything that is not one)."""
    return {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True) for k, v in values.items()}


_DTYPES = {torch.float32: 'F32', torch.float64: 'F64', torch.float16: 'F16', torch.bfloat16: 'BF16',
           torch.int64: 'I64', torch.int32: 'I32', torch.int16: 'I16', torch.int8: 'I8',
           torch.uint8: 'U8', torch.bool: 'BOOL'}


def save_safetensors(path, tensors, meta):
    """Writes a safetensors file byte for byte reproducibly (the `safetensors` package orders the
    metadata by hash, so two runs of the same script would differ): tensors in name order, header
    keys sorted, the header padded with spaces to a multiple of 8, written to a temp file in the
    same folder and renamed over `path`, mode 0644."""
    path = Path(path)
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in _DTYPES:
            raise SystemExit(f'{name}: dtype {t.dtype} has no safetensors name here')
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b''
        header[name] = {'dtype': _DTYPES[t.dtype], 'shape': list(t.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if meta:
        header['__metadata__'] = dict(sorted(meta.items()))
    text = json.dumps(header, sort_keys=True, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)
    write_atomic(path, [len(text).to_bytes(8, 'little'), text, *blobs])


def write_atomic(path, chunks):
    """Writes the byte strings `chunks` to `path` through a temp file in the same folder and a
    rename (mode 0644): a reader never sees a half-written file."""
    path = Path(path)
    tmp = path.with_name(f'.{path.name}.tmp')
    with open(tmp, 'wb') as f:
        for chunk in chunks:
            f.write(chunk)
    tmp.chmod(0o644)
    tmp.replace(path)
