//! Secrets at rest in a spec's repository: age files that CI's build key and the people who
//! edit them can open, as agenix keeps one `.age` file per secret in git.
//!
//! A recipient is an age X25519 key (`age1…`, what `age-keygen` makes) or an `ssh-ed25519`
//! public key; an identity is an age secret key (`AGE-SECRET-KEY-1…`, one per line of an
//! identity file) or an unencrypted OpenSSH Ed25519 private key. Files are standard age: `age
//! -d -i KEY` opens what [`encrypt`] writes, and [`decrypt`] opens what `age -r` writes.
//!
//! One thing differs from `age -e`, so that who can open a file can be checked: each
//! recipient's stanza is derived from the file key and the recipient alone (its ephemeral key
//! is an HKDF of both), not drawn at random. Whoever opens the file learns the file key, and
//! can then compute the stanza every named recipient should have and compare ([`recipients_match`]):
//! an age X25519 stanza does not name its recipient, so without this a file encrypted to
//! someone else as well could not be told from a right one. The file key and the payload nonce
//! stay random, so nothing is revealed that the file key does not reveal anyway.

use crate::{
    aead, b64, open_parts, random_bytes, ssh_tag, stanza_key, tweaked, unb64, unwrap_body,
    write_file, SealError, Stanza, Unwrap, FILE_KEY_BYTES, SSH_ED25519, SSH_ED25519_LABEL,
};
use chacha20poly1305::aead::Aead;
use chacha20poly1305::Nonce;
use ed25519_compact::x25519;
use hkdf::Hkdf;
use sha2::Sha256;
use std::fmt;

const X25519: &str = "X25519";
const X25519_LABEL: &[u8] = b"age-encryption.org/v1/X25519";
const PUBLIC_HRP: &str = "age";
const SECRET_HRP: &str = "age-secret-key-";

/// Who may open a secret file.
#[derive(Clone, PartialEq, Eq)]
pub enum Recipient {
    /// An age X25519 key, `age1…`.
    X25519(x25519::PublicKey),
    /// An `ssh-ed25519` key.
    Ssh(crate::Recipient),
}

impl fmt::Debug for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recipient({})", self.describe())
    }
}

impl Recipient {
    /// `age1…`, or `ssh-ed25519 BASE64 [comment]`.
    pub fn parse(text: &str) -> Result<Recipient, String> {
        let text = text.trim();
        if text.starts_with("ssh-") {
            let key = crate::identity::Identity::parse(text)?;
            let mut raw = [0u8; 32];
            raw.copy_from_slice(key.key_bytes());
            return crate::Recipient::from_ed25519(raw)
                .map(Recipient::Ssh)
                .map_err(|e| format!("not a usable ssh-ed25519 key: {e}"));
        }
        let (hrp, data) = bech32_decode(text)
            .ok_or("neither an age key (`age1…`) nor an `ssh-ed25519` key".to_string())?;
        if hrp != PUBLIC_HRP || data.len() != 32 {
            return Err("not an age public key (`age1…`, 32 bytes)".into());
        }
        x25519::PublicKey::from_slice(&data)
            .map(Recipient::X25519)
            .map_err(|_| "not a usable X25519 key".into())
    }

    /// How the recipient is written: `age1…`, or `ssh-ed25519 BASE64`.
    pub fn describe(&self) -> String {
        match self {
            Recipient::X25519(key) => bech32_encode(PUBLIC_HRP, key.as_ref()),
            Recipient::Ssh(key) => format!("{SSH_ED25519} {}", b64_padded(&key.wire)),
        }
    }

    /// What the recipient's stanza is derived from besides the file key.
    fn binding(&self) -> Vec<u8> {
        match self {
            Recipient::X25519(key) => [X25519.as_bytes(), key.as_ref()].concat(),
            Recipient::Ssh(key) => key.wire.clone(),
        }
    }

    /// The one stanza this recipient gets for `file_key`.
    fn stanza(&self, file_key: &[u8]) -> Result<Stanza, SealError> {
        let mut ephemeral = [0u8; 32];
        Hkdf::<Sha256>::new(Some(b"bell at rest v1"), file_key)
            .expand(&self.binding(), &mut ephemeral)
            .map_err(|_| SealError::BadKey)?;
        let esk = x25519::SecretKey::new(ephemeral);
        let epk = esk.recover_public_key().map_err(|_| SealError::BadKey)?;
        let (args, wrap_key) = match self {
            Recipient::X25519(to) => {
                let shared = to.dh(&esk).map_err(|_| SealError::BadKey)?;
                let key = stanza_key(&epk, to, &shared, X25519_LABEL);
                (vec![X25519.to_string(), b64(epk.as_ref())], key)
            }
            Recipient::Ssh(to) => {
                let shared = to.x25519.dh(&esk).map_err(|_| SealError::BadKey)?;
                let shared = tweaked(&to.wire, shared.as_ref())?;
                let key = stanza_key(&epk, &to.x25519, &shared, SSH_ED25519_LABEL);
                let tag = b64(&ssh_tag(&to.wire));
                (vec![SSH_ED25519.into(), tag, b64(epk.as_ref())], key)
            }
        };
        let body = aead(&wrap_key)
            .encrypt(&Nonce::default(), file_key)
            .map_err(|_| SealError::BadKey)?;
        Ok(Stanza { args, body })
    }
}

/// What opens a secret file.
pub enum Identity {
    X25519 {
        secret: x25519::SecretKey,
        public: x25519::PublicKey,
    },
    Ssh(crate::Identity),
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Identity({}, secret withheld)",
            self.recipient().describe()
        )
    }
}

impl Identity {
    /// The identities of an identity file: `AGE-SECRET-KEY-1…` lines (`#` comments and blank
    /// lines between), or one unencrypted OpenSSH Ed25519 private key.
    pub fn parse_file(text: &str) -> Result<Vec<Identity>, String> {
        if text.contains("-----BEGIN OPENSSH PRIVATE KEY-----") {
            let key = crate::openssh::read_ed25519(text)?;
            return crate::Identity::from_seed(key.seed)
                .map(|i| vec![Identity::Ssh(i)])
                .map_err(|e| format!("not a usable Ed25519 key: {e}"));
        }
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (hrp, data) = bech32_decode(line)
                .filter(|(hrp, data)| hrp == SECRET_HRP && data.len() == 32)
                .ok_or_else(|| {
                    format!(
                        "line {}: not an age secret key (`AGE-SECRET-KEY-1…`)",
                        n + 1
                    )
                })?;
            let _ = hrp;
            let mut scalar = [0u8; 32];
            scalar.copy_from_slice(&data);
            let secret = x25519::SecretKey::new(scalar);
            let public = secret
                .recover_public_key()
                .map_err(|_| format!("line {}: not a usable X25519 key", n + 1))?;
            out.push(Identity::X25519 { secret, public });
        }
        if out.is_empty() {
            return Err("no identity in it: an age identity file (`age-keygen -o FILE`) or an OpenSSH Ed25519 private key".into());
        }
        Ok(out)
    }

    /// Who this identity opens files for.
    pub fn recipient(&self) -> Recipient {
        match self {
            Identity::X25519 { public, .. } => Recipient::X25519(*public),
            Identity::Ssh(identity) => Recipient::Ssh(crate::Recipient {
                x25519: identity.public,
                wire: identity.wire.clone(),
            }),
        }
    }
}

impl Unwrap for Identity {
    fn unwrap_key(&self, stanza: &Stanza) -> Option<Result<Vec<u8>, SealError>> {
        match self {
            Identity::Ssh(identity) => identity.unwrap_key(stanza),
            Identity::X25519 { secret, public } => {
                let [kind, epk] = stanza.args.as_slice() else {
                    return None;
                };
                if kind != X25519 {
                    return None;
                }
                // An X25519 stanza does not say whom it is for: each is tried, and one that
                // does not unwrap is someone else's.
                let epk = unb64(epk)
                    .filter(|k| k.len() == 32)
                    .and_then(|k| x25519::PublicKey::from_slice(&k).ok())?;
                let shared = epk.dh(secret).ok()?;
                let wrap_key = stanza_key(&epk, public, &shared, X25519_LABEL);
                unwrap_body(&wrap_key, &stanza.body).ok().map(Ok)
            }
        }
    }
}

/// `secret` as an age file each of `recipients` can open.
pub fn encrypt(secret: &[u8], recipients: &[Recipient]) -> Result<Vec<u8>, SealError> {
    if recipients.is_empty() {
        return Err(SealError::Malformed("no recipient"));
    }
    let mut file_key = [0u8; FILE_KEY_BYTES];
    let mut nonce = [0u8; 16];
    random_bytes(&mut file_key)
        .and_then(|()| random_bytes(&mut nonce))
        .map_err(|_| SealError::BadKey)?;
    let stanzas = recipients
        .iter()
        .map(|r| r.stanza(&file_key))
        .collect::<Result<Vec<_>, _>>()?;
    write_file(&file_key, &stanzas, &nonce, secret)
}

/// Opens an age file (binary, or armored as `age -a` writes it) with the first of
/// `identities` it is for.
pub fn decrypt(file: &[u8], identities: &[Identity]) -> Result<Vec<u8>, SealError> {
    let file = dearmor(file)?;
    let keys: Vec<&dyn Unwrap> = identities.iter().map(|i| i as &dyn Unwrap).collect();
    open_parts(&file, &keys).map(|(_, secret, _)| secret)
}

const ARMOR_BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
const ARMOR_END: &str = "-----END AGE ENCRYPTED FILE-----";

/// An age file as text (`age -a`): what a repository keeps, so that a review shows that a
/// secret changed and a merge tool does not take it for a binary.
pub fn armor(file: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(file);
    let mut out = format!("{ARMOR_BEGIN}\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(ARMOR_END);
    out.push('\n');
    out
}

/// The binary age file inside an armored one; a binary one as it is.
fn dearmor(file: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, SealError> {
    use base64::Engine as _;
    let Ok(text) = std::str::from_utf8(file) else {
        return Ok(file.into());
    };
    let text = text.trim();
    let Some(inner) = text.strip_prefix(ARMOR_BEGIN) else {
        return Ok(file.into());
    };
    let inner = inner
        .strip_suffix(ARMOR_END)
        .ok_or(SealError::Malformed("an armored file without its end line"))?;
    let body: String = inner.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map(Into::into)
        .map_err(|_| SealError::Malformed("an armored file that is not base64"))
}

/// Whether exactly `recipients` can open `file` (opened with `identities`): each named one
/// has its stanza, and there is no other. `Err` when it cannot be opened.
pub fn recipients_match(
    file: &[u8],
    identities: &[Identity],
    recipients: &[Recipient],
) -> Result<bool, SealError> {
    let file = dearmor(file)?;
    let keys: Vec<&dyn Unwrap> = identities.iter().map(|i| i as &dyn Unwrap).collect();
    let (file_key, _, header) = open_parts(&file, &keys)?;
    let mut want = recipients
        .iter()
        .map(|r| r.stanza(&file_key).map(|s| (s.args, s.body)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut have: Vec<(Vec<String>, Vec<u8>)> = header
        .stanzas
        .into_iter()
        .map(|s| (s.args, s.body))
        .collect();
    want.sort();
    want.dedup();
    have.sort();
    Ok(want == have)
}

fn b64_padded(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const CHARSET: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

fn polymod(values: &[u8]) -> u32 {
    const GEN: [u32; 5] = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
    let mut chk: u32 = 1;
    for v in values {
        let b = chk >> 25;
        chk = ((chk & 0x1ffffff) << 5) ^ u32::from(*v);
        for (i, g) in GEN.iter().enumerate() {
            if (b >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

fn hrp_expand(hrp: &str) -> Vec<u8> {
    let mut out: Vec<u8> = hrp.bytes().map(|b| b >> 5).collect();
    out.push(0);
    out.extend(hrp.bytes().map(|b| b & 31));
    out
}

/// Regroups bits (8 → 5 or 5 → 8); `None` when padding is not zero (decoding).
fn convert(data: &[u8], from: u32, to: u32, pad: bool) -> Option<Vec<u8>> {
    let (mut acc, mut bits, mut out) = (0u32, 0u32, Vec::new());
    let max = (1u32 << to) - 1;
    for v in data {
        acc = (acc << from) | u32::from(*v);
        bits += from;
        while bits >= to {
            bits -= to;
            out.push(((acc >> bits) & max) as u8);
        }
    }
    if pad {
        if bits > 0 {
            out.push(((acc << (to - bits)) & max) as u8);
        }
    } else if bits >= from || ((acc << (to - bits)) & max) != 0 {
        return None;
    }
    Some(out)
}

/// Bech32 (BIP 173) as age writes its keys: the lowercase human-readable part and the bytes.
fn bech32_decode(text: &str) -> Option<(String, Vec<u8>)> {
    let lower = text.to_ascii_lowercase();
    if lower != text && text.to_ascii_uppercase() != text {
        return None;
    }
    let at = lower.rfind('1')?;
    let (hrp, rest) = (lower.get(..at)?, lower.get(at + 1..)?);
    if hrp.is_empty() || rest.len() < 6 {
        return None;
    }
    let values: Vec<u8> = rest
        .bytes()
        .map(|c| CHARSET.iter().position(|x| *x == c).map(|p| p as u8))
        .collect::<Option<_>>()?;
    if polymod(&[hrp_expand(hrp), values.clone()].concat()) != 1 {
        return None;
    }
    let data = convert(values.get(..values.len() - 6)?, 5, 8, false)?;
    Some((hrp.to_string(), data))
}

fn bech32_encode(hrp: &str, data: &[u8]) -> String {
    let values = convert(data, 8, 5, true).unwrap_or_default();
    let mut with = [hrp_expand(hrp), values.clone(), vec![0; 6]].concat();
    let chk = polymod(&with) ^ 1;
    with.clear();
    let mut out = format!("{hrp}1");
    for v in values
        .iter()
        .copied()
        .chain((0..6).map(|i| ((chk >> (5 * (5 - i))) & 31) as u8))
    {
        out.push(CHARSET[usize::from(v)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// `age-keygen -o FILE`: the identity file and its recipient line.
    fn age_keygen(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
        let path = dir.join(name);
        let out = Command::new("age-keygen")
            .arg("-o")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let public = text
            .lines()
            .find_map(|l| l.strip_prefix("# public key: "))
            .unwrap()
            .to_string();
        (path, public)
    }

    fn ssh_keygen(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
        let path = dir.join(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        (path, public.trim().to_string())
    }

    fn identities(path: &std::path::Path) -> Vec<Identity> {
        Identity::parse_file(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// What `age` itself does with a file: decrypt it with `key`, or encrypt `secret` to
    /// `recipients`.
    fn age(args: &[&str], input: &[u8]) -> (bool, Vec<u8>) {
        use std::io::Write;
        let mut child = Command::new("age")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.success(), out.stdout)
    }

    #[test]
    fn files_open_both_ways_with_age_and_name_exactly_their_recipients() {
        if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (ci, ci_public) = age_keygen(dir.path(), "ci.key");
        let (ana, ana_public) = ssh_keygen(dir.path(), "ana");
        let (eve, eve_public) = age_keygen(dir.path(), "eve.key");
        let named: Vec<Recipient> = [&ci_public, &ana_public]
            .iter()
            .map(|r| Recipient::parse(r).unwrap())
            .collect();
        assert_eq!(named[0].describe(), ci_public);
        assert!(
            ana_public.starts_with(&named[1].describe()),
            "{}",
            named[1].describe()
        );
        let secret = b"$6$rounds=5000$salt$hash\n";

        // Written here, opened by age with either named key, by neither with another's.
        let file = encrypt(secret, &named).unwrap();
        let path = dir.path().join("ops.hash.age");
        std::fs::write(&path, &file).unwrap();
        for key in [&ci, &ana] {
            let (ok, out) = age(
                &["-d", "-i", key.to_str().unwrap(), path.to_str().unwrap()],
                b"",
            );
            assert!(ok, "age -d -i {}", key.display());
            assert_eq!(out, secret);
        }
        assert!(
            !age(
                &["-d", "-i", eve.to_str().unwrap(), path.to_str().unwrap()],
                b""
            )
            .0
        );
        assert_eq!(decrypt(&file, &identities(&ci)).unwrap(), secret);
        assert_eq!(decrypt(&file, &identities(&ana)).unwrap(), secret);
        assert_eq!(
            decrypt(&file, &identities(&eve)).unwrap_err(),
            SealError::NotForThisKey
        );
        // Every encryption draws a new file key: the same secret twice is two files.
        assert_ne!(encrypt(secret, &named).unwrap(), file);
        assert!(recipients_match(&file, &identities(&ci), &named).unwrap());

        // Armored, both ways.
        let armored = armor(&file);
        std::fs::write(&path, &armored).unwrap();
        let (ok, out) = age(
            &["-d", "-i", ci.to_str().unwrap(), path.to_str().unwrap()],
            b"",
        );
        assert!(ok && out == secret);
        assert!(recipients_match(armored.as_bytes(), &identities(&ci), &named).unwrap());
        let (ok, by_age) = age(&["-a", "-r", &ci_public], secret);
        assert!(ok && by_age.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----"));
        assert_eq!(decrypt(&by_age, &identities(&ci)).unwrap(), secret);

        // Written by age to the same two: opened here; but its stanzas are age's own draws, so
        // they cannot be shown to be the named ones (`secrets rekey` writes them again).
        let (ok, by_age) = age(&["-r", &ci_public, "-r", &ana_public], secret);
        assert!(ok);
        assert_eq!(decrypt(&by_age, &identities(&ci)).unwrap(), secret);
        assert!(!recipients_match(&by_age, &identities(&ci), &named).unwrap());

        // One more recipient than named, or one fewer, or another in a named one's place.
        let with_eve: Vec<Recipient> = [&ci_public, &ana_public, &eve_public]
            .iter()
            .map(|r| Recipient::parse(r).unwrap())
            .collect();
        let extra = encrypt(secret, &with_eve).unwrap();
        assert!(!recipients_match(&extra, &identities(&ci), &named).unwrap());
        assert!(recipients_match(&extra, &identities(&ci), &with_eve).unwrap());
        let fewer = encrypt(secret, &named[..1]).unwrap();
        assert!(!recipients_match(&fewer, &identities(&ci), &named).unwrap());
        let swapped = encrypt(secret, &[named[0].clone(), with_eve[2].clone()]).unwrap();
        assert!(!recipients_match(&swapped, &identities(&ci), &named).unwrap());

        // A changed byte anywhere is refused, not opened to something else.
        for at in [30, file.len() / 2, file.len() - 1] {
            let mut bad = file.clone();
            bad[at] ^= 1;
            assert!(decrypt(&bad, &identities(&ci)).is_err(), "byte {at}");
        }
    }

    #[test]
    fn keys_that_are_not_keys_are_refused_with_what_they_are_not() {
        assert!(Recipient::parse("age1notakey").unwrap_err().contains("age"));
        assert!(Recipient::parse("ssh-rsa AAAA").is_err());
        assert!(Identity::parse_file("# only a comment\n")
            .unwrap_err()
            .contains("no identity"));
        assert!(Identity::parse_file("AGE-SECRET-KEY-1QQQQ\n")
            .unwrap_err()
            .contains("line 1"));
    }

    #[test]
    fn bech32_round_trips_and_refuses_a_bad_checksum() {
        let key = [7u8; 32];
        let text = bech32_encode("age", &key);
        assert!(text.starts_with("age1"));
        assert_eq!(bech32_decode(&text), Some(("age".into(), key.to_vec())));
        let mut bad = text.clone();
        bad.pop();
        bad.push(if text.ends_with('q') { 'p' } else { 'q' });
        assert_eq!(bech32_decode(&bad), None);
        assert_eq!(
            bech32_decode(&text.to_ascii_uppercase()).map(|d| d.1),
            Some(key.to_vec())
        );
    }
}
