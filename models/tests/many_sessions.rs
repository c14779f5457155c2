//! Many sessions on one flow (Host backend, tiny model): four sessions with their own prompt,
//! speaker and token stream ([`StreamInputs::variant`]), interleaved chunk by chunk on the one
//! stream of one [`DeviceFlow`], each emit exactly the mel the same session emits alone, bit for
//! bit. They share the weights, the activation workspace and the arena's per-process part (the
//! solver workspace and mask: one call's lifetime) and each owns only the arena's per-session
//! part; one session's prime (a turn reset) mid-stream leaves the others' audio unchanged.

use dcc_models::token2wav::SolverParams;
use dcc_models::token2wav::serve::{Arm, Session, StreamInputs};
use dcc_runtime::ops::GemmPath;

mod common;
mod rig;
use rig::Rig;

const SESSIONS: usize = 4;
const CHUNKS: usize = 3;
/// The session whose stream is reset (primed again) after this many chunks, interleaved.
const RESET: (usize, usize) = (2, 1);

fn rig() -> Rig {
    rig::tiny(dcc_runtime::backend::host(), GemmPath::default(), SESSIONS)
}

fn prime(s: &mut Session, x: &StreamInputs) {
    s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
}

fn chunk(s: &mut Session, x: &StreamInputs, i: usize) -> Vec<f32> {
    s.chunk(x.chunk(i, 25, 3).unwrap(), &x.spk, false).unwrap()
}

/// The two passes every session runs: prime and `CHUNKS` chunks (which captures every class,
/// as a served session's first turn does), then prime again and `CHUNKS` chunks in steady
/// state, session `RESET.0` primed again (a turn reset) before its chunk `RESET.1`.
type Passes = [Vec<Vec<f32>>; 2];

/// Each session alone, on the same flow, through the same calls as interleaved.
fn alone(r: &Rig, arm: Arm) -> Vec<Passes> {
    r.streams
        .iter()
        .enumerate()
        .map(|(k, x)| {
            let mut s =
                Session::new(r.dev.clone(), r.contract, arm, SolverParams::default()).unwrap();
            let mut passes: Passes = Default::default();
            for (pass, mels) in passes.iter_mut().enumerate() {
                prime(&mut s, x);
                for i in 0..CHUNKS {
                    if pass == 1 && (k, i) == RESET {
                        prime(&mut s, x);
                    }
                    mels.push(chunk(&mut s, x, i));
                }
            }
            passes
        })
        .collect()
}

fn interleaved(r: &Rig, arm: Arm) {
    let want = alone(r, arm);
    for k in 1..SESSIONS {
        assert_ne!(want[k], want[0], "{arm:?}: stream {k} emits stream 0's mel");
    }
    let be = r.dev.backend().clone();
    let before = be.memory().live_total;
    let mut ses: Vec<Session> = (0..SESSIONS)
        .map(|_| Session::new(r.dev.clone(), r.contract, arm, SolverParams::default()).unwrap())
        .collect();
    // each session holds what it reports, nothing more
    let held: usize = ses.iter().map(|s| s.bytes().total()).sum();
    assert_eq!(be.memory().live_total - before, held, "{arm:?}");
    if arm.state_rule() {
        // the per-process part is shared, the per-session part is each session's own
        let ws: Vec<_> = ses.iter().map(|s| s.state().solver_workspace()).collect();
        let carry: Vec<_> = ses.iter().map(|s| s.state().estimator_carry()).collect();
        assert!(ws.windows(2).all(|w| w[0] == w[1]), "{arm:?}: {ws:?}");
        for (i, c) in carry.iter().enumerate() {
            assert!(!carry[i + 1..].contains(c), "{arm:?}: carries {carry:?}");
        }
        for s in &ses {
            assert_eq!(
                s.bytes().state,
                dcc_generated::token2wav_tiny::SESSION_BYTES,
                "{arm:?}"
            );
        }
    }
    for pass in 0..2 {
        for (s, x) in ses.iter_mut().zip(&r.streams) {
            prime(s, x);
        }
        let mut got = vec![Vec::new(); SESSIONS];
        for i in 0..CHUNKS {
            for (k, (s, x)) in ses.iter_mut().zip(&r.streams).enumerate() {
                if pass == 1 && (k, i) == RESET {
                    prime(s, x);
                }
                got[k].push(chunk(s, x, i));
            }
        }
        for (k, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(got, &want[pass], "{arm:?}: session {k}, pass {pass}");
        }
    }
    if arm.replay().is_some() {
        // each session replays its own graphs, captured against its own per-session part
        for (k, s) in ses.iter().enumerate() {
            let replays: u64 = s.reports().iter().map(|r| r.replays).sum();
            assert!(replays > 0, "{arm:?}: session {k} never replayed");
        }
    }
    // dropping the sessions returns the device bytes they held
    drop(ses);
    assert_eq!(be.memory().live_total, before, "{arm:?}");
}

#[test]
fn four_interleaved_sessions_each_equal_alone() {
    let r = rig();
    // the state rule with chunk-clock replay: shared per-process part, each session's own
    // per-session part and graphs (the stock arms share nothing but the flow: `dcc-bench
    // sessions` runs them)
    interleaved(&r, Arm::SRc);
}
