//! The commands that meet the fleet: `pull` from a source and a store, the timer that runs it,
//! `register` with the store, and `pending`.

use super::*;

/// `pull`, and with `--wait SECS` (at a gateway), pulls again each time the store changes
/// what the host decided on, until SECS have passed without a change.
pub(super) fn cmd_pull(args: &Args) -> i32 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(args.wait.unwrap_or(0));
    loop {
        let (code, decided_on) = pull_once(args);
        // Only a pull that left the host where it should be waits: a failure, an unhealthy
        // host or a reboot is the timer's to try again.
        let (true, Some((revision, keys))) = (code == 0 || code == PENDING, decided_on) else {
            return code;
        };
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.as_secs() == 0 {
            return code;
        }
        match wait_for_change(args, revision, &keys, left.as_secs()) {
            Ok(true) => {}
            Ok(false) => return code,
            Err(e) => {
                errln!("warning: cannot wait at the gateway ({e}); the timer pulls next");
                return code;
            }
        }
    }
}

/// One long-poll at the gateway, each at most [`bell_store::gateway::MAX_WAIT`]; whether a
/// key changed within `seconds`.
fn wait_for_change(
    args: &Args,
    revision: i64,
    keys: &[String],
    seconds: u64,
) -> Result<bool, String> {
    let (Some(store), true) = (&args.store, args.gateway.is_some()) else {
        return Ok(false);
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    loop {
        let left = until
            .saturating_duration_since(std::time::Instant::now())
            .as_secs();
        if left == 0 {
            return Ok(false);
        }
        let poll = left.min(bell_store::gateway::MAX_WAIT);
        let limits = bell_wire::etcd::Limits {
            request: std::time::Duration::from_secs(poll + 15),
            ..bell_wire::etcd::Limits::HOST
        };
        let bell_store::Store::Etcd(etcd) =
            bell_store::Store::open(store, &args.access())?.with_limits(limits)
        else {
            return Ok(false);
        };
        if etcd.wait_for_change(&keys, revision, poll)? {
            return Ok(true);
        }
    }
}

fn pull_once(args: &Args) -> (i32, Option<(i64, Vec<String>)>) {
    let mut found = crate::pull::Established::default();
    let code = pull_reporting(args, &mut found);
    (code, found.decided_on.take())
}

fn pull_reporting(args: &Args, found: &mut crate::pull::Established) -> i32 {
    let Some(source) = &args.source else {
        return usage("`pull` needs `--source http://HOST[:PORT]/PATH/` or `--source DIR`");
    };
    let fetch_timeout = args.fetch_timeout.map_or(
        crate::fetch::DEFAULT_FETCH_TIMEOUT,
        std::time::Duration::from_secs,
    );
    // One deadline for the pull's every request, to its source and to its store.
    let deadline = bell_wire::Deadline::after(fetch_timeout, crate::fetch::FETCH_TIMED_OUT);
    let source = match crate::fetch::Source::open(source, args.source_ca.as_deref(), deadline) {
        Ok(source) => source,
        Err(e) => return usage(&e),
    };
    let opts = crate::pull::PullOptions {
        source,
        host: args.host.clone(),
        trust: args.trust.clone(),
        store: args.store.clone(),
        access: args.access(),
        fleet: args.fleet.clone(),
        lock_prefix: args.lock_prefix.clone(),
        apply: options(args),
        deadline,
    };
    let started = state::now();
    let result = crate::pull::pull(&opts, found);
    let mut run = match &result {
        Ok(pulled) => report::from_apply(&opts.apply.root, started, &pulled.report),
        Err(refusal) => report::from_refusal("apply", &opts.apply.root, started, None, refusal),
    };
    run.signature = found.signature.clone();
    if let Ok(pulled) = &result {
        run.rebooting = pulled.reboot.plan.as_ref().map(|p| p.describe());
    }
    // Gone back, or refusing a release it went back from: a state of its own, with why.
    let reverted = match &result {
        Ok(pulled) => pulled.reverted.clone(),
        Err(refusal) => refusal.reverted.then(|| refusal.message.clone()),
    };
    if let Some(why) = reverted {
        // The report names what the host runs again, and the release it took back.
        if let Ok(pulled) = &result {
            run.refused = true;
            run.refused_release = pulled.taken_back.clone();
        }
        run.result = bell_store::State::Reverted;
        run.status
            .insert("apply".to_string(), bell_store::State::Reverted);
        run.error = Some(why);
    }
    if run.fleet.is_none() {
        run.fleet = found.fleet.clone();
    }
    if let Err(refusal) = &result {
        if refusal.waiting {
            // Not a failure: the host stays on what it runs until a slot is free.
            run.result = bell_store::State::Waiting;
            run.status = [("apply".to_string(), bell_store::State::Waiting)].into();
        }
    }
    let mut sinks = args.sinks();
    if sinks.release.is_none() {
        sinks.release = found.release.clone();
    }
    sinks.read = found.read.take();
    sinks.until = Some(deadline);
    report::emit(&sinks, run);
    let pulled = match result {
        Ok(pulled) => pulled,
        Err(refusal) => {
            if let Some(signature) = &found.signature {
                if !args.json {
                    errln!("release: {signature}");
                }
            }
            let code = refused(&refusal, args.json);
            return if refusal.waiting { PENDING } else { code };
        }
    };
    let release = found.release.as_deref().unwrap_or("?");
    let signature = found.signature.as_deref().unwrap_or("?");
    if args.json {
        let mut value = serde_json::to_value(&pulled.report).unwrap_or_default();
        value["result"] = applied_result(&pulled.report).into();
        value["release"] = release.into();
        value["signature"] = signature.into();
        value["fetched"] = pulled.fetched.into();
        value["reused"] = pulled.reused.into();
        value["already_applied"] = pulled.already_applied.into();
        value["slot"] = pulled.slot.clone().into();
        value["reboot"] = pulled.reboot.note.clone().into();
        outjson!(value);
    } else {
        outln!("release {release} ({signature})");
        if pulled.already_applied {
            outln!(
                "bundle {} is applied already: applying it again",
                pulled.report.generation
            );
        } else {
            outln!(
                "bundle {}: {} files fetched, {} taken from the applied generation",
                pulled.report.generation,
                pulled.fetched,
                pulled.reused
            );
        }
        print_report(&pulled.report);
        if let Some(why) = &pulled.reverted {
            outln!("reverted: {why}");
        }
        if let Some(slot) = &pulled.slot {
            outln!("slot: {slot}");
        }
        if let Some(note) = &pulled.reboot.note {
            outln!("reboot: {note}");
        }
    }
    // Last, with the report filed: the host goes down.
    if let Some(plan) = &pulled.reboot.plan {
        if let Err(e) = crate::rebooting::execute(plan) {
            return refused(
                &Refusal::new(format!("cannot reboot: {e}"))
                    .help("the slot stays held; the next pull in the window tries again"),
                args.json,
            );
        }
    }
    match pulled.reverted {
        Some(_) => FAILURES,
        None => applied_code(&pulled.report),
    }
}

pub(super) fn cmd_install_timer(args: &Args) -> i32 {
    let job = match timer_job(args) {
        Ok(job) => job,
        Err(e) => return usage(&e),
    };
    let root = match statedir::open_root(&root_of(args)) {
        Ok(root) => root,
        Err(r) => return refused(&r, false),
    };
    if let crate::timer::Job::Pull(_) = &job {
        let trust = args
            .trust
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::trust::DEFAULT_TRUST_FILE));
        let trust = trust.to_string_lossy();
        if root.check_contained(&trust).is_err() || !root.host(&trust).is_file() {
            if args.trust.is_some() {
                errln!(
                    "warning: `{trust}` does not exist under the root yet: every pull is refused \
                     until it does"
                );
            } else {
                errln!(
                    "warning: no `--trust FILE` and no `{trust}`: the timer applies whatever the \
                     source serves, unverified (its reports say so)"
                );
            }
        }
    }
    for (flag, file) in [
        ("--source-ca", &args.source_ca),
        ("--store-ca", &args.store_ca),
        ("--store-cert", &args.store_cert),
        ("--store-key", &args.store_key),
        ("--store-password-file", &args.store_password_file),
    ] {
        let Some(file) = file else { continue };
        let file = file.to_string_lossy();
        if root.check_contained(&file).is_err() || !root.host(&file).is_file() {
            errln!(
                "warning: `{flag} {file}` does not exist under the root yet: every pull fails \
                 until it does"
            );
        }
    }
    let exe = args.exec.as_deref().unwrap_or("/usr/local/sbin/bell-run");
    if root.check_contained(exe).is_err() || !root.host(exe).is_file() {
        errln!(
            "warning: `{exe}` does not exist under the root yet: the timer's service fails until \
             it does (`install -D -m 0755 bell-run {}`, or `--exec PATH`)",
            root.host(exe).display()
        );
    }
    // An image is enabled offline, in its own tree; nothing starts until it boots.
    let image = root.dir.canonicalize().ok().as_deref() != Some(Path::new("/"));
    // `systemctl enable UNIT`, as run where the units are: in the image's tree, or here.
    let systemctl = match image {
        true => format!("systemctl --root {}", root.dir.display()),
        false => "systemctl".to_string(),
    };
    let interval = args.interval.as_deref().unwrap_or("15min");
    match crate::timer::install(&root, exe, interval, &job) {
        Ok(paths) => {
            for path in &paths {
                outln!("wrote {path}");
            }
            match image {
                true => outln!("enable with: {systemctl} enable bell-run.timer"),
                false => outln!(
                    "enable with: systemctl daemon-reload && systemctl enable --now bell-run.timer"
                ),
            }
            let also = |why: &str, unit: &str| outln!("and, {why}: {systemctl} enable {unit}");
            if let crate::timer::Job::Pull(_) = job {
                also(
                    "for the pull at boot that sees a reboot through",
                    "bell-run.service",
                );
            }
            if paths
                .iter()
                .any(|p| p.ends_with("/bell-run-register.service"))
            {
                also(
                    "to register this machine at boot for an operator to accept",
                    "bell-run-register.service",
                );
            }
            if paths.iter().any(|p| p.ends_with("/bell-run-live.service")) {
                also(
                    "for live files and a provider's health between pulls (`bell-run live`)",
                    "bell-run-live.service",
                );
            }
            OK
        }
        Err(e) => refused(&Refusal::new(e), false),
    }
}

/// What the timer's service runs: with `--source`, `pull` with the options given here, each
/// checked now rather than failing on every tick; without, a re-apply of the current generation.
pub(super) fn timer_job(args: &Args) -> Result<crate::timer::Job, String> {
    let Some(source) = &args.source else {
        let pull_only = [
            ("--store", args.store.is_some()),
            ("--trust", args.trust.is_some()),
            ("--fleet", args.fleet.is_some()),
            ("--host", args.host.is_some()),
            ("--report", args.report.is_some()),
            ("--metrics", args.metrics.is_some()),
            ("--timeout", args.timeout.is_some()),
            ("--fetch-timeout", args.fetch_timeout.is_some()),
            ("--wait", args.wait.is_some()),
            ("--lock-prefix", args.lock_prefix.is_some()),
            ("--alive-ttl", args.alive_ttl.is_some()),
            ("--source-ca", args.source_ca.is_some()),
            ("--store-ca", args.store_ca.is_some()),
            ("--store-cert", args.store_cert.is_some()),
            ("--store-key", args.store_key.is_some()),
            ("--store-user", args.store_user.is_some()),
            ("--store-password-file", args.store_password_file.is_some()),
        ];
        if let Some((flag, _)) = pull_only.iter().find(|(_, given)| *given) {
            return Err(format!(
                "`{flag}` is an option of the pulling timer: give `--source` as well"
            ));
        }
        return Ok(crate::timer::Job::ApplyCurrent);
    };
    if let crate::fetch::Source::Dir(dir) =
        crate::fetch::Source::check(source, args.source_ca.as_deref())?
    {
        if !dir.is_absolute() {
            return Err(format!("`--source {source}` must be an absolute directory"));
        }
    }
    let mut options = vec![("--source", source.clone())];
    // Checked, not opened: the TLS files are the image's, and may not be there yet.
    for dest in [args.store.clone(), args.report_destination()]
        .into_iter()
        .flatten()
    {
        bell_store::Store::check(&dest, &args.access())?;
    }
    // The host's timer speaks to the gateway with the host's identity, holding no password.
    match (&args.gateway, &args.store) {
        (Some(gateway), _) => options.push(("--gateway", gateway.clone())),
        (None, Some(store)) => options.push(("--store", store.clone())),
        (None, None) => {}
    }
    let paths = [
        ("--trust", &args.trust),
        ("--metrics", &args.metrics),
        ("--source-ca", &args.source_ca),
        ("--store-ca", &args.store_ca),
        ("--store-cert", &args.store_cert),
        ("--store-key", &args.store_key),
        ("--store-password-file", &args.store_password_file),
    ];
    for (flag, path) in paths {
        if let Some(path) = path {
            let text = path
                .to_str()
                .filter(|_| path.is_absolute())
                .ok_or_else(|| {
                    format!("`{flag} {}` must be an absolute UTF-8 path", path.display())
                })?;
            options.push((flag, text.to_string()));
        }
    }
    for (flag, value) in [
        ("--fleet", &args.fleet),
        ("--host", &args.host),
        ("--report", &args.report),
        ("--lock-prefix", &args.lock_prefix),
        ("--store-user", &args.store_user),
    ] {
        if let Some(value) = value {
            options.push((flag, value.clone()));
        }
    }
    if let Some(timeout) = args.timeout {
        options.push(("--timeout", timeout.to_string()));
    }
    if let Some(secs) = args.fetch_timeout {
        options.push(("--fetch-timeout", secs.to_string()));
    }
    if let Some(ttl) = args.alive_ttl {
        options.push(("--alive-ttl", ttl.to_string()));
    }
    // At a gateway, each run waits for a change until shortly before the next tick: a new
    // release reaches the host in a second or two, and the timer is there for everything else.
    let interval = args.interval.as_deref().unwrap_or("15min");
    let wait = args.wait.or_else(|| {
        args.gateway.as_ref()?;
        crate::timer::seconds(interval).map(|secs| secs.saturating_sub(60))
    });
    if let Some(wait) = wait.filter(|w| *w > 0) {
        options.push(("--wait", wait.to_string()));
    }
    Ok(crate::timer::Job::Pull(options))
}

pub(super) fn cmd_register(args: &Args) -> i32 {
    let (Some(store), Some(fleet)) = (&args.store, &args.fleet) else {
        return usage("`register` needs `--store etcd://HOST:PORT` and `--fleet NAME`");
    };
    let root = root_of(args);
    match crate::register::register(&root, args.host.as_deref(), store, &args.access(), fleet) {
        Ok(done) => {
            if args.json {
                let value = serde_json::json!({
                    "host": done.host,
                    "fleet": done.fleet,
                    "key": done.key,
                    "fingerprint": done.fingerprint,
                    "filed": done.filed,
                    "facts": done.facts,
                });
                outjson!(value);
            } else if done.filed {
                // The whole command, with the fingerprint to compare before running it.
                outln!(
                    "registered `{}` in fleet `{}` ({}) at {}: compare the fingerprint, then \
                     accept it with `bellc hosts accept {0}={2} --inventory INVENTORY.json \
                     --store {} --fleet {1}`",
                    done.host,
                    done.fleet,
                    done.fingerprint,
                    done.key,
                    store
                );
            } else {
                outln!(
                    "`{}` is registered in fleet `{}` already, with the same facts and identity",
                    done.host,
                    done.fleet
                );
            }
            OK
        }
        Err(refusal) => refused(&refusal, args.json),
    }
}

pub(super) fn cmd_pending(args: &Args) -> i32 {
    let root = match statedir::open_root(&root_of(args)) {
        Ok(root) => root,
        Err(refusal) => return refused(&refusal, args.json),
    };
    // What is not given comes from the pulling timer's configuration, if it is installed.
    let timer = |flag: &str| crate::timer::configured(&root, flag);
    // A timer that pulls through the fleet's gateway: asked the same way, each request signed
    // with the host's identity (the one the timer names, or the host's own).
    let through_gateway;
    let args = match timer("--gateway").filter(|_| args.store.is_none()) {
        Some(gateway) => {
            let mut from_timer = args.clone();
            from_timer.store_ca = args
                .store_ca
                .clone()
                .or_else(|| timer("--store-ca").map(PathBuf::from));
            from_timer.identity = args
                .identity
                .clone()
                .or_else(|| timer("--identity").map(PathBuf::from));
            from_timer.host = args.host.clone().or_else(|| timer("--host"));
            from_timer.gateway = Some(gateway.clone());
            if let Err(e) = super::gateway_store(&mut from_timer, &gateway)
                .and_then(|()| super::sign_for_gateway(&mut from_timer, false))
            {
                return refused(
                    &Refusal::new(format!("the pulling timer's gateway: {e}")),
                    args.json,
                );
            }
            through_gateway = from_timer;
            &through_gateway
        }
        None => args,
    };
    let Some(dest) = args.store.clone().or_else(|| timer("--store")) else {
        return usage(
            "`pending` needs `--store etcd://HOST:PORT` or `--gateway https://HOST:PORT` (no \
             pulling timer names one: neither install-timer's record nor BELL_RUN_PULL in \
             /etc/default/bell-run)",
        );
    };
    let fleet_given = args.fleet.clone().or_else(|| timer("--fleet"));
    let host_given = args.host.clone().or_else(|| timer("--host"));
    // The timer's TLS files go with the timer's store; given ones with a given store.
    let access = match &args.store {
        Some(_) => args.access(),
        None => {
            let file = |flag: &str| timer(flag).map(PathBuf::from);
            bell_store::Access {
                tls: bell_wire::tls::TlsFiles {
                    ca: file("--store-ca"),
                    cert: file("--store-cert"),
                    key: file("--store-key"),
                },
                user: timer("--store-user"),
                password_file: file("--store-password-file"),
                signer: None,
            }
        }
    };
    let result = (|| {
        let store = bell_store::Store::open(&dest, &access)
            .map_err(Refusal::new)?
            .with_limits(bell_wire::etcd::Limits::HOST);
        let state = state::load(&root).map_err(Refusal::new)?;
        let applied = state.generation.clone();
        let fleet = match (&fleet_given, &applied) {
            (Some(fleet), _) => fleet.clone(),
            (None, Some(id)) => {
                let path = state::generation_dir(&root, id).join(bell_bundle::MANIFEST_FILE);
                crate::rootfs::read_record(&path)
                    .ok()
                    .flatten()
                    .and_then(|t| bell_bundle::Manifest::from_json(&t).ok())
                    .map(|m| m.fleet)
                    .ok_or_else(|| {
                        Refusal::new(format!("cannot read the fleet from {}", path.display()))
                            .help("pass `--fleet NAME`")
                    })?
            }
            (None, None) => {
                return Err(
                    Refusal::new("nothing is applied yet, so the fleet is unknown")
                        .help("pass `--fleet NAME`"),
                )
            }
        };
        let host = report::host_name(host_given.as_deref(), &root.dir).map_err(Refusal::new)?;
        let desired = store.desired(&fleet, &host).map_err(Refusal::new)?;
        Ok((fleet, host, applied, desired))
    })();
    let (fleet, host, applied, desired) = match result {
        Ok(found) => found,
        Err(refusal) => return refused(&refusal, args.json),
    };
    let Some(want) = desired.bundle else {
        return refused(
            &Refusal::new(format!(
                "the store has no desired bundle for host `{host}` of fleet `{fleet}`"
            ))
            .help("check `--fleet` and `--host`, or publish a release that has this host with `bellc publish`"),
            args.json,
        );
    };
    let pending = applied.as_deref() != Some(want.as_str());
    if args.json {
        let value = serde_json::json!({
            "host": host,
            "applied": applied,
            "desired": want,
            "version": desired.version,
            "pending": pending,
        });
        outjson!(value);
    } else if pending {
        outln!(
            "update pending for {host}: applied {}, desired {} (release {})",
            applied.as_deref().map_or("nothing", bell_bundle::short_id),
            bell_bundle::short_id(&want),
            desired
                .version
                .as_deref()
                .map_or("unknown", bell_bundle::short_id)
        );
    } else {
        outln!(
            "{host} is up to date with release {}",
            desired
                .version
                .as_deref()
                .map_or("unknown", bell_bundle::short_id)
        );
    }
    if pending {
        PENDING
    } else {
        OK
    }
}
