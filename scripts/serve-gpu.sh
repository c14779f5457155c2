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
#   bash scripts/serve-gpu.sh batch      # exact cross-session batching: the CUDA twin of the Host
#                                        # test, then dcc-bench sessions --batch (BATCH_N,
#                                        # BATCH_GEMM, BATCH_MAX: the largest batch)
#   bash scripts/serve-gpu.sh profile    # ncu over one replayed SRc chunk per PROF_GEMM and one
#                                        # batched round of PROF_N (0: none): device µs per kernel
#   bash scripts/serve-gpu.sh half       # the half operating point: vendor fp16 export, our half arm
#                                        # checked against it, timed, profiled, batched (HALF_N)
#   bash scripts/serve-gpu.sh gemm       # module compile cold/warm (PTX cache), process start per
#                                        # GEMM path, the linear kernels, the full model per path
#                                        # (needs e2e's export in /tmp/full for the last part)
#   bash scripts/serve-gpu.sh vocfloor   # the vendor vocoder on CUDA against itself on the CPU,
#                                        # and our CUDA vocoder against both (the 1e-4 floor)
#   bash scripts/serve-gpu.sh halfcap    # half-point capacity: CAP_N sessions (default 250,256),
#                                        # batched calls of up to 32, 12 measured rounds
#   bash scripts/serve-gpu.sh roofline   # one session's SRc chunk per kernel family at both
#                                        # points (token2wav --profile), and the fp32 check on
#                                        # the 3xTF32 path
#   bash scripts/serve-gpu.sh latency    # one session's chunk at both points (issue 13): the
#                                        # fp32 and half checks against the vendor (24 chunks,
#                                        # B0 and SRc), then the same with OLD (other builds'
#                                        # dcc-bench binaries, space-separated) on the same exports
# Logs go to $OUT as one tarball per part; the last lines printed are a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
D=.dev/serve

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  : "${PEER:?set PEER to the flow peer script token2wav_stock.py}"
  : "${VENDOR:?set VENDOR to a folder holding stepaudio2/}"
  rm -rf "$D" && mkdir -p "$D/tests"
  # Release test binaries with CUDA paths. Cargo's JSON names each executable; copy_tests PREFIX
  # copies them into $D/tests as PREFIX + target name (+ "-unit" for a library's own tests).
  copy_tests() {
    python3 -c '
import json, sys, os, shutil
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if m.get("reason") == "compiler-artifact" and exe and m["profile"]["test"]:
        unit = "-unit" if m["target"]["kind"][0] == "lib" else ""
        shutil.copy(exe, os.path.join(sys.argv[1], sys.argv[2] + m["target"]["name"] + unit))
' "$D/tests" "$1"
  }
  cargo test --release -p dcc-runtime -p dcc-kernels --no-run --message-format=json 2>/dev/null |
    copy_tests ""
  cargo test --release -p dcc-models --test vocoder_golden --test vocoder_replay --test speech \
    --test batched_sessions --test many_sessions --test half_cache --no-run --message-format=json 2>/dev/null |
    copy_tests models-
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

# The half point's export (vendor fp16 beside fp32, half_peer.py) in $H, made once per machine;
# its JSON line in $H.json (written beside and renamed over, only when the export succeeded).
# Fails, naming the error, when the export does: the part that needs it stops there.
H=/tmp/fullh
half_export() {
  [[ -f $H/weights_half.safetensors && -f $H.json ]] && return 0
  if python3 scripts/half_peer.py --peer "$D/token2wav_stock.py" --vendor "$D/vendor" \
    --config full --device cuda --chunks 24 --export "$H" >"$H.json.part" 2>"$W/half_peer.err"; then
    mv "$H.json.part" "$H.json"
  else
    rm -f "$H.json.part"
    echo "half export failed: $(tail -n 3 "$W/half_peer.err")"
    return 1
  fi
}

# The fp32 export of 24 chunks in $F (e2e's, when it ran and succeeded on this machine: it marks
# a whole export with $F/.chunks24). Fails, naming the error, when the export does.
fp32_export24() {
  [[ -f $F/weights.safetensors && -f $F/.chunks24 ]] && return 0
  if python3 scripts/e2e_peer.py --peer "$D/token2wav_stock.py" --vendor "$D/vendor" --config full \
    --device cuda --chunks 24 --export "$F" >"$W/peer.json" 2>"$W/peer.err"; then
    touch "$F/.chunks24"
  else
    echo "fp32 export failed: $(tail -n 3 "$W/peer.err")"
    return 1
  fi
}

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
  # always run (the peer's stock line is measured here); a whole 24-chunk export is marked
  # ($F/.chunks24), so a later part of the same machine (latency) does not export it again
  rm -f "$F/.chunks24"
  python3 scripts/e2e_peer.py --peer "$D/token2wav_stock.py" --vendor "$D/vendor" --config full \
    --device cuda --chunks 24 --export "$F" >"$W/peer.json" 2>"$W/peer.err"
  rc=$?
  echo "e2e peer rc=$rc"; tail -n 1 "$W/peer.json"
  [[ $rc == 0 ]] && touch "$F/.chunks24"
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
batch)
  [[ -f $F/weights.safetensors ]] || python3 scripts/e2e_peer.py --peer "$D/token2wav_stock.py" \
    --vendor "$D/vendor" --config full --device cuda --chunks 12 --export "$F" >"$W/peer.json" 2>&1
  DCC_REQUIRE_GPU=1 "$D/tests/models-batched_sessions" cuda --test-threads=1 --nocapture \
    >"$W/batched_sessions.txt" 2>&1
  echo "batched_sessions (CUDA) rc=$? $(grep -h 'test result' "$W/batched_sessions.txt")"
  "$B" sessions --backend cuda --weights $F/weights.safetensors --io $F/io.safetensors \
    --contract token2wav --sessions "${BATCH_N:-16,32}" --chunks 6 --warmup 4 --arms SRc \
    --gemm "${BATCH_GEMM:-tf32x3}" --batch ${BATCH_MAX:+--max-batch $BATCH_MAX} \
    --plot "$OUT/sessions_batch.svg" \
    --json-out "$OUT/sessions_batch.json" >"$W/sessions_batch_table.txt" 2>&1
  echo "sessions --batch rc=$?"
  tail -n 30 "$W/sessions_batch_table.txt"
  ;;
profile)
  # per-kernel device time of replayed work, no host gaps: ncu records only the window
  # dcc-bench --profiler-window brackets (the last measured chunk of SRc; the last batched
  # round of PROF_N sessions), graph nodes one by one; scripts/ncu_table.py sums them per kernel
  [[ -f $F/weights.safetensors ]] || python3 scripts/e2e_peer.py --peer "$D/token2wav_stock.py" \
    --vendor "$D/vendor" --config full --device cuda --chunks 12 --export "$F" >"$W/peer.json" 2>&1
  ncu_run() { ncu --profile-from-start off --graph-profiling node --clock-control none \
    --cache-control none --csv --print-units base --metrics gpu__time_duration.sum "$@"; }
  fw=(--backend cuda --weights $F/weights.safetensors --io $F/io.safetensors --contract token2wav)
  for g in ${PROF_GEMM:-tf32x3 backend}; do
    ncu_run "$B" token2wav "${fw[@]}" --gemm "$g" --chunks 6 --warmup 4 --arms SRc --busy-reps 0 \
      --no-vocoder --profiler-window >"$W/ncu_srec_$g.csv" 2>"$W/ncu_srec_$g.err"
    echo "ncu SRc --gemm $g rc=$?"; grep -E '^SRc ' "$W/ncu_srec_$g.csv" | head -2
    python3 scripts/ncu_table.py "$W/ncu_srec_$g.csv" --title "SRc, one chunk, --gemm $g" |
      tee "$OUT/ncu_srec_$g.txt" | head -n 28
  done
  n=${PROF_N:-16}
  if [[ $n != 0 ]]; then  # PROF_N=0: no batched round
    ncu_run "$B" sessions "${fw[@]}" --gemm "${BATCH_GEMM:-tf32x3}" --sessions "$n" --chunks 2 \
      --warmup 4 --arms SRc --batch --profiler-window >"$W/ncu_batch.csv" 2>"$W/ncu_batch.err"
    echo "ncu batched round of $n rc=$?"; grep -E 'batched|SRc' "$W/ncu_batch.csv" | grep -v '^"' | tail -4
    python3 scripts/ncu_table.py "$W/ncu_batch.csv" --title "SRc, a batched round of $n" |
      tee "$OUT/ncu_batch_$n.txt" | head -n 40
  fi
  ;;
half)
  # the half operating point: the vendor's fp16 mode exported beside its fp32 mode (same seeded
  # inputs), our half arm checked against it at the vendor's own fp16-vs-fp32 distance (the
  # smallest over the chunks), timed and profiled, then batched sessions on the half path
  half_export || continue
  cp "$H.json" "$OUT/half_peer.json"
  tol=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(min(d['rel_l2']))" "$H.json")
  echo "vendor fp16 vs vendor fp32, rel-L2 per chunk: min $tol, max $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['rel_l2_max'])" "$H.json")"
  hw=(--backend cuda --gemm f16 --weights $H/weights_half.safetensors --io $H/io_half.safetensors
      --contract token2wav --no-vocoder)
  "$B" check "${hw[@]}" --chunks 24 --half-tol "$tol" --arms B0,S,R,Rc,SR,SRc >"$W/check_f16.txt" 2>&1
  echo "half check (every chunk within $tol of the vendor fp16) rc=$?"; tail -n 9 "$W/check_f16.txt"
  "$B" token2wav "${hw[@]}" --chunks 24 --arms SRc --profile >"$W/half_srec.txt" 2>&1
  echo "half SRc + profile rc=$?"; tail -n 30 "$W/half_srec.txt"
  "$B" sessions "${hw[@]}" --sessions "${HALF_N:-32,64}" --chunks 6 --warmup 4 --arms SRc --batch \
    ${BATCH_MAX:+--max-batch $BATCH_MAX} --json-out "$OUT/sessions_half.json" \
    >"$W/sessions_half.txt" 2>&1
  echo "half sessions --batch rc=$?"; tail -n 14 "$W/sessions_half.txt"
  ;;
latency)
  fp32_export24 || continue
  half_export || continue
  tol=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(min(d['rel_l2']))" "$H.json")
  echo "vendor fp16 vs vendor fp32, rel-L2 per chunk: min $tol"
  n=0
  # OLD: other builds' dcc-bench binaries, separated by spaces (word splitting intended)
  # shellcheck disable=SC2086
  for b in "$B" ${OLD:-}; do
    n=$((n + 1))
    "$b" check --backend cuda --gemm backend --weights $F/weights.safetensors --io $F/io.safetensors \
      --contract token2wav --chunks 24 --tol 1e-4 --arms B0,SRc >"$W/fp32_$n.txt" 2>&1
    echo "[$b] fp32 check rc=$?"; tail -n 12 "$W/fp32_$n.txt"
    "$b" check --backend cuda --gemm f16 --weights $H/weights_half.safetensors \
      --io $H/io_half.safetensors --contract token2wav --no-vocoder --chunks 24 --half-tol "$tol" \
      --arms B0,SRc >"$W/half_$n.txt" 2>&1
    echo "[$b] half check rc=$?"; tail -n 10 "$W/half_$n.txt"
  done
  ;;
roofline)
  # one session's chunk per kernel family at both points (issue 13's roofline): dcc-bench
  # token2wav --profile of SRc on the vendor's exports, fp32 (cuBLAS) and half, then the fp32
  # check on the 3xTF32 path (the fastest fp32-accurate GEMMs) beside the default's
  fp32_export24 || continue
  half_export || continue
  fw=(--backend cuda --weights $F/weights.safetensors --io $F/io.safetensors --contract token2wav
      --no-vocoder --chunks 24)
  hw=(--backend cuda --gemm f16 --weights $H/weights_half.safetensors --io $H/io_half.safetensors
      --contract token2wav --no-vocoder --chunks 24)
  "$B" token2wav "${fw[@]}" --gemm backend --arms SRc --profile >"$W/roofline_fp32.txt" 2>&1
  echo "fp32 SRc --profile rc=$?"; tail -n 32 "$W/roofline_fp32.txt" | tee "$OUT/roofline_fp32.txt"
  "$B" token2wav "${hw[@]}" --arms SRc --profile >"$W/roofline_half.txt" 2>&1
  echo "half SRc --profile rc=$?"; tail -n 32 "$W/roofline_half.txt" | tee "$OUT/roofline_half.txt"
  "$B" check "${fw[@]}" --gemm tf32x3 --tol 1e-4 --arms B0,SRc >"$W/check_tf32x3.txt" 2>&1
  echo "fp32 check --gemm tf32x3 rc=$?"; tail -n 5 "$W/check_tf32x3.txt"
  ;;
halfcap)
  # capacity at the half point: CAP_N sessions (default 250 and 256 = 8 calls of 32), 12 measured
  # rounds, each class split into the fewest calls of the contract's sizes up to 32
  half_export || continue
  "$B" sessions --backend cuda --gemm f16 --weights $H/weights_half.safetensors \
    --io $H/io_half.safetensors --contract token2wav --no-vocoder --sessions "${CAP_N:-250,256}" \
    --chunks 12 --warmup 3 --arms SRc --batch --batched-only --max-batch 32 \
    --json-out "$OUT/capacity_half.json" >"$W/capacity_half.txt" 2>&1
  echo "capacity rc=$?"; tail -n 8 "$W/capacity_half.txt"
  ;;
gemm)
  # NVRTC per module, cold then from the on-disk PTX cache (a fresh directory)
  for pass in cold warm; do
    DCC_REQUIRE_GPU=1 DCC_CACHE_DIR="$W/ptx" "$D/tests/backend" cuda_all_registered_modules_compile \
      --nocapture >"$W/compile_$pass.txt" 2>&1
    echo "modules $pass: rc=$? $(grep -h 'compiled' "$W/compile_$pass.txt" | tail -n 1)"
  done
  # a process's start to its first check, per GEMM path, without the cache (what each compiles)
  for g in backend invariant tf32x3; do
    s0=$(date +%s%N)
    DCC_CACHE_DIR=off "$B" check --backend cuda --weights $T/weights.safetensors \
      --io $T/io.safetensors --contract token2wav_tiny --chunks 2 --arms B0 --gemm $g \
      >"$W/start_$g.txt" 2>&1
    rc=$?
    echo "tiny check --gemm $g: rc=$rc $(( ($(date +%s%N) - s0) / 1000000 )) ms, uncached"
  done
  "$B" kernels --variants auto,tf32x3 --rows 112,1792 >"$W/kernels.txt" 2>&1
  echo "kernels rc=$?"; grep -E 'per chunk|twin check|^ok|FAIL' "$W/kernels.txt"
  if [[ -f $F/weights.safetensors ]]; then
    "$B" check --backend cuda --gemm tf32x3 --weights $F/weights.safetensors \
      --io $F/io.safetensors --contract token2wav --chunks 24 --tol 1e-4 --arms B0,SRc \
      >"$W/check_tf32x3.txt" 2>&1
    echo "full check --gemm tf32x3 rc=$?"; grep -E '^(B0|SRc) |check:' "$W/check_tf32x3.txt" | head -6
    for g in backend invariant tf32x3; do
      "$B" token2wav --backend cuda --gemm $g --weights $F/weights.safetensors \
        --io $F/io.safetensors --contract token2wav --chunks 24 --arms SRc >"$W/t2w_$g.txt" 2>&1
      echo "token2wav SRc --gemm $g rc=$?"; grep -E '^SRc ' "$W/t2w_$g.txt" | head -1
    done
  fi
  ;;
vocfloor)
  # One seeded full-config export per device: the same weights, mel and noise table (all drawn
  # on the CPU), so any distance between the two is the vendor's own device rounding.
  for dev in cpu cuda; do
    python3 scripts/vocoder_golden.py --vendor "$D/vendor" --config full --device $dev \
      --seconds 8 --out "$W/v$dev" >"$W/golden_$dev.json" 2>&1
    echo "vendor vocoder export on $dev rc=$?"
  done
  python3 - "$W/vcpu" "$W/vcuda" <<'PY' | tee "$W/vendor_cpu_vs_cuda.txt"
import sys
from safetensors.numpy import load_file
a = load_file(sys.argv[1] + '/vocoder_golden.safetensors')
b = load_file(sys.argv[2] + '/vocoder_golden.safetensors')
keys = sorted((k for k in a if k.startswith('pcm.')), key=lambda k: int(k[4:]))
errs = []
for k in keys:
    x, y = a[k].astype('float64').ravel(), b[k].astype('float64').ravel()
    errs.append(((x - y) ** 2).sum() ** 0.5 / max((x ** 2).sum() ** 0.5, 1e-30))
print('vendor cuda vs vendor cpu, rel L2 per call: ' + ' '.join(f'{e:.2e}' for e in errs))
print(f'vendor cuda vs vendor cpu: max {max(errs):.3e} over {len(errs)} calls')
PY
  for dev in cpu cuda; do
    DCC_REQUIRE_GPU=1 DCC_VOCODER_GOLDEN="$W/v$dev" timeout 600 "$D/tests/models-vocoder_golden" \
      cuda_reproduces --nocapture --test-threads=1 >"$W/ours_vs_vendor_$dev.txt" 2>&1
    echo "our CUDA vocoder vs vendor on $dev: rc=$? max rel L2 $(grep -o 'rel L2 [0-9.e+-]*' \
      "$W/ours_vs_vendor_$dev.txt" | awk '{if ($3+0 > m) m = $3+0} END {printf "%.3e", m}') \
      over $(grep -c 'rel L2' "$W/ours_vs_vendor_$dev.txt") calls"
  done
  rm -rf "$W"/v{cpu,cuda}/vocoder.safetensors
  ;;
*) echo "unknown part '$part' (suite, kernels, e2e, sessions, batch, profile, half, gemm, vocfloor, halfcap)"; exit 2 ;;
esac
tar czf "$OUT/$part.tgz" -C "$W" .
done
