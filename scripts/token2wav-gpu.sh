#!/usr/bin/env bash
# Token2Wav on the GPU machine, in ONE device command: correctness (tiny, both retentions; full
# model against a fresh export of the vendor peer) and the six-arm factorial (B0, S, R, Rc, SR,
# SRc; `dcc-bench --help`) next to the vendor's stock PyTorch peer on the same GPU.
#
# Prepare here (no GPU), then call the device `run` tool with carry [".dev/t2w"]:
#   scripts/token2wav-gpu.sh --prepare        # release build, strip, copy the peer + vendor code
#   run: bash scripts/token2wav-gpu.sh        # on the GPU machine (logs and JSON under $OUT)
#
# .dev/t2w holds: dcc-bench (stripped release binary), token2wav_stock.py (the peer), vendor/
# (minicpmo-utils 1.0.7's stepaudio2.cosyvoice2, unpacked). Full weights are exported on the GPU
# machine (/tmp/full) and never leave it.
#
# The peer and the vendor sources are not part of this repository; --prepare takes them from:
#   PEER    the peer script token2wav_stock.py (required: it exports weights, inputs and reference
#           outputs of the vendor decoder, and times the stock decoder)
#   VENDOR  a directory holding stepaudio2/cosyvoice2 (default: .vendor)
# Relative paths are taken from the repository root (the script runs there).
set -uo pipefail
cd "$(dirname "$0")/.."
D=.dev/t2w

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  PEER=${PEER:-}
  VENDOR=${VENDOR:-.vendor}
  if [[ ! -f "$PEER" ]]; then
    echo "token2wav-gpu.sh: no peer script at '$PEER'; set PEER=/path/to/token2wav_stock.py" >&2
    exit 2
  fi
  if [[ ! -d "$VENDOR/stepaudio2/cosyvoice2" ]]; then
    echo "token2wav-gpu.sh: no '$VENDOR/stepaudio2/cosyvoice2'; set VENDOR to the unpacked minicpmo-utils 1.0.7 sources" >&2
    exit 2
  fi
  cargo build --release -p dcc-models --bin dcc-bench
  mkdir -p "$D"
  cp "${CARGO_TARGET_DIR:-target}/release/dcc-bench" "$D/dcc-bench"
  strip "$D/dcc-bench"
  cp "$PEER" "$D/token2wav_stock.py"
  rm -rf "$D/vendor" && cp -rL "$VENDOR" "$D/vendor"
  du -sh "$D" "$D"/*
  exit 0
fi

OUT=${OUT:-/tmp/t2w-out}
mkdir -p "$OUT"
T=models/testdata/token2wav_tiny
B="$D/dcc-bench"
status=0
step() { echo; echo "=== $* ==="; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/device.txt"

step "copy-in check"
for f in "$B" "$D/token2wav_stock.py" "$D/vendor/stepaudio2/cosyvoice2" "$T/weights.safetensors" \
         "$T/io.safetensors" "$T/io_vendor_retention.safetensors"; do
  if [[ -e "$f" ]]; then echo "ok  $f"; else echo "MISSING $f"; exit 2; fi
done
sha256sum "$B" | tee -a "$OUT/device.txt"

step "tiny CUDA check, paper retention (contract token2wav_tiny), all arms"
"$B" check --backend cuda --weights "$T/weights.safetensors" --io "$T/io.safetensors" \
  --contract token2wav_tiny --chunks 6 --tol 1e-4 --arms B0,S,R,Rc,SR,SRc \
  --json-out "$OUT/tiny_paper.json" 2>"$OUT/tiny_paper.err" | tee "$OUT/tiny_paper.txt" || status=1
step "tiny CUDA check, vendor retention (contract token2wav_tiny_vendor), all arms"
"$B" check --backend cuda --weights "$T/weights.safetensors" --io "$T/io_vendor_retention.safetensors" \
  --contract token2wav_tiny_vendor --chunks 6 --tol 1e-4 --arms B0,S,R,Rc,SR,SRc \
  --json-out "$OUT/tiny_vendor.json" 2>"$OUT/tiny_vendor.err" | tee "$OUT/tiny_vendor.txt" || status=1

step "vendor PyTorch peer (stock), full config, 24 chunks, export to /tmp/full"
PYTHONUNBUFFERED=1 python3 "$D/token2wav_stock.py" --vendor "$D/vendor" --config full \
  --export /tmp/full --chunks 24 2>"$OUT/peer.err" | tee "$OUT/peer.txt" || status=1
ls -la /tmp/full || true

step "full-model check against the peer's export (rel-L2 <= 1e-3 per chunk)"
"$B" check --backend cuda --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors \
  --contract token2wav --chunks 24 --tol 1e-3 --arms B0,SRc \
  --json-out "$OUT/full_check.json" 2>"$OUT/full_check.err" | tee "$OUT/full_check.txt" || status=1

step "dcc-bench token2wav, full config, 24 chunks, six arms"
"$B" token2wav --backend cuda --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors \
  --contract token2wav --chunks 24 --arms "${ARMS:-B0,S,R,Rc,SR,SRc}" \
  --json-out "$OUT/bench.json" 2>"$OUT/bench.err" | tee "$OUT/bench.txt" || status=1
tail -5 "$OUT/bench.err" || true

step "results (same GPU, same run)"
cat "$OUT/device.txt"
echo "--- peer (vendor PyTorch, stock):"
grep '^{' "$OUT/peer.txt" || tail -20 "$OUT/peer.err"
echo "--- full-model check:"
cat "$OUT/full_check.txt"
echo "--- dcc-bench token2wav:"
cat "$OUT/bench.txt"
exit $status
