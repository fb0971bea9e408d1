//! `bellc hosts`: the hosts a spec builds (name, bundle, labels), and the registrations of
//! hosts not in the inventory yet (`pending`, `accept`, `reject`).

use crate::args::{HostsArgs, HostsCommand};
use crate::{compile, enroll, keys, read_check, Failure};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::source::Sources;

pub fn exec(
    cli: &crate::args::Cli,
    args: &HostsArgs,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    match &args.command {
        None => list(cli, args, sources, diags),
        Some(HostsCommand::Pending {
            spec,
            store,
            tls,
            json,
        }) => {
            read_check(spec)?;
            // Lowered only: the hosts it declares are all that counts here, and a spec whose
            // `assign` waits for hosts to accept does not build until they are.
            let mut own = Diagnostics::new();
            let Some(lowered) = bellc_core::front::lower::load(spec, sources, &mut own) else {
                diags.append(own);
                return Ok(1);
            };
            if own.has_errors() {
                eprintln!(
                    "warning: the spec has errors (`bellc check` shows them); a host it drops \
                 shows as pending"
                );
            }
            let identities: std::collections::HashMap<&str, Option<&str>> = lowered
                .hosts
                .iter()
                .map(|h| (h.name.as_str(), h.identity.as_deref()))
                .collect();
            let etcd = bell_store::Etcd::open(store, &tls.access())?;
            let fleet = &lowered.fleet.name;
            let (filed, rejected) = bell_store::discovery::read(&etcd, fleet)?;
            enroll::print_pending(
                &bell_ops::fleet::enroll::pending_among(
                    &|name| identities.get(name).copied(),
                    &filed,
                    &rejected,
                ),
                *json,
            )?;
            Ok(0)
        }
        Some(HostsCommand::Accept {
            hosts,
            inventory,
            labels,
            store,
            fleet,
            tls,
            json,
        }) => {
            let etcd = bell_store::Etcd::open(store, &tls.access())?;
            let labels = labels.iter().cloned().collect();
            Ok(enroll::accept(
                &etcd, fleet, hosts, inventory, &labels, *json,
            )?)
        }
        Some(HostsCommand::Reject {
            hosts,
            store,
            fleet,
            tls,
        }) => {
            let etcd = bell_store::Etcd::open(store, &tls.access())?;
            Ok(enroll::reject(&etcd, fleet, hosts)?)
        }
    }
}

/// `bellc hosts [SELECTION]`: each selected host's name, bundle and labels.
fn list(
    cli: &crate::args::Cli,
    args: &HostsArgs,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    let HostsArgs {
        selection,
        sealed_by,
        json,
        ..
    } = args;
    let (spec, _, selector) = selection.parse()?;
    let seal = keys::sealed_by(sealed_by)?;
    let known = seal.is_some();
    let Some(compiled) = compile(cli, &spec, sources, diags, seal) else {
        return Ok(1);
    };
    keys::warn_ids_of_sealed_hosts(&compiled, sealed_by, known);
    let hosts: std::collections::BTreeMap<&String, &bell_bundle::ReleaseHost> = compiled
        .release
        .hosts
        .iter()
        .filter(|(name, host)| selector.selects(name, &host.labels))
        .collect();
    if hosts.is_empty() && !selector.is_everything() {
        return Err(Failure::Usage(format!(
            "no host of {} is selected by {}",
            spec.display(),
            selector.describe()
        )));
    }
    if *json {
        let text = serde_json::to_string_pretty(&hosts).map_err(|e| e.to_string())?;
        outjson!(text);
    } else {
        for (name, host) in &hosts {
            let labels: Vec<String> = host
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            println!(
                "{name}\t{}\t{}",
                bell_bundle::short_id(&host.bundle),
                labels.join(" ")
            );
        }
    }
    Ok(0)
}
