//! `--profile` (token2wav): one steady-state eager chunk (arm B0's code path) queued behind a
//! spin kernel with a marker before every op; device µs per op category on stderr.

use std::time::Instant;

use dcc_models::token2wav::SolverParams;
use dcc_models::token2wav::serve::{Arm, Session};

use super::error::BenchError;
use super::inputs::tokens_of;
use super::{Res, Setup, roofline, spin};

/// One eager steady-state chunk with a marker before every op, behind a spin kernel.
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
    let toks = tokens_of(io, &s.sizes, 2)?;
    s.dev.set_inputs(toks, &io.spk, false).map_err(e)?;
    be.synchronize()?;
    spin(be.as_ref(), 1_000_000_000)?;
    s.dev.profile_begin();
    let t = Instant::now();
    let r = ses.enqueue_uploaded(toks.len(), false);
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    let rows = s.dev.profile_end().map_err(e)?;
    r.map_err(e)?;
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    let launches: usize = rows.iter().map(|r| r.launches).sum();
    eprintln!(
        "profile: one eager chunk on {} ({} ops, {total:.3} ms device between markers, host enqueue {host_ms:.1} ms; where the host enqueued slower than the device ran, the gaps count too)",
        be.device_name(),
        launches,
    );
    for line in roofline::table(&rows, be.device_name()) {
        eprintln!("{line}");
    }
    Ok(())
}
