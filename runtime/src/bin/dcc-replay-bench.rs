//! Micro-benchmark: one callable of K small kernels (default 2,000), eager vs exact-shape replay.
//!
//! Reports per chunk and per kernel: host wall time (issue + completion), device-busy time (CUDA
//! events around the chunk's work, queued behind a spin kernel so host issue gaps do not count),
//! capture time, launches per chunk, memory, and the SHA-256 of every chunk's outputs for both
//! arms (they must be equal). A table first, then one JSON line.
//!
//! `dcc-replay-bench --help` documents every flag.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, ValueEnum};
use dcc_runtime::backend::{self, AllocKind, Backend, BackendKind, DeviceBuffer};
use dcc_runtime::contract::{DType, Effects, Granularity, Verdict};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::replay::{
    Call, Catalog, ExactShapeReplay, Invocation, Outcome, OwnedSignature, OwnedTensorSig,
    ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;
use dcc_runtime::stats;
use dcc_runtime::{Arg, LaunchDims, Result};
use sha2::Digest;

/// Most kernels in the callable: its graph has one node per kernel, and 100,000 nodes (50× the
/// default) already take seconds to capture and instantiate.
const MAX_KERNELS: u64 = 100_000;
/// Most chunks per arm: 10,000 samples pin a p95 far more tightly than any run needs, and keep
/// one arm of the default callable (~5 ms per eager chunk) under a minute.
const MAX_CHUNKS: u64 = 10_000;
/// Most device-busy repetitions: each queues a ~0.1 s spin kernel first, so 100 are ~10 s.
const MAX_BUSY_REPS: u64 = 100;
/// Most floats per buffer: 2²⁶ floats are 256 MiB, and the run keeps five such buffers.
const MAX_N: u64 = 1 << 26;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    /// The GPU (device 0).
    Cuda,
    /// The CPU twin.
    Host,
}

#[derive(Parser, Debug)]
#[command(
    name = "dcc-replay-bench",
    version,
    about = "Replay micro-benchmark: one callable of K small kernels, eager vs one CUDA graph",
    long_about = "Replay micro-benchmark: one callable of K small kernels, eager vs one CUDA graph.\n\n\
The callable chains K elementwise kernels (`mix` and `affine`) over a ring of 4 buffers of N f32 \
with one staged input. Both arms run the same chunks: `eager` launches every kernel each chunk; \
`replay` captures the callable once (its first chunk, which is excluded from the timings) and \
then launches one graph per chunk. Reported per arm: wall p50/p95 ms per chunk (issue + \
completion), µs per kernel, device-busy ms per chunk (the chunk queued behind a ~0.1 s spin \
kernel, CUDA events around it, median of --busy-reps), host issue ms, launches per chunk; then \
capture time, graph nodes and memory, and the SHA-256 of both arms' outputs, which must be \
equal (exit 1 otherwise). A markdown table first, then one JSON line.",
    after_help = "Examples:\n  \
dcc-replay-bench                             the defaults: 2,000 kernels over 4 x 1,024 f32, 50 chunks\n  \
dcc-replay-bench --kernels 500 --n 65536     fewer, larger kernels\n  \
dcc-replay-bench --backend host --chunks 3   the CPU twin (semantics, not timing)\n\n\
Exit codes: 0 outputs equal, 1 a run error or outputs differ, 2 usage."
)]
struct Opts {
    /// Where to run: the GPU (device 0), or the CPU twin with the same replay semantics (its
    /// timings mean nothing).
    #[arg(long, value_enum, default_value_t = BackendChoice::Cuda)]
    backend: BackendChoice,
    /// Kernels in the callable (K): one eager launch each, one graph node each.
    #[arg(long, value_name = "K", default_value_t = 2000,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_KERNELS))]
    kernels: usize,
    /// Chunks per arm, including the first (the probe and capture), which is not timed: at
    /// least 2.
    #[arg(long, value_name = "C", default_value_t = 50,
          value_parser = RangedU64ValueParser::<usize>::new().range(2..=MAX_CHUNKS))]
    chunks: usize,
    /// Device-busy repetitions per arm (median reported).
    #[arg(long, value_name = "R", default_value_t = 10,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_BUSY_REPS))]
    busy_reps: usize,
    /// Floats per buffer (N); every kernel is elementwise over N.
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_N))]
    n: usize,
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

/// The numbers the table and the JSON line print for one arm ([`dcc_runtime::stats`]).
struct Summary {
    wall_p50: f64,
    wall_p95: f64,
    busy_p50: f64,
    issue_p50: f64,
}

impl Arm {
    fn summary(&self) -> std::result::Result<Summary, BenchError> {
        let at = |what: &'static str, v: &[f64], q: f64| {
            stats::percentile(v, q).map_err(|e| BenchError::Stats(self.name, what, e))
        };
        Ok(Summary {
            wall_p50: at("wall", &self.wall_ms, 0.5)?,
            wall_p95: at("wall", &self.wall_ms, 0.95)?,
            busy_p50: at("device-busy", &self.busy_ms, 0.5)?,
            issue_p50: at("host issue", &self.issue_ms, 0.5)?,
        })
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error(transparent)]
    Runtime(#[from] dcc_runtime::Error),
    #[error("{0} arm: {1} times: {2}")]
    Stats(&'static str, &'static str, stats::StatsError),
    #[error("replay outputs differ from eager")]
    OutputsDiffer,
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
    let o = match Opts::try_parse() {
        Ok(o) => o,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("dcc-replay-bench: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> std::result::Result<(), BenchError> {
    let b: Arc<dyn Backend> = match o.backend {
        BackendChoice::Cuda => backend::cuda(0)?,
        BackendChoice::Host => backend::host(),
    };
    b.preload(ks::KERNELS)?;
    // The catalog's one class is sized by the command line: derived at run time and owned by
    // the engines (freed with them).
    let catalog: Catalog = vec![OwnedSignature {
        callable: Cow::Borrowed("chain"),
        class: 0,
        attended: o.n,
        inputs: Box::new([OwnedTensorSig {
            name: Cow::Borrowed("x"),
            dims: Box::new([o.n]),
            strides: Box::new([1]),
            dtype: DType::F32,
            aliased: false,
        }]),
        scalars: Box::new([o.kernels as i64]),
    }]
    .into();
    let spec = ReplaySpec {
        name: Cow::Borrowed("chain"),
        verdict: Verdict::Captured,
        granularity: Granularity::Chunk,
        effects: Effects::NONE,
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
            ..spec.clone()
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
    let (es, rs) = (e.summary()?, r.summary()?);

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
    for (a, m) in [(&e, &es), (&r, &rs)] {
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} |",
            a.name,
            m.wall_p50,
            m.wall_p95,
            m.wall_p50 * 1e3 / k,
            m.busy_p50,
            m.busy_p50 * 1e3 / k,
            m.issue_p50,
            a.launches_per_chunk
        );
    }
    println!();
    println!("speedup (wall p50): {:.2}x", es.wall_p50 / rs.wall_p50);
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
        es.wall_p50,
        es.wall_p95,
        es.busy_p50,
        es.issue_p50,
        es.wall_p50 * 1e3 / k,
        es.busy_p50 * 1e3 / k,
        e.launches_per_chunk,
        e.sha_chunks,
        rs.wall_p50,
        rs.wall_p95,
        rs.busy_p50,
        rs.issue_p50,
        rs.wall_p50 * 1e3 / k,
        rs.busy_p50 * 1e3 / k,
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
        return Err(BenchError::OutputsDiffer);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> std::result::Result<Opts, String> {
        Opts::try_parse_from(std::iter::once("dcc-replay-bench").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.backend, BackendChoice::Cuda);
        assert_eq!(
            (o.kernels, o.chunks, o.busy_reps, o.n),
            (2000, 50, 10, 1024)
        );
        let o = parse(&[
            "--backend",
            "host",
            "--kernels",
            "3",
            "--chunks",
            "2",
            "--n",
            "7",
        ])
        .unwrap();
        assert_eq!(
            (o.backend, o.kernels, o.chunks, o.n),
            (BackendChoice::Host, 3, 2, 7)
        );
    }

    #[test]
    fn nonsense_values_are_refused() {
        for (args, flag) in [
            (&["--kernels", "0"][..], "--kernels"),
            (&["--kernels", "100001"], "--kernels"),
            (&["--chunks", "1"], "--chunks"),
            (&["--chunks", "10001"], "--chunks"),
            (&["--busy-reps", "0"], "--busy-reps"),
            (&["--busy-reps", "101"], "--busy-reps"),
            (&["--n", "0"], "--n"),
            (&["--n", "67108865"], "--n"),
            (&["--n", "-1"], "-1"),
            (&["--backend", "tpu"], "--backend"),
            (&["--bogus"], "--bogus"),
        ] {
            let e = parse(args).expect_err(&format!("{args:?} parsed"));
            assert!(e.contains(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn help_is_well_formed() {
        Opts::command().debug_assert();
    }
}
