# Writes emu.cpp: kernels/cuda/gemm.cu and gemm_tiles.cuh with the device intrinsics replaced by
# shim.h's emulation, the base entry and one per 3xTF32 tile variant of
# kernels/src/gemm/tf32_tiles.rs and tf32_tiles_small.rs (read from their CUDA entries), and the driver. Usage: python3 gen.py REPO_ROOT OUT_DIR (run.sh does it all).
import re, sys
root=sys.argv[1].rstrip('/')+'/'
out_dir=sys.argv[2].rstrip('/')+'/'
src=open(root+'kernels/cuda/gemm.cu').read()+open(root+'kernels/cuda/gemm_tiles.cuh').read()
def remove(s, name, template=False):
    m=re.search(r'(template <int N>\n)?__device__ __forceinline__ \w+ '+name+r'\(', s)
    assert m, name
    i=s.index('{', m.end())
    depth=0; j=i
    while True:
        if s[j]=='{': depth+=1
        elif s[j]=='}':
            depth-=1
            if depth==0: break
        j+=1
    return s[:m.start()]+s[j+1:]
for n in ['gemm_cp16','gemm_cp4','gemm_commit','gemm_wait','gemm_dynamic_smem','t3_mma']:
    src=remove(src,n)
assert src.count('extern __shared__ float4 gemm_smem[];')==4
src=src.replace('extern __shared__ float4 gemm_smem[];','float4* gemm_smem = emu_smem();')
rs=''.join(open(root+'kernels/src/gemm/'+f).read() for f in ['tf32_tiles.rs','tf32_tiles_small.rs'])
ents=[]; table=[]
sig='(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out)'
args='GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out}'
ents.append(f'extern "C" __global__ void gemm_linear_tf32x3{sig} {{ gemm_tf32x3({args}); }}\n')
table.append('{"tf32x3", gemm_linear_tf32x3, 16, 32, 128, 39168}')
# Each entry with the template call that follows it: gemm_t3v<MT, NTL, WM, WN, BK, ST, NT> (the
# four chains in every warp) or gemm_t3w<MT, NTL, WM, WN, CG, BK, ST, NT> (chains dealt to warps).
entries=re.findall(r'__launch_bounds__\((\d+), (\d+)\) gemm_linear_tf32x3_(\w+)\(.*?(gemm_t3[vw])<([\d,\s\\]+)>',rs,re.S)
assert entries, 'no tile variant entry in tf32_tiles.rs'
for nt0,mb,name,tmpl,params in entries:
    p=[int(x) for x in re.findall(r'\d+',params)]
    if tmpl=='gemm_t3v':
        mt,ntl,wm,wn,bk,st,nt=p; cg=1
    else:
        mt,ntl,wm,wn,cg,bk,st,nt=p
    assert nt==int(nt0)==32*wm*wn*cg, name
    ents.append(f'extern "C" __global__ void __launch_bounds__({nt}, {mb}) gemm_linear_tf32x3_{name}{sig} {{ {tmpl}<{",".join(map(str,p))}>({args}); }}\n')
    bm=16*mt*wm; bn=8*ntl*wn
    smem=max(4*st*(bm+bn)*(bk+4), 4*cg*bm*(bn+8) if cg>1 else 0)
    table.append(f'{{"{name}", gemm_linear_tf32x3_{name}, {bm}, {bn}, {nt}, {smem}}}')
out='#include "shim.h"\n'+src+''.join(ents)+'#include "driver.h"\nstatic const VariantEmu VARIANTS[] = {'+',\n'.join(table)+'};\n#include "main.h"\n'
open(out_dir+'emu.cpp','w').write(out)
print(len(table))
