//! Where things are in etcd: the keys of reports, statuses, the published release and the
//! rollout semaphores, named here once for the writers, the readers and the least-privilege
//! roles alike. (The enrollment and hold keys still name themselves in their modules.)

pub fn running_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/running/{host}")
}

/// Where the last report of `command` is: an apply's (or pull's) under `running/`, the others
/// under `reports/COMMAND/`, so that a host that alternates pulls and checks compares each
/// with the last of its kind and writes nothing when neither changed.
pub fn report_key(fleet: &str, command: &str, host: &str) -> String {
    if command == "apply" {
        running_key(fleet, host)
    } else {
        format!("/bell/{fleet}/reports/{command}/{host}")
    }
}

pub fn status_key(fleet: &str, category: &str, host: &str) -> String {
    format!("/bell/{fleet}/status/{category}/{host}")
}

/// Bound to the host's lease: there while the host runs (see [`Store::keep_alive`]).
pub fn alive_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/alive/{host}")
}

pub fn desired_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/desired/{host}")
}

pub fn version_key(fleet: &str) -> String {
    format!("/bell/{fleet}/current_version")
}

/// The default prefix: the fleet's own part of the store.
pub fn default_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}")
}

pub fn semaphore_key(prefix: &str, group: &str) -> String {
    format!("{prefix}/groups/{}/v1/semaphore", query_escape(group))
}

pub fn holder_key(prefix: &str, group: &str, host: &str) -> String {
    format!("{prefix}/groups/{}/v1/holders/{host}", query_escape(group))
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space becomes `+`, every other
/// byte `%XX`.
pub fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The inverse of [`query_escape`] (`%XX` and `+`).
pub fn query_unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = text
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
