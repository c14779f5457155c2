use dcc_macros::native_clock;
use dcc_runtime::contract::RegionBuf;

#[native_clock(spec = "specs/freeze_omni.yaml")]
struct Adapter {
    #[region(codec_context)]
    context: RegionBuf<f32, 25_600>,
    #[callable(codec_decod)]
    decode: (),
}

fn main() {}
