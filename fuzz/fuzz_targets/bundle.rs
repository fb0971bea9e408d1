//! What reaches bell-run from elsewhere as JSON: a bundle manifest (then checked for what
//! `verify_dir` checks before it touches a file), a release, and a host's report as `bellc
//! status` reads it from etcd.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(manifest) = bell_bundle::Manifest::from_json(text) {
        // A manifest that parses prints back canonically, and parses again to the same.
        let again = bell_bundle::Manifest::from_json(&manifest.to_json())
            .expect("a canonical manifest parses");
        assert_eq!(again.to_json(), manifest.to_json());
        let _ = manifest.id();
    }
    if let Ok(release) = serde_json::from_str::<bell_bundle::Release>(text) {
        let _ = release.to_json();
        let _ = release.unsigned();
    }
    let _ = serde_json::from_str::<bell_store::Report>(text);
});
