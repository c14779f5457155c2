#!/usr/bin/env bash
# One device command for the kernel work: the CUDA test suite (runtime, kernels, vocoder), the
# vocoder full-config check, the tiny and full checks on both GEMM paths, the six arms with the
# roofline profile, and the base binary interleaved. Prepare here: PEER=... scripts/gpu-suite.sh
# --prepare, copy the vocoder_golden test binary to .dev/suite/vocoder_golden-models, a base
# dcc-bench to .dev/base/dcc-bench-base and the vendor sources (stepaudio2/) to .dev/vsrc; run
# with carry [".dev/t2w", ".dev/suite", ".dev/base", ".dev/vsrc"]. Logs come back in $OUT/logs.tgz.
set -uo pipefail
D=.dev/t2w; S=.dev/suite; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
echo "=== CUDA tests (DCC_REQUIRE_GPU=1)"
tp=0; tf=0
for t in $S/*-test $S/vocoder_golden-models; do n=$(basename $t); DCC_REQUIRE_GPU=1 timeout 240 $t --test-threads=1 --nocapture > $W/$n.log 2>&1; rc=$?
  p=$(grep -o '[0-9]* passed' $W/$n.log | awk '{s+=$1} END {print s+0}'); f=$(grep -o '[0-9]* failed' $W/$n.log | awk '{s+=$1} END {print s+0}')
  tp=$((tp+p)); tf=$((tf+f)); echo "$n rc=$rc passed=$p failed=$f"; done
echo "total passed=$tp failed=$tf"
grep -h "MISMATCH\|panicked" $W/*.log | head -10
grep -h "kernels bit-equal\|of .* kernels bit-equal\|linear launches bit-equal\|fused activations" $W/*.log | head
grep -h "rel-L2\|rel_l2\|samples" $W/vocoder_golden-models.log | head -12
echo "=== vocoder full config (vendor on CUDA, our port on CUDA)"
python3 scripts/vocoder_golden.py --vendor .dev/vsrc --config full --device cuda --out /tmp/vfull > $W/vfull.txt 2>&1; tail -n 3 $W/vfull.txt
DCC_VOCODER_GOLDEN=/tmp/vfull DCC_REQUIRE_GPU=1 $S/vocoder_golden-models --test-threads=1 --nocapture cuda > $W/vfull_test.log 2>&1; echo "vocoder full rc=$?"; grep -h "rel\|samples\|test result" $W/vfull_test.log | head -12
T=models/testdata/token2wav_tiny
echo "=== tiny"
for g in backend invariant; do
$D/dcc-bench check --backend cuda --gemm $g --weights $T/weights.safetensors --io $T/io.safetensors --contract token2wav_tiny --chunks 6 --tol 1e-4 --arms B0,S,R,Rc,SR,SRc > $W/tiny_$g.txt 2>&1; echo "tiny $g rc=$?"; grep -E "^(B0|SRc) |check:" $W/tiny_$g.txt; done
echo "=== full"
python3 $D/token2wav_stock.py --vendor $D/vendor --config full --export /tmp/full --chunks 24 > $W/peer.txt 2>$W/peer.err; tail -n 1 $W/peer.txt
for g in backend invariant; do
$D/dcc-bench check --backend cuda --gemm $g --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors --contract token2wav --chunks 24 --tol 1e-4 --arms B0,SRc > $W/fullcheck_$g.txt 2>&1; echo "full check $g rc=$?"; grep -E "^(B0|SRc) |check:" $W/fullcheck_$g.txt; done
.dev/base/dcc-bench-base token2wav --backend cuda --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors --contract token2wav --chunks 24 --arms SRc > $W/base1.txt 2>&1
$D/dcc-bench token2wav --backend cuda --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors --contract token2wav --chunks 24 --arms B0,S,R,Rc,SR,SRc --profile > $W/six.txt 2>$W/six.err
.dev/base/dcc-bench-base token2wav --backend cuda --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors --contract token2wav --chunks 24 --arms SRc > $W/base2.txt 2>&1
$D/dcc-bench token2wav --backend cuda --gemm invariant --weights /tmp/full/weights.safetensors --io /tmp/full/io.safetensors --contract token2wav --chunks 24 --arms SRc --profile > $W/inv.txt 2>$W/inv.err
echo "--- base (aac4208-era binary, cuBLAS):"; grep -hE "^SRc " $W/base1.txt $W/base2.txt
echo "--- new, --gemm backend, six arms:"; grep -E "^arm|^(B0|S|R|Rc|SR|SRc) " $W/six.txt
echo "--- new, --gemm invariant:"; grep -E "^SRc " $W/inv.txt
echo "--- roofline (backend):"; grep -A30 "^profile" $W/six.err
echo "--- roofline (invariant), top:"; grep -A6 "^profile" $W/inv.err
tar czf $OUT/logs.tgz -C $W .
