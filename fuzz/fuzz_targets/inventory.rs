//! The inventory reader: a JSON host list, or `kubectl get nodes -o json`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = bellc_core::front::inventory::parse(text);
    }
});
