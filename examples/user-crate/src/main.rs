//! The same contract from a binary, where every unused item of a module would be a warning.

#![deny(warnings)]

mod freeze_omni {
    dcc_runtime::include_contracts!("freeze_omni");
}

fn main() {
    println!(
        "freeze_omni: one session's arena is {} B",
        freeze_omni::ARENA_BYTES
    );
}
