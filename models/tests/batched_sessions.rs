//! Exact cross-session batching (Host backend, tiny model, the invariant GEMM path): four
//! sessions with their own prompt, speaker and tokens, interleaved time-multiplexed and in
//! batched rounds (pairs, and one batch of four), each emit exactly the mel the same session
//! emits alone on the same flow, bit for bit; one session's turn reset mid-stream takes it out
//! of its batch for that chunk (counted `reset`, its class-mates' odd one `remainder`), a last
//! chunk runs alone (`last_chunk`), a refused request refuses its session only, and a flow on
//! the backend GEMM path is refused a batch. Every group's encoders run as one batched encoder
//! call (`BatchStats::encoder_batches` equals the batched flow calls), and a session that fails
//! between that call and the flow leaves its batch alone. The same on CUDA when a GPU exists (otherwise
//! `SKIP (cuda): ...`; `DCC_REQUIRE_GPU=1` makes that a failure).

use std::collections::BTreeMap;
use std::sync::Arc;

use dcc_models::token2wav::serve::{Arm, Batcher, NotBatchable, Request, Session, StreamInputs};
use dcc_models::token2wav::{BatchSizes, BatchedFlow, FlowError, SolverParams};
use dcc_runtime::backend::Backend;
use dcc_runtime::ops::GemmPath;
use dcc_runtime::replay::Fallback;

mod common;
mod rig;
use rig::Rig;

const SESSIONS: usize = 4;
const CHUNKS: usize = 3;
/// The session whose turn is reset (primed again) before this chunk of the second pass.
const RESET: (usize, usize) = (2, 1);
/// Chunk width (tokens) and the encoder's lookahead.
const CHUNK: (usize, usize) = (25, 3);

fn rig_on(be: Arc<dyn Backend>, gemm: GemmPath) -> Rig {
    rig::tiny(be, gemm, SESSIONS)
}

fn rig(gemm: GemmPath) -> Rig {
    rig_on(dcc_runtime::backend::host(), gemm)
}

fn session(r: &Rig, arm: Arm) -> Session {
    Session::new(r.dev.clone(), r.contract, arm, SolverParams::default()).unwrap()
}

fn prime(s: &mut Session, x: &StreamInputs) {
    s.prime(&x.prompt_call(CHUNK.1), &x.prompt_mel, &x.spk)
        .unwrap();
}

fn tokens_of(x: &StreamInputs, i: usize) -> &[u32] {
    x.chunk(i, CHUNK.0, CHUNK.1).unwrap()
}

/// Two passes per session: prime and `CHUNKS` chunks, then prime again and `CHUNKS` chunks,
/// session `RESET.0` primed again before its chunk `RESET.1` of the second pass.
type Passes = [Vec<Vec<f32>>; 2];

fn alone(r: &Rig, arm: Arm) -> Vec<Passes> {
    r.streams
        .iter()
        .enumerate()
        .map(|(k, x)| {
            let mut s = session(r, arm);
            let mut passes: Passes = Default::default();
            for (pass, mels) in passes.iter_mut().enumerate() {
                prime(&mut s, x);
                for i in 0..CHUNKS {
                    if pass == 1 && (k, i) == RESET {
                        prime(&mut s, x);
                    }
                    mels.push(s.chunk(tokens_of(x, i), &x.spk, false).unwrap());
                }
            }
            passes
        })
        .collect()
}

/// The four sessions through `batcher`'s rounds, both passes; returns each session's mels.
fn batched(r: &Rig, arm: Arm, batcher: &mut Batcher) -> Vec<Passes> {
    let mut ses: Vec<Session> = (0..SESSIONS).map(|_| session(r, arm)).collect();
    let mut got: Vec<Passes> = vec![Default::default(); SESSIONS];
    for pass in 0..2 {
        for (s, x) in ses.iter_mut().zip(&r.streams) {
            prime(s, x);
        }
        for i in 0..CHUNKS {
            if pass == 1 {
                let (k, at) = RESET;
                if at == i {
                    prime(&mut ses[k], &r.streams[k]);
                }
            }
            let reqs: Vec<Request<'_>> = r
                .streams
                .iter()
                .map(|x| Request {
                    tokens: tokens_of(x, i),
                    spk: &x.spk,
                    last_chunk: false,
                })
                .collect();
            for (g, mel) in got.iter_mut().zip(batcher.round(&mut ses, &reqs)) {
                g[pass].push(mel.unwrap());
            }
        }
    }
    got
}

#[test]
fn batch_sizes_and_workspace_come_from_the_contract() {
    use dcc_generated::token2wav_tiny as g;
    let r = rig(GemmPath::Invariant);
    assert_eq!(r.contract.flow_batch, g::FLOW_BATCH);
    let sizes = BatchSizes::new(r.contract.flow_batch).unwrap();
    let max = sizes.max();
    let frames = r.dev.call_frames(CHUNK.0 + CHUNK.1, false);
    // the rows a batched call presents per session: the contract's
    assert_eq!(2 * frames, g::FLOW_ROWS_PER_SESSION);
    let flow = BatchedFlow::new(r.dev.clone(), &r.contract.arena, sizes, frames).unwrap();
    // one solver workspace per batch slot, as the contract sizes a slot
    assert_eq!(flow.workspace_bytes(), max * g::BATCH_SLOT_BYTES);
}

fn batcher(r: &Rig, sizes: &[usize], replay: bool) -> Batcher {
    let replay = replay.then_some(&r.contract);
    let sizes = BatchSizes::new(sizes).unwrap();
    let frames = r.dev.call_frames(CHUNK.0 + CHUNK.1, false);
    let flow = BatchedFlow::new(r.dev.clone(), &r.contract.arena, sizes, frames).unwrap();
    Batcher::new(flow, replay)
}

fn reasons(b: &Batcher) -> BTreeMap<NotBatchable, u64> {
    b.stats().alone.clone()
}

/// Batch counts and reasons of both passes: every round all four batch (`per_round` batches
/// of `size`), but the reset round (the reset session alone, `reset`; the other three a pair
/// and a `remainder`) and the round after it (the reset session one chunk behind the others,
/// alone as `class_mismatch`; again a pair and a `remainder`).
fn expect(b: &Batcher, size: usize, per_round: u64) {
    let st = b.stats();
    let rounds = 2 * CHUNKS as u64;
    let mut batches = BTreeMap::from([(size, per_round * (rounds - 2))]);
    *batches.entry(2).or_default() += 2;
    assert_eq!(st.batches, batches, "{st:?}");
    let want = BTreeMap::from([
        (NotBatchable::ClassMismatch, 1),
        (NotBatchable::Reset, 1),
        (NotBatchable::Remainder, 2),
    ]);
    assert_eq!(reasons(b), want);
    let batched: u64 = st.batches.iter().map(|(n, k)| *n as u64 * k).sum();
    assert_eq!(st.batched_chunks, batched);
    // every group's encoders ran as one batched encoder call
    assert_eq!(st.encoder_batches, st.batches, "{st:?}");
}

#[test]
fn batched_pairs_each_equal_alone() {
    let r = rig(GemmPath::Invariant);
    let arm = Arm::SRc;
    let want = alone(&r, arm);
    for k in 1..SESSIONS {
        assert_ne!(want[k], want[0], "stream {k} emits stream 0's mel");
    }
    // the batched calls through graphs: captured per (class, size, members) in the first
    // pass, replayed in the second (the same classes again after the prime)
    let mut pairs = batcher(&r, &[1, 2], true);
    assert_eq!(batched(&r, arm, &mut pairs), want);
    expect(&pairs, 2, 2);
    let rep = pairs.engines().report();
    assert!(rep.replays > 0 && rep.classes_captured > 0, "{rep:?}");
    assert_eq!(
        rep.calls,
        pairs.stats().batches.values().sum::<u64>(),
        "{rep:?}"
    );
    // the pairs (0, 1) and (2, 3); the reset rounds' pair is (0, 1) again
    assert_eq!(rep.engines, 2, "{rep:?}");
    let eager: u64 = rep.fallbacks.values().sum();
    assert_eq!(rep.replays + eager, rep.calls, "{rep:?}");
    let probation = rep.fallbacks.get(&Fallback::Probation).copied();
    assert_eq!(probation, Some(rep.classes_captured), "{rep:?}");
    // the batched encoder calls through graphs of their own, per (class, size, members)
    let enc = pairs.engines().encoder_report();
    assert!(enc.replays > 0 && enc.classes_captured > 0, "{enc:?}");
    let encoder_calls: u64 = pairs.stats().encoder_batches.values().sum();
    assert_eq!(enc.calls, encoder_calls, "{enc:?}");
    assert_eq!(enc.engines, 2, "{enc:?}");
    let eager: u64 = enc.fallbacks.values().sum();
    assert_eq!(enc.replays + eager, enc.calls, "{enc:?}");
    assert!(pairs.bytes() > pairs.flow().bytes(), "the graphs are held");
    // the sessions are gone: the next round drops their groups' graphs
    let mut fresh: Vec<Session> = (0..2).map(|_| session(&r, arm)).collect();
    for (s, x) in fresh.iter_mut().zip(&r.streams) {
        prime(s, x);
    }
    let reqs: Vec<Request<'_>> = r.streams[..2]
        .iter()
        .map(|x| Request {
            tokens: tokens_of(x, 0),
            spk: &x.spk,
            last_chunk: false,
        })
        .collect();
    for (k, mel) in pairs.round(&mut fresh, &reqs).into_iter().enumerate() {
        assert_eq!(mel.unwrap(), want[k][0][0], "fresh session {k}");
    }
    let rep = pairs.engines().report();
    assert_eq!((rep.engines, rep.discarded), (3, 2), "{rep:?}");
    let enc = pairs.engines().encoder_report();
    assert_eq!((enc.engines, enc.discarded), (3, 2), "{enc:?}");
}

#[test]
fn batches_of_four_each_equal_alone_eager_arm() {
    let r = rig(GemmPath::Invariant);
    let arm = Arm::S;
    let want = alone(&r, arm);
    let mut fours = batcher(&r, &[1, 2, 4], false);
    assert_eq!(batched(&r, arm, &mut fours), want);
    expect(&fours, 4, 1);
}

#[test]
fn interleaved_and_batched_sessions_each_equal_alone() {
    // the case: four sessions interleaved time-multiplexed, plus one batched pair, on
    // one flow, each equal to alone
    let r = rig(GemmPath::Invariant);
    let arm = Arm::SRc;
    let want = alone(&r, arm);
    let mut pair = batcher(&r, &[1, 2], true);
    let mut four: Vec<Session> = (0..SESSIONS).map(|_| session(&r, arm)).collect();
    let mut two: Vec<Session> = (0..2).map(|_| session(&r, arm)).collect();
    for (s, x) in four
        .iter_mut()
        .chain(two.iter_mut())
        .zip(r.streams.iter().cycle())
    {
        prime(s, x);
    }
    for i in 0..CHUNKS {
        for (k, ((s, x), w)) in four.iter_mut().zip(&r.streams).zip(&want).enumerate() {
            let mel = s.chunk(tokens_of(x, i), &x.spk, false).unwrap();
            assert_eq!(mel, w[0][i], "interleaved session {k}, chunk {i}");
        }
        let reqs: Vec<Request<'_>> = r.streams[..2]
            .iter()
            .map(|x| Request {
                tokens: tokens_of(x, i),
                spk: &x.spk,
                last_chunk: false,
            })
            .collect();
        for (k, mel) in pair.round(&mut two, &reqs).into_iter().enumerate() {
            assert_eq!(
                mel.unwrap(),
                want[k][0][i],
                "batched session {k}, chunk {i}"
            );
        }
    }
    assert_eq!(pair.stats().batches.get(&2), Some(&(CHUNKS as u64)));
    assert_eq!(pair.stats().encoder_batches, pair.stats().batches);
    assert!(pair.stats().alone.is_empty(), "{:?}", pair.stats());
}

#[test]
fn a_failure_after_the_batched_encoder_fails_its_session_only() {
    // four sessions batch; session 1 fails between the batched encoder call and the flow: it
    // leaves the batch (the rows behind it close up), the other three's flow runs as a batch
    // of three, each equal to alone; the failed session refuses its next chunk, the others
    // batch on
    let r = rig(GemmPath::Invariant);
    let arm = Arm::SRc;
    let want = alone(&r, arm);
    let mut b = batcher(&r, &[1, 2, 4], false);
    let mut ses: Vec<Session> = (0..SESSIONS).map(|_| session(&r, arm)).collect();
    for (s, x) in ses.iter_mut().zip(&r.streams) {
        prime(s, x);
    }
    let reqs = |i: usize| -> Vec<Request<'_>> {
        r.streams
            .iter()
            .map(|x| Request {
                tokens: tokens_of(x, i),
                spk: &x.spk,
                last_chunk: false,
            })
            .collect()
    };
    ses[1].inject_fault_after_encoder();
    for (k, mel) in b.round(&mut ses, &reqs(0)).into_iter().enumerate() {
        if k == 1 {
            assert!(matches!(mel, Err(FlowError::Device(_))), "{mel:?}");
        } else {
            assert_eq!(mel.unwrap(), want[k][0][0], "session {k}, chunk 0");
        }
    }
    let st = b.stats();
    assert_eq!(st.encoder_batches, BTreeMap::from([(4, 1)]), "{st:?}");
    assert_eq!(st.batches, BTreeMap::from([(3, 1)]), "{st:?}");
    for (k, mel) in b.round(&mut ses, &reqs(1)).into_iter().enumerate() {
        if k == 1 {
            assert!(matches!(mel, Err(FlowError::SessionFailed(_))), "{mel:?}");
        } else {
            assert_eq!(mel.unwrap(), want[k][0][1], "session {k}, chunk 1");
        }
    }
    let st = b.stats();
    assert_eq!(st.encoder_batches, BTreeMap::from([(4, 1), (2, 1)]));
    assert_eq!(reasons(&b), BTreeMap::from([(NotBatchable::Remainder, 1)]));
}

#[test]
fn refusals_touch_their_session_only() {
    let r = rig(GemmPath::Invariant);
    let arm = Arm::SRc;
    let want = alone(&r, arm);
    let mut b = batcher(&r, &[1, 2, 4], false);
    let mut ses: Vec<Session> = (0..SESSIONS).map(|_| session(&r, arm)).collect();
    for (s, x) in ses.iter_mut().zip(&r.streams) {
        prime(s, x);
    }
    // chunk 0: session 3's token is out of the vocabulary: refused, the state untouched; the
    // other three batch (a pair and a remainder)
    let bad: Vec<u32> = vec![u32::MAX; CHUNK.0 + CHUNK.1];
    let reqs: Vec<Request<'_>> = r
        .streams
        .iter()
        .enumerate()
        .map(|(k, x)| Request {
            tokens: if k == 3 { &bad } else { tokens_of(x, 0) },
            spk: &x.spk,
            last_chunk: false,
        })
        .collect();
    let out = b.round(&mut ses, &reqs);
    // each chunk's call time: the pair's batched call for both members, session 2's own call,
    // none for the refused session 3
    let t = b.call_times();
    assert_eq!(t.len(), SESSIONS);
    let zero = std::time::Duration::ZERO;
    assert!(t[0] > zero && t[0] == t[1], "{t:?}");
    assert!(t[2] > zero && t[3] == zero, "{t:?}");
    for (k, mel) in out.iter().enumerate() {
        if k == 3 {
            assert!(matches!(mel, Err(FlowError::Input(_))), "{mel:?}");
        } else {
            assert_eq!(mel.as_ref().unwrap(), &want[k][0][0], "session {k}");
        }
    }
    // session 3 retries chunk 0 alone (its class holds it alone): equal to alone
    let x = &r.streams[3];
    let mel = ses[3].chunk(tokens_of(x, 0), &x.spk, false).unwrap();
    assert_eq!(mel, want[3][0][0]);
    // chunk 1, every session a last chunk: each alone, counted
    let reqs: Vec<Request<'_>> = r
        .streams
        .iter()
        .map(|x| Request {
            tokens: tokens_of(x, 1),
            spk: &x.spk,
            last_chunk: true,
        })
        .collect();
    assert!(b.round(&mut ses, &reqs).iter().all(|m| m.is_ok()));
    let alone = reasons(&b);
    assert_eq!(alone.get(&NotBatchable::LastChunk), Some(&4), "{alone:?}");
    assert_eq!(alone.get(&NotBatchable::Remainder), Some(&1), "{alone:?}");
    // a stock arm cannot batch
    let mut stock = vec![session(&r, Arm::Rc)];
    prime(&mut stock[0], &r.streams[0]);
    let x = &r.streams[0];
    let reqs = [Request {
        tokens: tokens_of(x, 0),
        spk: &x.spk,
        last_chunk: false,
    }];
    let mel = b.round(&mut stock, &reqs).remove(0).unwrap();
    assert_eq!(reasons(&b).get(&NotBatchable::Stock), Some(&1));
    assert_eq!(mel.len(), want[0][0][0].len());
}

#[test]
fn batching_needs_the_invariant_path_and_sizes_from_one() {
    let r = rig(GemmPath::Backend);
    let sizes = BatchSizes::new(&[1, 2]).unwrap();
    let e = BatchedFlow::new(r.dev.clone(), &r.contract.arena, sizes, 50).err();
    assert!(matches!(e, Some(FlowError::Config(_))), "{e:?}");
    for bad in [&[][..], &[2, 4], &[1, 1], &[1, 4, 2]] {
        assert!(BatchSizes::new(bad).is_err(), "{bad:?}");
    }
    assert_eq!(BatchSizes::new(&[1, 2, 4, 8]).unwrap().split(13), [8, 4, 1]);
}

#[test]
fn cuda_batched_sessions_each_equal_alone() {
    let be = match dcc_runtime::backend::cuda(0) {
        Ok(be) => be,
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
            return;
        }
    };
    let r = rig_on(be, GemmPath::Invariant);
    // replayed pairs and eager fours of the replay arm, eager fours of the eager arm
    for (arm, sizes, replay) in [
        (Arm::SRc, &[1, 2][..], true),
        (Arm::SRc, &[1, 2, 4], false),
        (Arm::S, &[1, 2, 4], false),
    ] {
        let want = alone(&r, arm);
        let mut b = batcher(&r, sizes, replay);
        assert_eq!(batched(&r, arm, &mut b), want, "{arm:?} {sizes:?}");
        expect(
            &b,
            sizes[sizes.len() - 1],
            4 / sizes[sizes.len() - 1] as u64,
        );
        if replay {
            let rep = b.engines().report();
            assert!(rep.replays > 0, "{rep:?}");
            let enc = b.engines().encoder_report();
            assert!(enc.replays > 0, "{enc:?}");
        }
    }
}
