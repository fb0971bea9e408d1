use super::*;

#[test]
fn parents_walk_up_to_root() {
    assert_eq!(parent_path("/srv/data").as_deref(), Some("/srv"));
    assert_eq!(parent_path("/srv").as_deref(), Some("/"));
    assert_eq!(parent_path("/"), None);
    assert_eq!(normalize_path("/srv//data/"), "/srv/data");
}

#[test]
fn a_path_is_named_only_as_a_whole() {
    assert!(names_path(
        "EnvironmentFile=/etc/app.conf\n",
        "/etc/app.conf"
    ));
    assert!(!names_path(
        "EnvironmentFile=/etc/app.conf.d/x",
        "/etc/app.conf"
    ));
    assert!(names_path("x /etc/app.conf", "/etc/app.conf"));
}

/// The kinds state their blanket rules (`kinds::package::PACKAGES_FIRST`, …); this stage
/// words them into the sentence and never makes them a dependency.
#[test]
fn a_kinds_blanket_rule_explains_itself_and_only_orders() {
    let rule = Reason::Rule("packages are installed before the files of their host");
    assert_eq!(
        rule.explain("package:nginx", "file:/etc/nginx/nginx.conf", None),
        "packages are installed before the files of their host, so `package:nginx` comes \
         before `file:/etc/nginx/nginx.conf`"
    );
    assert!(!rule.is_dependency());
}

/// A dependency a kind implies is worded by the kind, with the two resources put in its
/// sentence; a nested mount never closes a cycle (a mount takes no `after`), so its sentence is
/// read here rather than in a cycle's diagnostic.
#[test]
fn a_kinds_implied_dependency_explains_itself_in_its_words() {
    let why = Kind::MOUNT
        .implied_order()
        .iter()
        .find_map(|rule| match rule {
            Implied::AfterEnclosing { why, .. } => Some(*why),
            _ => None,
        })
        .expect("mounts order nested mounts");
    let reason = Reason::Needs(why);
    assert_eq!(
        reason.explain("mount:srv", "mount:data", None),
        "`mount:data` is mounted under `mount:srv`, so it is mounted after it"
    );
    assert!(reason.is_dependency());
    assert!(!Reason::Sequence("{before} runs before {after}").is_dependency());
}
