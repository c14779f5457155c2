//! Synthetic kernels (`kernels/cuda/synthetic.cu`) for the runtime's tests and benchmark.

use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::{CudaSource, KernelDef};

pub static SOURCE: CudaSource = CudaSource {
    name: "synthetic",
    code: include_str!("../cuda/synthetic.cu"),
};

/// `affine_f32(out, in, n: i64, a: f32, b: f32)`: `out[i] = in[i] * a + b`.
pub static AFFINE: KernelDef = KernelDef {
    name: "synthetic.affine_f32",
    source: &SOURCE,
    entry: "affine_f32",
    params: &[Param::Ptr, Param::Ptr, Param::I64, Param::F32, Param::F32],
    host: host_affine,
};

/// `mix_f32(out, x, y, n: i64, wx: f32, wy: f32)`: `out[i] = x[i] * wx + y[i] * wy`.
pub static MIX: KernelDef = KernelDef {
    name: "synthetic.mix_f32",
    source: &SOURCE,
    entry: "mix_f32",
    params: &[
        Param::Ptr,
        Param::Ptr,
        Param::Ptr,
        Param::I64,
        Param::F32,
        Param::F32,
    ],
    host: host_mix,
};

/// `row_sum_f32(out, in, rows: i64, cols: i64)`: sequential sum per row.
pub static ROW_SUM: KernelDef = KernelDef {
    name: "synthetic.row_sum_f32",
    source: &SOURCE,
    entry: "row_sum_f32",
    params: &[Param::Ptr, Param::Ptr, Param::I64, Param::I64],
    host: host_row_sum,
};

/// `hash_u32(data, n: i64, salt: u32)`: an integer mixing step in place.
pub static HASH: KernelDef = KernelDef {
    name: "synthetic.hash_u32",
    source: &SOURCE,
    entry: "hash_u32",
    params: &[Param::Ptr, Param::I64, Param::U32],
    host: host_hash,
};

/// `spin_cycles(cycles: i64)`: device busy-wait; a no-op on Host.
pub static SPIN: KernelDef = KernelDef {
    name: "synthetic.spin_cycles",
    source: &SOURCE,
    entry: "spin_cycles",
    params: &[Param::I64],
    host: host_spin,
};

pub static KERNELS: &[&KernelDef] = &[&AFFINE, &MIX, &ROW_SUM, &HASH, &SPIN];

unsafe fn host_affine(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (out, inp, n, s, b) = (
        a.ptr(0)?.0 as *mut f32,
        a.ptr(1)?.0 as *const f32,
        a.usize(2)?,
        a.f32(3)?,
        a.f32(4)?,
    );
    for i in 0..n {
        // SAFETY: HostFn contract; elementwise, so out == in is fine.
        unsafe { out.add(i).write(inp.add(i).read() * s + b) };
    }
    Ok(())
}

unsafe fn host_mix(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let out = a.ptr(0)?.0 as *mut f32;
    let (x, y) = (a.ptr(1)?.0 as *const f32, a.ptr(2)?.0 as *const f32);
    let (n, wx, wy) = (a.usize(3)?, a.f32(4)?, a.f32(5)?);
    for i in 0..n {
        // SAFETY: HostFn contract; elementwise.
        unsafe {
            out.add(i)
                .write(x.add(i).read() * wx + y.add(i).read() * wy)
        };
    }
    Ok(())
}

unsafe fn host_row_sum(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (out, inp, rows, cols) = (
        a.ptr(0)?.0 as *mut f32,
        a.ptr(1)?.0 as *const f32,
        a.usize(2)?,
        a.usize(3)?,
    );
    for r in 0..rows {
        let mut acc = 0.0f32;
        for c in 0..cols {
            // SAFETY: HostFn contract.
            acc += unsafe { inp.add(r * cols + c).read() };
        }
        // SAFETY: HostFn contract.
        unsafe { out.add(r).write(acc) };
    }
    Ok(())
}

/// The integer mix of `hash_u32`.
pub fn mix32(v: u32, salt: u32, i: u64) -> u32 {
    let mut x = v ^ salt ^ (i as u32);
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846ca68b);
    x ^= x >> 16;
    x
}

unsafe fn host_hash(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (data, n, salt) = (a.ptr(0)?.0 as *mut u32, a.usize(1)?, a.u32(2)?);
    for i in 0..n {
        // SAFETY: HostFn contract.
        unsafe { data.add(i).write(mix32(data.add(i).read(), salt, i as u64)) };
    }
    Ok(())
}

unsafe fn host_spin(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    a.i64(0)?;
    Ok(())
}
