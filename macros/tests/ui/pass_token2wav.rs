use dcc_macros::native_clock;
use dcc_runtime::contract::{NativeClock, NativeClockAdapter, RegionBuf};

#[native_clock(spec = "specs/token2wav.yaml")]
struct Adapter {
    #[region(carry)]
    carry: RegionBuf<f32, 131_727_360>,
    #[region(solver_workspace)]
    workspace: RegionBuf<f32, 15_007_744>, // one solver step (`lifetime: iteration`)
    #[region(attention_mask)]
    mask: RegionBuf<bool, 112>,
    #[region(conformer_cache)]
    conformer: RegionBuf<f32, 1_234_944>,
    #[region(upsample_cache)]
    upsample: RegionBuf<f32, 1_646_592>,
    #[region(estimator_conv_cache)]
    conv: RegionBuf<f32, 655_360>,
    #[region(pre_lookahead_cache)]
    pre_lookahead: RegionBuf<f32, 1024>,
    #[region(up_layer_cache)]
    up_layer: RegionBuf<f32, 2048>,
    #[region(voc_mel)]
    voc_mel: RegionBuf<f32, 4400>,
    #[region(voc_source)]
    voc_source: RegionBuf<f32, 24_960>,
    #[region(voc_phase)]
    voc_phase: RegionBuf<f64, 9>,
    #[region(voc_offsets)]
    voc_offsets: RegionBuf<i64, 5>,
    #[callable(encoder)]
    encoder: (),
    #[callable(flow)]
    flow: (),
    #[callable(vocoder, eager)]
    vocoder: (),
    #[callable(vocoder_flush, eager)]
    vocoder_flush: (),
}

fn main() {
    assert_eq!(
        <Adapter as NativeClockAdapter>::Contract::FAMILY,
        "token2wav"
    );
    assert_eq!(Adapter::region_of("carry").unwrap().attended, 402);
    assert_eq!(Adapter::catalog_of("flow").unwrap().len(), 3);
    assert!(Adapter::catalog_of("vocoder").unwrap().is_empty());
}
