//! TLS for bell's HTTP clients (etcd's gateway, a bundle source, a build output served over
//! https): rustls with the `ring` provider, synchronous, so bell-run stays one static binary
//! with no async runtime and no C library of its own.
//!
//! What a client trusts is the CA file it is given (`--store-ca`, `--source-ca`), or, without
//! one, the system's bundle (`/etc/ssl/certs/ca-certificates.crt`, Debian's and Ubuntu's). A
//! server is checked against the name or address the URL gives, as a browser does. A client
//! certificate (`--store-cert`, `--store-key`) is sent when given; its key must be readable
//! by its owner alone, as an SSH key must.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where Debian and Ubuntu keep the CAs the system trusts (package `ca-certificates`).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The most a CA, certificate or key file may hold: a system bundle is about 200 KiB.
const MAX_PEM_BYTES: u64 = 4 << 20;

/// What a TLS client is told to trust and to present, as the command line gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA file; `None` is the system's.
    pub ca: Option<PathBuf>,
    /// The client certificate (PEM, the chain from the leaf up) and its key.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }
}

/// A loaded TLS client configuration, cheap to clone.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
    /// What the server is verified against, for messages: "the CA in ca.pem".
    trusts: String,
}

/// The same configuration, not an equal one: two loads of one file are two.
impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for Tls {}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("trusts", &self.trusts).finish()
    }
}

impl Tls {
    /// Reads the files. `cert_flag` and `key_flag` name the options in messages.
    pub fn load(files: &TlsFiles, flags: [&str; 3]) -> Result<Tls, String> {
        let [ca_flag, cert_flag, key_flag] = flags;
        let (ca_path, trusts) = match &files.ca {
            Some(ca) => (
                ca.clone(),
                format!("the CA in {} (`{ca_flag}`)", ca.display()),
            ),
            None => (
                PathBuf::from(SYSTEM_CA_BUNDLE),
                format!("the system's CAs ({SYSTEM_CA_BUNDLE}; `{ca_flag}` names another)"),
            ),
        };
        let pem = read_pem(&ca_path).map_err(|e| format!("`{ca_flag}`: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| {
                format!("`{ca_flag}`: {} is not a PEM file: {e}", ca_path.display())
            })?;
            found += 1;
            roots.add(cert).map_err(|e| {
                format!(
                    "`{ca_flag}`: a certificate in {} is not a CA's: {e}",
                    ca_path.display()
                )
            })?;
        }
        if found == 0 {
            return Err(format!(
                "`{ca_flag}`: {} holds no certificate (`-----BEGIN CERTIFICATE-----`)",
                ca_path.display()
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots);
        let config = match (&files.cert, &files.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert, cert_flag)?;
                let key = read_key(key, key_flag)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    format!("`{cert_flag}` and `{key_flag}` do not go together: {e}")
                })?
            }
            (Some(_), None) => return Err(format!("`{cert_flag}` needs `{key_flag}`")),
            (None, Some(_)) => return Err(format!("`{key_flag}` needs `{cert_flag}`")),
        };
        Ok(Tls {
            config: Arc::new(config),
            trusts,
        })
    }

    /// The rustls configuration, for a client that speaks another protocol over it (etcd's
    /// gRPC, which sets its own ALPN).
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        Arc::clone(&self.config)
    }

    /// Wraps a connected stream and completes the handshake, so that a server whose
    /// certificate is not trusted is refused here, with what was refused and why.
    /// `server` is the name or address the certificate must be for.
    pub fn connect(&self, mut tcp: TcpStream, server: &str) -> Result<TlsStream, String> {
        let host = server
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(server);
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| format!("`{server}` is not a name a certificate can be for"))?;
        let mut conn = rustls::ClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|e| format!("TLS: {e}"))?;
        while conn.is_handshaking() {
            if let Err(e) = conn.complete_io(&mut tcp) {
                return Err(explain(&e, &self.trusts).unwrap_or_else(|| {
                    format!("TLS handshake failed: {e} (is this a TLS port?)")
                }));
            }
        }
        Ok(TlsStream {
            inner: rustls::StreamOwned::new(conn, tcp),
            trusts: self.trusts.clone(),
        })
    }
}

/// What a TLS error means for whoever runs the command, when `e` is one.
fn explain(e: &io::Error, trusts: &str) -> Option<String> {
    let tls_error = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match tls_error {
        rustls::Error::InvalidCertificate(why) => format!(
            "TLS: the server's certificate is not trusted ({why:?}); it is verified against \
             {trusts}"
        ),
        // With TLS 1.3 a server checks the client's certificate after the client finished
        // its side of the handshake: its refusal comes with the first read.
        rustls::Error::AlertReceived(alert) => format!(
            "TLS: the server refused the connection ({alert:?}); a server that asks for a \
             client certificate (`--store-cert`) refuses a client without one, or with one \
             its CA did not sign"
        ),
        other => format!("TLS: {other}"),
    })
}

/// A TLS connection over TCP.
pub struct TlsStream {
    inner: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    trusts: String,
}

impl TlsStream {
    fn explained(&self, e: io::Error) -> io::Error {
        match explain(&e, &self.trusts) {
            Some(text) => io::Error::new(e.kind(), text),
            None => e,
        }
    }
}

impl TlsStream {
    /// The TCP socket under the connection, to set its timeouts.
    pub fn tcp(&self) -> &TcpStream {
        &self.inner.sock
    }
}

impl Read for TlsStream {
    /// A server that closes without TLS's `close_notify` ends the stream as an error
    /// (`UnexpectedEof`): whether what came is whole is for the HTTP framing to say.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| self.explained(e))
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.explained(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().map_err(|e| self.explained(e))
    }
}

fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(format!("{} is larger than a PEM file", path.display()));
    }
    Ok(bytes)
}

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(path).map_err(|e| format!("`{flag}`: {e}"))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{flag}`: {} is not a PEM file: {e}", path.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "`{flag}`: {} holds no certificate (`-----BEGIN CERTIFICATE-----`)",
            path.display()
        ));
    }
    Ok(chain)
}

/// A private key, refused when anyone but its owner may read it (see [`read_private`]).
fn read_key(path: &Path, flag: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_private(path, flag, MAX_PEM_BYTES)?;
    // Not the parser's message: it could quote the key's bytes.
    PrivateKeyDer::from_pem_slice(&pem).map_err(|_| {
        format!(
            "`{flag}`: {} holds no private key (`-----BEGIN PRIVATE KEY-----`)",
            path.display()
        )
    })
}

/// The bytes of a secret file (a key, a password): a plain file that only its owner may
/// read, owned by root or the user running this, at most `max` bytes. A secret others can
/// read is a secret others may already have. The checks are of the file opened, not of the
/// path before it is opened again.
pub fn read_private(path: &Path, flag: &str, max: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::MetadataExt;
    let cannot = |e: io::Error| format!("`{flag}`: cannot read {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(format!("`{flag}`: {} is not a plain file", path.display()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "`{flag}`: {} may be read by others (mode {:o}); `chmod 600` it",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if meta.uid() != 0 && Some(meta.uid()) != me {
        return Err(format!(
            "`{flag}`: {} belongs to uid {}, neither root nor the user running this",
            path.display(),
            meta.uid()
        ));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > max {
        return Err(format!("`{flag}`: {} is too large", path.display()));
    }
    Ok(bytes)
}
