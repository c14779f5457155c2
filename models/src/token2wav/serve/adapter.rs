//! The `#[native_clock]` adapters of the three Token2Wav contracts and what a session reads of
//! one ([`ContractView`]).
//!
//! Every number an adapter needs comes from the contract: the region buffer types are the
//! generated module's (`dcc_generated::<family>::CarryBuf`, ...: element type and count), the
//! stream sizes its constants (`CHUNK_TOKENS`, `LOOKAHEAD_TOKENS`), and a compile-time check
//! ties the generated module to the spec the attribute expands (same SHA-256), so neither can
//! drift from the other.
//!
//! The callables' inputs and written regions are bound by name through the generated typed
//! I/O structs. The three contracts generate the same structs (same fields, same order) in
//! their own modules; the session uses `token2wav`'s, and [`ContractView::of`] checks that the
//! adapter's callables declare exactly those names, in that order.
//!
//! A session runs the contract at one operating point: the base ([`ContractView::of`]) or a
//! named point of the spec ([`ContractView::at_point`], e.g. `half`: the carry and the solver
//! workspace in f16). The view then holds that point's arena (the regions' dtypes, dims and
//! offsets) and that point's callables, whose catalogs key the replay engines on the point's
//! dtypes and extents; the typed I/O structs are the same at every point.

use dcc_runtime::contract::{
    ArenaLayout, CallableInfo, NativeClock, NativeClockAdapter, RegionInfo,
};

/// The name [`ContractView::at_point`] gives the base operating point (the spec's own values).
pub const BASE_POINT: &str = "base";

pub use dcc_generated::token2wav::{EncoderInputs, EncoderWrites, FlowInputs, FlowWrites};

use super::super::{FlowError, Keeps};

/// Byte-wise string equality in a constant context.
const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A `#[native_clock]` adapter of a Token2Wav contract, with the stream sizes of that
/// contract's generated module.
pub trait Token2WavAdapter: NativeClockAdapter {
    /// New tokens per chunk (the contract's `chunk_tokens`).
    const CHUNK_TOKENS: usize;
    /// Tokens after the chunk the encoder looks ahead at (`lookahead_tokens`): a chunk call
    /// reads `CHUNK_TOKENS + LOOKAHEAD_TOKENS` tokens.
    const LOOKAHEAD_TOKENS: usize;
    /// The batch sizes the contract's `flow` callable declares (`batch:`; `[1]`: none), the
    /// sizes a batched call is captured for.
    const FLOW_BATCH: &'static [usize];
    /// The generated module's contract (`dcc_generated::<module>::Contract`): the buffer types
    /// and stream sizes come from it, so it must be the spec the attribute expanded.
    type Generated: NativeClock;
    /// That module's name (`generated/src/<module>.rs`).
    const GENERATED_MODULE: &'static str;
}

macro_rules! adapter {
    ($(#[$m:meta])* $name:ident, $spec:literal, $generated:ident, $batch:expr) => {
        $(#[$m])*
        #[dcc_macros::native_clock(spec = $spec)]
        pub struct $name {
            #[region(carry)]
            pub carry: dcc_generated::$generated::CarryBuf,
            #[region(solver_workspace)]
            pub solver_workspace: dcc_generated::$generated::SolverWorkspaceBuf,
            #[region(attention_mask)]
            pub attention_mask: dcc_generated::$generated::AttentionMaskBuf,
            #[region(conformer_cache)]
            pub conformer_cache: dcc_generated::$generated::ConformerCacheBuf,
            #[region(upsample_cache)]
            pub upsample_cache: dcc_generated::$generated::UpsampleCacheBuf,
            /// The estimator's causal-conv contexts `[step, layer, cfg, conv, frame, hidden]`.
            #[region(estimator_conv_cache)]
            pub estimator_conv_cache: dcc_generated::$generated::EstimatorConvCacheBuf,
            /// The pre-lookahead layer's conv context `[token, dim]`.
            #[region(pre_lookahead_cache)]
            pub pre_lookahead_cache: dcc_generated::$generated::PreLookaheadCacheBuf,
            /// The upsampling conv's context `[frame, dim]`.
            #[region(up_layer_cache)]
            pub up_layer_cache: dcc_generated::$generated::UpLayerCacheBuf,
            /// `UpsampleConformerEncoderV2.forward_chunk` ([`DeviceFlow::encoder_call`]).
            ///
            /// [`DeviceFlow::encoder_call`]: super::super::DeviceFlow::encoder_call
            #[callable(encoder)]
            pub encoder: (),
            /// The CFM solver loop ([`DeviceFlow::flow_call`]).
            ///
            /// [`DeviceFlow::flow_call`]: super::super::DeviceFlow::flow_call
            #[callable(flow)]
            pub flow: (),
            /// The vocoder's mel history (HiFT, a later issue: declared, not yet used).
            #[region(voc_mel)]
            pub voc_mel: dcc_generated::$generated::VocMelBuf,
            /// The vocoder's harmonic-source history.
            #[region(voc_source)]
            pub voc_source: dcc_generated::$generated::VocSourceBuf,
            /// The vocoder's float64 harmonic phase.
            #[region(voc_phase)]
            pub voc_phase: dcc_generated::$generated::VocPhaseBuf,
            /// The vocoder's stream counters.
            #[region(voc_offsets)]
            pub voc_offsets: dcc_generated::$generated::VocOffsetsBuf,
            /// HiFT (a later issue): bound, never captured here.
            #[callable(vocoder, eager)]
            pub vocoder: (),
            /// HiFT's final flush (a later issue): bound, never captured here.
            #[callable(vocoder_flush, eager)]
            pub vocoder_flush: (),
        }

        impl $name {
            /// The region handles of a state-rule session's arena, checked against the layout.
            pub fn bind(arena: &dcc_runtime::Arena) -> dcc_runtime::Result<Self> {
                use dcc_runtime::contract::RegionBuf;
                Ok(Self {
                    carry: RegionBuf::bind(arena, "carry")?,
                    solver_workspace: RegionBuf::bind(arena, "solver_workspace")?,
                    attention_mask: RegionBuf::bind(arena, "attention_mask")?,
                    conformer_cache: RegionBuf::bind(arena, "conformer_cache")?,
                    upsample_cache: RegionBuf::bind(arena, "upsample_cache")?,
                    estimator_conv_cache: RegionBuf::bind(arena, "estimator_conv_cache")?,
                    pre_lookahead_cache: RegionBuf::bind(arena, "pre_lookahead_cache")?,
                    up_layer_cache: RegionBuf::bind(arena, "up_layer_cache")?,
                    voc_mel: RegionBuf::bind(arena, "voc_mel")?,
                    voc_source: RegionBuf::bind(arena, "voc_source")?,
                    voc_phase: RegionBuf::bind(arena, "voc_phase")?,
                    voc_offsets: RegionBuf::bind(arena, "voc_offsets")?,
                    encoder: (),
                    flow: (),
                    vocoder: (),
                    vocoder_flush: (),
                })
            }
        }

        impl Token2WavAdapter for $name {
            const CHUNK_TOKENS: usize = dcc_generated::$generated::CHUNK_TOKENS;
            const LOOKAHEAD_TOKENS: usize = dcc_generated::$generated::LOOKAHEAD_TOKENS;
            const FLOW_BATCH: &'static [usize] = $batch;
            type Generated = dcc_generated::$generated::Contract;
            const GENERATED_MODULE: &'static str = stringify!($generated);
        }

        // The generated module the buffer types and sizes come from is the one of the spec the
        // attribute expanded (checked again, with the catalogs, by `ContractView::of`).
        const _: () = assert!(
            same_str(
                <<$name as NativeClockAdapter>::Contract as NativeClock>::SPEC_SHA256,
                dcc_generated::$generated::SPEC_SHA256
            ),
            concat!(
                "dcc_generated::",
                stringify!($generated),
                " was generated from another ",
                $spec,
                ": regenerate it (`dcc compile`)"
            )
        );
    };
}

adapter!(
    /// The full model's contract (`specs/token2wav.yaml`, paper retention).
    Token2Wav,
    "specs/token2wav.yaml",
    token2wav,
    dcc_generated::token2wav::FLOW_BATCH
);
adapter!(
    /// The tiny golden model's contract (`specs/token2wav_tiny.yaml`, paper retention).
    Token2WavTiny,
    "specs/token2wav_tiny.yaml",
    token2wav_tiny,
    dcc_generated::token2wav_tiny::FLOW_BATCH
);
adapter!(
    /// The tiny golden model under the vendor's slicing (`specs/token2wav_tiny_vendor.yaml`).
    Token2WavTinyVendor,
    "specs/token2wav_tiny_vendor.yaml",
    token2wav_tiny_vendor,
    // its spec declares no `batch:` (the implicit `[1]`): no generated sizes
    &[1]
);

/// What a session needs from a contract, as data.
#[derive(Copy, Clone, Debug)]
pub struct ContractView {
    pub family: &'static str,
    /// The operating point the view describes: [`BASE_POINT`] or a name of the spec's
    /// `operating_points:`.
    pub point: &'static str,
    pub arena: ArenaLayout,
    /// The regions the signatures are keyed on, as the contract lays them out.
    pub carry: &'static RegionInfo,
    /// The encoder blocks' cache (token clock) and the up-blocks' cache (frame clock).
    pub conformer: &'static RegionInfo,
    pub upsample: &'static RegionInfo,
    /// The conv contexts: the estimator's (solver clock), the pre-lookahead layer's (token
    /// clock) and the upsampling conv's (frame clock), all pinned.
    pub estimator_conv: &'static RegionInfo,
    pub pre_lookahead: &'static RegionInfo,
    pub up_layer: &'static RegionInfo,
    /// The solver's per-step workspace.
    pub solver_workspace: &'static RegionInfo,
    pub encoder: &'static CallableInfo,
    pub flow: &'static CallableInfo,
    /// Whether the adapter asks for capture of each (`#[callable(x, eager)]` → false).
    pub capture_encoder: bool,
    pub capture_flow: bool,
    /// What each cache keeps (the regions' declared `keep`).
    pub keeps: Keeps,
    /// New tokens per chunk and the encoder's lookahead (the contract's quantities).
    pub chunk_tokens: usize,
    pub lookahead_tokens: usize,
    /// The generated admission predicates (`NativeClock::admit`), the base's at every point:
    /// they read the chunk size, which no bundled point overrides.
    pub admit: fn(&str, usize) -> Option<bool>,
    /// The batch sizes of the `flow` callable (`batch:`; [`Token2WavAdapter::FLOW_BATCH`]).
    pub flow_batch: &'static [usize],
}

impl ContractView {
    /// From a `#[native_clock]` adapter, at the base operating point: the start-up check. The
    /// spec fingerprint the attribute embedded must be the generated module's, and so must the
    /// catalogs the session keys its signatures on ([`FlowError::Fingerprint`] otherwise,
    /// naming both hashes and the command that regenerates the module).
    pub fn of<A: Token2WavAdapter>() -> Result<Self, FlowError> {
        Self::verify::<A>()?;
        if <A::Contract as NativeClock>::CALLABLES != <A::Generated as NativeClock>::CALLABLES {
            return Err(stale::<A>("catalogs"));
        }
        Self::build::<A>(
            BASE_POINT,
            A::arena(),
            <A::Contract as NativeClock>::CALLABLES,
        )
    }

    /// From a `#[native_clock]` adapter, at the operating point `point` ([`BASE_POINT`]: the
    /// same as [`ContractView::of`]): that point's arena and callables, checked as `of` checks
    /// the base's. A point the contract does not declare is [`FlowError::UnknownPoint`],
    /// naming the ones it does.
    pub fn at_point<A: Token2WavAdapter>(point: &str) -> Result<Self, FlowError> {
        if point == BASE_POINT {
            return Self::of::<A>();
        }
        Self::verify::<A>()?;
        let Some(p) = <A::Contract as NativeClock>::operating_point(point) else {
            return Err(FlowError::UnknownPoint {
                family: <A::Contract as NativeClock>::FAMILY,
                point: point.to_string(),
                known: Self::points::<A>().join(", "),
            });
        };
        if <A::Generated as NativeClock>::operating_point(point) != Some(p) {
            return Err(stale::<A>(&format!("operating point `{point}`")));
        }
        Self::build::<A>(p.name, p.arena, p.callables)
    }

    /// The operating points a session of adapter `A` may run: [`BASE_POINT`], then the spec's.
    pub fn points<A: Token2WavAdapter>() -> Vec<&'static str> {
        std::iter::once(BASE_POINT)
            .chain(
                <A::Contract as NativeClock>::OPERATING_POINTS
                    .iter()
                    .map(|p| p.name),
            )
            .collect()
    }

    /// The fingerprint half of the start-up check.
    fn verify<A: Token2WavAdapter>() -> Result<(), FlowError> {
        verify_fingerprint(
            A::GENERATED_MODULE,
            A::SPEC_PATH,
            <A::Contract as NativeClock>::SPEC_SHA256,
            <A::Generated as NativeClock>::SPEC_SHA256,
        )
    }

    /// The view of `A`'s contract at the point `point`, whose session arena is `arena` and whose
    /// callables are `callables`; whether each callable is captured is the adapter's binding.
    fn build<A: Token2WavAdapter>(
        point: &'static str,
        arena: ArenaLayout,
        callables: &'static [CallableInfo],
    ) -> Result<Self, FlowError> {
        let bad = |m: &str| FlowError::Config(format!("contract of the adapter: {m}"));
        let callable = |name: &str| {
            let bound = A::CALLABLE_FIELDS
                .iter()
                .find(|b| b.callable.name == name)
                .ok_or_else(|| bad(&format!("no callable `{name}`")))?;
            let info = callables
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| bad(&format!("no callable `{name}` at point `{point}`")))?;
            Ok::<_, FlowError>((info, bound.capture))
        };
        let ((enc, capture_encoder), (flow, capture_flow)) =
            (callable("encoder")?, callable("flow")?);
        named(enc, &EncoderInputs::NAMES, &EncoderWrites::NAMES)?;
        named(flow, &FlowInputs::NAMES, &FlowWrites::NAMES)?;
        let region = |name: &str| {
            arena
                .region(name)
                .ok_or_else(|| bad(&format!("no region `{name}` at point `{point}`")))
        };
        Ok(ContractView {
            family: A::Contract::FAMILY,
            point,
            arena,
            carry: region("carry")?,
            conformer: region("conformer_cache")?,
            upsample: region("upsample_cache")?,
            estimator_conv: region("estimator_conv_cache")?,
            pre_lookahead: region("pre_lookahead_cache")?,
            up_layer: region("up_layer_cache")?,
            solver_workspace: region("solver_workspace")?,
            encoder: enc,
            flow,
            capture_encoder,
            capture_flow,
            keeps: Keeps::of(&arena)?,
            chunk_tokens: A::CHUNK_TOKENS,
            lookahead_tokens: A::LOOKAHEAD_TOKENS,
            admit: <A::Contract as NativeClock>::admit,
            flow_batch: A::FLOW_BATCH,
        })
    }

    /// Tokens one chunk call reads (the chunk and its lookahead).
    pub fn call_tokens(&self) -> usize {
        self.chunk_tokens + self.lookahead_tokens
    }
}

/// The adapter's expansion and `dcc_generated`'s module agree on the spec's hash but not on
/// `what` (another compiler generated one of them).
fn stale<A: Token2WavAdapter>(what: &str) -> FlowError {
    FlowError::Config(format!(
        "the {what} of {} as the adapter expanded it and of `dcc_generated::{}` differ (same \
         spec sha256 {}, another compiler): regenerate the module (`cargo run -p dcc-compiler \
         --bin dcc -- compile {} -o generated/src/{}.rs`) and rebuild",
        A::SPEC_PATH,
        A::GENERATED_MODULE,
        <A::Contract as NativeClock>::SPEC_SHA256,
        A::SPEC_PATH,
        A::GENERATED_MODULE
    ))
}

/// The spec fingerprint an adapter's attribute embedded (`embedded`, of `spec`) against the one
/// of the generated module `module` it reads (`generated`).
fn verify_fingerprint(
    module: &'static str,
    spec: &'static str,
    embedded: &'static str,
    generated: &'static str,
) -> Result<(), FlowError> {
    if embedded == generated {
        return Ok(());
    }
    Err(FlowError::Fingerprint {
        module,
        spec,
        embedded,
        generated,
    })
}

/// Checks that `c` declares the inputs (in every catalog class) and written regions the typed
/// I/O structs name, in their order: the positions the structs bind are the callable's.
fn named(c: &CallableInfo, inputs: &[&str], writes: &[&str]) -> Result<(), FlowError> {
    let mismatch = |what: &str, declared: Vec<&str>, typed: &[&str]| {
        FlowError::Config(format!(
            "callable `{}` declares {what} {declared:?}, the typed I/O binds {typed:?}",
            c.name
        ))
    };
    for sig in c.catalog {
        if !sig.inputs.iter().map(|t| t.name).eq(inputs.iter().copied()) {
            let declared = sig.inputs.iter().map(|t| t.name).collect();
            return Err(mismatch("inputs", declared, inputs));
        }
    }
    if c.writes != writes {
        return Err(mismatch("writes", c.writes.to_vec(), writes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callable(writes: &'static [&'static str]) -> CallableInfo {
        CallableInfo {
            writes,
            ..*<Token2WavTiny as NativeClockAdapter>::callable_of("flow").unwrap()
        }
    }

    /// The typed I/O binds by position: a callable whose declared names differ is refused.
    #[test]
    fn callables_must_declare_the_typed_names() {
        let flow = callable(&FlowWrites::NAMES);
        assert_eq!(named(&flow, &FlowInputs::NAMES, &FlowWrites::NAMES), Ok(()));
        let swapped = callable(&["carry", "solver_workspace", "estimator_conv_cache"]);
        let e = named(&swapped, &FlowInputs::NAMES, &FlowWrites::NAMES).unwrap_err();
        assert!(e.to_string().contains("writes"), "{e}");
        assert!(named(&flow, &EncoderInputs::NAMES, &FlowWrites::NAMES).is_err());
    }

    /// The start-up check passes for every adapter and refuses a generated module from another
    /// spec, naming both hashes and the regenerate command.
    #[test]
    fn fingerprints_are_checked_at_start_up() {
        assert!(ContractView::of::<Token2Wav>().is_ok());
        assert!(ContractView::of::<Token2WavTinyVendor>().is_ok());
        let embedded =
            <<Token2WavTiny as NativeClockAdapter>::Contract as NativeClock>::SPEC_SHA256;
        let (module, spec) = ("token2wav_tiny", "specs/token2wav_tiny.yaml");
        assert_eq!(verify_fingerprint(module, spec, embedded, embedded), Ok(()));
        let other = dcc_generated::token2wav_tiny_vendor::SPEC_SHA256;
        assert_ne!(other, embedded);
        let e = verify_fingerprint(module, spec, embedded, other).unwrap_err();
        assert!(matches!(e, FlowError::Fingerprint { .. }), "{e:?}");
        let msg = e.to_string();
        for part in [
            embedded,
            other,
            "cargo run -p dcc-compiler --bin dcc -- compile specs/token2wav_tiny.yaml -o \
             generated/src/token2wav_tiny.rs",
        ] {
            assert!(msg.contains(part), "`{msg}` lacks `{part}`");
        }
    }

    /// A view at a point holds that point's arena and callables; an unknown point is a typed
    /// error naming the points there are.
    #[test]
    fn a_view_at_a_point_reads_that_points_arena_and_catalogs() {
        use dcc_generated::token2wav_tiny as tiny;
        assert_eq!(
            ContractView::points::<Token2WavTiny>(),
            [BASE_POINT, "duplex", "half"]
        );
        assert_eq!(
            ContractView::points::<Token2WavTinyVendor>(),
            [BASE_POINT, "duplex"]
        );
        let base = ContractView::at_point::<Token2WavTiny>(BASE_POINT).unwrap();
        assert_eq!((base.point, base.arena), (BASE_POINT, tiny::ARENA));
        assert_eq!(base.flow.catalog, &tiny::FLOW_CATALOG[..]);
        let duplex = ContractView::at_point::<Token2WavTiny>("duplex").unwrap();
        assert_eq!(duplex.arena, tiny::operating_points::duplex::ARENA);
        assert_eq!(
            duplex.flow.catalog,
            &tiny::operating_points::duplex::FLOW_CATALOG[..]
        );
        // five solver steps: the carry's leading extent in every duplex signature
        assert!(duplex.flow.catalog.iter().all(|s| s.inputs[3].dims[0] == 5));
        let half = ContractView::at_point::<Token2Wav>("half").unwrap();
        assert_eq!(
            half.arena,
            dcc_generated::token2wav::operating_points::half::ARENA
        );
        assert_eq!(half.carry.dtype, dcc_runtime::contract::DType::F16);
        assert_eq!(
            half.flow.catalog,
            &dcc_generated::token2wav::operating_points::half::FLOW_CATALOG[..]
        );
        let e = ContractView::at_point::<Token2WavTinyVendor>("half").unwrap_err();
        assert_eq!(
            e,
            FlowError::UnknownPoint {
                family: "token2wav_tiny_vendor",
                point: "half".into(),
                known: "base, duplex".into(),
            }
        );
        assert!(e.to_string().contains("no operating point `half`"), "{e}");
    }

    #[test]
    fn stream_sizes_come_from_the_generated_module() {
        let c = ContractView::of::<Token2WavTiny>().unwrap();
        assert_eq!(
            c.call_tokens(),
            dcc_generated::token2wav_tiny::CHUNK_TOKENS
                + dcc_generated::token2wav_tiny::LOOKAHEAD_TOKENS
        );
        // what the encoder's catalog keys `tokens` on
        let tokens = c.encoder.catalog[0].inputs[0];
        assert_eq!(tokens.dims.iter().product::<usize>(), c.call_tokens());
    }
}
