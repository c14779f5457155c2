use dcc_macros::native_clock;

#[native_clock(spec = "macros/tests/ui/specs/broken.yaml")]
struct Adapter {
    #[region(codec_context)]
    context: (),
}

fn main() {}
