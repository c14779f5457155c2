//! The derivation half of the contract language: trajectories (first-call advance, schedules,
//! `retention: none`), operating points that disable regions or change dtypes, query phases,
//! loop-specialised signatures, and the derivation fixes (order independence, the flush bound's
//! W_r, lock-step on actual trajectories, ∏K_r overflow, the arena total). Each fixture in
//! `tests/derive_lang/` checks clean; its report is snapshotted, and the tests below pin the
//! numbers.

use dcc_compiler::ir::Verdict;
use dcc_compiler::{Checked, check_source, generate, load_file};

fn fixture(name: &str) -> Checked {
    let path = format!(
        "{}/tests/derive_lang/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    match load_file(&path) {
        Ok(c) => c,
        Err(e) => panic!("{path}: {e}"),
    }
}

fn module(c: &Checked) -> String {
    generate(c)
        .expect("generates")
        .into_values()
        .next()
        .expect("one module")
}

/// How many `dcc::Signature {` entries the generated catalog of `callable` lists.
/// Signatures of `callable` in the base's catalog of a generated module (the operating points'
/// catalogs follow `pub mod operating_points`).
fn generated_signatures(module: &str, callable: &str) -> usize {
    let marker = format!("callable: \"{callable}\"");
    let base = module
        .split("pub mod operating_points")
        .next()
        .unwrap_or("");
    base.matches(&marker).count()
}

#[test]
fn reports() {
    insta::glob!("derive_lang/*.yaml", |path| {
        let c = load_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let text = dcc_compiler::report::text(&c);
        // The file path differs between machines; the rest is the rendered report.
        let text = text.replace(&path.display().to_string(), "<spec>");
        insta::assert_snapshot!(text);
    });
}

#[test]
fn first_call_advance_and_schedule_follow_the_walk() {
    let c = fixture("trajectories");
    let d = &c.derived;
    let flow = d.region("flow_cache").unwrap();
    // 0 (first call), +0, +50, +75, then +25 per call, bounded at 200.
    assert_eq!(flow.catalog, vec![0, 50, 125, 150, 175, 200]);
    assert_eq!(flow.width.width.value, 6);
    assert_eq!(flow.width.schedule, vec![0, 50, 75]);
    let mel = d.region("mel_cache").unwrap();
    assert_eq!(
        (mel.catalog.clone(), mel.width.width.value),
        (vec![0, 8], 2)
    );
    let hop = d.region("hop_cache").unwrap();
    assert_eq!(hop.catalog, vec![0, 25, 75, 175, 275, 375, 400]);
    let call = d.callable("flow").unwrap();
    assert_eq!((call.reachable, call.classes), (Some(6), Some(6)));
    assert_eq!(call.reserve().classes.len(), 6);
    let extents: Vec<u64> = call
        .reserve()
        .classes
        .iter()
        .map(|k| k.extents[0].1)
        .collect();
    assert_eq!(extents, flow.catalog);
    assert_eq!(generated_signatures(&module(&c), "flow"), 6);
    // A partial flush is bounded by the largest advance (75) and the admission bound (75).
    assert_eq!(call.flush_classes.as_ref().map(|f| f.value), Some(75));
}

#[test]
fn retention_none_is_out_unbounded() {
    let c = fixture("unbounded");
    let d = &c.derived;
    let kv = d.region("kv").unwrap();
    assert!(kv.width.unbounded);
    // Storage sized to the declared envelope; without one, to the first call.
    assert_eq!(kv.envelope_extent.value, 4096);
    assert_eq!(d.region("history").unwrap().envelope_extent.value, 16);
    for name in ["decode", "summarize"] {
        let call = d.callable(name).unwrap();
        assert_eq!(call.verdict, Verdict::OutUnbounded, "{name}");
        assert_eq!(call.classes, None, "{name}");
        assert!(
            call.reason.contains("grows for the whole session"),
            "{}",
            call.reason
        );
        assert!(!call.reserve().complete);
    }
    // Not captured: the generated catalog is empty.
    assert_eq!(generated_signatures(&module(&c), "decode"), 0);
    // Storage sized for the first call only is worth a warning, with the rendered message.
    let warnings = c.warnings.render();
    assert_eq!(c.warnings.items.len(), 1, "{warnings}");
    insta::assert_snapshot!(warnings.replace(&c.source.path.display().to_string(), "<spec>"));
}

#[test]
fn operating_points_disable_and_change_dtype() {
    let c = fixture("points");
    let base = &c.derived;
    let op = |n: &str| {
        c.operating_points
            .iter()
            .find(|o| o.operating_point == n)
            .unwrap()
    };
    // `no_cache`: the region's extent is 0, it has no bytes, the arena shrinks.
    let off = op("no_cache");
    let r = off.region("flow_cache").unwrap();
    assert!(r.disabled);
    assert_eq!((r.attended_extent.value, r.live_bytes), (0, 0));
    assert_eq!(r.catalog, vec![0]);
    assert_eq!(off.arena.slot("flow_cache").map(|s| s.bytes), Some(0));
    assert!(off.arena.total_bytes < base.arena.total_bytes);
    let flow = off.callable("flow").unwrap();
    let cache = &flow.reserve().classes[0].args[1];
    assert_eq!(cache.dims, vec![0, 64]);
    assert_eq!(cache.bytes, 0);
    // `no_ctx`: an override sets a fixed extent to 0.
    let no_ctx = op("no_ctx").region("conv_ctx").unwrap();
    assert_eq!((no_ctx.attended_extent.value, no_ctx.live_bytes), (0, 0));
    // A disabled region reserves nothing to compare with: no ρ.
    assert!(r.stock.is_empty());
    assert_eq!(off.stock_bytes, 0);
    // `half`: every f32 region, constant and caller tensor is bf16: bytes halve, ρ doubles.
    let half = op("half");
    for (b, h) in base.regions.iter().zip(&half.regions) {
        assert_eq!(h.dtype, dcc_compiler::ir::DType::BF16);
        assert_eq!(h.live_bytes * 2, b.live_bytes, "{}", b.name);
    }
    let (rb, rh) = (
        base.region("flow_cache").unwrap().stock[0].reserved_bytes,
        half.region("flow_cache").unwrap().stock[0].reserved_bytes,
    );
    assert_eq!(rh * 2, rb);
    let (mb, mh) = (
        base.callable("flow").unwrap().reserve().total_bytes,
        half.callable("flow").unwrap().reserve().total_bytes,
    );
    assert_eq!(mh * 2, mb);
    assert_eq!(half.constants[0].bytes * 2, base.constants[0].bytes);
    // Per name: the cache and the constant only.
    let named = op("half_cache");
    assert_eq!(
        named.region("conv_ctx").unwrap().live_bytes,
        base.region("conv_ctx").unwrap().live_bytes
    );
    assert_eq!(
        named.region("flow_cache").unwrap().dtype,
        dcc_compiler::ir::DType::F16
    );
    assert_eq!(named.constants[0].dtype, dcc_compiler::ir::DType::F16);
    // `flow.mu`: one caller tensor of one callable.
    let mu = &named.callable("flow").unwrap().reserve().classes[0].args[0];
    assert_eq!(
        (mu.name.as_str(), mu.dtype),
        ("mu", dcc_compiler::ir::DType::F16)
    );
    // The generated operating-point module says what changed.
    let m = module(&c);
    assert!(m.contains("pub const FLOW_CACHE_DTYPE: dcc::DType = dcc::DType::BF16;"));
}

#[test]
fn query_phases_agree_across_catalog_reserve_and_generated_table() {
    let c = fixture("phases");
    let call = c.derived.callable("flow").unwrap();
    assert_eq!(call.configs, 3);
    assert_eq!(call.phases, ["first", "steady", "flush"]);
    // First call: extent 0 with 106 input frames; later calls: 100, 150, 200 with 56 (steady)
    // and 34 (flush) frames. 1 + 3 + 3 classes, all enumerated.
    assert_eq!(call.classes, Some(7));
    assert_eq!(call.classes_bound, Some(12));
    let classes = &call.reserve().classes;
    assert_eq!(classes.len(), 7);
    let seen: Vec<(Option<&str>, u64, u64)> = classes
        .iter()
        .map(|k| (k.phase.as_deref(), k.extents[0].1, k.args[0].dims[0]))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("first"), 0, 106),
            (Some("steady"), 100, 56),
            (Some("steady"), 150, 56),
            (Some("steady"), 200, 56),
            (Some("flush"), 100, 34),
            (Some("flush"), 150, 34),
            (Some("flush"), 200, 34),
        ]
    );
    // M_reserve stages exactly these classes.
    let staged: u64 = classes.iter().map(|k| k.staging_bytes).sum();
    assert_eq!(call.reserve().staging_bytes, staged);
    assert_eq!(generated_signatures(&module(&c), "flow"), 7);
    // A flush of 1 to 3 tokens: three configurations at each later extent; without a `first`
    // phase the first call presents the steady shape.
    let enc = c.derived.callable("encoder").unwrap();
    assert_eq!(enc.configs, 4);
    assert_eq!(enc.phases, ["steady", "flush"]);
    assert_eq!((enc.classes, enc.classes_bound), (Some(13), Some(16)));
    let flushes: Vec<&str> = enc
        .reserve()
        .classes
        .iter()
        .filter_map(|k| k.phase.as_deref())
        .filter(|p| p.starts_with("flush"))
        .collect();
    assert_eq!(flushes.len(), 9);
    assert_eq!(flushes[0], "flush (n_tok = 1)");
    assert_eq!(generated_signatures(&module(&c), "encoder"), 13);
    // A scratch region whose extent is a query-phase value: storage for the largest (100
    // frames), each phase's view at its own extent.
    let ws = c.derived.region("workspace").unwrap();
    assert_eq!(ws.envelope_extent.value, 100);
    let est = c.derived.callable("estimator").unwrap();
    let views: Vec<(Option<&str>, Vec<u64>)> = est
        .reserve()
        .classes
        .iter()
        .map(|k| (k.phase.as_deref(), k.args[1].dims.clone()))
        .collect();
    assert_eq!(
        views,
        [
            (Some("first"), vec![100, 64]),
            (Some("steady"), vec![50, 64])
        ]
    );
}

#[test]
fn specialize_step_multiplies_the_catalog_and_keeps_the_ring_axis() {
    let c = fixture("depth");
    let call = c.derived.callable("depth_step").unwrap();
    assert_eq!(call.specialized_steps, Some(8));
    assert_eq!(call.classes, Some(8));
    let classes = &call.reserve_step.classes;
    let steps: Vec<Option<u64>> = classes.iter().map(|k| k.step).collect();
    assert_eq!(steps, (0..8).map(Some).collect::<Vec<_>>());
    // The loop clock is the ring's time axis: the per-step view keeps it.
    assert_eq!(classes[0].args[1].dims, vec![6, 2, 16, 8, 64]);
    // At chunk granularity the whole loop is one graph.
    assert_eq!(call.reserve_chunk.classes.len(), 1);
    let m = module(&c);
    assert_eq!(generated_signatures(&m, "depth_step"), 8);
    assert!(m.contains("dims: &[6, 2, 16, 8, 64]"));
}

/// Two growing regions on one base clock: `a` on frames, `b` on samples (480 per frame); the
/// admission variable counts samples (the finer clock).
fn two_clock_spec(inputs: &str, reads: &str) -> String {
    format!(
        "family: order\nclocks:\n  frame: base\n  sample: 480 per frame\nquantities:\n  d: 4\n\
         regions:\n  a:\n    clock: frame\n    growth: {{ frame: {{ from: 0, by: 8 }} }}\n    \
         retention: {{ window: 24 }}\n    lifetime: session\n    mutability: mutable\n    \
         placement: arena\n    dtype: f32\n    shape: [d]\n  b:\n    clock: sample\n    \
         growth: {{ sample: {{ from: 0, by: 3840 }} }}\n    retention: {{ window: 3840 }}\n    \
         lifetime: session\n    mutability: mutable\n    placement: arena\n    dtype: f32\n    \
         shape: [d]\ncallables:\n  c:\n    granularity: step\n    admit: f <= 3840\n    \
         effects: none\n    query: fixed\n    inputs:\n{inputs}    reads: [{reads}]\n"
    )
}

#[test]
fn catalog_and_flush_bound_do_not_depend_on_declaration_order() {
    let one =
        check_source("one.yaml", &two_clock_spec("      x: { region: b }\n", "a")).expect("checks");
    let two =
        check_source("two.yaml", &two_clock_spec("      x: { region: a }\n", "b")).expect("checks");
    let (c1, c2) = (
        one.derived.callable("c").unwrap(),
        two.derived.callable("c").unwrap(),
    );
    assert_eq!(c1.specializing_region.as_deref(), Some("a"));
    assert_eq!(c1.specializing_region, c2.specializing_region);
    assert_eq!(c1.attended_extents, vec![0, 8, 16, 24]);
    assert_eq!(c1.attended_extents, c2.attended_extents);
    assert_eq!(c1.flush_classes, c2.flush_classes);
    assert_eq!(c1.flush_classes.as_ref().map(|f| f.value), Some(8));
    assert_eq!((c1.classes, c2.classes), (c2.classes, c1.classes));
}

fn window_spec(regions: &str, admit: &str) -> String {
    format!(
        "family: w\nclocks:\n  frame: base\nquantities:\n  d: 4\nregions:\n{regions}\
         callables:\n  c:\n    granularity: step\n    admit: {admit}\n    effects: none\n    \
         query: fixed\n    inputs:\n      x: {{ region: a }}\n      y: {{ region: b }}\n"
    )
}

fn region(name: &str, from: u64, by: u64, window: u64) -> String {
    format!(
        "  {name}:\n    clock: frame\n    growth: {{ frame: {{ from: {from}, by: {by} }} }}\n    \
         retention: {{ window: {window} }}\n    lifetime: session\n    mutability: mutable\n    \
         placement: arena\n    dtype: f32\n    shape: [d]\n"
    )
}

#[test]
fn flush_bound_accounts_for_the_window() {
    // a: 40, then 45 (W_r = 5 < s_r = 10): at most 5 partial-flush extents, not 10.
    let spec = window_spec(
        &format!("{}{}", region("a", 40, 10, 45), region("b", 0, 100, 100)),
        "f <= 10",
    );
    let c = check_source("w.yaml", &spec).expect("checks");
    let f = c
        .derived
        .callable("c")
        .unwrap()
        .flush_classes
        .clone()
        .unwrap();
    assert_eq!(f.value, 5);
    insta::assert_snapshot!(f.explain(), @"5 = min(s_r 10 frames, admit bound 10 frames, W_r 5 frames)");
}

#[test]
fn regions_that_saturate_on_the_first_call_advance_together() {
    // a: 40 → 50 (by 10), b: 100 → 150 (by 100): both at their bound after one call.
    let spec = window_spec(
        &format!("{}{}", region("a", 40, 10, 50), region("b", 100, 100, 150)),
        "f <= 10",
    );
    let c = check_source("s.yaml", &spec).expect("checks");
    let call = c.derived.callable("c").unwrap();
    assert_eq!(call.catalog_width, Some(4));
    assert_eq!((call.reachable, call.classes), (Some(2), Some(2)));
    assert_eq!(call.lockstep.len(), 1);
    let tuples: Vec<Vec<u64>> = call
        .reserve()
        .classes
        .iter()
        .map(|k| k.extents.iter().map(|(_, v)| *v).collect())
        .collect();
    assert_eq!(tuples, [vec![40, 100], vec![50, 150]]);
    insta::assert_snapshot!(call.reason, @"2 signature classes reachable of ≤ |Q_o| 1 × ∏K_r 4 = 4 (`a`: K_r = ceil(W_r 10 / s_r 10) + 1 = 2; `b`: K_r = ceil(W_r 50 / s_r 100) + 1 = 2; a and b advance together on the frame clock), within the capture limit 64: every signature is known before traffic arrives");
}

#[test]
fn bound_overflow_is_no_error_while_the_reachable_count_fits() {
    // Five regions in lock-step, each with 2^20 + 1 extents: ∏K_r overflows 64 bits, the
    // reachable count is 2^20 + 1.
    let n = 1u64 << 20;
    let mut regions = String::new();
    let mut inputs = String::new();
    for i in 0..5 {
        regions.push_str(&region(&format!("r{i}"), 0, 1, n));
        inputs.push_str(&format!("      x{i}: {{ region: r{i} }}\n"));
    }
    let spec = format!(
        "family: o\nclocks:\n  frame: base\nquantities:\n  d: 4\nregions:\n{regions}\
         callables:\n  c:\n    granularity: step\n    admit: f <= 1\n    effects: none\n    \
         query: fixed\n    inputs:\n{inputs}"
    );
    let c = check_source("o.yaml", &spec).expect("an overflowing bound alone is no error");
    let call = c.derived.callable("c").unwrap();
    assert_eq!(call.catalog_width, None);
    assert_eq!(call.reachable, Some(n + 1));
    assert_eq!(call.classes, Some(n + 1));
    assert_eq!(call.verdict, Verdict::OutWidth);
    assert!(
        call.reason.contains("∏K_r more than 2^64"),
        "{}",
        call.reason
    );
    let text = dcc_compiler::report::text(&c);
    assert!(text.contains("more than 2^64"), "{text}");
}

#[test]
fn report_arena_total_is_the_generated_arena_bytes() {
    for name in ["trajectories", "unbounded", "points", "phases", "depth"] {
        let c = fixture(name);
        let m = module(&c);
        let line = format!(
            "pub const ARENA_BYTES: usize = {};",
            spell(c.derived.arena.total_bytes)
        );
        assert!(m.contains(&line), "{name}: {line}");
        let text = dcc_compiler::report::text(&c);
        assert!(
            text.contains(&format!(
                "session arena: {}",
                dcc_compiler::report::fmt_bytes(c.derived.arena.total_bytes)
            )),
            "{name}"
        );
        for op in &c.operating_points {
            let line = format!(
                "pub const ARENA_BYTES: usize = {};",
                spell(op.arena.total_bytes)
            );
            assert!(
                m.contains(&line),
                "{name} at {}: {line}",
                op.operating_point
            );
        }
    }
}

/// `1_141_379_328`: how the generated module spells an integer.
fn spell(n: u64) -> String {
    let s = n.to_string();
    if s.len() <= 4 {
        return s;
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    out
}
