//! Fuzz the whole front/validate/derive pipeline: any bytes in, a typed result out, no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(d) = dcc_compiler::check_source("fuzz.yaml", text) {
            // Rendering must not panic either (spans always inside the text).
            let _ = d.render();
        }
    }
});
