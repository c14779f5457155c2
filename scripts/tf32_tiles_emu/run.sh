#!/usr/bin/env bash
# CPU emulation of the 3xTF32 linear kernels: runs gemm.linear_tf32x3 and the tile variants of
# kernels/src/gemm/tf32_tiles.rs and tf32_tiles_small.rs (gemm_t3v and gemm_t3w; the real CUDA source, one std::thread
# per CUDA thread, mma emulated per warp by one fixed per-element model) on shapes with tails
# (among them the model's K and 80 and 1,536 outputs; a few minutes on two cores), and compares
# each output bit for bit with the spec (gemm.cu's 3xTF32 comment) evaluated directly on the
# same model. It checks the kernels' indexing (fragments, staging, chains, the partials'
# exchange), not PTX or speed: a GPU run of
# runtime/tests/gemm_tf32_tiles.rs checks those. Needs g++ (C++20) and python3. The half
# linear's variants (gemm_f16.cu): run_f16.sh beside this one.
# Usage: scripts/tf32_tiles_emu/run.sh [VARIANT...]   (e.g. t64x128w t16x32s8; default: every variant)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cp "$here"/shim.h "$here"/driver.h "$here"/main.h "$out"/
python3 "$here/gen.py" "$root" "$out" >/dev/null
g++ -std=c++20 -O1 -pthread -w "$out/emu.cpp" -o "$out/emu"
"$out/emu" "$@"
