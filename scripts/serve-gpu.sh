#!/usr/bin/env bash
# The serving run on the GPU, in device commands of a few minutes each: tokens to audio (issue 12),
# many sessions (issue 10) and the linear kernels (issue 13), next to the vendor's stock line.
#
# Prepare here (no GPU needed; PEER is the flow peer script token2wav_stock.py, VENDOR a folder
# holding the vendor's stepaudio2/ with cosyvoice2/, causal_vocoder/ and token2wav.py):
#   PEER=... VENDOR=... scripts/serve-gpu.sh --prepare
# then run on the device (carry [".dev/serve"]), one part per command or several:
#   bash scripts/serve-gpu.sh suite      # CUDA test binaries (runtime, kernels, vocoder, speech)
#   bash scripts/serve-gpu.sh kernels    # dcc-bench kernels: every linear variant against cuBLAS
#   bash scripts/serve-gpu.sh e2e        # vendor e2e peer (export) + dcc-bench check/token2wav
#   bash scripts/serve-gpu.sh sessions   # dcc-bench sessions (needs e2e's export in /tmp/full)
# Logs go to $OUT as one tarball per part; the last lines printed are a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
D=.dev/serve

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  : "${PEER:?set PEER to the flow peer script token2wav_stock.py}"
  : "${VENDOR:?set VENDOR to a folder holding stepaudio2/}"
  rm -rf "$D" && mkdir -p "$D/tests"
  # release test binaries with CUDA paths; the JSON names each executable
  cargo test --release -p dcc-runtime -p dcc-kernels --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, os, shutil
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if m.get("reason") == "compiler-artifact" and exe and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = m["target"]["name"] + ("-unit" if kind == "lib" else "")
        shutil.copy(exe, os.path.join(sys.argv[1], name))
' "$D/tests"
  cargo test --release -p dcc-models --test vocoder_golden --test vocoder_replay --test speech \
    --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, os, shutil
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if m.get("reason") == "compiler-artifact" and exe and m["profile"]["test"]:
        shutil.copy(exe, os.path.join(sys.argv[1], "models-" + m["target"]["name"]))
' "$D/tests"
  cargo build --release -p dcc-models --bin dcc-bench
  cp "${CARGO_TARGET_DIR:-target}/release/dcc-bench" "$D/dcc-bench"
  strip "$D/dcc-bench" "$D"/tests/*
  cp "$PEER" "$D/token2wav_stock.py"
  cp -rL "$VENDOR" "$D/vendor"
  find "$D/vendor" -name __pycache__ -prune -exec rm -rf {} +
  du -sh "$D"
  exit 0
fi

OUT=${OUT:-/tmp/serve-out}
mkdir -p "$OUT"
B=$D/dcc-bench
T=models/testdata/token2wav_tiny
F=/tmp/full
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"

for part in "$@"; do
W=$(mktemp -d "/tmp/$part.XXXX")
case $part in
suite)
  tp=0 tf=0
  for t in "$D"/tests/*; do
    n=$(basename "$t")
    DCC_REQUIRE_GPU=1 timeout 300 "$t" --test-threads=1 --nocapture >"$W/$n.log" 2>&1
    rc=$?
    p=$(grep -o '[0-9]* passed' "$W/$n.log" | awk '{s+=$1} END {print s+0}')
    f=$(grep -o '[0-9]* failed' "$W/$n.log" | awk '{s+=$1} END {print s+0}')
    tp=$((tp + p)) tf=$((tf + f))
    printf '%-26s rc=%d passed=%-3d failed=%d\n' "$n" "$rc" "$p" "$f"
  done
  grep -h 'SKIP' "$W"/*.log | head -5
  grep -h 'MISMATCH\|panicked' "$W"/*.log | head -10
  grep -h 'bit-equal\|rel-L2\|rel_l2\|classes\|captured' "$W"/*.log | head -20
  echo "suite: $tp passed, $tf failed"
  ;;
kernels)
  "$B" kernels >"$W/kernels.txt" 2>&1; echo "kernels rc=$?"
  grep -E 'per chunk|twin check|^ok|FAIL' "$W/kernels.txt"
  ;;
e2e)
  python3 scripts/e2e_peer.py --peer "$D/token2wav_stock.py" --vendor "$D/vendor" --config full \
    --device cuda --chunks 24 --export "$F" >"$W/peer.json" 2>"$W/peer.err"
  echo "e2e peer rc=$?"; tail -n 1 "$W/peer.json"
  for g in backend invariant; do
    "$B" check --backend cuda --gemm $g --weights $F/weights.safetensors --io $F/io.safetensors \
      --contract token2wav --chunks 24 --tol 1e-4 --arms B0,SRc >"$W/check_$g.txt" 2>&1
    echo "full check --gemm $g rc=$?"; grep -E '^(B0|SRc) |check|PCM|pcm' "$W/check_$g.txt" | head -12
  done
  "$B" token2wav --backend cuda --weights $F/weights.safetensors --io $F/io.safetensors \
    --contract token2wav --chunks 24 --arms B0,S,R,Rc,SR,SRc --wav "$OUT/full_SRc.wav" \
    --wav-arm SRc --format json --json-out "$OUT/six.json" >"$W/six.txt" 2>"$W/six.err"
  echo "six arms rc=$?"
  "$B" token2wav --backend cuda --weights $F/weights.safetensors --io $F/io.safetensors \
    --contract token2wav --chunks 24 --arms B0,S,R,Rc,SR,SRc >"$W/six_table.txt" 2>&1
  echo "six arms (table) rc=$?"; cat "$W/six_table.txt" | tail -n 30
  "$B" token2wav --backend cuda --weights $T/weights.safetensors --io $T/io.safetensors \
    --contract token2wav_tiny --chunks 4 --wav "$W/tiny.wav" >"$W/tiny.txt" 2>&1
  echo "tiny --wav rc=$? bytes=$(stat -c %s "$W/tiny.wav" 2>/dev/null)"
  ;;
sessions)
  # the flow's weights and inputs: the e2e part's export, or a fresh one (a cold machine)
  [[ -f $F/weights.safetensors ]] || python3 scripts/e2e_peer.py --peer "$D/token2wav_stock.py" \
    --vendor "$D/vendor" --config full --device cuda --chunks 12 --export "$F" >"$W/peer.json" 2>&1
  "$B" sessions --backend cuda --weights $F/weights.safetensors --io $F/io.safetensors \
    --contract token2wav --sessions 1,4,16,32,48 --chunks 6 --arms SRc,B0 \
    --plot "$OUT/sessions.svg" >"$W/sessions.txt" 2>&1
  echo "sessions rc=$?"; tail -n 40 "$W/sessions.txt"
  "$B" sessions --backend cuda --weights $F/weights.safetensors --io $F/io.safetensors \
    --contract token2wav --sessions 32 --chunks 6 --arms SRc --cadence realtime \
    >"$W/sessions_rt.txt" 2>&1
  echo "sessions realtime rc=$?"; tail -n 15 "$W/sessions_rt.txt"
  ;;
*) echo "unknown part '$part' (suite, kernels, e2e, sessions)"; exit 2 ;;
esac
tar czf "$OUT/$part.tgz" -C "$W" .
done
