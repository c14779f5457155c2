//! Device randomness kernels (`kernels/cuda/rng.cu`) and their host twins.

use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::philox;
use crate::{CudaSource, KernelDef};

pub static SOURCE: CudaSource = CudaSource {
    name: "rng",
    code: include_str!("../cuda/rng.cu"),
};

/// `philox_bits_u32(state: *const u64[2], out: *mut u32, n: i64)`.
pub static BITS_U32: KernelDef = KernelDef {
    name: "rng.philox_bits_u32",
    source: &SOURCE,
    entry: "philox_bits_u32",
    params: &[Param::Ptr, Param::Ptr, Param::I64],
    host: host_bits_u32,
};

/// `philox_uniform_f32(state: *const u64[2], out: *mut f32, n: i64)`.
pub static UNIFORM_F32: KernelDef = KernelDef {
    name: "rng.philox_uniform_f32",
    source: &SOURCE,
    entry: "philox_uniform_f32",
    params: &[Param::Ptr, Param::Ptr, Param::I64],
    host: host_uniform_f32,
};

/// `add_uniform_f32(out: *mut f32, x: *const f32, state: *const u64[2], n: i64, scale: f32)`.
pub static ADD_UNIFORM_F32: KernelDef = KernelDef {
    name: "rng.add_uniform_f32",
    source: &SOURCE,
    entry: "add_uniform_f32",
    params: &[Param::Ptr, Param::Ptr, Param::Ptr, Param::I64, Param::F32],
    host: host_add_uniform_f32,
};

/// `philox_advance(state: *mut u64[2], increment: u64)`: `state[1] += increment`.
pub static ADVANCE: KernelDef = KernelDef {
    name: "rng.philox_advance",
    source: &SOURCE,
    entry: "philox_advance",
    params: &[Param::Ptr, Param::U64],
    host: host_advance,
};

pub static KERNELS: &[&KernelDef] = &[&BITS_U32, &UNIFORM_F32, &ADD_UNIFORM_F32, &ADVANCE];

/// Reads `[seed, offset]`.
///
/// # Safety
/// `p` addresses two readable `u64`.
unsafe fn state(p: u64) -> (u64, u64) {
    let s = p as *const u64;
    // SAFETY: caller guarantees two readable words.
    unsafe { (s.read_unaligned(), s.add(1).read_unaligned()) }
}

unsafe fn host_bits_u32(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract.
    let (seed, offset) = unsafe { state(a.ptr(0)?.0) };
    let out = a.ptr(1)?.0 as *mut u32;
    for i in 0..a.usize(2)? {
        // SAFETY: out holds n words (HostFn contract).
        unsafe { out.add(i).write(philox::bits(seed, offset, i as u64)) };
    }
    Ok(())
}

unsafe fn host_uniform_f32(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract.
    let (seed, offset) = unsafe { state(a.ptr(0)?.0) };
    let out = a.ptr(1)?.0 as *mut f32;
    for i in 0..a.usize(2)? {
        // SAFETY: out holds n floats.
        unsafe {
            out.add(i)
                .write(philox::uniform(philox::bits(seed, offset, i as u64)))
        };
    }
    Ok(())
}

unsafe fn host_add_uniform_f32(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let out = a.ptr(0)?.0 as *mut f32;
    let x = a.ptr(1)?.0 as *const f32;
    // SAFETY: HostFn contract.
    let (seed, offset) = unsafe { state(a.ptr(2)?.0) };
    let n = a.usize(3)?;
    let scale = a.f32(4)?;
    for i in 0..n {
        let u = philox::uniform(philox::bits(seed, offset, i as u64));
        // SAFETY: x and out hold n floats (they may be the same buffer: read before write).
        unsafe { out.add(i).write(x.add(i).read() + scale * u) };
    }
    Ok(())
}

unsafe fn host_advance(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let s = a.ptr(0)?.0 as *mut u64;
    let inc = a.u64(1)?;
    // SAFETY: s addresses two u64 (HostFn contract).
    unsafe {
        let off = s.add(1);
        off.write_unaligned(off.read_unaligned().wrapping_add(inc));
    }
    Ok(())
}
