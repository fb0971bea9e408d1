//! A node written where it does not belong says where it does belong, and a misspelt node
//! gets the closest name allowed in that place.
use crate::common::*;

#[test]
fn nodes_in_the_wrong_place_say_where_they_belong() {
    let fx = Fixture::spec(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\nmatch role=\"x\"\noverride \"o\" {\n  match host=\"a\"\n  host \"b\"\n  pakage \"htop\"\n}\n",
    );
    let run = fx.bellc(&["check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    for expected in [
        "unknown node `match` at the top level",
        "help: `match` is only allowed inside an `override` block",
        "unknown node `host` inside `override`",
        "help: `host` is only allowed at the top level",
        "unknown node `pakage` inside `override`",
        "help: did you mean `package`?",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing {expected:?} in:\n{}",
            run.stderr
        );
    }
}
