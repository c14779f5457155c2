//! Micro-benchmark: one callable of K small kernels (default 2,000), eager vs exact-shape replay.
//!
//! Reports per chunk and per kernel: host wall time (issue + completion), device-busy time (CUDA
//! events around the chunk's work, queued behind a spin kernel so host issue gaps do not count),
//! capture time, launches per chunk, memory, and the SHA-256 of every chunk's outputs for both
//! arms (they must be equal). A table first, then one JSON line.
//!
//! `dcc-replay-bench [--backend cuda|host] [--kernels K] [--chunks C] [--busy-reps R] [--n N]`

use std::sync::Arc;
use std::time::Instant;

use dcc_runtime::backend::{self, AllocKind, Backend, BackendKind, DeviceBuffer};
use dcc_runtime::contract::{DType, Effects, Granularity, Signature, TensorSig, Verdict};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::replay::{
    Call, ExactShapeReplay, Invocation, Outcome, ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;
use dcc_runtime::{Arg, LaunchDims, Result};
use sha2::Digest;

const N_DEFAULT: usize = 1024;

struct Opts {
    backend: String,
    kernels: usize,
    chunks: usize,
    busy_reps: usize,
    n: usize,
}

fn parse() -> std::result::Result<Opts, String> {
    let mut o = Opts {
        backend: "cuda".into(),
        kernels: 2000,
        chunks: 50,
        busy_reps: 10,
        n: N_DEFAULT,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--backend" => o.backend = val()?,
            "--kernels" => o.kernels = val()?.parse().map_err(|e| format!("--kernels: {e}"))?,
            "--chunks" => o.chunks = val()?.parse().map_err(|e| format!("--chunks: {e}"))?,
            "--busy-reps" => o.busy_reps = val()?.parse().map_err(|e| format!("--busy-reps: {e}"))?,
            "--n" => o.n = val()?.parse().map_err(|e| format!("--n: {e}"))?,
            "-h" | "--help" => return Err("usage: dcc-replay-bench [--backend cuda|host] [--kernels K] [--chunks C] [--busy-reps R] [--n N]".into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.kernels == 0 || o.chunks < 2 || o.n == 0 {
        return Err("need --kernels >= 1, --chunks >= 2, --n >= 1".into());
    }
    Ok(o)
}

/// The callable: kernel 0 mixes the staged input into buffer 0; kernel i (i >= 1) is an affine
/// or a mix over a ring of 4 buffers. `scalars[0]` = K, `dims(0)[0]` = n.
fn chain(call: &mut Call<'_>) -> Result<()> {
    let b = call.backend();
    let n = call.dims(0)?[0];
    let k = call.scalar(0)? as usize;
    let bufs = [
        call.write(0)?,
        call.write(1)?,
        call.write(2)?,
        call.write(3)?,
    ];
    let d = LaunchDims::linear(n, 256);
    let ni = n as i64;
    let x = call.input(0)?;
    // SAFETY (this and the launches below): every launch is elementwise over `n` f32. Input 0
    // has dims [n] (`Rig::call` passes `Rig::x`, allocated with `o.n` floats and dims
    // [self.n]; during capture the engine's staging copy of that shape), and the four written
    // regions are `Rig::bufs`, each allocated with `o.n` floats, so `n` floats lie inside each.
    // The Rig owns them for the whole run, so they outlive the engine's graphs. Here out == x:
    // MIX is elementwise (it reads index i before writing it), which allows that.
    unsafe {
        b.launch(
            &ks::MIX,
            d,
            &[
                Arg::Ptr(bufs[0]),
                Arg::Ptr(bufs[0]),
                Arg::Ptr(x),
                Arg::I64(ni),
                Arg::F32(0.5),
                Arg::F32(0.5),
            ],
        )
    }?;
    for i in 1..k {
        let (src, dst, other) = (bufs[i % 4], bufs[(i + 1) % 4], bufs[(i + 2) % 4]);
        if i % 2 == 0 {
            // SAFETY: as above: dst and src are two of the Rig's buffers of `n` floats.
            unsafe {
                b.launch(
                    &ks::AFFINE,
                    d,
                    &[
                        Arg::Ptr(dst),
                        Arg::Ptr(src),
                        Arg::I64(ni),
                        Arg::F32(0.999),
                        Arg::F32(0.001 * (i % 7) as f32),
                    ],
                )
            }?;
        } else {
            // SAFETY: as above: dst, src and other are three distinct buffers of the Rig's ring
            // of four, `n` floats each.
            unsafe {
                b.launch(
                    &ks::MIX,
                    d,
                    &[
                        Arg::Ptr(dst),
                        Arg::Ptr(src),
                        Arg::Ptr(other),
                        Arg::I64(ni),
                        Arg::F32(0.5),
                        Arg::F32(0.5),
                    ],
                )
            }?;
        }
    }
    Ok(())
}

fn input(n: usize, chunk: usize) -> Vec<f32> {
    let mut s = (chunk as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

struct Arm {
    name: &'static str,
    wall_ms: Vec<f64>,
    busy_ms: Vec<f64>,
    issue_ms: Vec<f64>,
    launches_per_chunk: f64,
    sha_chunks: String,
    sha_final: String,
}

/// The element at sorted index `len / 2` (`pct`'s index `round((len − 1) · 0.5)` is exactly that:
/// the product is exact in f64 and `round` takes `m − 0.5` up to `m`).
fn median(v: &[f64]) -> f64 {
    pct(v, 0.5)
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        f64::NAN
    } else {
        s[((s.len() - 1) as f64 * p).round() as usize]
    }
}

type Engine = ExactShapeReplay<fn(&mut Call<'_>) -> Result<()>>;

struct Rig {
    b: Arc<dyn Backend>,
    x: DeviceBuffer,
    bufs: Vec<DeviceBuffer>,
    n: usize,
    k: usize,
}

impl Rig {
    fn reset(&self) -> Result<()> {
        for (i, buf) in self.bufs.iter().enumerate() {
            self.b.upload(buf.ptr(), &input(self.n, 10_000 + i))?;
        }
        Ok(())
    }

    fn call(&self, e: &mut Engine) -> Result<Outcome> {
        let dims = [self.n];
        let inputs = [TensorArg {
            ptr: self.x.ptr(),
            dims: &dims,
            strides: &[1],
            dtype: DType::F32,
        }];
        let writes: Vec<WriteArg> = self
            .bufs
            .iter()
            .map(|b| WriteArg {
                ptr: b.ptr(),
                bytes: b.bytes(),
            })
            .collect();
        e.call(&Invocation {
            inputs: &inputs,
            writes: &writes,
            scalars: &[self.k as i64],
        })
    }

    fn spin(&self) -> Result<()> {
        // ~2e8 SM cycles (about 0.1 s at 2 GHz): long enough to queue a whole chunk behind it.
        if self.b.kind() == BackendKind::Cuda {
            // SAFETY: SPIN takes no pointer argument; it only burns cycles.
            unsafe {
                self.b.launch(
                    &ks::SPIN,
                    LaunchDims::blocks(1, 32),
                    &[Arg::I64(200_000_000)],
                )
            }?;
        }
        Ok(())
    }

    fn run(
        &self,
        name: &'static str,
        e: &mut Engine,
        chunks: usize,
        busy_reps: usize,
    ) -> Result<Arm> {
        self.reset()?;
        let mut chunk_hash = sha2::Sha256::new();
        let mut wall = Vec::new();
        let mut l0 = self.b.eager_launches();
        for c in 0..chunks {
            if c == 1 {
                l0 = self.b.eager_launches();
            }
            self.b.upload(self.x.ptr(), &input(self.n, c))?;
            self.b.synchronize()?;
            let t = Instant::now();
            let o = self.call(e)?;
            self.b.synchronize()?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if c > 0 {
                wall.push(ms);
                if name == "replay" && !matches!(o, Outcome::Replayed { .. }) {
                    return Err(dcc_runtime::Error::Invalid(format!(
                        "chunk {c} was not replayed: {o:?}"
                    )));
                }
            }
            chunk_hash.update(self.b.download::<u8>(self.bufs[0].ptr(), self.n * 4)?);
        }
        let launches = (self.b.eager_launches() - l0) as f64 / (chunks - 1) as f64;
        let mut fin = sha2::Sha256::new();
        for buf in &self.bufs {
            fin.update(self.b.download::<u8>(buf.ptr(), self.n * 4)?);
        }
        // Device-busy: the chunk's work queued behind a spin kernel, events around it.
        let mut busy = Vec::new();
        let mut issue = Vec::new();
        for r in 0..busy_reps {
            self.b.upload(self.x.ptr(), &input(self.n, 5000 + r))?;
            self.spin()?;
            let m0 = self.b.marker()?;
            let t = Instant::now();
            self.call(e)?;
            issue.push(t.elapsed().as_secs_f64() * 1e3);
            let m1 = self.b.marker()?;
            busy.push(self.b.elapsed_ms(&m0, &m1)?);
        }
        Ok(Arm {
            name,
            wall_ms: wall,
            busy_ms: busy,
            issue_ms: issue,
            launches_per_chunk: launches,
            sha_chunks: format!("{:x}", chunk_hash.finalize()),
            sha_final: format!("{:x}", fin.finalize()),
        })
    }
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("dcc-replay-bench: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<()> {
    let b: Arc<dyn Backend> = match o.backend.as_str() {
        "cuda" => backend::cuda(0)?,
        "host" => backend::host(),
        other => {
            return Err(dcc_runtime::Error::Invalid(format!(
                "unknown backend {other}"
            )));
        }
    };
    b.preload(ks::KERNELS)?;
    let dims: &'static [usize] = Box::leak(vec![o.n].into_boxed_slice());
    let inputs: &'static [TensorSig] = Box::leak(
        vec![TensorSig {
            name: "x",
            dims,
            strides: &[1],
            dtype: DType::F32,
            aliased: false,
        }]
        .into_boxed_slice(),
    );
    let scalars: &'static [i64] = Box::leak(vec![o.kernels as i64].into_boxed_slice());
    let catalog: &'static [Signature] = Box::leak(
        vec![Signature {
            callable: "chain",
            class: 0,
            attended: o.n,
            inputs,
            scalars,
        }]
        .into_boxed_slice(),
    );
    let spec = ReplaySpec {
        name: "chain",
        verdict: Verdict::Captured,
        granularity: Granularity::Chunk,
        effects: Effects::None,
        rng_increment: 0,
        writes: 4,
        catalog,
    };
    let rig = Rig {
        x: b.alloc(o.n * 4, AllocKind::Other)?,
        bufs: (0..4)
            .map(|_| b.alloc(o.n * 4, AllocKind::Other))
            .collect::<Result<_>>()?,
        b: b.clone(),
        n: o.n,
        k: o.kernels,
    };
    let f: fn(&mut Call<'_>) -> Result<()> = chain;
    let mut eager = ExactShapeReplay::new(
        b.clone(),
        ReplaySpec {
            verdict: Verdict::OutWidth,
            ..spec
        },
        Arc::new(HostRng::new(0)),
        None,
        f,
    )?;
    let mut replay = ExactShapeReplay::new(b.clone(), spec, Arc::new(HostRng::new(0)), None, f)?;
    // Warm-up (module load, first launches) outside every number.
    rig.reset()?;
    rig.call(&mut eager)?;
    b.synchronize()?;

    let e = rig.run("eager", &mut eager, o.chunks, o.busy_reps)?;
    let r = rig.run("replay", &mut replay, o.chunks, o.busy_reps)?;
    let rep = replay.report();
    let mem = b.memory();
    let k = o.kernels as f64;
    let equal = e.sha_chunks == r.sha_chunks && e.sha_final == r.sha_final;

    println!("device: {} ({:?})", b.device_name(), b.kind());
    println!(
        "callable: {} kernels over 4 x {} f32, {} chunks (first excluded from timing), {} busy reps",
        o.kernels, o.n, o.chunks, o.busy_reps
    );
    println!();
    println!(
        "| arm | wall p50 ms/chunk | wall p95 | µs/kernel (wall) | device-busy ms/chunk | µs/kernel (busy) | host issue ms | launches/chunk |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for a in [&e, &r] {
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} |",
            a.name,
            median(&a.wall_ms),
            pct(&a.wall_ms, 0.95),
            median(&a.wall_ms) * 1e3 / k,
            median(&a.busy_ms),
            median(&a.busy_ms) * 1e3 / k,
            median(&a.issue_ms),
            a.launches_per_chunk
        );
    }
    println!();
    println!(
        "speedup (wall p50): {:.2}x",
        median(&e.wall_ms) / median(&r.wall_ms)
    );
    println!(
        "capture: {:.3} ms (probe {:.3} ms), {} graph nodes, graph memory {} B",
        rep.capture_ms,
        rep.probe_ms,
        rep.graph_nodes,
        mem.live(AllocKind::Graph)
    );
    println!("engine: {rep}");
    println!("memory: {mem}");
    println!(
        "sha256 per-chunk outputs: eager {} replay {}",
        e.sha_chunks, r.sha_chunks
    );
    println!(
        "sha256 final state:       eager {} replay {}",
        e.sha_final, r.sha_final
    );
    println!("outputs equal: {equal}");
    println!(
        "{{\"device\":\"{}\",\"backend\":\"{:?}\",\"kernels\":{},\"n\":{},\"chunks\":{},\"eager\":{{\"wall_p50_ms\":{:.4},\"wall_p95_ms\":{:.4},\"busy_p50_ms\":{:.4},\"issue_p50_ms\":{:.4},\"us_per_kernel_wall\":{:.4},\"us_per_kernel_busy\":{:.4},\"launches_per_chunk\":{},\"sha256\":\"{}\"}},\"replay\":{{\"wall_p50_ms\":{:.4},\"wall_p95_ms\":{:.4},\"busy_p50_ms\":{:.4},\"issue_p50_ms\":{:.4},\"us_per_kernel_wall\":{:.4},\"us_per_kernel_busy\":{:.4},\"launches_per_chunk\":{},\"sha256\":\"{}\"}},\"capture_ms\":{:.4},\"probe_ms\":{:.4},\"graph_nodes\":{},\"graph_bytes\":{},\"staging_bytes\":{},\"peak_bytes\":{},\"outputs_equal\":{}}}",
        b.device_name(),
        b.kind(),
        o.kernels,
        o.n,
        o.chunks,
        median(&e.wall_ms),
        pct(&e.wall_ms, 0.95),
        median(&e.busy_ms),
        median(&e.issue_ms),
        median(&e.wall_ms) * 1e3 / k,
        median(&e.busy_ms) * 1e3 / k,
        e.launches_per_chunk,
        e.sha_chunks,
        median(&r.wall_ms),
        pct(&r.wall_ms, 0.95),
        median(&r.busy_ms),
        median(&r.issue_ms),
        median(&r.wall_ms) * 1e3 / k,
        median(&r.busy_ms) * 1e3 / k,
        r.launches_per_chunk,
        r.sha_chunks,
        rep.capture_ms,
        rep.probe_ms,
        rep.graph_nodes,
        mem.live(AllocKind::Graph),
        rep.staging_bytes,
        mem.peak_total,
        equal
    );
    if !equal {
        return Err(dcc_runtime::Error::Invalid(
            "replay outputs differ from eager".into(),
        ));
    }
    Ok(())
}
