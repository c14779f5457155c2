//! `--profile` (token2wav): one steady-state eager chunk (arm B0's code path) queued behind a
//! spin kernel with a marker before every op; device µs per op category on stderr.

use std::time::Instant;

use dcc_runtime::backend::BackendKind;

use dcc_models::token2wav::SolverParams;
use dcc_models::token2wav::serve::{Arm, Session};

use super::error::BenchError;
use super::inputs::tokens_of;
use super::{Res, Setup, roofline, spin};

/// Spin iterations the device runs per host millisecond, measured (a spin of `PROBE` iterations
/// between two synchronizations).
fn spin_rate(s: &Setup) -> Res<f64> {
    const PROBE: i64 = 50_000_000;
    s.be.synchronize()?;
    let t = Instant::now();
    spin(s.be.as_ref(), PROBE)?;
    s.be.synchronize()?;
    Ok(PROBE as f64 / (t.elapsed().as_secs_f64() * 1e3).max(1e-3))
}

/// One eager steady-state chunk with a marker before every op, behind a spin kernel.
///
/// The device must not start the chunk before the host has queued all of it, or the time the
/// host spends queueing (markers included) shows up as gaps between ops. So the chunk is queued
/// twice: the first pass (chunk 2) measures the host's queueing time behind a 1 s spin, the
/// second (chunk 3, the reported one) sits behind a spin of twice that, sized by the measured
/// spin rate; the line says whether the spin outlasted the queueing. It cannot always: the
/// driver's launch queue holds on the order of a thousand operations, so a chunk of several
/// thousand ops (markers included) blocks the host until the spin ends, and the ops queued after
/// that run as fast as the host issues them (measured on an H100: the full model's 2,672-op chunk
/// queued in 2.2 s behind a 2.1 s spin). The per-op device times then include those gaps.
pub fn profile(s: &Setup) -> Res<()> {
    let be = &s.be;
    let e = BenchError::from;
    let io = &s.io;
    let mut ses =
        Session::new(s.dev.clone(), s.contract, Arm::B0, SolverParams::default()).map_err(e)?;
    ses.prime(&s.prompt, &io.mel, &io.spk).map_err(e)?;
    for i in 0..2 {
        ses.chunk(tokens_of(io, &s.sizes, i)?, &io.spk, false)
            .map_err(e)?;
    }
    let rate = spin_rate(s)?;
    let mut spin_ms = 1000.0;
    let mut last = None;
    for i in 2..4 {
        let toks = tokens_of(io, &s.sizes, i)?;
        s.dev.set_inputs(toks, &io.spk, false).map_err(e)?;
        be.synchronize()?;
        spin(be.as_ref(), (spin_ms * rate) as i64)?;
        s.dev.profile_begin();
        let t = Instant::now();
        let r = ses.enqueue_uploaded(toks.len(), false);
        let host_ms = t.elapsed().as_secs_f64() * 1e3;
        let rows = s.dev.profile_end().map_err(e)?;
        r.map_err(e)?;
        last = Some((rows, host_ms, spin_ms));
        spin_ms = (2.0 * host_ms).max(100.0);
    }
    let Some((rows, host_ms, spin_ms)) = last else {
        return Ok(());
    };
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    let launches: usize = rows.iter().map(|r| r.launches).sum();
    let queued = if be.kind() != BackendKind::Cuda {
        format!("host enqueue {host_ms:.1} ms; the Host backend runs each op as it is queued")
    } else if spin_ms > host_ms {
        format!(
            "host enqueue {host_ms:.1} ms behind a {spin_ms:.0} ms spin: the device started after the whole chunk was queued, no queueing gaps"
        )
    } else {
        format!(
            "host enqueue {host_ms:.1} ms behind a {spin_ms:.0} ms spin: the host queued slower than the spin lasted, so gaps between ops count too"
        )
    };
    eprintln!(
        "profile: one eager chunk on {} ({} ops, {total:.3} ms device between markers; {queued})",
        be.device_name(),
        launches,
    );
    for line in roofline::table(&rows, be.device_name()) {
        eprintln!("{line}");
    }
    Ok(())
}
