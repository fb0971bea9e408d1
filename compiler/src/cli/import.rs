//! `bellc import divingbell`: reads the values (and an inventory), writes the spec.
//! `bellc import known-hosts`: host identities from ssh-keyscan or known_hosts, as inventory.

use crate::args::ImportFrom;
use crate::Failure;
use bell_import::{divingbell, known_hosts};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::front::inventory;
use bellc_core::front::read::{read_bounded, utf8, MAX_INVENTORY, MAX_SPEC_FILE};
use bellc_core::source::Sources;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub struct Request<'a> {
    pub values: &'a [std::path::PathBuf],
    pub inventory: Option<&'a Path>,
    pub output: &'a Path,
    pub name: Option<&'a str>,
    pub target: &'a str,
    pub force: bool,
    pub verify: bool,
    pub retire: bool,
    pub rules: divingbell::Rules,
    /// `--deny-warnings`: a warning stops the import as an error does.
    pub deny_warnings: bool,
    /// `--labels inventory`: every label of every host goes to `nodes_path(output)`.
    pub keep_labels: bool,
    /// `--secrets-recipient`: who the secrets moved out of the spec are encrypted to.
    pub recipients: Vec<bell_seal::at_rest::Recipient>,
}

/// Beside the spec: `bell.kdl` → `bell.nodes.json`.
fn nodes_path(output: &Path) -> std::path::PathBuf {
    let stem = output
        .file_stem()
        .map_or_else(|| "bell".into(), |s| s.to_string_lossy().into_owned());
    output.with_file_name(format!("{stem}.nodes.json"))
}

/// The hosts with every label, in the inventory form bellc reads (`inventory PATH`).
fn nodes_json(hosts: &[inventory::Entry]) -> String {
    let list: Vec<serde_json::Value> = hosts
        .iter()
        .map(|h| {
            let mut entry = serde_json::json!({ "name": h.name, "labels": h.labels.iter().collect::<std::collections::BTreeMap<_, _>>() });
            if let Some(address) = &h.address {
                entry["address"] = address.clone().into();
            }
            if let Some(identity) = &h.identity {
                entry["identity"] = identity.clone().into();
            }
            entry
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
    text.push('\n');
    text
}

fn read_text(path: &Path, max: u64) -> Result<String, String> {
    let bytes =
        read_bounded(path, max).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    utf8(bytes).map_err(|e| {
        format!(
            "{} is not UTF-8 text (at byte {})",
            path.display(),
            e.offset
        )
    })
}

pub fn divingbell(
    request: &Request,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, String> {
    let nodes = nodes_path(request.output);
    let beside = request.output.parent().unwrap_or(Path::new(""));
    let secrets_kdl = beside.join("secrets.kdl");
    let mut refused = vec![request.output, nodes.as_path()];
    if !request.recipients.is_empty() {
        refused.push(&secrets_kdl);
    }
    for path in refused {
        if path.exists() && !request.force {
            return Err(format!(
                "{} exists; name another with -o, or replace it with --force",
                path.display()
            ));
        }
    }
    let mut values = Vec::new();
    for path in request.values {
        let text = read_text(path, MAX_SPEC_FILE)?;
        values.push(sources.add(path, text));
    }
    let hosts = match request.inventory {
        None => Vec::new(),
        Some(path) => {
            let text = read_text(path, MAX_INVENTORY)?;
            inventory::parse(&text)
                .map_err(|e| format!("{} is not an inventory: {}", path.display(), e.message))?
        }
    };
    let stem = request
        .values
        .last()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "divingbell".into());
    let input = divingbell::Input {
        values: &values,
        fleet: request.name.unwrap_or(&stem),
        target: request.target,
        hosts: &hosts,
        verify: request.verify,
        retire: request.retire,
        rules: request.rules,
        all_labels: nodes
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|_| request.keep_labels),
        secrets_moved: !request.recipients.is_empty(),
    };
    let Some(written) = divingbell::import(sources, &input, diags) else {
        return Ok(1);
    };
    // A spec with an error in it is no spec: nothing is written that `bellc check` might
    // accept while it says less than the values do.
    let fails = diags.has_errors() || (request.deny_warnings && diags.warning_count() > 0);
    if fails {
        eprintln!(
            "{} not written: the import stopped at what is said below",
            request.output.display()
        );
        return Ok(1);
    }
    let (text, moved) = match request.recipients.is_empty() {
        true => (written.text, Vec::new()),
        false => bellc_core::front::lower::move_out(&written.text)
            .ok_or("the written spec does not parse: a bug in the import")?,
    };
    let encrypted = encrypt_moved(beside, &moved, &request.recipients, request.force)?;
    // A spec that holds password hashes is as secret as the values it came from.
    let secret = written.secret && !bellc_core::front::lower::holds_no_secret(&text);
    let mode = if secret { 0o600 } else { 0o644 };
    write_file(request.output, text.as_bytes(), mode, request.force)?;
    if !request.recipients.is_empty() {
        let kdl = secrets_kdl_text(&moved, &request.recipients);
        write_file(&secrets_kdl, kdl.as_bytes(), 0o644, request.force)?;
        eprintln!(
            "wrote {encrypted} secret(s) into encrypted files beside it ({}), each named in {}",
            moved
                .iter()
                .map(|(f, _)| f.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            secrets_kdl.display()
        );
    }
    eprintln!(
        "wrote {}{}; check it with `bellc check {}`",
        request.output.display(),
        if hosts.is_empty() {
            " (no hosts: add them, or import with --inventory)".to_string()
        } else {
            format!(" with {} hosts", hosts.len())
        },
        request.output.display()
    );
    if written.labels_left_out && request.keep_labels {
        write_file(&nodes, nodes_json(&hosts).as_bytes(), 0o644, request.force)?;
        eprintln!(
            "wrote {} with every label of the {} hosts",
            nodes.display(),
            hosts.len()
        );
    }
    if let Some((hosts, compared)) = written.verified {
        eprintln!(
            "verified: {hosts} hosts, {compared} resources compared, each as Divingbell gives it"
        );
    }
    Ok(0)
}

/// Encrypts each secret `bellc_core::front::lower::move_out` took out of the spec into its file
/// under `beside` (armored, as `bellc secrets rekey` writes), to `recipients`; how many.
fn encrypt_moved(
    beside: &Path,
    moved: &[(String, String)],
    recipients: &[bell_seal::at_rest::Recipient],
    force: bool,
) -> Result<usize, String> {
    for (file, secret) in moved {
        let path = beside.join(file);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let sealed = bell_seal::at_rest::encrypt(secret.as_bytes(), recipients)
            .map_err(|e| format!("cannot encrypt {file}: {e}"))?;
        let armored = bell_seal::at_rest::armor(&sealed);
        write_file(&path, armored.as_bytes(), 0o644, force)?;
    }
    Ok(moved.len())
}

/// `secrets.kdl` for the files the import wrote: the first recipient is the build's key, the
/// others keys of their own, recipients of every file.
fn secrets_kdl_text(
    moved: &[(String, String)],
    recipients: &[bell_seal::at_rest::Recipient],
) -> String {
    use bellc_core::kdl_text::string;
    let mut out = String::from(
        "// Who opens each encrypted file (`bellc secrets check`, `rekey`, `edit`), as written by\n\
         // `bellc import divingbell --secrets-recipient`: the build's key, then the others.\n",
    );
    let mut names = Vec::new();
    for (i, recipient) in recipients.iter().enumerate() {
        let key = string(&recipient.describe());
        match i {
            0 => out.push_str(&format!("build {key}\n")),
            _ => {
                let name = format!("recipient-{}", i + 1);
                out.push_str(&format!("key {} {key}\n", string(&name)));
                names.push(string(&name));
            }
        }
    }
    for (file, _) in moved {
        let mut line = format!("secret {}", string(file));
        for name in &names {
            line.push(' ');
            line.push_str(name);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Writes `path` with `mode`, replacing it only when `force`.
fn write_file(path: &Path, bytes: &[u8], mode: u32, force: bool) -> Result<(), String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(mode);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut file = options.open(path).map_err(fail)?;
    // An existing file keeps its mode through a truncating open.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(fail)?;
    file.write_all(bytes).map_err(fail)
}

/// `bellc import known-hosts FILE… [--inventory INV] [-o OUT]`. Warnings go to stderr; exit 1
/// when no file held a key bellc could take.
pub fn known_hosts(
    files: &[std::path::PathBuf],
    inventory: Option<&Path>,
    output: Option<&Path>,
    force: bool,
) -> Result<u8, String> {
    if let Some(out) = output.filter(|o| o.exists() && !force) {
        return Err(format!(
            "{} exists; give --force to replace it",
            out.display()
        ));
    }
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    for file in files {
        let (what, text) = if file.as_os_str() == "-" {
            let mut text = String::new();
            use std::io::Read;
            std::io::stdin()
                .take(MAX_INVENTORY)
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read stdin: {e}"))?;
            ("stdin".to_string(), text)
        } else {
            (file.display().to_string(), read_text(file, MAX_INVENTORY)?)
        };
        let (mut more, said) = known_hosts::read(&what, &text);
        found.append(&mut more);
        warnings.extend(said);
    }
    let (value, count) = match inventory {
        Some(path) => {
            let text = read_text(path, MAX_INVENTORY)?;
            let mut value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
            let filled = known_hosts::fill(&mut value, &found, &mut warnings)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            (value, filled)
        }
        None => {
            let value = known_hosts::inventory(&found, &mut warnings);
            let count = value.as_array().map_or(0, Vec::len);
            (value, count)
        }
    };
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    if count == 0 {
        return Err("no host's Ed25519 key was found: nothing written".to_string());
    }
    let mut text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
    text.push('\n');
    match output {
        Some(out) => {
            std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?
        }
        None => print!("{text}"),
    }
    eprintln!(
        "{count} host identit{}",
        if count == 1 { "y" } else { "ies" }
    );
    Ok(0)
}

/// `bellc import divingbell` and `bellc import known-hosts`.
pub fn exec(
    cli: &crate::args::Cli,
    from: &ImportFrom,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    match from {
        ImportFrom::Divingbell {
            values,
            inventory,
            output,
            name,
            target,
            force,
            verify,
            retire_divingbell,
            divingbell_version,
            labels,
            secrets_recipient,
        } => {
            let rules = bell_import::divingbell::Rules::at(divingbell_version)
                .map_err(|e| Failure::Usage(format!("--divingbell-version: {e}")))?;
            let recipients = secrets_recipient
                .iter()
                .map(|r| bell_seal::at_rest::Recipient::parse(r))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Failure::Usage(format!("--secrets-recipient: {e}")))?;
            let request = Request {
                recipients,
                rules,
                keep_labels: labels == "inventory",
                deny_warnings: cli.deny_warnings,
                values,
                inventory: inventory.as_deref(),
                output,
                name: name.as_deref(),
                target,
                force: *force,
                verify: *verify,
                retire: *retire_divingbell,
            };
            Ok(divingbell(&request, sources, diags)?)
        }
        ImportFrom::KnownHosts {
            files,
            inventory,
            output,
            force,
        } => Ok(known_hosts(
            files,
            inventory.as_deref(),
            output.as_deref(),
            *force,
        )?),
    }
}
