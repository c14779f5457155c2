use dcc_macros::native_clock;
use dcc_runtime::contract::{Bf16, RegionBuf};

#[native_clock(spec = "specs/language_backbone.yaml")]
struct Adapter {
    #[region(kv_cache)]
    kv: RegionBuf<Bf16, 57_344_000>,
    #[callable(decode_step)]
    decode: (),
}

fn main() {}
