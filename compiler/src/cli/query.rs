//! `bellc query`: the command line's side of [`bellc_core::review::query`].

use bellc_core::resolve::ResolvedHost;
use bellc_core::review::explain;
use bellc_core::review::query::{self, Target};
use bellc_core::review::select::Selector;
use bellc_core::source::Sources;
use std::path::{Path, PathBuf};

/// The spec among the words after the query (one ending in `.kdl`, or a file that exists),
/// and the host names or globs; `bell.kdl` when no spec is named.
pub fn spec_and_patterns(words: &[String]) -> (PathBuf, Vec<String>) {
    let is_spec = |w: &String| w.ends_with(".kdl") || Path::new(w).is_file();
    let spec = words
        .iter()
        .find(|w| is_spec(w))
        .map_or_else(|| PathBuf::from("bell.kdl"), PathBuf::from);
    let patterns = words.iter().filter(|w| !is_spec(w)).cloned().collect();
    (spec, patterns)
}

/// Prints the answer; an error when the selector selects no host.
pub fn print(
    front: &bellc_core::Frontend,
    sources: &Sources,
    what: &str,
    target: &Target,
    selector: &Selector,
    json: bool,
) -> Result<(), String> {
    let answer = query::query(
        &front.spec,
        &front.resolution.hosts,
        target,
        what,
        selector,
        sources,
    );
    if answer.hosts == 0 {
        return Err(format!(
            "no host of the spec is selected by {}",
            selector.describe()
        ));
    }
    if json {
        let text = serde_json::to_string_pretty(&answer).map_err(|e| e.to_string())?;
        outjson!(text);
    } else {
        print!("{}", query::to_text(&answer));
    }
    Ok(())
}

/// The hosts of the spec `selector` selects, in the spec's order; an error when none is (with
/// a guess when a single name was given that is not a host's).
pub fn selected<'a>(
    front: &'a bellc_core::Frontend,
    selector: &Selector,
    patterns: &[String],
    spec: &Path,
) -> Result<Vec<&'a ResolvedHost>, String> {
    let hosts: Vec<&ResolvedHost> = front
        .resolution
        .hosts
        .iter()
        .filter(|h| selector.selects(&h.name, &h.labels))
        .collect();
    if !hosts.is_empty() {
        return Ok(hosts);
    }
    match patterns {
        // One plain name, as `bellc explain HOST` has always taken: perhaps a typo.
        [one] if !one.contains(['*', '?', '[']) && !selector.has_conditions() => {
            let names = front.resolution.hosts.iter().map(|h| h.name.as_str());
            let hint = bellc_core::front::validate::did_you_mean(one, names)
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            Err(format!("no host `{one}` in {}{hint}", spec.display()))
        }
        _ => Err(format!(
            "no host of {} is selected by {}",
            spec.display(),
            selector.describe()
        )),
    }
}

/// `bellc explain`: each group of hosts that share a configuration, explained once.
pub fn print_explain(
    front: &bellc_core::Frontend,
    sources: &Sources,
    hosts: &[&ResolvedHost],
    overridden: bool,
    json: bool,
) -> Result<(), String> {
    let groups = explain::groups(hosts);
    if json {
        let configurations: Vec<query::Configuration> = groups
            .iter()
            .map(|g| query::configuration(&front.spec, g, sources, overridden))
            .collect();
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "format": query::QUERY_FORMAT,
            "groups": configurations,
        }))
        .map_err(|e| e.to_string())?;
        outjson!(text);
        return Ok(());
    }
    let services = bellc_core::render::service_endpoints(&front.resolution);
    for (i, group) in groups.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!(
            "{}",
            explain::explain_group(&front.spec, group, sources, overridden)
        );
        print!("{}", who_may_provide(group, &services));
    }
    Ok(())
}

/// For each service a live file or a `wait-for` of the group follows, the hosts the build says
/// may provide it: all a live file can ever list, what a wait counts. Health decides at runtime
/// which of them do.
fn who_may_provide(
    group: &[&ResolvedHost],
    services: &std::collections::BTreeMap<String, Vec<bellc_core::render::ServiceEndpoint>>,
) -> String {
    let Some(host) = group.first() else {
        return String::new();
    };
    let mut followed = std::collections::BTreeSet::new();
    for res in &host.model.resources {
        if res.kind == bellc_core::spec::Kind::LIVE {
            followed.extend(res.str("service").map(str::to_string));
        }
        followed.extend(res.wait_for().iter().map(|w| w.service.clone()));
    }
    let mut out = String::new();
    for service in followed {
        let listed: Vec<String> = services
            .get(&service)
            .into_iter()
            .flatten()
            .map(|p| {
                let address = p.address.as_deref().unwrap_or("no address");
                match p.port {
                    Some(port) => format!("{} ({address}:{port})", p.host),
                    None => format!("{} ({address})", p.host),
                }
            })
            .collect();
        out.push_str(&format!(
            "// `{service}` may be provided by: {} (ready when their signed health says so)\n",
            listed.join(", ")
        ));
    }
    out
}

/// `bellc explain --override NAME`: the selected hosts it applies to.
pub fn print_override(
    front: &bellc_core::Frontend,
    sources: &Sources,
    hosts: &[&ResolvedHost],
    name: &str,
    json: bool,
) -> Result<(), String> {
    let spec = &front.spec;
    let Some(index) = spec.overrides.iter().position(|o| o.name == name) else {
        let hint = bellc_core::front::validate::did_you_mean(
            name,
            spec.overrides.iter().map(|o| o.name.as_str()),
        )
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
        return Err(format!("the spec has no override `{name}`{hint}"));
    };
    let matched: Vec<&str> = hosts
        .iter()
        .filter(|h| h.model.layers.contains(&index))
        .map(|h| h.name.as_str())
        .collect();
    let at = sources.file_line(spec.overrides[index].span);
    if json {
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "format": query::QUERY_FORMAT,
            "override": name,
            "at": at,
            "hosts": matched,
        }))
        .map_err(|e| e.to_string())?;
        outjson!(text);
    } else {
        println!(
            "override {name}  {at}: {} host{}",
            matched.len(),
            if matched.len() == 1 { "" } else { "s" }
        );
        if !matched.is_empty() {
            println!("    {}", matched.join(" "));
        }
    }
    Ok(())
}
