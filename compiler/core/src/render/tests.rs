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

/// What a part rendered on its own adds when merged is what adding it in place would have:
/// a path taken already is refused (the bundle is then rendered whole, so that the kind that
/// meets the conflict reports it), a trigger already there is not added twice and keeps its
/// first script, and secrets declared before the part mark what it adds.
#[test]
fn a_part_merges_as_if_rendered_in_place() {
    use super::{BundleBuilder, BundleKind, NewFile, NewResource};
    let target = crate::targets::get("debian-12").expect("the default target");
    let resource = |name: &str| NewResource {
        kind: BundleKind::Of(Kind::LIMIT),
        name: name.into(),
        files: Vec::new(),
        lines_in: Vec::new(),
        after: Vec::new(),
        apply: Some(format!("echo {name}\n")),
        revert: None,
        exec: None,
        check: None,
    };
    let mut here = BundleBuilder::new(target, "f");
    here.secret_value("s3cret-value");
    here.add_file(NewFile::root_owned("/etc/a", "a\n", 0o644), "limit:a")
        .expect("free");
    here.add_trigger("reload", vec!["/etc/".into()], "first\n".into());

    let mut part = here.for_part();
    part.add_file(
        NewFile::root_owned("/etc/b", "holds s3cret-value\n", 0o644),
        "mount:b",
    )
    .expect("free");
    part.add_trigger("reload", vec!["/etc/".into()], "second\n".into());
    part.add_trigger("other", vec!["/etc/".into()], "other\n".into());
    part.add_resource(resource("b"));
    here.merge(&part).expect("no path is taken twice");

    let mut clash = here.for_part();
    clash
        .add_file(NewFile::root_owned("/etc/a", "again\n", 0o644), "mount:a")
        .expect("free in the part");
    assert!(here.merge(&clash).is_err(), "/etc/a is taken");

    let bundle = here.finish(&crate::graph::ResourceOrder::default());
    let file_b = bundle.manifest.files.iter().find(|f| f.path == "/etc/b");
    assert!(
        file_b.is_some_and(|f| f.secret),
        "a secret declared before the part marks it"
    );
    let names: Vec<&str> = bundle
        .manifest
        .triggers
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["reload", "other"]);
    assert_eq!(&*bundle.contents["scripts/trigger/reload.sh"], b"first\n");
    assert_eq!(bundle.manifest.resources.len(), 1);
    assert_eq!(bundle.manifest.files.len(), 2);
}
