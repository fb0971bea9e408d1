//! etcd's users: a client logged in as one (a token per member, renewed when it expires),
//! and refusals that say which user may not do what.

use super::*;

impl Etcd {
    /// One request to endpoint `at`, as this client's user when it has one: logged in on that
    /// member first (etcd's simple tokens are the member's own), and again once when the
    /// member says the token expired.
    pub(super) fn call_endpoint<T>(
        &self,
        at: usize,
        path: &str,
        body: &str,
        parse: &dyn Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let endpoint = &self.endpoints[at];
        let tls = self.tls.as_ref();
        if let Some(signer) = &self.signer {
            // A gateway that asks for a pause (429, `Retry-After`) gets it, within
            // `throttled_waits` and the request's deadline; then the request is signed again
            // (a signature is good for one request at one time) and sent once more.
            let mut waited = std::time::Duration::ZERO;
            loop {
                let authorization = (signer.0)(path, body.as_bytes());
                let answer = call_one(
                    endpoint,
                    tls,
                    self.limits,
                    Some(&authorization),
                    path,
                    body,
                    parse,
                );
                let Err(Failure::Throttled(why, wait)) = answer else {
                    return answer;
                };
                let wait = std::time::Duration::from_secs(wait.max(1));
                let in_time = self
                    .limits
                    .until
                    .is_none_or(|until| std::time::Instant::now() + wait < until);
                if waited + wait > self.limits.throttled_waits || !in_time {
                    return Err(Failure::Throttled(why, wait.as_secs()));
                }
                std::thread::sleep(wait);
                waited += wait;
                self.requests.fetch_add(1, Ordering::Relaxed);
            }
        }
        let Some(auth) = &self.auth else {
            return call_one(endpoint, tls, self.limits, None, path, body, parse);
        };
        for attempt in 0..2 {
            if attempt > 0 {
                self.requests.fetch_add(1, Ordering::Relaxed);
            }
            let token = match auth.token(at) {
                Some(token) => token,
                None => {
                    self.requests.fetch_add(1, Ordering::Relaxed);
                    let token = auth.log_in(endpoint, tls, self.limits)?;
                    auth.keep(at, Some(token.clone()));
                    token
                }
            };
            let token = Some(token.as_str()).filter(|t| !t.is_empty());
            match call_one(endpoint, tls, self.limits, token, path, body, parse) {
                Err(Failure::Refused(e)) if attempt == 0 && e.contains("auth token") => {
                    auth.keep(at, None);
                }
                Err(Failure::Refused(e)) if e.contains("permission denied") => {
                    return Err(Failure::Refused(format!(
                        "{e}: user `{}` may not {}",
                        auth.user,
                        what_was_asked(path, body)
                    )))
                }
                other => return other,
            }
        }
        Err(Failure::Refused(format!(
            "user `{}`: the member refused a token it had just given",
            auth.user
        )))
    }
}

impl Etcd {
    /// The `Authorization` header for a request to endpoint `at`: the signer's, or the token of
    /// this client's user (logged in on that member first when it has none), or none.
    pub(super) fn authorization_for(
        &self,
        at: usize,
        path: &str,
        body: &str,
    ) -> Result<Option<String>, Failure> {
        if let Some(signer) = &self.signer {
            return Ok(Some((signer.0)(path, body.as_bytes())));
        }
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let token = match auth.token(at) {
            Some(token) => token,
            None => {
                self.requests.fetch_add(1, Ordering::Relaxed);
                let token = auth.log_in(&self.endpoints[at], self.tls.as_ref(), self.limits)?;
                auth.keep(at, Some(token.clone()));
                token
            }
        };
        Ok(Some(token).filter(|t| !t.is_empty()))
    }

    /// How a reader speaks etcd's gRPC interface to endpoint `at` (`None` past the last):
    /// etcd's binary protocol, on the same port as the JSON gateway every other call uses,
    /// answers a range of hundreds of MiB several times faster. The token is this client's
    /// user's on that member (logged in first when it has none); a client that signs its
    /// requests (a host, to the gateway) has no such access.
    pub fn grpc_access(&self, at: usize) -> Result<Option<GrpcAccess>, String> {
        let Some(endpoint) = self.endpoints.get(at) else {
            return Ok(None);
        };
        if self.signer.is_some() {
            return Err("a client that signs its requests speaks only to the gateway".into());
        }
        let token = self.authorization_for(at, "/v3/kv/range", "").map_err(
            |(Failure::Refused(e) | Failure::Unreachable(e) | Failure::Throttled(e, _))| {
                format!("{endpoint}: {e}")
            },
        )?;
        Ok(Some(GrpcAccess {
            endpoint: endpoint.clone(),
            tls: self.tls.as_ref().map(crate::tls::Tls::client_config),
            token,
        }))
    }

    /// How many endpoints it has.
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    /// Forgets the token of endpoint `at` (one it may have refused).
    pub fn forget_token(&self, at: usize) {
        if let Some(auth) = &self.auth {
            auth.keep(at, None);
        }
    }
}

/// What a request asked for, as a refusal names it: "write `/bell/f/running/h2`".
pub(super) fn what_was_asked(path: &str, body: &str) -> String {
    let Ok(body) = serde_json::from_str::<serde_json::Value>(body) else {
        return format!("call `{path}`");
    };
    let key_of = |request: &serde_json::Value| {
        let key = request.get("key")?.as_str().and_then(from_base64)?;
        Some(format!(
            "`{}`",
            String::from_utf8_lossy(&key).escape_debug()
        ))
    };
    // (verb, keys), in the order first asked.
    let mut asked: Vec<(&str, Vec<String>)> = Vec::new();
    let mut ask = |verb: &'static str, key: Option<String>| {
        let Some(key) = key else { return };
        match asked.iter_mut().find(|(v, _)| *v == verb) {
            Some((_, keys)) if !keys.contains(&key) => keys.push(key),
            Some(_) => {}
            None => asked.push((verb, vec![key])),
        }
    };
    match path {
        "/v3/kv/range" => ask("read", key_of(&body)),
        "/v3/kv/put" => ask("write", key_of(&body)),
        "/v3/kv/deleterange" => ask("delete", key_of(&body)),
        "/v3/kv/txn" => {
            for compare in body
                .get("compare")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
            {
                ask("read", key_of(compare));
            }
            for op in body
                .get("success")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
            {
                for (field, verb) in [
                    ("request_range", "read"),
                    ("request_put", "write"),
                    ("request_delete_range", "delete"),
                ] {
                    if let Some(request) = op.get(field) {
                        ask(verb, key_of(request));
                    }
                }
            }
        }
        _ => {}
    }
    if asked.is_empty() {
        return format!("call `{path}`");
    }
    let parts: Vec<String> = asked
        .into_iter()
        .map(|(verb, keys)| format!("{verb} {}", keys.join(", ")))
        .collect();
    let together = if path == "/v3/kv/txn" && parts.len() > 1 {
        " (in one transaction)"
    } else {
        ""
    };
    format!("{}{together}", parts.join(" and "))
}

/// What [`Etcd::grpc_access`] gives: the `HOST:PORT` to connect to, its TLS client
/// configuration (`None`: plain TCP), and the token to send as gRPC's `token` metadata.
#[derive(Clone)]
pub struct GrpcAccess {
    pub endpoint: String,
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    pub token: Option<String>,
}

/// Never the token.
impl std::fmt::Debug for GrpcAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcAccess")
            .field("endpoint", &self.endpoint)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// An etcd user this client logs in as, and the token each member gave it.
pub(super) struct Auth {
    pub(super) user: String,
    pub(super) password: String,
    pub(super) password_file: PathBuf,
    /// Per endpoint; `""` where the member has authentication off.
    pub(super) tokens: std::sync::Mutex<Vec<Option<String>>>,
}

/// Never the password.
impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("user", &self.user).finish()
    }
}

impl Auth {
    fn token(&self, at: usize) -> Option<String> {
        self.tokens.lock().ok()?.get(at).cloned().flatten()
    }

    fn keep(&self, at: usize, token: Option<String>) {
        if let Ok(mut tokens) = self.tokens.lock() {
            if let Some(slot) = tokens.get_mut(at) {
                *slot = token;
            }
        }
    }

    /// `/v3/auth/authenticate` on one member: its token, or `""` when it has authentication
    /// off (users are set up before `etcdctl auth enable`, and must keep working through it).
    fn log_in(
        &self,
        endpoint: &str,
        tls: Option<&crate::tls::Tls>,
        limits: Limits,
    ) -> Result<String, Failure> {
        let body = serde_json::json!({ "name": self.user, "password": self.password }).to_string();
        let answer = call_one(
            endpoint,
            tls,
            limits,
            None,
            "/v3/auth/authenticate",
            &body,
            &|bytes| serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| e.to_string()),
        );
        drop(body);
        match answer {
            Ok(answer) => {
                let token = answer.get("token").and_then(|t| t.as_str()).unwrap_or("");
                // It goes into a header line: nothing but printable ASCII.
                if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(Failure::Unreachable(format!(
                        "user `{}` logged in, but the member sent no usable token",
                        self.user
                    )));
                }
                Ok(token.to_string())
            }
            Err(Failure::Refused(e)) if e.contains("authentication is not enabled") => {
                Ok(String::new())
            }
            Err(Failure::Refused(e)) => Err(Failure::Refused(format!(
                "user `{}` could not log in ({e}); is the password in {} the one `bellc store \
                 roles --apply` wrote for it?",
                self.user,
                self.password_file.display()
            ))),
            Err(unreachable) => Err(unreachable),
        }
    }
}

pub(super) fn is_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
}

/// A password file: one line, private as a key is ([`crate::tls::read_private`]).
pub(super) fn read_password(path: &Path) -> Result<String, String> {
    let flag = "--store-password-file";
    let bytes = crate::tls::read_private(path, flag, 4096)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("`{flag}`: {} is not UTF-8 text", path.display()))?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    if password.is_empty() || password.contains(['\n', '\r']) {
        return Err(format!(
            "`{flag}`: {} must hold the password on one line",
            path.display()
        ));
    }
    Ok(password.to_string())
}
