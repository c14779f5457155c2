use dcc_macros::native_clock;

#[native_clock(spec = "specs/no_such_model.yaml")]
struct Adapter {
    #[callable(decode)]
    decode: (),
}

fn main() {}
