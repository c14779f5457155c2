// A misspelled binding is the only error: the struct and the adapter impl are still emitted,
// so the code below that uses them reports nothing more, and the callable the misspelling
// meant is not reported as unbound.
use dcc_macros::native_clock;
use dcc_runtime::contract::{NativeClockAdapter, RegionBuf};

#[native_clock(spec = "specs/freeze_omni.yaml")]
struct Adapter {
    #[region(codec_context)]
    context: RegionBuf<f32, 25_600>,
    #[callable(codec_decoder)]
    decode: (),
}

fn arena_bytes(a: Adapter) -> usize {
    let _ = (a.context, a.decode);
    Adapter::arena().total_bytes
}

fn main() {
    let _ = arena_bytes;
}
