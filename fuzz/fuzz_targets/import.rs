//! `bellc import divingbell` from the text of a values file, with `--verify`: any YAML must
//! end in a spec or diagnostics, never a panic or a hang, and a spec the import writes must be
//! KDL that bellc reads, whatever the values hold (every value is quoted by construction).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = bellc_core::source::Sources::new();
    let values = [sources.add(Path::new("values.yaml"), text.to_string())];
    let mut diags = bellc_core::diagnostic::Diagnostics::new();
    let input = bell_import::divingbell::Input {
        values: &values,
        fleet: "fuzz",
        target: "ubuntu-24.04",
        hosts: &[],
        verify: true,
        retire: true,
        rules: Default::default(),
        all_labels: None,
        secrets_moved: false,
    };
    if let Some(written) = bell_import::divingbell::import(&sources, &input, &mut diags) {
        let mut spec_sources = bellc_core::source::Sources::new();
        let file = spec_sources.add(Path::new("bell.kdl"), written.text.clone());
        let mut spec_diags = bellc_core::diagnostic::Diagnostics::new();
        let _ = bellc_core::front::lower::lower_root(file, &mut spec_sources, &mut spec_diags);
        let lines = spec_diags.to_short_lines(&spec_sources);
        let unreadable: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("bell::parse::"))
            .collect();
        assert!(
            unreadable.is_empty(),
            "the import wrote a spec bellc cannot read: {unreadable:?}\n{}",
            written.text
        );
    }
    // Printing the diagnostics walks every span: one out of range would panic here.
    let _ = diags.to_short(&sources);
});
