//! SSH public keys: every type `ssh-keygen` makes is accepted; damaged keys are refused, and on
//! every case our verdict agrees with `ssh-keygen -l`, which parses the key the way sshd does.

use bellc_core::front::validate::ssh_public_key;
use std::path::Path;
use std::process::Command;

fn ssh_keygen_available() -> bool {
    bell_testkit::tool("ssh-keygen")
}

/// A fresh public key line of `kind` (`-t` and optional `-b`).
fn generate(dir: &Path, kind: &str, bits: Option<&str>) -> String {
    let file = dir.join(format!("key-{kind}-{}", bits.unwrap_or("default")));
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", kind, "-N", "", "-C", "alice@example test"]);
    if let Some(bits) = bits {
        cmd.args(["-b", bits]);
    }
    let status = cmd.arg("-f").arg(&file).status().expect("run ssh-keygen");
    assert!(status.success(), "ssh-keygen -t {kind}");
    let line = std::fs::read_to_string(file.with_extension("pub")).expect("read .pub");
    line.trim_end().to_owned()
}

/// Whether `ssh-keygen -l` accepts the line as a public key.
fn ssh_keygen_accepts(dir: &Path, line: &str) -> bool {
    let file = dir.join("probe.pub");
    std::fs::write(&file, format!("{line}\n")).expect("write probe");
    Command::new("ssh-keygen")
        .arg("-l")
        .arg("-f")
        .arg(&file)
        .output()
        .expect("run ssh-keygen -l")
        .status
        .success()
}

fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn wire_string(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(&u32::try_from(field.len()).expect("len").to_be_bytes());
    out.extend_from_slice(field);
}

/// Splits a key blob into its wire-format strings.
fn wire_fields(mut blob: &[u8]) -> Vec<Vec<u8>> {
    let mut fields = Vec::new();
    while blob.len() >= 4 {
        let len = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        fields.push(blob[4..4 + len].to_vec());
        blob = &blob[4 + len..];
    }
    fields
}

fn blob_of(line: &str) -> Vec<u8> {
    bell_wire::from_base64(line.split(' ').nth(1).expect("key data")).expect("base64")
}

/// Security-key public keys need a FIDO token to generate; their public form is the plain key's
/// point plus an application string, built here and confirmed by `ssh-keygen -l` below.
fn security_key_lines(ed25519: &str, ecdsa256: &str) -> [String; 2] {
    let ed = wire_fields(&blob_of(ed25519));
    let mut sk_ed = Vec::new();
    wire_string(&mut sk_ed, b"sk-ssh-ed25519@openssh.com");
    wire_string(&mut sk_ed, &ed[1]);
    wire_string(&mut sk_ed, b"ssh:");
    let ec = wire_fields(&blob_of(ecdsa256));
    let mut sk_ec = Vec::new();
    wire_string(&mut sk_ec, b"sk-ecdsa-sha2-nistp256@openssh.com");
    wire_string(&mut sk_ec, &ec[1]);
    wire_string(&mut sk_ec, &ec[2]);
    wire_string(&mut sk_ec, b"ssh:");
    [
        format!("sk-ssh-ed25519@openssh.com {} token", encode_base64(&sk_ed)),
        format!(
            "sk-ecdsa-sha2-nistp256@openssh.com {} token",
            encode_base64(&sk_ec)
        ),
    ]
}

struct Keys {
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    lines: Vec<String>,
}

fn keys() -> Option<Keys> {
    if !ssh_keygen_available() {
        return None;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().to_owned();
    let mut lines = vec![
        generate(&dir, "rsa", Some("3072")),
        generate(&dir, "rsa", Some("1024")),
        generate(&dir, "dsa", None),
        generate(&dir, "ecdsa", Some("256")),
        generate(&dir, "ecdsa", Some("384")),
        generate(&dir, "ecdsa", Some("521")),
        generate(&dir, "ed25519", None),
    ];
    let sk = security_key_lines(&lines[6], &lines[3]);
    lines.extend(sk);
    Some(Keys {
        _dir: tmp,
        dir,
        lines,
    })
}

#[test]
fn accepts_every_key_type() {
    let Some(keys) = keys() else { return };
    for line in &keys.lines {
        assert!(
            ssh_keygen_accepts(&keys.dir, line),
            "ssh-keygen refuses {line}"
        );
        assert_eq!(ssh_public_key(line), Ok(()), "{line}");
        // Without a comment, with tabs and extra spaces.
        let mut parts = line.split(' ');
        let (kind, data) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        assert_eq!(ssh_public_key(&format!("{kind} {data}")), Ok(()));
        assert_eq!(
            ssh_public_key(&format!("{kind}\t{data}  comment with  spaces")),
            Ok(())
        );
    }
}

fn message(line: &str) -> String {
    match ssh_public_key(line) {
        Ok(()) => panic!("{line:?} should be refused"),
        Err(invalid) => {
            assert!(!invalid.help.is_empty());
            invalid.message
        }
    }
}

#[test]
fn refuses_damaged_keys_like_ssh_keygen() {
    let Some(keys) = keys() else { return };
    let ed25519 = &keys.lines[6];
    let rsa = &keys.lines[0];
    let ed_data = ed25519.split(' ').nth(1).expect("data");
    let rsa_data = rsa.split(' ').nth(1).expect("data");

    let mut cases: Vec<(String, String)> = vec![
        (
            format!("ssh-rsa {ed_data}"),
            "ssh key says `ssh-rsa` but its key data is a `ssh-ed25519` key".to_owned(),
        ),
        (
            format!("ssh-ed25519 {rsa_data}"),
            "ssh key says `ssh-ed25519` but its key data is a `ssh-rsa` key".to_owned(),
        ),
        (
            format!("ssh-ed25519 {}", &ed_data[..ed_data.len() - 4]),
            "`ssh-ed25519` key is malformed: the key data is truncated".to_owned(),
        ),
        (
            format!("ssh-ed25519 {}", &ed_data[..ed_data.len() - 1]),
            "the key data of this `ssh-ed25519` key is not valid base64".to_owned(),
        ),
        (
            format!("ssh-ed25519 {}!{}", &ed_data[..10], &ed_data[11..]),
            "the key data of this `ssh-ed25519` key is not valid base64".to_owned(),
        ),
        (
            format!("ssh-ed25519 {ed_data}AAAA"),
            "`ssh-ed25519` key is malformed: the key data has 3 bytes after the key".to_owned(),
        ),
        (
            format!("ssh-rsa {}", &rsa_data[..rsa_data.len() / 4 * 2 + 1]),
            "the key data of this `ssh-rsa` key is not valid base64".to_owned(),
        ),
        (
            format!("ssh-rsa {}", &rsa_data[..rsa_data.len() / 4 * 2]),
            "`ssh-rsa` key is malformed: the key data is truncated".to_owned(),
        ),
        (
            "ssh-ed25519".to_owned(),
            "ssh public key of type `ssh-ed25519` has no key data".to_owned(),
        ),
        ("".to_owned(), "ssh public key is empty".to_owned()),
        (
            format!("ssh-ed2519 {ed_data}"),
            "unknown ssh key type `ssh-ed2519`".to_owned(),
        ),
        (
            format!("no-pty,command=\"/bin/true\" {ed25519}"),
            "ssh public key starts with options (`no-pty,command=\"/bin/true\"`), not a key type"
                .to_owned(),
        ),
        (
            format!("{ed25519}\nssh-rsa {rsa_data}"),
            "ssh public key contains U+000A".to_owned(),
        ),
    ];
    // An ed25519 blob whose point is one byte short.
    let fields = wire_fields(&blob_of(ed25519));
    let mut short = Vec::new();
    wire_string(&mut short, &fields[0]);
    wire_string(&mut short, &fields[1][..31]);
    cases.push((
        format!("ssh-ed25519 {}", encode_base64(&short)),
        "`ssh-ed25519` key is malformed: an ed25519 public key is 32 bytes, this one is 31"
            .to_owned(),
    ));
    // An ecdsa key whose embedded curve disagrees with its type.
    let ec = wire_fields(&blob_of(&keys.lines[3]));
    let mut curve = Vec::new();
    wire_string(&mut curve, &ec[0]);
    wire_string(&mut curve, b"nistp384");
    wire_string(&mut curve, &ec[2]);
    cases.push((
        format!("ecdsa-sha2-nistp256 {}", encode_base64(&curve)),
        "`ecdsa-sha2-nistp256` key is malformed: the key data names curve `nistp384`, the type says `nistp256`"
            .to_owned(),
    ));

    for (line, expected) in &cases {
        assert_eq!(&message(line), expected, "{line}");
        if !line.contains('\n') && !line.starts_with("no-pty") {
            assert!(
                !ssh_keygen_accepts(&keys.dir, line),
                "ssh-keygen accepts what we refuse: {line}"
            );
        }
    }
    assert_eq!(
        ssh_public_key(&format!("ssh-ed2519 {ed_data}"))
            .unwrap_err()
            .help
            .split('?')
            .next(),
        Some("did you mean `ssh-ed25519`")
    );
}
