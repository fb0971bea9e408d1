//! exec: scripts with their rerun, retry, timeout and blocking policies.

use super::*;

impl Mapper {
    pub(super) fn exec(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &[
            "data",
            "args",
            "env",
            "rerun_policy",
            "timeout",
            "script_timeout",
            "rerun_interval",
            "retry_interval",
            "blocking_policy",
            "rerun_interval_persist",
            "rerun_max_count",
            "retry_interval_persist",
            "retry_max_count",
        ];
        for (name_key, script) in self.entries(conf, path) {
            let Some(name) = name_key.scalar() else {
                continue;
            };
            let name_span = name_key.span;
            let here = format!("{path}.{name}");
            let mut node = NodeText::new("exec", name);
            let mut data = None;
            for (key, value) in self.entries(script, &here) {
                let field = key.scalar().unwrap_or_default();
                let at = format!("{here}.{field}");
                node.from(value.span);
                // `timeout` in Divingbell's chart and gate, `script_timeout` in its documentation.
                let prop = match field {
                    "timeout" | "script_timeout" => Some("timeout"),
                    "rerun_max_count" => Some("rerun-max-count"),
                    "retry_max_count" => Some("retry-max-count"),
                    _ => None,
                };
                match field {
                    _ if prop.is_some() => {
                        if let (Some(prop), Some(text)) = (prop, self.text(value, &at)) {
                            node.prop(prop, number_or_string(&text));
                        }
                    }
                    "rerun_interval" | "retry_interval" => {
                        if let Some(seconds) = self.interval(value, &at) {
                            let prop = if field == "rerun_interval" {
                                "rerun-interval"
                            } else {
                                "retry-interval"
                            };
                            node.prop(prop, seconds);
                        }
                    }
                    "rerun_interval_persist" | "retry_interval_persist" => {
                        if let Some(b) = self.boolean(value, &at) {
                            let prop = if field.starts_with("rerun") {
                                "rerun-interval-persist"
                            } else {
                                "retry-interval-persist"
                            };
                            node.prop(prop, format!("#{b}"));
                        }
                    }
                    "rerun_policy" => match self.text(value, &at).as_deref() {
                        Some(policy @ ("always" | "never")) => node.prop("rerun", string(policy)),
                        Some("once_successfully") => {
                            node.prop("rerun", string("once-successfully"))
                        }
                        _ => self.refuse(value, &at, POLICIES),
                    },
                    "blocking_policy" => match self.text(value, &at).as_deref() {
                        Some("foreground") => {}
                        Some("foreground_halt_pod_on_failure") => {
                            node.prop("on-failure", string("halt"))
                        }
                        Some("background") => node.prop("background", "#true".into()),
                        _ => self.refuse(
                            value,
                            &at,
                            "it takes foreground, background or foreground_halt_pod_on_failure",
                        ),
                    },
                    "args" => {
                        let args: Vec<String> =
                            self.words(value, &at).iter().map(|a| string(a)).collect();
                        if !args.is_empty() {
                            node.child("args", args.join(" "));
                        }
                    }
                    "env" => {
                        let mut vars = Vec::new();
                        for (k, v) in self.entries(value, &at) {
                            let k = k.scalar().unwrap_or_default();
                            if let Some(v) = self.text(v, &format!("{at}.{k}")) {
                                vars.push(format!("{}={}", ident(k), string(&v)));
                            }
                        }
                        if !vars.is_empty() {
                            node.child("env", vars.join(" "));
                        }
                    }
                    "data" => data = self.text(value, &at).map(|text| (text, value.span)),
                    _ => self.unknown(key, &here, KNOWN),
                }
            }
            if let Some((data, span)) = data {
                node.from(span);
                node.child("script", block(&data, "    "));
            }
            self.out.decls.push(node.decl(name_span));
        }
    }
}
