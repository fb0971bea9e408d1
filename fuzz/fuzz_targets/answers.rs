//! What a server answers, as bell's two plain HTTP clients read it: etcd's gateway (HTTP,
//! chunked or not, with JSON and base64 inside) and a bundle source (the head before the
//! body is streamed). Neither server is trusted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bell_wire::etcd::read_answer(data);
    assert!(bell_wire::etcd::range_readings_agree(data));
    let head = match data.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(end) => &data[..end],
        None => data,
    };
    let _ = bell_wire::client::parse_head(head);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = bell_wire::from_base64(text);
        let _ = bell_store::State::parse(text);
    }
});
