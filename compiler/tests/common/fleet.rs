//! For the fleet review tests: the real `bell-run` binary (built on demand, since a test of one
//! package cannot name another package's binary), a real etcd server or three-member cluster
//! and a real nginx on free loopback ports with temporary directories (killed on drop).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use super::have as require;

/// The bell-run binary of this workspace, built if needed (a no-op when up to date), or the one
/// `BELL_RUN_BIN` names (`.ci/test` runs every test with the static release binary).
pub fn bell_run() -> PathBuf {
    if let Some(bin) = std::env::var_os("BELL_RUN_BIN") {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "BELL_RUN_BIN: no file at {}", bin.display());
        return bin;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", "bell-run", "--bin", "bell-run"])
        .current_dir(workspace)
        .status()
        .expect("run cargo build -p bell-run");
    assert!(status.success(), "cargo build -p bell-run failed");
    // Tests run from target/debug/deps/; the binaries are one level up.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("bell-run");
    assert!(bin.is_file(), "no bell-run at {}", bin.display());
    bin
}

pub fn run_bin(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args).env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{} panicked:\n{}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `bell-run apply BUNDLE --root ROOT`: a bundle applied into an image root.
pub fn apply_into(bin: &Path, bundle: &Path, root: &Path) -> Output {
    run_bin(
        bin,
        &[
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
        &[],
    )
}

pub fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A certificate authority made with `openssl` for one test: a CA, a server certificate for
/// `127.0.0.1` (etcd members, nginx) and a client certificate, each key 0600.
pub struct Pki {
    pub dir: tempfile::TempDir,
}

impl Pki {
    /// `None` (a skip) only outside CI when openssl is not installed.
    pub fn new() -> Option<Pki> {
        if !require("openssl") {
            return None;
        }
        let pki = Pki {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        pki.openssl(
            "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
             -subj /CN=bell-test-CA -keyout ca.key -out ca.pem",
        );
        pki.issue(
            "server",
            "127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        );
        pki.issue("client", "bell-client", "extendedKeyUsage=clientAuth");
        pki.issue_expired("expired", "subjectAltName=IP:127.0.0.1,DNS:localhost");
        Some(pki)
    }

    /// NAME.pem and NAME.key for `127.0.0.1`, signed by the CA, valid for one day in 2020
    /// (`openssl ca`, which takes dates in the past).
    fn issue_expired(&self, name: &str, ext: &str) {
        std::fs::write(
            self.path("ca.cnf"),
            "[ca]\ndefault_ca = bell\n[bell]\ndatabase = index.txt\nnew_certs_dir = .\n\
             serial = serial\ndefault_md = sha256\npolicy = any\n[any]\ncommonName = supplied\n",
        )
        .expect("ca.cnf");
        std::fs::write(self.path("index.txt"), "").expect("index.txt");
        std::fs::write(self.path("serial"), "1000\n").expect("serial");
        self.openssl(&format!(
            "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
             -keyout {name}.key -out {name}.csr"
        ));
        std::fs::write(self.path(&format!("{name}.ext")), format!("{ext}\n")).expect("ext");
        self.openssl(&format!(
            "ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in {name}.csr -out {name}.pem \
             -startdate 20200101000000Z -enddate 20200102000000Z -extfile {name}.ext -notext"
        ));
    }

    /// `openssl ARGS` in the CA's directory (words without spaces).
    fn openssl(&self, args: &str) {
        let out = Command::new("openssl")
            .args(args.split_whitespace())
            .current_dir(self.dir.path())
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", text(&out));
    }

    /// NAME.pem and NAME.key, signed by the CA.
    fn issue(&self, name: &str, cn: &str, ext: &str) {
        self.openssl(&format!(
            "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN={cn} \
             -keyout {name}.key -out {name}.csr"
        ));
        std::fs::write(self.path(&format!("{name}.ext")), format!("{ext}\n")).expect("ext");
        self.openssl(&format!(
            "x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
             -extfile {name}.ext -out {name}.pem"
        ));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            self.path(&format!("{name}.key")),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// How a client reaches a member: trusting this CA, with the client certificate.
    pub fn access(&self) -> bell_store::Access {
        bell_store::Access {
            tls: bell_wire::tls::TlsFiles {
                ca: Some(self.path("ca.pem")),
                cert: Some(self.path("client.pem")),
                key: Some(self.path("client.key")),
            },
            ..Default::default()
        }
    }

    /// How a client reaches a member that asks for no client certificate: trusting this CA.
    pub fn server_access(&self) -> bell_store::Access {
        bell_store::Access {
            tls: bell_wire::tls::TlsFiles {
                ca: Some(self.path("ca.pem")),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// `etcdctl ARGS` against the TLS member at `endpoint`, trusting this CA: its output.
    pub fn etcdctl(&self, endpoint: &str, args: &[&str]) -> Output {
        Command::new("etcdctl")
            .arg(format!("--endpoints=https://{endpoint}"))
            .arg(format!("--cacert={}", self.path("ca.pem").display()))
            .args(args)
            .env("ETCDCTL_API", "3")
            .output()
            .expect("etcdctl")
    }

    /// The options that say [`Pki::access`] on a command line.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (flag, file) in [
            ("--store-ca", "ca.pem"),
            ("--store-cert", "client.pem"),
            ("--store-key", "client.key"),
        ] {
            out.push(flag.to_string());
            out.push(self.path(file).display().to_string());
        }
        out
    }
}

/// How an etcd member speaks to its clients.
#[derive(Clone, Copy)]
enum Serving<'a> {
    Plain,
    /// TLS with the CA's server certificate.
    Tls(&'a Pki),
    /// TLS, and every client must present a certificate of the CA.
    TlsWithClientCertificates(&'a Pki),
}

/// The command that starts one etcd member on loopback (its client and peer URLs, data in
/// `dir`), and its log there (opened for appending: a member started again after a kill writes
/// on after its first life).
fn member_command(
    name: &str,
    client: u16,
    peer: u16,
    cluster: &str,
    dir: &Path,
    serving: Serving,
) -> (Command, std::fs::File) {
    let scheme = match serving {
        Serving::Plain => "http",
        _ => "https",
    };
    let client_url = format!("{scheme}://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))
        .expect("log");
    let mut command = Command::new("etcd");
    if let Serving::Tls(pki) | Serving::TlsWithClientCertificates(pki) = serving {
        command
            .arg(format!("--cert-file={}", pki.path("server.pem").display()))
            .arg(format!("--key-file={}", pki.path("server.key").display()));
    }
    if let Serving::Tls(_) = serving {
        // Login tokens that expire within a test, so that renewing them is tested; and a
        // small quota (64 MiB), which a flood let through would fill in seconds.
        command
            .arg("--auth-token-ttl=2")
            .arg(format!("--quota-backend-bytes={}", QUOTA));
    }
    if let Serving::TlsWithClientCertificates(pki) = serving {
        command.arg("--client-cert-auth").arg(format!(
            "--trusted-ca-file={}",
            pki.path("ca.pem").display()
        ));
    }
    command
        .arg(format!("--name={name}"))
        .arg(format!("--data-dir={}", dir.join(name).display()))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster={cluster}"))
        .arg("--initial-cluster-state=new");
    (command, log)
}

/// The database quota of a cluster that serves TLS with users (etcd's default is 2 GiB).
pub const QUOTA: u64 = 64 << 20;

/// Waits until a put through `store` succeeds, while every member in `children` runs.
fn wait_ready(store: &bell_store::Etcd, children: &mut [Child]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if children
            .iter_mut()
            .any(|c| matches!(c.try_wait(), Ok(Some(_))))
        {
            return false;
        }
        if store.put("/bell-test/ready", b"1").is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// `etcdctl ARGS` against `endpoint` (`HOST:PORT`), as an attacker with the write access every
/// host has would run it; its stdout. Fails the test when etcdctl does.
pub fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    let out = Command::new("etcdctl")
        .arg(format!("--endpoints=http://{endpoint}"))
        .args(args)
        .env("ETCDCTL_API", "3")
        .output()
        .expect("etcdctl");
    assert!(out.status.success(), "etcdctl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `etcdctl put` of a key that is not UTF-8 (etcd's root can write one), as a test's attack.
pub fn etcdctl_put_bytes(endpoint: &str, key: &[u8], value: &str) {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new("etcdctl")
        .arg(format!("--endpoints=http://{endpoint}"))
        .arg("put")
        .arg(std::ffi::OsStr::from_bytes(key))
        .arg(value)
        .env("ETCDCTL_API", "3")
        .output()
        .expect("etcdctl");
    assert!(out.status.success(), "etcdctl put: {}", text(&out));
}

/// A real etcd on loopback, for one test.
pub struct Etcd {
    child: Child,
    pub url: String,
    pub endpoint: String,
    _data: tempfile::TempDir,
}

impl Etcd {
    /// `None` (a skip) only outside CI when etcd is not installed.
    pub fn start() -> Option<Etcd> {
        Etcd::start_with(Serving::Plain)
    }

    /// A member serving TLS with `pki`'s server certificate (`etcds://`), asking clients for
    /// none: with etcd's users on, its JSON gateway refuses a request that carries one.
    pub fn start_tls(pki: &Pki) -> Option<Etcd> {
        Etcd::start_with(Serving::Tls(pki))
    }

    fn start_with(serving: Serving) -> Option<Etcd> {
        if !require("etcd") {
            return None;
        }
        // Another process may take a port between probing and binding; try a few.
        for _ in 0..5 {
            let data = tempfile::tempdir().expect("tempdir");
            let (client, peer) = (free_port(), free_port());
            let cluster = format!("bell-test=http://127.0.0.1:{peer}");
            let (mut command, log) =
                member_command("bell-test", client, peer, &cluster, data.path(), serving);
            let mut child = [command
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start etcd")];
            let endpoint = format!("127.0.0.1:{client}");
            let (url, access) = match serving {
                Serving::Plain => (format!("etcd://{endpoint}"), bell_store::Access::default()),
                Serving::Tls(pki) => (format!("etcds://{endpoint}"), pki.server_access()),
                Serving::TlsWithClientCertificates(pki) => {
                    (format!("etcds://{endpoint}"), pki.access())
                }
            };
            let client = bell_store::Etcd::open(&url, &access).expect("a client");
            if wait_ready(&client, &mut child) {
                let [child] = child;
                return Some(Etcd {
                    child,
                    url,
                    endpoint,
                    _data: data,
                });
            }
            let [mut child] = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("etcd did not become ready on a free loopback port in five tries");
    }

    pub fn client(&self) -> bell_store::Etcd {
        bell_store::Etcd::new(vec![self.endpoint.clone()])
    }

    /// Every request the member has served, as etcd counts them itself (its gRPC server's
    /// `grpc_server_started_total`, which the JSON gateway's requests go through): what a
    /// client sent, measured from outside it. Plain members only.
    #[allow(dead_code)]
    pub fn requests_served(&self) -> u64 {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.endpoint).expect("connect to etcd");
        write!(
            stream,
            "GET /metrics HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.endpoint
        )
        .expect("ask for the metrics");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("read the metrics");
        text.lines()
            .filter(|l| l.starts_with("grpc_server_started_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real three-member etcd cluster on loopback (where failover matters); every member is
/// killed on drop, and `kill` takes one down midway.
pub struct EtcdCluster {
    members: Vec<Child>,
    /// How each member is started again after `kill` (its arguments; the data directory
    /// holds its state, so it rejoins as itself).
    argv: Vec<Vec<std::ffi::OsString>>,
    /// The member's log directory, for its log file.
    logs: PathBuf,
    /// `HOST:PORT` of each member, in order.
    pub endpoints: Vec<String>,
    /// `etcd://` with every member's endpoint.
    pub url: String,
    _data: tempfile::TempDir,
}

impl EtcdCluster {
    /// `None` (a skip) only outside CI when etcd is not installed.
    pub fn start() -> Option<EtcdCluster> {
        EtcdCluster::start_with(Serving::Plain)
    }

    /// A cluster whose clients speak TLS with certificates of `pki` (`etcds://`).
    pub fn start_tls(pki: &Pki) -> Option<EtcdCluster> {
        EtcdCluster::start_with(Serving::TlsWithClientCertificates(pki))
    }

    /// A cluster serving TLS with `pki`'s server certificate, asking clients for none (as
    /// etcd's users need), whose login tokens expire after two seconds unused.
    pub fn start_tls_for_users(pki: &Pki) -> Option<EtcdCluster> {
        EtcdCluster::start_with(Serving::Tls(pki))
    }

    fn start_with(serving: Serving) -> Option<EtcdCluster> {
        if !require("etcd") {
            return None;
        }
        for _ in 0..5 {
            let data = tempfile::tempdir().expect("tempdir");
            let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
            let cluster = ports
                .iter()
                .enumerate()
                .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
                .collect::<Vec<_>>()
                .join(",");
            let argv: Vec<Vec<std::ffi::OsString>> = ports
                .iter()
                .enumerate()
                .map(|(i, (client, peer))| {
                    let (command, _) = member_command(
                        &format!("m{i}"),
                        *client,
                        *peer,
                        &cluster,
                        data.path(),
                        serving,
                    );
                    command.get_args().map(|a| a.to_os_string()).collect()
                })
                .collect();
            let logs = data.path().to_path_buf();
            let mut members: Vec<Child> = (0..3).map(|i| respawn(&argv[i], &logs, i)).collect();
            let endpoints: Vec<String> = ports
                .iter()
                .map(|(client, _)| format!("127.0.0.1:{client}"))
                .collect();
            let (scheme, access) = match serving {
                Serving::Plain => ("etcd", bell_store::Access::default()),
                Serving::Tls(pki) => ("etcds", pki.server_access()),
                Serving::TlsWithClientCertificates(pki) => ("etcds", pki.access()),
            };
            let url = format!("{scheme}://{}", endpoints.join(","));
            let ready = (0..3).all(|i| {
                let member =
                    bell_store::Etcd::open(&format!("{scheme}://{}", endpoints[i]), &access)
                        .expect("a client");
                wait_ready(&member, &mut members)
            });
            let cluster = EtcdCluster {
                members,
                argv,
                logs,
                endpoints,
                url,
                _data: data,
            };
            if ready {
                return Some(cluster);
            }
        }
        panic!("a three-member etcd cluster did not become ready in five tries");
    }

    pub fn client(&self) -> bell_store::Etcd {
        bell_store::Etcd::new(self.endpoints.clone())
    }

    /// A client of a TLS cluster.
    pub fn client_tls(&self, pki: &Pki) -> bell_store::Etcd {
        bell_store::Etcd::open(&self.url, &pki.access()).expect("a TLS client")
    }

    /// Takes member `i` down, as a host that lost power.
    pub fn kill(&mut self, i: usize) {
        let _ = self.members[i].kill();
        let _ = self.members[i].wait();
    }

    /// Starts member `i` again after [`EtcdCluster::kill`], on its data: it rejoins as itself.
    #[allow(dead_code)]
    pub fn restart(&mut self, i: usize) {
        if let Ok(None) = self.members[i].try_wait() {
            return;
        }
        self.members[i] = respawn(&self.argv[i], &self.logs, i);
    }

    /// The process id of member `i` (to pause it with SIGSTOP, as a network partition or a
    /// stalled disk looks from outside).
    #[allow(dead_code)]
    pub fn pid(&self, i: usize) -> u32 {
        self.members[i].id()
    }
}

/// Starts member `i` with the arguments it was first started with, its log appended to.
fn respawn(argv: &[std::ffi::OsString], logs: &Path, i: usize) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("m{i}.log")))
        .expect("log");
    Command::new("etcd")
        .args(argv)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start etcd")
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            let _ = member.kill();
            let _ = member.wait();
        }
    }
}

/// A real nginx (Debian's `nginx-light`) serving `dir` on a free loopback port, with its own
/// temporary configuration, logs and pid file; stopped on drop. The access log is kept so that
/// a test can count what hosts fetched.
pub struct Nginx {
    child: Child,
    pub url: String,
    pub access_log: PathBuf,
    _state: tempfile::TempDir,
}

impl Nginx {
    /// `None` (a skip) only outside CI when nginx is not installed.
    pub fn serve(dir: &Path) -> Option<Nginx> {
        Nginx::serve_as(dir, None)
    }

    /// [`Nginx::serve`] with workers that run as `user` (`nobody`), as the README's recipe
    /// runs them: what they serve must be readable without privileges.
    pub fn serve_as(dir: &Path, user: Option<&str>) -> Option<Nginx> {
        Nginx::start(dir, user, None)
    }

    /// [`Nginx::serve`] over https with `pki`'s server certificate.
    pub fn serve_tls(dir: &Path, pki: &Pki) -> Option<Nginx> {
        Nginx::start(dir, None, Some((pki, "server")))
    }

    /// [`Nginx::serve_tls`] with `pki`'s certificate NAME (`expired`).
    pub fn serve_tls_as(dir: &Path, pki: &Pki, name: &str) -> Option<Nginx> {
        Nginx::start(dir, None, Some((pki, name)))
    }

    fn start(dir: &Path, user: Option<&str>, pki: Option<(&Pki, &str)>) -> Option<Nginx> {
        if !require("nginx") {
            return None;
        }
        let nginx = ["/usr/sbin/nginx", "/sbin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .unwrap_or("nginx");
        for _ in 0..5 {
            let state = tempfile::tempdir().expect("tempdir");
            let port = free_port();
            let s = state.path().display();
            // Workers run as the test's user (root in CI, where `user` is needed to read a
            // private temporary directory; ignored with a notice otherwise).
            let user = match user {
                Some(user) => format!("user {user};"),
                None if bell_testkit::euid() == Some(0) => "user root root;".to_string(),
                None => String::new(),
            };
            let listen = match pki {
                None => format!("listen 127.0.0.1:{port};"),
                Some((pki, name)) => format!(
                    "listen 127.0.0.1:{port} ssl;\n    ssl_certificate {};\n    \
                     ssl_certificate_key {};",
                    pki.path(&format!("{name}.pem")).display(),
                    pki.path(&format!("{name}.key")).display()
                ),
            };
            let conf = format!(
                "{user}\ndaemon off;\nworker_processes 1;\npid {s}/nginx.pid;\nerror_log {s}/error.log;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n  access_log {s}/access.log;\n  client_body_temp_path {s}/body;\n\
                 proxy_temp_path {s}/proxy;\n  fastcgi_temp_path {s}/fastcgi;\n\
                 uwsgi_temp_path {s}/uwsgi;\n  scgi_temp_path {s}/scgi;\n\
                 default_type application/octet-stream;\n\
                 server {{\n    {listen}\n    root {};\n  }}\n}}\n",
                dir.display()
            );
            std::fs::write(state.path().join("nginx.conf"), conf).expect("nginx.conf");
            let child = Command::new(nginx)
                .arg("-e")
                .arg(state.path().join("error.log"))
                .arg("-p")
                .arg(state.path())
                .arg("-c")
                .arg(state.path().join("nginx.conf"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start nginx");
            let mut server = Nginx {
                child,
                url: format!(
                    "{}://127.0.0.1:{port}/",
                    if pki.is_some() { "https" } else { "http" }
                ),
                access_log: state.path().join("access.log"),
                _state: state,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = server.child.try_wait() {
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(server);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("nginx did not start on a free loopback port in five tries");
    }

    /// The request lines of every request answered so far. nginx logs a request just after
    /// sending its last byte, so a client that has exited may not be in the log yet: a marker
    /// request, answered by the one worker after every earlier one, is waited for instead.
    pub fn requests(&self) -> Vec<String> {
        use std::io::{Read, Write};
        static MARKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MARKERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let marker = format!("/bell-test-marker-{n}");
        let address = self.url.trim_start_matches("http://").trim_end_matches('/');
        let mut stream = std::net::TcpStream::connect(address).expect("connect to nginx");
        write!(stream, "GET {marker} HTTP/1.0\r\n\r\n").expect("send the marker");
        stream
            .read_to_end(&mut Vec::new())
            .expect("read the marker's answer");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let lines: Vec<String> = std::fs::read_to_string(&self.access_log)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split('"').nth(1).map(str::to_string))
                .collect();
            if lines.iter().any(|l| l.contains(&marker)) {
                return lines
                    .into_iter()
                    .filter(|l| !l.contains("/bell-test-marker-"))
                    .collect();
            }
            assert!(Instant::now() < deadline, "nginx never logged {marker}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM, not SIGKILL: the master then stops its workers (a killed master leaves
        // them serving).
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
