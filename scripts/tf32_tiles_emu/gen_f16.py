# Writes emu_f16.cpp: kernels/cuda/gemm_f16.cu with its device intrinsics replaced by shim.h and
# shim_f16.h's emulation, its entries as they are, a table of them (read from the file: the
# h16_linear<MT, NT, WM, WN, BK, ST> of each entry), and the f16 driver. Usage: python3 gen_f16.py
# REPO_ROOT OUT_DIR (run_f16.sh does it all).
import re, sys
root=sys.argv[1].rstrip('/')+'/'
out_dir=sys.argv[2].rstrip('/')+'/'
src=open(root+'kernels/cuda/gemm_f16.cu').read()
def remove(s, name):
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
for n in ['h16_to_f32','h16_round','h16_pack','h16_cp16','h16_commit','h16_wait','h16_dynamic_smem','h16_mma']:
    src=remove(src,n)
assert src.count('extern __shared__ float4 h16_smem[];')==1
src=src.replace('extern __shared__ float4 h16_smem[];','float4* h16_smem = emu_smem();')
chains=int(re.search(r'#define H16_KW (\d+)',src).group(1))
bk=int(re.search(r'#define H16_BK (\d+)',src).group(1))
st=int(re.search(r'#define H16_ST (\d+)',src).group(1))
table=[]
defs={'H16_BK':bk,'H16_ST':st}
# Each entry with the template call in its body (one warp per chain: x staged as float, the
# partials in shared memory).
for name,mt,nt,wm,wn,vbk,vst in re.findall(r'gemm_linear_f16_(\w+)\([^{]*\{\s*h16_linear<(\d+), (\d+), (\d+), (\d+), (\w+), (\w+)>',src):
    mt,nt,wm,wn=int(mt),int(nt),int(wm),int(wn)
    vbk=int(defs.get(vbk,vbk)); vst=int(defs.get(vst,vst))
    bm=16*mt*wm; bn=8*nt*wn; nth=32*wm*wn*chains
    smem=max(vst*(bm*(vbk+8)*4+bn*(vbk+8)*2), chains*bm*(bn+8)*4)
    table.append(f'{{"f16_{name}", gemm_linear_f16_{name}, {bm}, {bn}, {nth}, {smem}}}')
assert len(table)==src.count('extern "C" __global__ void'), 'an entry the table does not list'
assert table, 'no entry in gemm_f16.cu'
out='#include "shim.h"\n#include "shim_f16.h"\n'+src+'#include "driver.h"\nstatic const VariantEmu16 VARIANTS[] = {'+',\n'.join(table)+'};\n#include "main_f16.h"\n'
open(out_dir+'emu_f16.cpp','w').write(out)
print(len(table))
