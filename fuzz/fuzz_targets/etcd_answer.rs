//! What an etcd endpoint answers (HTTP/1.1, chunked or not, with JSON and base64 inside), as
//! bell-run and bellc read it: an endpoint is not trusted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bell_store::etcd::read_answer(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = bell_store::etcd::unb64(text);
        let _ = bell_store::State::parse(text);
    }
});
