#!/usr/bin/env bash
# Everything that needs the GPU, in ONE device command: the CUDA test suite (the same test binaries
# CI runs on Host, with DCC_REQUIRE_GPU=1 so a missing GPU fails instead of skipping), the replay
# micro-benchmark (runtime/BENCH.md), then scripts/token2wav-gpu.sh (correctness + factorial + peer).
#
# Prepare here (no GPU needed), then call the device `run` tool with carry [".dev/suite", ".dev/t2w"]:
#   PEER=/path/to/token2wav_stock.py scripts/gpu-suite.sh --prepare   # (PEER, VENDOR: token2wav-gpu.sh)
#   run: bash scripts/gpu-suite.sh            # logs under $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
D=.dev/suite

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  rm -rf "$D" && mkdir -p "$D"
  # Release test binaries of the crates with CUDA paths; the JSON names each executable.
  cargo test --release -p dcc-runtime -p dcc-kernels --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, os, shutil
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if m.get("reason") == "compiler-artifact" and exe and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = m["target"]["name"] + ("-unit" if kind == "lib" else "")
        shutil.copy(exe, os.path.join(sys.argv[1], name + "-test"))
' "$D"
  cargo build --release -p dcc-runtime --bin dcc-replay-bench
  cp "${CARGO_TARGET_DIR:-target}/release/dcc-replay-bench" "$D/"
  strip "$D"/*
  scripts/token2wav-gpu.sh --prepare >/dev/null
  du -sh "$D" .dev/t2w
  ls "$D"
  exit 0
fi

OUT=${OUT:-/tmp/suite-out}
mkdir -p "$OUT"
# $OUT brings back at most 8 files: logs go to W, and come back as one tarball.
W=$(mktemp -d /tmp/suite.XXXX)
status=0
summary=()

echo "=== device ==="
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$W/device.txt"

echo "=== CUDA test suite (DCC_REQUIRE_GPU=1) ==="
passed=0 failed=0
for t in "$D"/*-test; do
  name=$(basename "$t")
  DCC_REQUIRE_GPU=1 "$t" --test-threads=1 --nocapture >"$W/$name.log" 2>&1
  rc=$?
  p=$(grep -o '[0-9]* passed' "$W/$name.log" | awk '{s+=$1} END {print s+0}')
  f=$(grep -o '[0-9]* failed' "$W/$name.log" | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p)) failed=$((failed + f))
  cuda=$(grep -c '::cuda\|cuda_' "$W/$name.log" || true)
  printf '%-28s rc=%d passed=%-3d failed=%d\n' "$name" "$rc" "$p" "$f"
  summary+=("$(printf '%-28s %6d %6d %s' "$name" "$p" "$f" "$([[ $rc == 0 ]] && echo ok || echo FAIL)")")
  [[ $rc == 0 ]] || status=1
done
grep -h 'SKIP' "$W"/*-test.log && { echo "unexpected SKIP under DCC_REQUIRE_GPU=1"; status=1; }

echo "=== replay micro-benchmark ==="
"$D/dcc-replay-bench" 2>"$W/replay-bench.err" | tee "$W/replay-bench.txt" || status=1

echo "=== Token2Wav ==="
OUT="$W/t2w" bash scripts/token2wav-gpu.sh >"$W/t2w.txt" 2>&1 || status=1

{
echo
echo "=== summary ($(cat "$W/device.txt")) ==="
printf '%-28s %6s %6s\n' "test binary" passed failed
printf '%s\n' "${summary[@]}"
echo "total: $passed passed, $failed failed"
echo "--- carry auditor and sessions (CUDA and Host runs of the same tests):"
grep -h -E 'carry audit|per extra session' "$W"/carry-test.log "$W"/sessions-test.log || true
echo "--- replay micro-benchmark:"
cat "$W/replay-bench.txt"
echo "--- Token2Wav (scripts/token2wav-gpu.sh; full log in t2w.txt):"
sed -n '/=== results/,$p' "$W/t2w.txt"
} 2>&1 | tee "$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$W" .
exit $status
