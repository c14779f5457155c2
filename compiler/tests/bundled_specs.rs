//! The bundled specs reproduce the paper's numbers (Table 2, Table 3, eq. 4) — derived, not
//! stored: change a quantity in the spec and these fail.

use dcc_compiler::ir::Verdict;
use dcc_compiler::{Checked, load_file};

fn spec(name: &str) -> Checked {
    let path = format!("{}/../specs/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    match load_file(&path) {
        Ok(c) => c,
        Err(e) => panic!("{path}: {e}"),
    }
}

#[test]
fn token2wav_table2_and_catalog() {
    let c = spec("token2wav");
    let d = &c.derived;
    let carry = d.region("carry").unwrap();
    assert_eq!(carry.attended_extent.value, 402);
    assert_eq!(
        carry.attended_extent.explain(),
        "402 = f_prompt 302 + f_retained 100"
    );
    assert_eq!(carry.catalog, vec![302, 352, 402]);
    let ws = d.region("solver_workspace").unwrap();
    let env: Vec<u64> = ws.envelope_axes.iter().map(|e| e.value).collect();
    // One solver step's slice (`lifetime: iteration`), against the vendor's 16 × 1000.
    assert_eq!(env, vec![1, 458]);
    assert_eq!(
        ws.envelope_extent.explain(),
        "458 = (one of n_steps 10 (lifetime `iteration`)) × (f_prompt 302 + f_retained 100 + f_call 56)"
    );
    assert_eq!(ws.tick_bytes.value, 131_072);
    assert_eq!(ws.rho().unwrap().rounded1(), 34.9);
    let mask = d.region("attention_mask").unwrap();
    let rhos: Vec<f64> = mask.stock.iter().map(|s| s.rho.rounded1()).collect();
    assert_eq!(rhos, vec![8.9, 17.9]);
    let flow = d.callable("flow").unwrap();
    assert_eq!(flow.attended_extents, vec![302, 352, 402]);
    assert_eq!(flow.catalog_width, Some(3));
    assert_eq!(flow.catalog_size.value, 3);
    assert_eq!(flow.verdict, Verdict::Captured);
    assert_eq!(flow.launch_ratio.den, 10);
    // Chunk granularity: the stacked carry over all solver steps is one input (≈527 MB).
    assert_eq!(
        flow.reserve_chunk.largest_input,
        Some(("cache".to_string(), 10 * 402 * 131_072))
    );
    assert_eq!(
        flow.reserve_step.largest_input,
        Some(("cache".to_string(), 402 * 131_072))
    );
    // The carry is aliased, so it never enters the staging term.
    assert!(flow.reserve_chunk.staging_bytes < 1_000_000);
    assert_eq!(flow.reserve_chunk.classes.len(), 3);
    assert_eq!(flow.flush_classes.as_ref().map(|f| f.value), Some(50));
    assert_eq!(flow.flush_clock.as_deref(), Some("frame"));
    assert_eq!(
        flow.flush_classes.as_ref().unwrap().explain(),
        "50 = min(s_r f_chunk 50 frames, admit bound f_chunk 50 frames)"
    );
    assert_eq!((flow.classes, flow.classes_bound), (Some(3), Some(3)));
    // The encoder reads two growing caches that advance together on the token clock: 3 of the
    // 3 × 3 tuples eq. 7 bounds are reachable, and the catalog lists exactly those.
    let enc = d.callable("encoder").unwrap();
    assert_eq!(enc.catalog_width, Some(9));
    assert_eq!(enc.classes_bound, Some(9));
    assert_eq!((enc.reachable, enc.classes), (Some(3), Some(3)));
    assert_eq!(enc.lockstep.len(), 1);
    assert_eq!(
        (
            enc.lockstep[0].regions.as_slice(),
            enc.lockstep[0].base.as_str()
        ),
        (
            &["conformer_cache".to_string(), "upsample_cache".to_string()][..],
            "token"
        )
    );
    assert_eq!(enc.verdict, Verdict::Captured);
    for r in [&enc.reserve_step, &enc.reserve_chunk] {
        let ext: Vec<Vec<(&str, u64)>> = r
            .classes
            .iter()
            .map(|k| k.extents.iter().map(|(n, v)| (n.as_str(), *v)).collect())
            .collect();
        assert_eq!(
            ext,
            [
                [("conformer_cache", 151), ("upsample_cache", 302)],
                [("conformer_cache", 176), ("upsample_cache", 352)],
                [("conformer_cache", 201), ("upsample_cache", 402)],
            ]
        );
        assert!(r.complete);
        let idx: Vec<usize> = r.classes.iter().map(|k| k.index).collect();
        assert_eq!(idx, [0, 1, 2]);
    }
    // Partial flushes of the encoder: the admission bound (50 frames) on the token clock.
    assert_eq!(enc.flush_clock.as_deref(), Some("token"));
    assert_eq!(
        enc.flush_classes.as_ref().unwrap().explain(),
        "25 = min(s_r chunk_tokens 25 tokens, admit bound f_chunk 50 frames = 25 tokens)"
    );
    let text = dcc_compiler::report::text(&c);
    assert!(
        text.contains("classes 3 (≤ |Q_o| 1 × ∏K_r 9: conformer_cache and upsample_cache advance together on the token clock)"),
        "{text}"
    );
    assert!(text.contains(
        "partial flushes add ≤ 25 classes on the token clock: 25 = min(s_r chunk_tokens 25 tokens, admit bound f_chunk 50 frames = 25 tokens)"
    ));
    // Duplex operating point: 5 solver steps in the carry, the workspace still one step's.
    let duplex = &c.operating_points[0];
    assert_eq!(duplex.operating_point, "duplex");
    let carry = duplex.region("carry").unwrap();
    assert_eq!(carry.envelope_axes[0].value, 5);
    let ws = duplex.region("solver_workspace").unwrap();
    assert_eq!(ws.envelope_axes[0].value, 1);
    assert_eq!(ws.rho().unwrap().rounded1(), 34.9);
    assert_eq!(c.spec.constants.len(), 4);
}

#[test]
fn table3_verdicts() {
    let cases = [
        ("moshi", 1, Verdict::Captured),
        ("token2wav", 3, Verdict::Captured),
        ("freeze_omni", 2, Verdict::Captured),
        ("speech_token_kv", 1, Verdict::OutQo),
        ("language_backbone", 2001, Verdict::OutWidth),
    ];
    for (name, k, verdict) in cases {
        let c = spec(name);
        let main = c
            .derived
            .callables
            .iter()
            .find(|x| x.catalog_width == Some(k))
            .unwrap_or_else(|| panic!("{name}: no callable with K = {k}"));
        assert_eq!(main.verdict, verdict, "{name}");
        assert!(!main.reason.is_empty());
        // One growing region (or none): the reachable catalog is eq. 7's bound.
        assert_eq!(main.reachable, Some(k), "{name}");
        if verdict != Verdict::OutQo {
            assert_eq!(main.classes, Some(k), "{name}");
        }
    }
    let lb = spec("language_backbone");
    let r = &lb.derived.regions[0];
    assert_eq!(
        (r.width.window.value, r.width.stride.as_ref().unwrap().value),
        (2000, 1)
    );
    let st = spec("speech_token_kv");
    assert_eq!(st.derived.callables[0].classes, None);
    // The unit stride is counted, not listed: 2001 classes, out: width, no signature emitted.
    let dec = &lb.derived.callables[0];
    assert_eq!((dec.classes, dec.classes_bound), (Some(2001), Some(2001)));
    assert!(dec.reserve_step.classes.is_empty());
    assert!(dec.reserve_step.complete);
}

#[test]
fn cli_json_and_exit_codes() {
    use std::process::Command;
    let exe = env!("CARGO_BIN_EXE_dcc");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new(exe)
        .current_dir(root)
        .args([
            "check",
            "specs/token2wav.yaml",
            "specs/moshi.yaml",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let objs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), 2);
    let t = &objs[0];
    assert_eq!(t["family"], "token2wav");
    assert_eq!(t["spec_sha256"].as_str().unwrap().len(), 64);
    let ws = t["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "solver_workspace")
        .unwrap();
    assert_eq!(ws["rho"], 34.9);
    for key in [
        "attended_extent",
        "envelope_extent",
        "live_bytes",
        "reserved_bytes",
    ] {
        assert!(ws.get(key).is_some(), "{key}");
    }
    let flow = t["callables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "flow")
        .unwrap();
    assert_eq!(flow["attended_extents"], serde_json::json!([302, 352, 402]));
    let enc = t["callables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "encoder")
        .unwrap();
    assert_eq!(enc["attended_extents"], serde_json::json!([151, 176, 201]));
    assert_eq!(enc["catalog_width"], 9);
    assert_eq!(enc["classes_bound"], 9);
    assert_eq!(enc["reachable"], 3);
    assert_eq!(enc["classes"], 3);
    assert_eq!(enc["lockstep"][0]["clock"], "token");
    assert_eq!(enc["flush_clock"], "token");
    assert_eq!(
        enc["m_reserve"]["step"]["classes"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(flow["verdict"], "captured");
    assert!(flow["m_reserve_bytes"]["chunk"].as_u64().is_some());
    assert!(t["diagnostics"].is_array());

    let bad = Command::new(exe)
        .current_dir(root)
        .args([
            "check",
            "compiler/tests/malformed/09_undefined_quantity.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("error[E0021]"));
    let missing = Command::new(exe)
        .args(["check", "/nonexistent/spec.yaml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let usage = Command::new(exe).args(["frobnicate"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let dot = Command::new(exe)
        .current_dir(root)
        .args(["graph", "specs/token2wav.yaml"])
        .output()
        .unwrap();
    assert_eq!(dot.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dot.stdout).starts_with("digraph"));
}

/// Storage order and kept slices are declared separately: the estimator cache is prepend-ordered
/// in both Token2Wav retentions; the paper keeps the order's natural rule, the vendor's contract
/// declares the append rule on prepend storage. Layouts put the frame axis where the port keeps it.
#[test]
fn token2wav_keep_rules_and_layouts() {
    use dcc_compiler::ir::{CacheOrder, KeepRule};
    for (name, head, tail, rule) in [
        ("token2wav", 100, 302, KeepRule::Natural),
        ("token2wav_tiny", 100, 302, KeepRule::Natural),
        ("token2wav_tiny_vendor", 302, 100, KeepRule::Swapped),
    ] {
        let c = spec(name);
        for region in ["carry", "solver_workspace"] {
            let r = c.derived.region(region).unwrap();
            assert_eq!(r.order, Some(CacheOrder::Prepend), "{name}/{region}");
            let k = r.keep.as_ref().unwrap();
            assert_eq!((k.head.value, k.tail.value, k.rule), (head, tail, rule));
            assert_eq!((k.prompt, k.retained), (302, 100));
            assert_eq!(
                r.dim_names,
                ["step", "est_layers", "cfg", "est_heads", "frame", "kv_dim"]
            );
        }
        // The conformer caches at their own clocks: the encoder blocks on the token clock
        // (151 + 50 tokens), the up-blocks on the frame clock (302 + 100 frames).
        for (region, names, catalog) in [
            (
                "conformer_cache",
                ["conf_blocks", "conf_heads", "token", "kv_dim"],
                [151, 176, 201],
            ),
            (
                "upsample_cache",
                ["conf_up_blocks", "conf_heads", "frame", "kv_dim"],
                [302, 352, 402],
            ),
        ] {
            let conf = c.derived.region(region).unwrap();
            assert_eq!(conf.order, Some(CacheOrder::Append), "{name}/{region}");
            assert_eq!(conf.keep.as_ref().unwrap().rule, KeepRule::Natural);
            assert_eq!(conf.dim_names, names);
            assert_eq!(conf.catalog, catalog, "{name}/{region}");
            assert_eq!(conf.width.width.value, 3);
        }
        // Eq. 7 bounds the encoder by ∏K_r = 3 × 3; the two caches advance together on the
        // token clock, so 3 classes are reachable.
        let enc = c.derived.callable("encoder").unwrap();
        assert_eq!(enc.attended_extents, vec![151, 176, 201]);
        assert_eq!(enc.catalog_width, Some(9));
        assert_eq!(enc.classes, Some(3), "{name}");
        assert_eq!(enc.reserve_chunk.classes.len(), 3, "{name}");
        // The numbers do not depend on the layout or the keep rule.
        let carry = c.derived.region("carry").unwrap();
        assert_eq!(carry.attended_extent.value, 402);
        assert_eq!(carry.catalog, vec![302, 352, 402]);
    }
    let vendor = spec("token2wav_tiny_vendor");
    let paper = spec("token2wav_tiny");
    assert_eq!(vendor.derived.arena, paper.derived.arena);
    let flow = vendor.derived.callable("flow").unwrap();
    let names: Vec<&str> = flow.reserve_chunk.classes[0]
        .args
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names[..4], ["mu", "cond", "spk", "cache"]);
    assert_eq!(flow.reserve_chunk.classes[0].args[0].dims, vec![50, 80]);
    assert_eq!(flow.reserve_chunk.classes[0].args[2].dims, vec![1, 192]);
    assert_eq!(
        flow.reserve_chunk.classes[1].args[3].dims,
        vec![10, 2, 2, 2, 352, 64]
    );
    let json = dcc_compiler::report::json(&vendor);
    let carry = json["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "carry")
        .unwrap();
    assert_eq!(carry["order"], "prepend");
    assert_eq!(carry["keep"]["rule"], "swapped");
    assert_eq!(carry["keep"]["slices"], "H[0:302] ‖ H[ℓ−100:ℓ]");
    assert_eq!(carry["dims"], serde_json::json!([10, 2, 2, 2, 402, 64]));
}

// ---------------------------------------------------------------------------------------------
// Mimi (kyutai-labs/moshi 0.2.13) and the CosyVoice2 flow-cache decoder (FunAudioLLM/CosyVoice
// 88f467a): contracts of released code, every number derived from the cited configuration.
// ---------------------------------------------------------------------------------------------

/// Mimi keeps two transformer rings of `context` = 250 latent frames and one context per
/// streaming conv (kernel − stride frames on the clock of the signal it buffers): every state
/// is pinned, so encode and decode are one signature each.
#[test]
fn mimi_rings_conv_contexts_and_verdicts() {
    let c = spec("mimi");
    let d = &c.derived;
    // The SEANet strides 4, 5, 6, 8 and the 25 → 12.5 Hz resampling, as clocks of the frame.
    let per_frame: Vec<(&str, u64)> = d
        .clocks
        .iter()
        .map(|k| (k.name.as_str(), k.per_base))
        .collect();
    assert_eq!(
        per_frame,
        [
            ("frame", 1),
            ("latent", 2),
            ("hz200", 16),
            ("hz1200", 96),
            ("hz6000", 480),
            ("sample", 1920)
        ]
    );
    assert_eq!(d.quantity("frame_size"), Some(1920));
    for ring in ["enc_kv", "dec_kv"] {
        let r = d.region(ring).unwrap();
        assert_eq!(r.attended_extent.explain(), "250 = context 250");
        assert!(r.width.pinned, "{ring}");
        assert_eq!(r.catalog, vec![250]);
        assert_eq!(r.tick_bytes.value, 8 * 2 * 8 * 64 * 4);
        assert_eq!(r.live_bytes, 8_192_000);
        assert_eq!(r.dims, vec![8, 2, 8, 250, 64]);
        assert_eq!(r.rho().unwrap().rounded1(), 1.0);
    }
    // (region, clock, frames kept, channels): kernel − stride of every streaming conv.
    let convs = [
        ("enc_conv_in", "sample", 6, 1),
        ("enc_res0", "sample", 2, 64),
        ("enc_down0", "sample", 4, 64),
        ("enc_res1", "hz6000", 2, 128),
        ("enc_down1", "hz6000", 5, 128),
        ("enc_res2", "hz1200", 2, 256),
        ("enc_down2", "hz1200", 6, 256),
        ("enc_res3", "hz200", 2, 512),
        ("enc_down3", "hz200", 8, 512),
        ("enc_conv_out", "latent", 2, 1024),
        ("enc_downsample", "latent", 2, 512),
        ("dec_upsample", "latent", 2, 512),
        ("dec_conv_in", "latent", 6, 512),
        ("dec_up0", "hz200", 8, 512),
        ("dec_res0", "hz200", 2, 512),
        ("dec_up1", "hz1200", 6, 256),
        ("dec_res1", "hz1200", 2, 256),
        ("dec_up2", "hz6000", 5, 128),
        ("dec_res2", "hz6000", 2, 128),
        ("dec_up3", "sample", 4, 64),
        ("dec_res3", "sample", 2, 64),
        ("dec_conv_out", "sample", 2, 64),
    ];
    for (name, clock, frames, channels) in convs {
        let r = d.region(name).unwrap();
        assert_eq!(r.axes, [clock], "{name}");
        assert_eq!(r.attended_extent.value, frames, "{name}");
        assert_eq!(r.width.width.value, 1, "{name}");
        assert_eq!(r.dims, vec![channels, frames], "{name}");
        assert_eq!(r.live_bytes, frames * channels * 4, "{name}");
    }
    assert_eq!(d.regions.len(), convs.len() + 2);
    assert_eq!(d.arena.live_bytes, 16_480_792);
    assert_eq!(d.arena.total_bytes, 16_481_024);
    assert_eq!(d.stock_bytes, 2 * 8_192_000);
    // encode: one 1920-sample frame; decode: one frame of 8 int64 codes. Staged inputs are the
    // caller tensors only; every region is written through.
    for (name, staging, write_through, ring) in [
        ("encode", 1920 * 4, 8_238_104, "enc_kv"),
        ("decode", 8 * 8, 8_242_688, "dec_kv"),
    ] {
        let k = d.callable(name).unwrap();
        assert_eq!(k.specializing_region.as_deref(), Some(ring));
        assert_eq!(k.attended_extents, vec![250]);
        assert_eq!(k.region_widths.len(), 12);
        assert_eq!(k.catalog_width, Some(1));
        assert_eq!((k.reachable, k.classes), (Some(1), Some(1)));
        assert_eq!(k.verdict, Verdict::Captured);
        assert_eq!(k.flush_classes, None);
        for r in [&k.reserve_step, &k.reserve_chunk] {
            assert_eq!(r.staging_bytes, staging, "{name}");
            assert_eq!(r.write_through_bytes, write_through, "{name}");
            assert_eq!(r.total_bytes, staging + write_through, "{name}");
            assert_eq!(r.largest_input, Some(("kv".to_string(), 8_192_000)));
            assert_eq!(r.classes.len(), 1);
            assert!(r.complete);
        }
    }
    let text = dcc_compiler::report::text(&c);
    assert!(
        text.contains("attended extent A_r  250 = context 250"),
        "{text}"
    );
}

/// CosyVoice2's flow-cache decoder: the estimator caches are pinned at the last 50 frames of
/// each Euler step (captured, the first call's 100-frame query counted as a second
/// configuration), while the encoder's KV caches keep every token of the utterance up to the
/// 15,000-frame noise table (301 reachable classes in lock-step, out of scope by width). The
/// HiFT caches start empty and fill in one call.
#[test]
fn cosyvoice2_flow_cache_trajectory_and_verdicts() {
    use dcc_compiler::ir::{DType, Placement};
    let c = spec("cosyvoice2_flow");
    let d = &c.derived;
    for (q, v) in [
        ("f_chunk", 50),
        ("flow_cache_frames", 50),
        ("prompt_tokens", 25),
        ("session_tokens", 7500),
        ("source_cache_len", 3840),
        ("mel_overlap_len", 34),
        ("v1_source_cache_len", 5120),
        ("down_conv_ch", 832),
        ("up_conv_ch", 1024),
    ] {
        assert_eq!(d.quantity(q), Some(v), "{q}");
    }
    // Encoder caches: no retention in the code, bounded by the noise table.
    let enc = d.region("enc_kv").unwrap();
    assert_eq!(enc.attended_extent.explain(), "7500 = session_tokens 7500");
    assert_eq!(enc.attended_min.value, 0);
    assert_eq!(enc.tick_bytes.value, 6 * 8 * 128 * 4);
    assert_eq!(enc.live_bytes, 184_320_000);
    assert_eq!(enc.width.width.value, 301);
    assert_eq!(enc.catalog[..3], [0, 25, 50]);
    let up = d.region("enc_up_kv").unwrap();
    assert_eq!(up.live_bytes, 245_760_000);
    assert_eq!(up.width.width.value, 301);
    assert_eq!(up.dims, vec![4, 8, 15000, 128]);
    for (name, ctx) in [("pre_lookahead_cache", 2), ("up_layer_cache", 4)] {
        let r = d.region(name).unwrap();
        assert_eq!(r.dims, vec![512, ctx], "{name}");
        assert_eq!(r.width.width.value, 1, "{name}");
    }
    // Estimator caches: one slice per Euler step, the last 50 frames (rho = 1: the vendor
    // allocates exactly this), conv contexts of kernel − 1 = 2 frames.
    for (name, dims, bytes) in [
        ("est_down_kv", vec![10, 1, 4, 2, 50, 512, 2], 16_384_000),
        ("est_mid_kv", vec![10, 12, 4, 2, 50, 512, 2], 196_608_000),
        ("est_up_kv", vec![10, 1, 4, 2, 50, 512, 2], 16_384_000),
    ] {
        let r = d.region(name).unwrap();
        assert_eq!(r.dims, dims, "{name}");
        assert_eq!(r.live_bytes, bytes, "{name}");
        assert_eq!(r.catalog, vec![50], "{name}");
        assert_eq!(r.rho().unwrap().rounded1(), 1.0, "{name}");
    }
    for (name, dims, bytes) in [
        ("est_down_conv", vec![10, 1, 2, 832, 2], 133_120),
        ("est_mid_conv", vec![10, 12, 2, 512, 2], 983_040),
        ("est_up_conv", vec![10, 1, 2, 1024, 2], 163_840),
        ("est_final_conv", vec![10, 2, 256, 2], 40_960),
    ] {
        let r = d.region(name).unwrap();
        assert_eq!((r.dims.clone(), r.live_bytes), (dims, bytes), "{name}");
    }
    // HiFT caches: absent on the first call, then 8 frames / 3840 samples.
    for (name, catalog, bytes) in [
        ("hift_mel_cache", [0, 8], 8 * 80 * 4),
        ("hift_source_cache", [0, 3840], 3840 * 4),
        ("hift_speech_cache", [0, 3840], 3840 * 4),
    ] {
        let r = d.region(name).unwrap();
        assert_eq!(r.catalog, catalog, "{name}");
        assert_eq!(r.width.width.value, 2, "{name}");
        assert_eq!(r.live_bytes, bytes, "{name}");
    }
    assert_eq!(d.arena.total_bytes, 660_822_528);
    assert_eq!(d.stock_bytes, 2 * 16_384_000 + 196_608_000);
    let noise = d.constants.iter().find(|k| k.name == "rand_noise").unwrap();
    assert_eq!((noise.placement, noise.bytes), (Placement::Host, 4_800_000));
    let window = d
        .constants
        .iter()
        .find(|k| k.name == "speech_window")
        .unwrap();
    assert_eq!((window.dtype, window.bytes), (DType::F64, 61_440));

    // The encoder: two growing caches in lock-step on the token clock, 301 of 301 × 301.
    let e = d.callable("encoder").unwrap();
    assert_eq!(e.catalog_width, Some(90_601));
    assert_eq!((e.reachable, e.classes), (Some(301), Some(301)));
    assert_eq!(e.lockstep.len(), 1);
    assert_eq!(
        e.lockstep[0].regions,
        ["enc_kv".to_string(), "enc_up_kv".to_string()]
    );
    assert_eq!(e.verdict, Verdict::OutWidth);
    assert!(
        e.reason
            .starts_with("301 signature classes reachable of ≤ |Q_o| 1 × ∏K_r 90601"),
        "{}",
        e.reason
    );
    assert_eq!(e.reserve_step.write_through_bytes, 430_092_288);
    assert_eq!(e.reserve_step.total_bytes, 430_159_712);
    assert_eq!(
        e.flush_classes.as_ref().unwrap().explain(),
        "25 = min(s_r token_hop_len 25 tokens, admit bound f_chunk 50 frames = 25 tokens)"
    );
    // The decoder: every region pinned; |Q_o| = 2 query phases (first call 100 frames, later
    // 50), both staged: M_reserve counts the first call's 96,720 B beside the later 48,520 B.
    let f = d.callable("flow_decoder").unwrap();
    assert_eq!(f.attended_extents, vec![50]);
    assert_eq!((f.configs, f.catalog_width), (2, Some(1)));
    assert_eq!(f.phases, ["first", "steady"]);
    assert_eq!((f.classes, f.classes_bound), (Some(2), Some(2)));
    assert_eq!(f.verdict, Verdict::Captured);
    assert_eq!((f.steps, f.launch_ratio.den), (10, 10));
    assert_eq!(f.reserve_chunk.write_through_bytes, 230_696_960);
    let staged: Vec<u64> = f
        .reserve_chunk
        .classes
        .iter()
        .map(|k| k.staging_bytes)
        .collect();
    assert_eq!(staged, [96_720, 48_520]);
    assert_eq!(f.reserve_chunk.total_bytes, 230_842_200);
    assert_eq!(
        f.reserve_chunk.largest_input,
        Some(("mid_kv".to_string(), 196_608_000))
    );
    assert_eq!(
        f.reserve_step.largest_input,
        Some(("mid_kv".to_string(), 19_660_800))
    );
    // Two callables: the vocoder's host-drawn phases keep it out of this contract.
    assert_eq!(d.callables.len(), 2);
}

#[test]
fn new_specs_table3_style_verdicts() {
    for (name, callable, k, classes, verdict) in [
        ("mimi", "encode", 1, 1, Verdict::Captured),
        ("mimi", "decode", 1, 1, Verdict::Captured),
        ("cosyvoice2_flow", "flow_decoder", 1, 2, Verdict::Captured),
        ("cosyvoice2_flow", "encoder", 90_601, 301, Verdict::OutWidth),
    ] {
        let c = spec(name);
        let x = c.derived.callable(callable).unwrap();
        assert_eq!(
            (x.catalog_width, x.classes, x.verdict),
            (Some(k), Some(classes), verdict),
            "{name}/{callable}"
        );
        assert!(!x.reason.is_empty());
        assert!(c.operating_points.is_empty(), "{name}");
    }
}

/// The streaming vocoder's contract (BoundedVocoder of minicpmo-utils 1.0.7): its bounded
/// histories, the float64 phase, the counters and the noise table, and the catalog derived by
/// hand in the spec's comments — 2 chunk classes (empty histories, then full ones) of the 2 × 2
/// tuples eq. 7 bounds. The tiny specs declare the same vocoder (its streaming arithmetic does
/// not depend on the channel counts).
#[test]
fn token2wav_vocoder_contract() {
    use dcc_compiler::ir::DType;
    // The tiny specs keep the rows of the vendor's table the golden stream reads (+ one frame).
    for (name, rows) in [
        ("token2wav", 7_200_000),
        ("token2wav_tiny", 48_480),
        ("token2wav_tiny_vendor", 48_480),
    ] {
        let c = spec(name);
        let d = &c.derived;
        assert_eq!(d.quantity("noise_rows"), Some(rows), "{name}");
        for (q, v) in [
            ("voc_block", 16),
            ("voc_blocks", 4),
            ("voc_delay", 8),
            ("voc_history", 31),
            ("voc_mel_keep", 39),
            ("voc_source_keep", 36),
        ] {
            assert_eq!(d.quantity(q), Some(v), "{name}: {q}");
        }
        for (region, dtype, catalog, bytes) in [
            // the histories' storage holds one 16-frame block past the window (`call: voc_block`)
            ("voc_mel", DType::F32, vec![0, 39], (39 + 16) * 80 * 4),
            (
                "voc_source",
                DType::F32,
                vec![0, 17_280],
                (36 + 16) * 480 * 4,
            ),
            ("voc_phase", DType::F64, vec![1], 9 * 8),
            ("voc_offsets", DType::I64, vec![1], 5 * 8),
        ] {
            let r = d.region(region).unwrap();
            assert_eq!(
                (r.dtype, &r.catalog, r.live_bytes),
                (dtype, &catalog, bytes),
                "{name}: {region}"
            );
            assert!(
                d.arena.slot(region).is_some(),
                "{name}: {region} in the arena"
            );
        }
        let voc = d.callable("vocoder").unwrap();
        assert_eq!(voc.catalog_width, Some(4), "{name}");
        assert_eq!((voc.reachable, voc.classes), (Some(2), Some(2)), "{name}");
        assert_eq!(voc.lockstep.len(), 1);
        assert_eq!(voc.lockstep[0].regions, ["voc_mel", "voc_source"]);
        assert_eq!(voc.lockstep[0].base, "token");
        assert_eq!(voc.verdict, Verdict::Captured);
        // the partial-flush count is capped by voc_mel's window W_r = 39 (not the 49 query
        // lengths a last chunk can have: see the spec's comment)
        assert_eq!(voc.flush_classes.as_ref().map(|f| f.value), Some(39));
        let ext: Vec<Vec<(&str, u64)>> = voc
            .reserve_chunk
            .classes
            .iter()
            .map(|k| k.extents.iter().map(|(n, v)| (n.as_str(), *v)).collect())
            .collect();
        assert_eq!(
            ext,
            [
                [("voc_mel", 0), ("voc_source", 0)],
                [("voc_mel", 39), ("voc_source", 17_280)]
            ],
            "{name}"
        );
        let flush = d.callable("vocoder_flush").unwrap();
        assert_eq!(
            (flush.reachable, flush.classes),
            (Some(2), Some(2)),
            "{name}"
        );
        assert_eq!(flush.flush_classes.as_ref().map(|f| f.value), Some(8));
        let noise = c
            .spec
            .constants
            .iter()
            .find(|k| k.name.value == "noise_table");
        assert_eq!(noise.map(|k| k.dtype.value), Some(DType::F32), "{name}");
    }
}

/// The drafts restate bundled specs with the newer constructs (units, trajectories, phases, effect
/// sets, dtype and disable points): each checks clean, and the Mimi draft, whose only additions
/// are units, derives exactly the bundled spec's arena and verdicts.
#[test]
fn drafts_check_clean_and_mimi_with_units_derives_the_same_numbers() {
    let draft = |name: &str| {
        let path = format!("{}/../specs/drafts/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
        match load_file(&path) {
            Ok(c) => c,
            Err(e) => panic!("{path}: {e}"),
        }
    };
    let (m, b) = (draft("mimi.next"), spec("mimi"));
    assert_eq!(m.derived.arena.total_bytes, b.derived.arena.total_bytes);
    assert_eq!(m.derived.arena.total_bytes, 16_481_024);
    for (x, y) in m.derived.callables.iter().zip(&b.derived.callables) {
        assert_eq!((x.verdict, x.classes), (y.verdict, y.classes), "{}", x.name);
    }
    let c = draft("cosyvoice2_flow.next");
    assert!(
        c.derived
            .callables
            .iter()
            .any(|x| x.verdict == Verdict::OutUnbounded),
        "the growing encoder caches are out: unbounded"
    );
    assert!(
        c.derived
            .callables
            .iter()
            .any(|x| x.verdict == Verdict::OutEffects),
        "the HiFT vocoder's host draws are out: effects"
    );
}
