use super::common;
use crate::spec::Kind;

/// Every host's own resource renders a stdlib script no other host asks for: the memo of
/// rendered scripts stays within its limit however many there are.
#[test]
fn the_stdlib_memo_forgets_at_its_limit() {
    let renderer = super::Renderer::new();
    let content = "x".repeat(4096);
    let mut rendered = 0;
    for i in 0..10_000 {
        let ctx = minijinja::context! { kind => "file", name => format!("/etc/{i}"), role => "apply", content };
        let text = renderer
            .stdlib("common/prelude.sh.j2", ctx)
            .unwrap_or_default();
        rendered += text.len() + content.len();
    }
    let held = super::STDLIB_MEMO.with(|m| m.borrow().1);
    assert!(rendered > 2 * super::INTERN_LIMIT, "{rendered}");
    assert!(held <= super::INTERN_LIMIT + 2 * 8192, "{held}");
}

/// A profile that names a directory no kind writes into has a typo: it would be ignored.
#[test]
fn every_profile_path_is_one_a_kind_writes_into() {
    let mut known = vec![&common::UNIT_DIR];
    known.extend(Kind::every_target_path());
    for target in crate::targets::all().values() {
        for key in target.paths.keys() {
            assert!(
                known.iter().any(|p| p.key == key),
                "targets/{}.json: `paths.{key}` is no directory bell writes into",
                target.name
            );
        }
    }
    let mut keys: Vec<_> = known.iter().map(|p| p.key).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), known.len(), "a key is listed twice");
}

#[test]
fn script_file_names_are_injective_and_safe() {
    use super::file_name_for;
    assert_eq!(file_name_for("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
    assert_eq!(file_name_for("/etc/a_b"), "%2Fetc%2Fa_b");
    assert_ne!(file_name_for("/etc/a/b"), file_name_for("/etc/a%2Fb"));
    assert_eq!(file_name_for(".."), "%2E.");
}
