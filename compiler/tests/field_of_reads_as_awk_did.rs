//! The stdlib reads account files with `field_of` (shell builtins) where it ran
//! `awk -F: -v u=NAME '$1 == u { print $N; exit }'`, a process per field. Both are run on the
//! same files, by `sh` and by `bash`, and must print the same and succeed alike: empty fields,
//! fewer fields than asked for, a name that is a prefix of another, the first of two lines of
//! one name, blanks kept, a last line without its newline, backslashes and glob characters.

use crate::common::{have, repo_root};
use bellc_core::escape::shell_quote;
use std::fmt::Write as _;
use std::process::Command;

const FILES: &[&str] = &[
    "root:x:0:0:root:/root:/bin/bash\nops:x:1000:1000::/home/ops:/bin/sh\n",
    "op:x:1:1\nops:*:2:2:Ops Team, room 4:/srv/o ps:/bin/sh\nops:dup:3:3\n",
    "ops\nops:\n:x:9\n",
    "ops:$6$salt$a\\b\\\\c*?[x]:7::\n",
    "  ops:lead\nops:  kept  :x\nlast:no-newline:5",
    "",
    "\n\n\nops::::::::\n",
];
const NAMES: &[&str] = &["ops", "op", "root", "last", "nobody", "  ops"];

#[test]
fn field_of_prints_what_awk_printed() {
    let fields = std::fs::read_to_string(repo_root().join("stdlib/common/fields.sh.j2"))
        .expect("stdlib/common/fields.sh.j2");
    assert!(
        !fields.contains("{{") && !fields.contains("{%"),
        "plain shell"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut script = format!("{fields}\n");
    for (i, text) in FILES.iter().enumerate() {
        let path = dir.path().join(format!("f{i}"));
        std::fs::write(&path, text).expect("write");
        for name in NAMES {
            for n in 1..=9 {
                let (p, q) = (path.display(), shell_quote(name));
                writeln!(
                    script,
                    "printf '== %s %s %s\\n' {i} {q} {n}
field_of {q} {n} <'{p}'; echo \"rc $?\"
echo '--'
awk -F: -v u={q} -v n={n} '$1 == u {{ print $n; found = 1; exit }} END {{ exit !found }}' '{p}'; echo \"rc $?\""
                )
                .expect("write");
            }
        }
    }
    let script_path = dir.path().join("compare.sh");
    std::fs::write(&script_path, script).expect("write");
    for shell in ["sh", "bash"] {
        if !have(shell) {
            continue;
        }
        let out = Command::new(shell).arg(&script_path).output().expect(shell);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut cases = 0;
        for case in text.split("== ").skip(1) {
            let (head, rest) = case.split_once('\n').expect("head");
            let (builtin, awk) = rest.split_once("--\n").expect("two answers");
            assert_eq!(builtin, awk, "{shell}: case {head}");
            cases += 1;
        }
        assert_eq!(cases, FILES.len() * NAMES.len() * 9);
    }
}
