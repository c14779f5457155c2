#!/usr/bin/env bash
# Whether the CUDA kernels compile to the same PTX in the working tree as at REV (default HEAD):
# every registered module compiled by NVRTC for sm_90 with the backend's options on both sides
# (runtime/tests/nvrtc.rs with DCC_PTX_DUMP), then compared entry by entry. Same PTX means the same
# instructions, so a restructuring of the CUDA source that prints "same" changes no bit of any
# output; no GPU needed. Needs libnvrtc on LD_LIBRARY_PATH (.ci/run shows how to get the CUDA 13.0
# wheel). Prints one line per kernel entry that differs, is new or is removed, then a summary;
# exit 0 when every entry is the same, 1 when not, 2 on a failure to compile or check out.
# REV must have runtime/tests/nvrtc.rs with DCC_PTX_DUMP (this script's commit and later).
# NVRTC is not deterministic everywhere: with the same source, NVRTC 13.0.88 emitted
# attention_rel_pos with one more `ld.shared.v2.f32` (after a `.pragma "used_bytes_mask 255"`) in
# 1 of 4 processes here (2026-11-29), its arithmetic unchanged. So an entry whose PTX differs only
# in loads, pragmas and register numbering is reported as "loads", apart from "differs"
# (arithmetic or control changed too). "loads" is not "same": a load of another address is a
# load line too, so read those lines (or re-run) before taking it for NVRTC's noise.
# Usage: scripts/ptx-diff.sh [REV]
set -uo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1; rm -rf "$work"' EXIT
git worktree add --detach "$work/base" "$rev" >/dev/null 2>&1 || { echo "cannot check out $rev"; exit 2; }
# dump DIR TARGET OUT: every module's PTX of the tree at DIR, built in TARGET, into OUT. Each tree
# builds in its own target directory: cargo hashes and fingerprints a workspace's crates by
# their paths inside it, so two checkouts sharing one would share a stale build (the kernels'
# sources are compiled in by include_str!).
dump() {
  (cd "$1" && DCC_PTX_DUMP="$3" DCC_REQUIRE_NVRTC=1 CARGO_TARGET_DIR="$2" \
    cargo test --release --locked -q -p dcc-runtime --test nvrtc every_module_compiles_under_nvrtc \
    >"$3.log" 2>&1) || { echo "NVRTC failed in $1:"; tail -n 20 "$3.log"; exit 2; }
}
echo "compiling every module at $rev and in the working tree (a few minutes each)" >&2
dump "$work/base" "$work/target" "$work/ptx-base"
dump "$PWD" "${CARGO_TARGET_DIR:-$PWD/target}" "$work/ptx-tree"
# Compare entry by entry: a module's PTX split at each `.entry` (the text before the first entry,
# and the compiler's comment lines, left out), so a module that gains an entry shows the others
# unchanged.
python3 - "$work/ptx-base" "$work/ptx-tree" "$rev" <<'PY'
import difflib, os, re, sys
base, tree, rev = sys.argv[1:]
def entries(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith('.ptx'):
                continue
            text = '\n'.join(l for l in open(os.path.join(d, f)).read().splitlines() if not l.lstrip().startswith('//'))
            mod = os.path.relpath(os.path.join(d, f), root)[:-4].replace('+', '/')
            parts = re.split(r'(?m)^(?=\.(?:visible|weak) \.entry )', text)
            for p in parts[1:]:
                name = re.match(r'\.\w+ \.entry (\w+)', p).group(1)
                out[f'{mod}: {name}'] = p
    return out
def loads_only(x, y):
    # the two entries with virtual registers renumbered, their declarations dropped: do they
    # differ only in shared or global loads and compiler pragmas?
    def norm(t):
        t = re.sub(r'%([a-z]+)[0-9]+', r'%\1', t)
        return [l for l in t.splitlines() if not re.match(r'\s*\.reg ', l)]
    changed = [l[1:].strip() for l in difflib.unified_diff(norm(x), norm(y), lineterm='', n=0)
               if l[:1] in '+-' and not l.startswith(('+++', '---'))]
    return all(l.startswith(('ld.', '.pragma')) for l in changed)
a, b = entries(base), entries(tree)
same = loads = 0
for k in sorted(set(a) | set(b)):
    if k not in a:
        print(f'new      {k}')
    elif k not in b:
        print(f'removed  {k}')
    elif a[k] == b[k]:
        same += 1
    elif loads_only(a[k], b[k]):
        loads += 1
        print(f'loads    {k}')
    else:
        print(f'differs  {k}')
n = len(set(a) | set(b))
print(f'ptx-diff {rev}..working tree: {same} of {n} entries the same PTX'
      + (f', {loads} differing only in loads (read them)' if loads else ''))
sys.exit(0 if same == n else 1)
PY
