//! A crate that uses dcc the way a user's crate would, so CI builds that path: a build script
//! compiles specs with `dcc_compiler::Config` (`build.rs`), the modules are included with
//! `dcc_runtime::include_contracts!`, and an adapter is bound with `#[native_clock]`.
//!
//! Every warning is an error here. A contract module describes the whole contract and a crate
//! reads a few of its items, so this crate deliberately uses almost nothing of `moshi` (its
//! buffer type) and includes it in a private module — the case where unused items would warn.

#![deny(warnings)]

use dcc_runtime::contract::NativeClockAdapter;

/// The Moshi contract, private: only its buffer type is used.
mod moshi {
    dcc_runtime::include_contracts!("moshi");
}

/// The Freeze-Omni contract, public.
pub mod freeze_omni {
    dcc_runtime::include_contracts!("freeze_omni");
}

/// Moshi's temporal transformer state, bound to its contract.
#[dcc_macros::native_clock(spec = "specs/moshi.yaml")]
pub struct MoshiAdapter {
    #[region(temporal_kv)]
    pub kv: moshi::TemporalKvBuf,
    #[callable(temporal_step)]
    pub step: (),
}

/// Bytes one Moshi session's arena allocates.
pub fn moshi_arena_bytes() -> usize {
    MoshiAdapter::arena().total_bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcc_runtime::contract::{NativeClock, RegionBuf};

    #[test]
    fn the_adapter_reads_its_contract() {
        // 3000 frames × 32 layers × (k, v) × 32 heads × 128 × 2 B (bf16).
        assert_eq!(moshi_arena_bytes(), 3000 * 32 * 2 * 32 * 128 * 2);
        let kv = MoshiAdapter::region_of("kv").expect("the kv field is bound");
        assert_eq!((kv.name, kv.attended), ("temporal_kv", 3000));
        let step = MoshiAdapter::catalog_of("step").expect("the step field is bound");
        assert_eq!(step.len(), 1, "a ring pins the extent: one class");
        assert_eq!(
            <MoshiAdapter as NativeClockAdapter>::Contract::FAMILY,
            "moshi"
        );
    }

    #[test]
    fn a_host_arena_binds_the_public_contract() {
        let backend = dcc_runtime::backend::host();
        let arena = dcc_runtime::Arena::new(backend, &freeze_omni::ARENA).expect("host arena");
        let ctx: freeze_omni::CodecContextBuf =
            RegionBuf::bind(&arena, "codec_context").expect("the layout's region");
        assert_eq!(
            ctx.ptr(),
            arena.base().offset(freeze_omni::CodecContext::OFFSET)
        );
        assert_eq!(
            freeze_omni::CodecDecodeInputs::NAMES,
            ["codes", "context"],
            "the typed inputs follow the spec's order"
        );
    }
}
