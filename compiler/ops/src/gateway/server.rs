//! The gateway's HTTPS server: hyper's HTTP/1.1 on tokio behind rustls. A request is checked
//! on the runtime's threads; what etcd answers is asked on tokio's blocking pool (the etcd
//! client is synchronous), so a slow etcd holds a blocking thread, never the threads that
//! accept and read; reads from the cache and long-polls wait as tasks.

use super::{Answer, Decision, Gateway};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where and how the gateway listens.
pub struct Listen {
    /// `ADDRESS:PORT`.
    pub address: String,
    /// The certificate chain the hosts verify (`bell-run --store-ca` names its CA), and its key.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Seconds between two readings of OUT's release.
    pub refresh: u64,
}

/// How long a connection may take to send its request: a host sends a few KiB at once, and
/// a connection that trickles is a slow-loris, not a host.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves until the process ends. `ready` is called with the bound address once the gateway
/// listens and has read a signed release.
pub fn run(
    gateway: Gateway,
    listen: &Listen,
    ready: impl FnOnce(std::net::SocketAddr),
) -> Result<(), String> {
    let tls = server_config(listen)?;
    gateway.load_release()?;
    let gateway = Arc::new(gateway);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the gateway's runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen.address)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", listen.address))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("cannot listen on {}: {e}", listen.address))?;
        ready(address);
        let reloader = Arc::clone(&gateway);
        let refresh = Duration::from_secs(listen.refresh.max(1));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(refresh).await;
                let gateway = Arc::clone(&reloader);
                let loaded = tokio::task::spawn_blocking(move || gateway.load_release()).await;
                if let Ok(Err(e)) = loaded {
                    eprintln!("warning: {e}; the gateway goes on with the release it had");
                }
            }
        });
        let flagger = Arc::clone(&gateway);
        std::thread::spawn(move || {
            let mut flagged = super::Flagged::default();
            loop {
                std::thread::sleep(Duration::from_secs(2));
                if let Err(e) = flagger.flag_throttled(&mut flagged) {
                    eprintln!("warning: cannot say which hosts are throttled: {e}");
                }
            }
        });
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        loop {
            let (tcp, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    eprintln!("warning: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = acceptor.clone();
            let gateway = Arc::clone(&gateway);
            tokio::spawn(async move {
                let Ok(Ok(tls)) = tokio::time::timeout(READ_TIMEOUT, acceptor.accept(tcp)).await
                else {
                    return;
                };
                let io = hyper_util::rt::TokioIo::new(tls);
                let service = hyper::service::service_fn(move |request| {
                    let gateway = Arc::clone(&gateway);
                    async move { Ok::<_, std::convert::Infallible>(respond(gateway, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(READ_TIMEOUT)
                    .serve_connection(io, service)
                    .await;
            });
        }
    })
}

/// The server's TLS: the chain and key given, TLS 1.2 and 1.3 with ring's suites.
fn server_config(listen: &Listen) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&listen.cert)
        .map_err(|e| format!("`--tls-cert {}`: {e}", listen.cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`--tls-cert {}`: {e}", listen.cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "`--tls-cert {}` holds no certificate",
            listen.cert.display()
        ));
    }
    let key_pem = bell_wire::tls::read_private(&listen.key, "--tls-key", 1 << 20)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("`--tls-key {}`: {e}", listen.key.display()))?;
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("`--tls-cert` and `--tls-key`: {e}"))
}

async fn respond(gateway: Arc<Gateway>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let answer = answer(gateway, request).await;
    let mut response = Response::builder()
        .status(answer.status)
        .header("content-type", "application/json");
    if let Some(wait) = answer.retry_after {
        response = response.header("retry-after", wait.to_string());
    }
    response
        .body(Full::new(Bytes::from(answer.body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

async fn answer(gateway: Arc<Gateway>, request: Request<Incoming>) -> Answer {
    let path = request.uri().path().to_string();
    if request.method() == hyper::Method::GET && path == "/metrics" {
        return Answer {
            status: 200,
            body: gateway.metrics().into_bytes(),
            retry_after: None,
        };
    }
    if request.method() != hyper::Method::POST {
        return Answer::refusal(405, "the gateway takes POST requests (and GET /metrics)");
    }
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // The largest value a host may write, as base64 inside JSON, and room for the rest.
    let cap = gateway.config.limits.max_value / 3 * 4 + 64 * 1024;
    let body = match Limited::new(request.into_body(), cap).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return Answer::refusal(
                413,
                &format!("a request body is at most {cap} bytes at the gateway"),
            )
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Checking the signature and the grants is short work for the runtime's own threads;
    // only what waits on etcd goes to the blocking pool.
    match gateway.receive(&path, authorization.as_deref(), &body, now) {
        Decision::Now(answer) => answer,
        // A read waits for the cache to be fresh as a task, and a long-poll for its keys: no
        // thread is held while they wait.
        Decision::Read(read) => read.answer_when_fresh().await,
        Decision::Wait(waiting) => {
            let until = tokio::time::Instant::now() + waiting.timeout;
            waiting.answer(waiting.wait.until(until).await)
        }
        Decision::Etcd(sent) => tokio::task::spawn_blocking(move || gateway.carry_out(sent))
            .await
            .unwrap_or_else(|_| Answer::refusal(500, "the gateway failed on this request")),
    }
}
