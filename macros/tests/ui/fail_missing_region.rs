use dcc_macros::native_clock;

#[native_clock(spec = "specs/freeze_omni.yaml")]
struct Adapter {
    #[callable(codec_decode)]
    decode: (),
}

fn main() {}
