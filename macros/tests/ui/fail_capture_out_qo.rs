use dcc_macros::native_clock;
use dcc_runtime::contract::{Bf16, RegionBuf};

#[native_clock(spec = "specs/speech_token_kv.yaml")]
struct Adapter {
    #[region(kv_cache)]
    kv: RegionBuf<Bf16, 12_288_000>,
    #[callable(decode)]
    decode: (),
}

fn main() {}
