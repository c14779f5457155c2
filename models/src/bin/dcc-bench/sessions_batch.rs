//! `dcc-bench sessions --batch`: the same N sessions as time-multiplexed, served in rounds by a
//! [`Batcher`]: each round every session brings its chunk, the sessions of one catalog class
//! run their encoder and their flow as batched calls of the contract's batch sizes (the fewest
//! calls, then the most even; through graphs per (class, size, members) on a replay arm), the
//! others alone, counted by reason.
//!
//! The rounds' chunks arrive together (a batching server aligns its sessions: at `realtime`
//! cadence every session's chunk i arrives i chunk-durations after the start), and each
//! session's chunk is done when its round is: its latency is the round's end minus its arrival.
//! At `max` cadence a chunk's latency is the wall time of the call that produced it (its
//! batch's, [`Batcher::call_times`]), as a time-multiplexed session's is its own call's: the
//! two arms' latencies then measure the same thing, and a round of k batches takes about k of
//! them.

use std::time::{Duration, Instant};

use dcc_models::token2wav::serve::{Batcher, NotBatchable, Request, Session, StreamInputs};
use dcc_models::token2wav::{BatchSizes, BatchedFlow, SolverParams};

use super::super::error::BenchError;
use super::super::{MIB, Res, Setup, mel_bytes, non_finite};
use super::{Cadence, RunResult, SessionsArgs, chunk_seconds};

/// Runs `r.n` sessions of `r.arm` in batched rounds over `sizes`.
pub(super) fn rounds(
    s: &Setup,
    a: &SessionsArgs,
    streams: &[StreamInputs],
    sizes: &[usize],
    r: &mut RunResult,
) -> Res<()> {
    let (arm, n) = (r.arm, r.n);
    let e = |error| BenchError::Flow {
        arm: Some(arm.name()),
        error,
    };
    s.be.synchronize()?;
    s.be.reset_peak();
    let (chunk, la) = (s.sizes.chunk_tokens, s.sizes.lookahead_tokens);
    let frames = s.dev.call_frames(chunk + la, false);
    let sizes = BatchSizes::new(sizes).map_err(e)?;
    let flow = BatchedFlow::new(s.dev.clone(), &s.contract.arena, sizes, frames).map_err(e)?;
    let replay = arm.replay().is_some().then_some(&s.contract);
    let mut batcher = Batcher::new(flow, replay);
    let mut ses = Vec::with_capacity(n);
    for _ in 0..n {
        ses.push(Session::new(s.dev.clone(), s.contract, arm, SolverParams::default()).map_err(e)?);
    }
    r.per_session_mib =
        ses.iter().map(|x| x.bytes().total()).sum::<usize>() as f64 / n as f64 / MIB;
    let prime = |ses: &mut [Session]| -> Res<()> {
        for (x, st) in ses.iter_mut().zip(streams) {
            x.prime(&st.prompt_call(la), &st.prompt_mel, &st.spk)
                .map_err(e)?;
        }
        Ok(())
    };
    let round = |b: &mut Batcher, ses: &mut [Session], i: usize| -> Res<Vec<Vec<f32>>> {
        let reqs = streams
            .iter()
            .take(n)
            .map(|st| {
                Ok(Request {
                    tokens: st.chunk(i, chunk, la).ok_or(BenchError::NoChunk(i))?,
                    spk: &st.spk,
                    last_chunk: false,
                })
            })
            .collect::<Res<Vec<_>>>()?;
        b.round(ses, &reqs)
            .into_iter()
            .map(|m| m.map_err(e))
            .collect()
    };
    super::progress(format_args!(
        "{} batched × {n}: sessions created",
        arm.name()
    ));
    prime(&mut ses)?;
    for i in 0..a.common.warmup {
        round(&mut batcher, &mut ses, i)?;
        super::progress(format_args!(
            "{} batched × {n}: warm-up round {i}",
            arm.name()
        ));
    }
    prime(&mut ses)?;
    let warm = batcher.stats().clone();
    let warm_phases = batcher.phases().clone();
    s.be.synchronize()?;
    let d = chunk_seconds(s.contract.family);
    let realtime = a.cadence == Cadence::Realtime;
    let mut misses = 0u64;
    let mut hashes = vec![Vec::new(); n];
    let t0 = Instant::now();
    for i in 0..a.common.chunks {
        let arrival = Duration::from_secs_f64(d * i as f64);
        if realtime && let Some(wait) = arrival.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
        let window = a.common.profiler_window && i + 1 == a.common.chunks;
        if window {
            s.be.profiler_window(true)?;
        }
        let mels = round(&mut batcher, &mut ses, i)?;
        if window {
            s.be.profiler_window(false)?;
        }
        let done = t0.elapsed();
        for (k, m) in mels.iter().enumerate() {
            // at --cadence max, the wall time of the call that produced the chunk (its batch's),
            // as a time-multiplexed session's latency is its own call's
            r.latency_ms.push(if realtime {
                done.saturating_sub(arrival).as_secs_f64() * 1e3
            } else {
                batcher.call_times()[k].as_secs_f64() * 1e3
            });
            if realtime && done > arrival + Duration::from_secs_f64(d) {
                misses += 1;
            }
            if let Some(p) = non_finite(i, "mel", m) {
                r.problems.push(format!("session {k}: {p}"));
            }
            hashes[k].extend_from_slice(&mel_bytes(m));
        }
        super::progress(format_args!("{} batched × {n}: round {i}", arm.name()));
    }
    r.wall_s = t0.elapsed().as_secs_f64();
    r.misses = realtime.then_some(misses);
    let mem = s.be.memory();
    r.used_mib = match (mem.device_free, mem.device_total) {
        (Some(f), Some(t)) => Some((t - f) as f64 / MIB),
        _ => None,
    };
    r.shas = hashes.iter().map(|h| dcc_runtime::sha256_hex(h)).collect();
    // the measured chunks' batches and reasons (the warm-up's taken out)
    let st = batcher.stats();
    for (size, k) in &st.batches {
        let k = k - warm.batches.get(size).copied().unwrap_or(0);
        if k > 0 {
            r.batches.insert(*size, k);
        }
    }
    for why in NotBatchable::ALL {
        let (now, before) = (st.alone.get(&why), warm.alone.get(&why));
        let k = now.copied().unwrap_or(0) - before.copied().unwrap_or(0);
        if k > 0 {
            r.not_batchable.insert(why.name(), k);
        }
    }
    let rep = batcher.engines().report();
    r.batch_replays = Some((rep.calls, rep.replays));
    let enc = batcher.engines().encoder_report();
    r.encoder_replays = Some((enc.calls, enc.replays));
    r.batch_mib = batcher.bytes() as f64 / MIB;
    let p = batcher.phases().since(&warm_phases);
    let m = p.mean();
    super::progress(format_args!(
        "{} batched × {n}: per group (ms, {} groups): stage {:.2}, encoder {:.2} host / {:.2} \
         device, between {:.2}, flow {:.2} host / {:.2} device, finish {:.2}",
        arm.name(),
        m.groups,
        m.stage_ms,
        m.encode_host_ms,
        m.encode_device_ms,
        m.between_ms,
        m.flow_host_ms,
        m.flow_device_ms,
        m.finish_ms,
    ));
    r.phases = Some(p);
    Ok(())
}
