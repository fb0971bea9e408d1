//! A host's own network namespace: one `unshare --net` process holds it, a veth pair links it
//! to the machine's namespace (the machine's end `OUTSIDE`, the host's `INSIDE`, a /30 of
//! their own), and programs enter it with `nsenter`. The namespace and its link go when the
//! holder does, however the test ends (it waits on its stdin, which closes with the test).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Netns {
    holder: Child,
    /// The host's end of the link, inside the namespace.
    pub inside: String,
    /// The machine's address on the link: what the host reaches its fleet at.
    pub outside_addr: String,
}

impl Netns {
    /// A namespace linked to this one; `None` where the machine cannot make one (not root, no
    /// `ip`).
    pub fn make() -> Option<Netns> {
        if !bell_testkit::tool("ip") || !bell_testkit::namespaces(&["--net"]) {
            return None;
        }
        let mut holder = Command::new("unshare")
            .args([
                "--net",
                "sh",
                "-c",
                "ip link set lo up; echo ready; read -r _",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut said = String::new();
        let _ = BufReader::new(holder.stdout.take()?).read_line(&mut said);
        if said.trim() != "ready" {
            let _ = holder.kill();
            let _ = holder.wait();
            return None;
        }
        // Names and a /30 of this test process's own, so that tests running at once differ.
        let id = std::process::id();
        let net = format!(
            "100.{}.{}.{}",
            64 + ((id >> 16) & 63),
            (id >> 8) & 255,
            (id & 63) * 4
        );
        let base = net
            .rsplit_once('.')
            .map(|(a, _)| a.to_string())
            .unwrap_or_default();
        let last: u32 = net
            .rsplit('.')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let (outside_addr, inside_addr) = (
            format!("{base}.{}", last + 1),
            format!("{base}.{}", last + 2),
        );
        let netns = Netns {
            inside: format!("bi{id}"),
            outside_addr,
            holder,
        };
        let outside = format!("bo{id}");
        let pid = netns.holder.id().to_string();
        let here = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let made = here(&[
            "link",
            "add",
            &outside,
            "type",
            "veth",
            "peer",
            "name",
            &netns.inside,
            "netns",
            &pid,
        ]) && here(&[
            "addr",
            "add",
            &format!("{}/30", netns.outside_addr),
            "dev",
            &outside,
        ]) && here(&["link", "set", &outside, "up"])
            && netns.ip(&[
                "addr",
                "add",
                &format!("{inside_addr}/30"),
                "dev",
                &netns.inside,
            ])
            && netns.ip(&["link", "set", &netns.inside, "up"]);
        assert!(made, "the host's network namespace could not be linked");
        Some(netns)
    }

    /// `ip ARGS` in the namespace; whether it succeeded.
    pub fn ip(&self, args: &[&str]) -> bool {
        self.enter(Path::new("ip"))
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `program` run in the namespace (`nsenter` execs it: its pid is the program's).
    pub fn enter(&self, program: &Path) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net=/proc/{}/ns/net", self.holder.id()))
            .arg("--")
            .arg(program);
        command
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Closing its stdin ends the holder; the veth pair goes with the namespace.
        drop(self.holder.stdin.take());
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
