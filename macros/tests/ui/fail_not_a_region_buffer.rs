use dcc_macros::native_clock;

#[native_clock(spec = "specs/freeze_omni.yaml")]
struct Adapter {
    #[region(codec_context)]
    context: Vec<f32>,
    #[callable(codec_decode)]
    decode: (),
}

fn main() {}
