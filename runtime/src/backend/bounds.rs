//! Range checks shared by both backends: a registry of live allocations (start address →
//! length) and the extent, overlap and alignment arithmetic that every copy, memset, GEMM and
//! kernel launch is checked with before it touches device memory.
//!
//! Both backends run the same checks and refuse with the same typed errors
//! ([`Error::Dangling`] for an address no live buffer owns, [`Error::OutOfBounds`] for a range
//! that starts inside a buffer and leaves it, [`Error::Invalid`] for misalignment, overlap or an
//! impossible descriptor). All arithmetic is overflow-checked: an address near `u64::MAX` plus
//! a large count is out of bounds, never wrapped around.
//!
//! Every allocation carries an identity ([`Allocation::id`], from a per-backend counter), so a
//! graph that recorded the allocations it touches can tell a buffer that is still the one it saw
//! from one freed and reallocated at the same address with the same length
//! ([`Live::check_same`]).
//!
//! A lookup is one `BTreeMap` range query under a mutex and never allocates, so it is cheap on
//! the eager path and allowed inside a capture.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use dcc_kernels::{Arg, DevPtr, KernelDef};

use super::Gemm;
use crate::error::{Error, Result};

/// A poisoned lock only means another thread panicked while holding it; the guarded maps stay
/// consistent (single insert/remove operations) and `()` has no state to corrupt.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Live allocations of one backend by start address.
///
/// `stream` is the Host "stream" (see `HostBackend`): every Host operation that touches buffer
/// memory holds it from its bounds check to its last access, and unregistering a buffer (before
/// it is freed) takes it too. The CUDA backend does not hold it: it holds the [`Live`] guard from
/// its check until the work is enqueued, and a buffer is unregistered under the same lock before
/// its (stream-ordered) free is enqueued, so checked work is always ordered before the free.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Start address → (length, identity).
    live: Mutex<BTreeMap<u64, (usize, u64)>>,
    stream: Mutex<()>,
    /// The last identity handed out (identities start at 1).
    last_id: AtomicU64,
}

impl Registry {
    /// Registers the allocation `[start, start + len)` under a fresh identity, which it returns.
    pub(crate) fn insert(&self, start: u64, len: usize) -> u64 {
        let id = self.last_id.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.live).insert(start, (len, id));
        id
    }

    /// Unregisters the allocation starting at `start`, after any Host operation in flight on
    /// another thread (which checked it live) has finished.
    pub(crate) fn remove(&self, start: u64) {
        let _stream = self.stream();
        lock(&self.live).remove(&start);
    }

    /// The live allocations, locked: no buffer of this backend is unregistered (freed) while the
    /// guard is held.
    pub(crate) fn live(&self) -> Live<'_> {
        Live(lock(&self.live))
    }

    /// Checks that `[addr, addr + bytes)` lies inside one live allocation ([`Live::check`]),
    /// for `Backend::check_range`.
    pub(crate) fn check_range(&self, addr: u64, bytes: usize) -> Result<()> {
        self.live().check(addr, bytes).map(|_| ())
    }

    /// Serializes access to Host buffer memory (see the type's docs).
    pub(crate) fn stream(&self) -> MutexGuard<'_, ()> {
        lock(&self.stream)
    }
}

/// One live allocation, as a check found it: its whole range (not just the bytes checked) and
/// its identity.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Allocation {
    /// First byte.
    pub start: u64,
    /// Bytes.
    pub len: usize,
    /// Unique per backend over its life: a buffer freed and reallocated at the same address
    /// gets a new one.
    pub id: u64,
}

impl Allocation {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        // Cannot overflow: the range of a real allocation.
        self.start + self.len as u64
    }
}

/// The device memory one stream operation names, checked by [`Live::validate`].
pub(crate) enum Access<'a> {
    /// A kernel launch: argument kinds against the kernel's parameters, and the start of each
    /// pointer argument inside a live buffer (kernels declare no footprint: how far one reaches
    /// from there is `Backend::launch`'s `# Safety` contract).
    Launch(&'static KernelDef, &'a [Arg]),
    /// A device-to-device copy: both ranges in full, and not overlapping.
    Dtod {
        dst: DevPtr,
        src: DevPtr,
        bytes: usize,
    },
    /// `count` 32-bit words: in full, 4-byte aligned.
    Memset32 { dst: DevPtr, count: usize },
    /// A GEMM (with its bias, for `gemm_bias`): every operand over all its batches,
    /// f32-aligned.
    Gemm(&'a Gemm, Option<DevPtr>),
}

/// The locked registry (see [`Registry::live`]).
pub(crate) struct Live<'a>(MutexGuard<'a, BTreeMap<u64, (usize, u64)>>);

impl Live<'_> {
    /// Checks that `[addr, addr + bytes)` lies inside one live allocation and returns it
    /// (`bytes == 0` checks that `addr` lies in an allocation or at its end).
    pub(crate) fn check(&self, addr: u64, bytes: usize) -> Result<Allocation> {
        let Some((&start, &(len, id))) = self.0.range(..=addr).next_back() else {
            return Err(Error::Dangling(addr));
        };
        // `start + len` cannot overflow: it is the end of a real allocation.
        let end = start + len as u64;
        match addr.checked_add(bytes as u64) {
            Some(last) if last <= end => Ok(Allocation { start, len, id }),
            _ if addr < end => Err(Error::OutOfBounds(format!(
                "{bytes} bytes at {addr:#x} overrun the buffer {start:#x}+{len}"
            ))),
            _ => Err(Error::Dangling(addr)),
        }
    }

    /// Checks `count` elements of `T` at `addr`: in bounds and aligned for `T`.
    pub(crate) fn check_elems<T>(&self, addr: u64, count: usize, what: &str) -> Result<Allocation> {
        if !addr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(Error::Invalid(format!(
                "{what} at {addr:#x} is not aligned to {} bytes",
                std::mem::align_of::<T>()
            )));
        }
        let bytes = count.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::OutOfBounds(format!(
                "{what}: {count} elements overflow the address space"
            ))
        })?;
        self.check(addr, bytes)
    }

    /// Checks that `a` is still live as it was found: the same range under the same identity.
    /// [`Error::Reallocated`] when its start lies in a live allocation that is not `a` (freed
    /// and reallocated), [`Error::Dangling`] when no live allocation holds it.
    pub(crate) fn check_same(&self, a: &Allocation) -> Result<()> {
        if let Some(&(len, id)) = self.0.get(&a.start)
            && len == a.len
            && id == a.id
        {
            return Ok(());
        }
        let covered = self
            .0
            .range(..=a.start)
            .next_back()
            .is_some_and(|(&start, &(len, _))| a.start < start + len as u64);
        Err(if covered {
            Error::Reallocated(a.start)
        } else {
            Error::Dangling(a.start)
        })
    }

    /// Checks every address `op` names (see [`Access`]); `touched` sees the allocation of each
    /// operand that passed (a capture records them for [`Live::check_same`] at replay).
    pub(crate) fn validate(
        &self,
        op: Access<'_>,
        mut touched: impl FnMut(Allocation),
    ) -> Result<()> {
        match op {
            Access::Launch(kernel, args) => {
                kernel.check_args(args)?;
                for a in args {
                    if let Arg::Ptr(p) = a {
                        touched(self.check(p.0, 0)?);
                    }
                }
                Ok(())
            }
            Access::Dtod { dst, src, bytes } => {
                touched(self.check(dst.0, bytes)?);
                touched(self.check(src.0, bytes)?);
                // Both ranges lie in allocations, so these sums do not overflow.
                let (d, s, n) = (dst.0, src.0, bytes as u64);
                if n > 0 && d < s + n && s < d + n {
                    return Err(Error::Invalid(format!(
                        "dtod ranges overlap ({n} bytes {s:#x} -> {d:#x})"
                    )));
                }
                Ok(())
            }
            Access::Memset32 { dst, count } => {
                touched(self.check_elems::<u32>(dst.0, count, "memset_d32")?);
                Ok(())
            }
            Access::Gemm(g, bias) => {
                for (p, elems, what) in gemm_operands(g)? {
                    touched(self.check_elems::<f32>(p.0, elems, what)?);
                }
                if let Some(b) = bias {
                    touched(self.check_elems::<f32>(b.0, g.m, "gemm bias")?);
                }
                Ok(())
            }
        }
    }
}

/// Checks a GEMM descriptor as cuBLAS does (leading dimensions at least the stored rows,
/// batch >= 1) and returns each operand with the elements it spans ([`operand_elems`], all
/// batches included).
pub(crate) fn gemm_operands(g: &Gemm) -> Result<[(DevPtr, usize, &'static str); 3]> {
    let (ar, ac) = if g.trans_a { (g.k, g.m) } else { (g.m, g.k) };
    let (br, bc) = if g.trans_b { (g.n, g.k) } else { (g.k, g.n) };
    let bad = || Error::Invalid(format!("gemm descriptor {g:?}"));
    if g.batch == 0 || g.lda < ar.max(1) || g.ldb < br.max(1) || g.ldc < g.m.max(1) {
        return Err(bad());
    }
    let elems = |rows, cols, ld, stride| operand_elems(rows, cols, ld, stride, g.batch);
    Ok([
        (
            g.a,
            elems(ar, ac, g.lda, g.stride_a).ok_or_else(bad)?,
            "gemm A",
        ),
        (
            g.b,
            elems(br, bc, g.ldb, g.stride_b).ok_or_else(bad)?,
            "gemm B",
        ),
        (
            g.c,
            elems(g.m, g.n, g.ldc, g.stride_c).ok_or_else(bad)?,
            "gemm C",
        ),
    ])
}

/// What `gemm_bias` accepts beyond [`gemm_operands`]: one batch, `beta == 0`, and a 16-byte
/// aligned bias (cuBLASLt's bias pointer; the Host twin refuses the same, so code that runs on
/// Host runs on CUDA).
pub(crate) fn check_gemm_bias(g: &Gemm, bias: DevPtr) -> Result<()> {
    if g.batch != 1 || g.beta != 0.0 {
        return Err(Error::Invalid(format!(
            "gemm_bias descriptor {g:?} (batch 1, beta 0)"
        )));
    }
    if !bias.0.is_multiple_of(16) {
        return Err(Error::Invalid(format!(
            "gemm_bias: bias {bias} is not 16-byte aligned"
        )));
    }
    Ok(())
}

/// Elements a column-major operand of `rows × cols` (leading dimension `ld`) spans over `batch`
/// matrices `stride` elements apart: one past the largest index a GEMM touches,
/// `(rows-1) + (cols-1)·ld + (batch-1)·stride + 1`, 0 when it touches none; `None` on overflow.
pub(crate) fn operand_elems(
    rows: usize,
    cols: usize,
    ld: usize,
    stride: usize,
    batch: usize,
) -> Option<usize> {
    if rows == 0 || cols == 0 || batch == 0 {
        return Some(0);
    }
    (rows - 1)
        .checked_add((cols - 1).checked_mul(ld)?)?
        .checked_add((batch - 1).checked_mul(stride)?)?
        .checked_add(1)
}
