#!/usr/bin/env bash
# CPU emulation of the half linear's tile variants (kernels/cuda/gemm_f16.cu, every
# gemm_linear_f16_* entry; the real CUDA source, one std::thread per CUDA thread, mma.m16n8k16
# emulated per warp by one fixed per-element model) on small shapes with tails, each output
# compared bit for bit with the spec (gemm_f16.cu's header comment) evaluated on the same model:
# the kernels' indexing (fragments, staging, chains, the partials' exchange), not PTX or speed
# (runtime/tests/gemm_f16.rs on a GPU checks those). Needs g++ (C++20, _Float16) and python3.
# Usage: scripts/tf32_tiles_emu/run_f16.sh [VARIANT]   (e.g. f16_64x128; default: every variant)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cp "$here"/shim.h "$here"/shim_f16.h "$here"/driver.h "$here"/main_f16.h "$out"/
python3 "$here/gen_f16.py" "$root" "$out" >/dev/null
g++ -std=c++20 -O1 -pthread -w "$out/emu_f16.cpp" -o "$out/emu"
"$out/emu" "$@"
