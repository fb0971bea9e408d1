//! `bellc check --strict` compiles every AppArmor profile with the build machine's
//! apparmor_parser and reports its error at the line of the spec.

use crate::common;
use crate::common::have;
use bellc_core::diagnostic::Diagnostics;
use bellc_core::source::Sources;

/// `bellc check --strict`'s profile pass over `spec`: how many profiles apparmor_parser read,
/// and the diagnostics, one line each.
fn strict_check(spec: &str) -> (usize, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bell.kdl");
    std::fs::write(&path, spec).expect("write");
    let mut sources = Sources::with_base(dir.path().to_path_buf());
    let mut diags = Diagnostics::new();
    let front = bellc_core::frontend(&path, &mut sources, &mut diags).expect("frontend");
    let checked =
        bellc_core::kinds::apparmor::check_profiles_with_parser(&front.spec, &sources, &mut diags)
            .expect("apparmor_parser runs");
    (checked, diags.to_short_lines(&sources))
}

#[test]
fn parser_errors_point_at_the_spec_line() {
    if !have("apparmor_parser") {
        return;
    }
    let spec = r####"fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
apparmor "good" {
    profile "/usr/bin/good {\n  capability setgid,\n}\n"
}
apparmor "bad" {
    profile #"""
        /usr/bin/bad {
          capability setgid,
          capability not_a_capability,
        }
        """#
}
"####;
    let (checked, diags) = strict_check(spec);
    assert_eq!(checked, 2);
    assert_eq!(
        diags,
        vec!["bell.kdl:10:1: error[bell::render::invalid]: apparmor_parser rejects profile `bad`: Invalid capability not_a_capability."]
    );
}

/// A profile whose block closes on its header line is still a profile, for bellc as for
/// apparmor_parser.
#[test]
fn a_profile_closed_on_its_header_line_is_a_profile() {
    let spec = "fleet \"t\" target=\"debian-12\"\nhost \"h\"\napparmor \"x\" {\n    profile \"profile x {}\\n\"\n}\napparmor \"y\" {\n    profile \"/usr/bin/y flags=(complain) { }\\n\"\n}\n";
    let (compiled, errors) = common::compile(spec);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(compiled.is_some());
    if !have("apparmor_parser") {
        return;
    }
    let (checked, diags) = strict_check(spec);
    assert_eq!(checked, 2);
    assert!(diags.is_empty(), "{diags:?}");
}
