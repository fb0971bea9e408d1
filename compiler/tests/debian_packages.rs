//! packaging/build-deb: the bell-run and bellc Debian packages, as `dpkg-deb` shows them and
//! lintian judges them, and the packaged units as systemd reads them under the unpacked root
//! (one test: one build of both packages).
//! (Installing, enabling, `man`, remove and purge on a booted Debian 12: compiler/tests/vm/
//! 50-debian-package.sh.)

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A binary of the workspace's `package`, built when it is not up to date.
fn workspace_bin(package: &str, bin: &str) -> PathBuf {
    let workspace = common::repo_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .current_dir(&workspace)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build -p {package}");
    let exe = std::env::current_exe().expect("the test binary");
    let dir = exe.parent().and_then(Path::parent).expect("target/debug");
    dir.join(bin)
}

/// The static bell-run the package ships: CI's (`BELL_RUN_BIN`), else runner/build-static's.
fn static_bell_run() -> PathBuf {
    if let Some(bin) = std::env::var_os("BELL_RUN_BIN") {
        return PathBuf::from(bin);
    }
    let out = Command::new(common::repo_root().join("runner/build-static"))
        .output()
        .expect("runner/build-static runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

struct Packages {
    _dir: tempfile::TempDir,
    bell_run: PathBuf,
    bellc: PathBuf,
}

fn build() -> Packages {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new(common::repo_root().join("packaging/build-deb"))
        .arg(dir.path())
        .env("BELLC_BIN", env!("CARGO_BIN_EXE_bellc"))
        .env("BELL_RUN_BIN", static_bell_run())
        .env(
            "BELL_RUN_MANUAL_BIN",
            workspace_bin("bell-run-manual", "bell-run-manual"),
        )
        .output()
        .expect("packaging/build-deb runs");
    assert!(
        out.status.success(),
        "build-deb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect();
    let named = |package: &str| {
        printed
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{package}_")))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no {package} package among {printed:?}"))
    };
    Packages {
        bell_run: named("bell-run"),
        bellc: named("bellc"),
        _dir: dir,
    }
}

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let out = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .expect("dpkg-deb runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dpkg-deb --contents`' lines as `MODE OWNER PATH`.
fn contents(deb: &Path) -> Vec<String> {
    dpkg_deb(&["--contents"], deb)
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let path = fields.get(5).copied().unwrap_or("").trim_start_matches('.');
            format!("{} {} {path}", fields[0], fields[1])
        })
        .collect()
}

fn has(contents: &[String], line: &str) {
    assert!(
        contents.iter().any(|c| c == line),
        "`{line}` is not in the package:\n{}",
        contents.join("\n")
    );
}

#[test]
fn the_packages_hold_what_hosts_and_workstations_need_lintian_and_systemd_accept_them() {
    let tools = ["dpkg-deb", "dpkg-shlibdeps", "lintian", "systemd-analyze"];
    if !tools.iter().all(|t| common::have(t)) {
        return;
    }
    let packages = build();

    // bell-run: the static binary, the units (installed, not enabled), /etc/bell, the
    // options' conffile, a man page per command and the completions.
    let info = dpkg_deb(&["--info"], &packages.bell_run);
    for field in ["Package: bell-run", "Section: admin", "Recommends: systemd"] {
        assert!(info.contains(field), "{field}:\n{info}");
    }
    assert!(
        !info.contains("Depends:"),
        "a static binary depends on nothing:\n{info}"
    );
    for script in ["postinst", "prerm", "postrm", "conffiles", "md5sums"] {
        assert!(info.contains(&format!(" {script} ")), "{script}:\n{info}");
    }
    let files = contents(&packages.bell_run);
    for line in [
        "-rwxr-xr-x root/root /usr/sbin/bell-run",
        "-rw-r--r-- root/root /usr/lib/systemd/system/bell-run.service",
        "-rw-r--r-- root/root /usr/lib/systemd/system/bell-run.timer",
        "-rw-r--r-- root/root /usr/lib/systemd/system/bell-run-register.service",
        "-rw-r--r-- root/root /usr/lib/systemd/system/bell-run-live.service",
        "drwxr-xr-x root/root /etc/bell/",
        "-rw-r--r-- root/root /etc/default/bell-run",
        "-rw-r--r-- root/root /usr/share/man/man8/bell-run.8.gz",
        "-rw-r--r-- root/root /usr/share/man/man8/bell-run-pull.8.gz",
        "-rw-r--r-- root/root /usr/share/man/man8/bell-run-install-timer.8.gz",
        "-rw-r--r-- root/root /usr/share/bash-completion/completions/bell-run",
        "-rw-r--r-- root/root /usr/share/zsh/vendor-completions/_bell-run",
        "-rw-r--r-- root/root /usr/share/fish/vendor_completions.d/bell-run.fish",
        "-rw-r--r-- root/root /usr/share/doc/bell-run/copyright",
        "-rw-r--r-- root/root /usr/share/doc/bell-run/changelog.gz",
    ] {
        has(&files, line);
    }
    // Enabling is the admin's or the image's: no link under /etc/systemd ships.
    assert!(
        !files.iter().any(|f| f.contains("/etc/systemd/")),
        "{files:?}"
    );
    for command in bell_run::spec::COMMANDS {
        has(
            &files,
            &format!(
                "-rw-r--r-- root/root /usr/share/man/man8/bell-run-{}.8.gz",
                command.name
            ),
        );
    }

    // bellc: the binary with what it links, a page per command and the completions.
    let info = dpkg_deb(&["--info"], &packages.bellc);
    assert!(info.contains("Package: bellc"), "{info}");
    assert!(info.contains("Depends: libc6 (>= "), "{info}");
    let files = contents(&packages.bellc);
    for line in [
        "-rwxr-xr-x root/root /usr/bin/bellc",
        "-rw-r--r-- root/root /usr/share/man/man1/bellc.1.gz",
        "-rw-r--r-- root/root /usr/share/man/man1/bellc-rollout.1.gz",
        "-rw-r--r-- root/root /usr/share/man/man1/bellc-store-roles.1.gz",
        "-rw-r--r-- root/root /usr/share/bash-completion/completions/bellc",
        "-rw-r--r-- root/root /usr/share/zsh/vendor-completions/_bellc",
        "-rw-r--r-- root/root /usr/share/fish/vendor_completions.d/bellc.fish",
    ] {
        has(&files, line);
    }

    // lintian: no error in either (its warnings are printed, for whoever reads the log).
    let out = Command::new("lintian")
        .args(["--fail-on", "error", "--no-tag-display-limit"])
        .arg(&packages.bell_run)
        .arg(&packages.bellc)
        .output()
        .expect("lintian runs");
    let said = String::from_utf8_lossy(&out.stdout);
    println!("lintian:\n{said}");
    assert!(
        out.status.success(),
        "lintian: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!said.lines().any(|l| l.starts_with("E: ")), "{said}");

    systemd_accepts_the_units(&packages);
}

/// The packaged units as systemd reads them: unpacked under a root that has the system's own
/// units beside them, `systemd-analyze verify --root` finds the binary they run there and
/// nothing it ignores.
fn systemd_accepts_the_units(packages: &Packages) {
    let root = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&packages.bell_run)
        .arg(root.path())
        .output()
        .expect("dpkg-deb -x runs");
    assert!(out.status.success());
    let units = root.path().join("usr/lib/systemd/system");
    // Copies: systemd takes no link for some kinds of unit.
    let copied = Command::new("cp")
        .args(["-rn", "/usr/lib/systemd/system/."])
        .arg(&units)
        .status()
        .expect("cp runs");
    assert!(copied.success());
    let names = [
        "bell-run.service",
        "bell-run.timer",
        "bell-run-register.service",
        "bell-run-live.service",
    ];
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.path().display()))
        .args(names.map(|n| format!("/usr/lib/systemd/system/{n}")))
        .output()
        .expect("systemd-analyze runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    let service = std::fs::read_to_string(units.join("bell-run.service")).expect("the service");
    assert!(
        service.contains("EnvironmentFile=-/etc/default/bell-run")
            && service.contains("ExecStart=/usr/sbin/bell-run pull $BELL_RUN_PULL"),
        "{service}"
    );
}
