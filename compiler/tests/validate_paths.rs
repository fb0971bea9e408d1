//! Absolute paths of managed resources and file modes.

use bellc_core::front::validate::{absolute_path, file_mode};

fn message(path: &str) -> String {
    match absolute_path(path) {
        Ok(()) => panic!("{path:?} should be refused"),
        Err(invalid) => {
            assert!(!invalid.help.is_empty());
            invalid.message
        }
    }
}

#[test]
fn accepts_normalised_absolute_paths() {
    for good in [
        "/mnt",
        "/mnt/data-1",
        "/etc/bell/a b",
        "/var/lib/ünï",
        "/.hidden",
        "/a/...b",
    ] {
        assert_eq!(absolute_path(good), Ok(()), "{good}");
    }
}

#[test]
fn refuses_paths_with_a_reason() {
    assert_eq!(message(""), "path `` is not absolute");
    assert_eq!(message("mnt/data"), "path `mnt/data` is not absolute");
    assert_eq!(message("/"), "path `/` is the root directory");
    assert_eq!(message("/mnt/"), "path `/mnt/` ends with `/`");
    assert_eq!(absolute_path("/mnt//").unwrap_err().help, "write `/mnt`");
    assert_eq!(message("//mnt"), "path `//mnt` contains `//`");
    assert_eq!(message("/mnt//data"), "path `/mnt//data` contains `//`");
    assert_eq!(
        message("/mnt/../etc"),
        "path `/mnt/../etc` contains a `..` component"
    );
    assert_eq!(
        message("/mnt/./data"),
        "path `/mnt/./data` contains a `.` component"
    );
    assert_eq!(
        message("/mnt/.."),
        "path `/mnt/..` contains a `..` component"
    );
    assert_eq!(message("/mnt/a\nb"), "path contains U+000A");
    assert_eq!(message("/mnt/a\0b"), "path contains U+0000");
    assert_eq!(
        message(&format!("/{}", "a".repeat(256))),
        format!(
            "path `/{}` has a component longer than 255 bytes",
            "a".repeat(256)
        )
    );
    let long = "/aaaaaaa".repeat(512);
    assert_eq!(message(&long), "path is 4096 bytes long, the limit is 4095");
}

#[test]
fn file_modes() {
    assert_eq!(file_mode("0640"), Ok(0o640));
    // One way to write a mode: four digits, with the fix said.
    let three = file_mode("640").unwrap_err();
    assert_eq!(three.message, "file mode `640` has three digits");
    assert_eq!(
        three.help,
        "write the mode as four octal digits: `\"0640\"`"
    );
    assert_eq!(file_mode("1777"), Ok(0o1777));
    assert_eq!(file_mode("7777"), Ok(0o7777));
    assert_eq!(file_mode("0000"), Ok(0));
    assert!(file_mode("000").is_err());
    for bad in [
        "",
        "7",
        "64",
        "0o640",
        "0x1ff",
        "0648",
        "17777",
        "-640",
        "rw-r--r--",
        " 640",
    ] {
        let invalid = file_mode(bad).expect_err(bad);
        assert_eq!(
            invalid.message,
            format!("file mode `{bad}` is not an octal mode")
        );
        assert!(invalid.help.contains("`\"0644\"`"), "{}", invalid.help);
    }
}
