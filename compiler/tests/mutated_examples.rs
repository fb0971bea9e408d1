//! 300 randomly mutated copies of every example spec: each gives exit 0 (it still builds) or
//! 1 (diagnostics), never a panic (101), an abort (134) or a hang. The mutations are the slips
//! and attacks a spec meets: bytes deleted, doubled or replaced with KDL's own punctuation,
//! lines swapped, duplicated or cut, a file truncated. The generator is seeded, so a failure
//! names the seed that reproduces it (`BELL_MUTATION_SEED=N`).

use crate::common;

use std::path::Path;
use std::process::Command;

const COPIES: u64 = 300;

/// xorshift64*: small, seeded, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const PIECES: &[&str] = &[
    "{",
    "}",
    "\"",
    "#",
    "\n",
    "=",
    "/-",
    "/*",
    "*/",
    "\\",
    "0",
    "-1",
    "#true",
    "#null",
    ";",
    "\u{feff}",
    "é",
    "\u{202e}",
    "{{",
    "}}",
    "{%",
    "%}",
    "$(",
    "`",
    "'",
    " ",
    "\t",
    "\r\n",
    "9999999999999999999999",
    "..",
    "/",
    "*",
    "r#\"",
    "\"\"\"",
];

fn mutate(text: &str, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = bytes.len().max(1);
        match rng.below(8) {
            // Delete a short range.
            0 => {
                let at = rng.below(len);
                let n = (1 + rng.below(16)).min(bytes.len().saturating_sub(at));
                bytes.drain(at..at + n);
            }
            // Insert a piece of KDL, template or shell punctuation.
            1 | 2 => {
                let at = rng.below(len).min(bytes.len());
                let piece = PIECES[rng.below(PIECES.len())].as_bytes();
                bytes.splice(at..at, piece.iter().copied());
            }
            // Replace a byte with any byte (not always UTF-8).
            3 => {
                if !bytes.is_empty() {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.next() as u8;
                }
            }
            // Duplicate a range elsewhere.
            4 => {
                let from = rng.below(len).min(bytes.len());
                let n = (1 + rng.below(200)).min(bytes.len() - from);
                let chunk: Vec<u8> = bytes[from..from + n].to_vec();
                let at = rng.below(len).min(bytes.len());
                bytes.splice(at..at, chunk);
            }
            // Swap two lines, or drop one.
            5 | 6 => {
                let mut lines: Vec<Vec<u8>> =
                    bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                let a = rng.below(lines.len());
                if rng.below(2) == 0 {
                    let b = rng.below(lines.len());
                    lines.swap(a, b);
                } else {
                    lines.remove(a);
                }
                bytes = lines.join(&b'\n');
            }
            // Truncate.
            _ => {
                let at = rng.below(len).min(bytes.len());
                bytes.truncate(at);
            }
        }
    }
    bytes
}

fn bellc(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_bellc"))
        .args(args)
        .args(common::EXAMPLE_KEY)
        .current_dir(dir)
        .output()
        .expect("run bellc");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
            .chars()
            .take(2000)
            .collect(),
    )
}

fn check_copies(example: &str, seeds: std::ops::Range<u64>) {
    let source = std::fs::read_to_string(common::repo_root().join("examples").join(example))
        .expect("example");
    let dir = tempfile::tempdir().expect("tempdir");
    // The examples' inventories, so that what refers to them still reads them.
    let status = Command::new("cp")
        .arg("-r")
        .arg(common::repo_root().join("examples/inventory"))
        .arg(dir.path())
        .status()
        .expect("cp");
    assert!(status.success());
    // And its encrypted secrets with the key that opens them.
    common::copy_example(dir.path(), example.trim_end_matches(".kdl"), "bell.kdl");
    let several = seeds.end - seeds.start > 1;
    let mut built = 0;
    for seed in seeds {
        let mut rng =
            Rng(0x9e37_79b9_7f4a_7c15 ^ (seed.wrapping_add(1)).wrapping_mul(0xbf58_476d_1ce4_e5b9));
        let mutated = mutate(&source, &mut rng);
        std::fs::write(dir.path().join("bell.kdl"), &mutated).expect("write");
        let (code, stderr) = bellc(dir.path(), &["check", "--short"]);
        let seed_is = format!("{example}, BELL_MUTATION_SEED={seed}");
        match code {
            // A refusal names at least one error.
            Some(1) => assert!(
                stderr.contains(": error["),
                "{seed_is}: `bellc check` failed without an error:\n{stderr}"
            ),
            // What still checks is built too, through rendering and writing, and builds.
            Some(0) => {
                let (code, stderr) = bellc(dir.path(), &["build", "--short", "-o", "out"]);
                assert_eq!(
                    code,
                    Some(0),
                    "{seed_is}: `bellc check` passed but `bellc build` failed:\n{stderr}"
                );
                built += 1;
            }
            _ => panic!("{seed_is}: `bellc check` exited {code:?}:\n{stderr}"),
        }
    }
    // Mutations that leave nothing buildable would test only the parser's refusals.
    assert!(
        built > 0 || !several,
        "{example}: none of the mutated copies built"
    );
    eprintln!("{example}: {built} of the mutated copies still built");
}

fn seeds() -> std::ops::Range<u64> {
    match std::env::var("BELL_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => seed..seed + 1,
        None => 0..COPIES,
    }
}

#[test]
fn mutated_divingbell_specs_never_panic() {
    check_copies("divingbell.kdl", seeds());
}

#[test]
fn mutated_three_role_specs_never_panic() {
    check_copies("three-role.kdl", seeds());
}
