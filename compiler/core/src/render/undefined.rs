//! What an "undefined value" in a user's template was: the name that is missing, and the names
//! that exist at that point (`p.adress` → `p` has `address`, `host`, `port`).
//!
//! minijinja says only "undefined value" and where. bellc knows the context it rendered with,
//! so it walks the failing expression's path through that context (and through the `for` and
//! `set` lines of the template, for loop variables) until a step is missing.

use minijinja::value::{Value, ValueKind};

/// The first missing step of a template expression.
#[derive(Debug, PartialEq, Eq)]
pub struct Undefined {
    /// The path up to and including the missing step: `p.adress`, `service`.
    pub name: String,
    /// What exists where the step was looked up, sorted.
    pub known: Vec<String>,
    /// Where `known` comes from: `p`, or empty for the template's top level.
    pub within: String,
}

/// `a.b["c"].d` → `a`, then `b`, `c`, `d`. Stops at the first thing that is not a path (a
/// filter, an operator, a call).
fn path(expr: &str) -> Option<Vec<String>> {
    let ident = |s: &str| -> usize {
        s.char_indices()
            .take_while(|(i, c)| {
                c.is_ascii_alphabetic() || *c == '_' || (*i > 0 && c.is_ascii_digit())
            })
            .count()
    };
    let mut rest = expr.trim_start();
    let n = ident(rest);
    if n == 0 {
        return None;
    }
    let mut steps = vec![rest[..n].to_string()];
    rest = &rest[n..];
    loop {
        if let Some(after) = rest.strip_prefix('.') {
            let n = ident(after);
            if n == 0 {
                break;
            }
            steps.push(after[..n].to_string());
            rest = &after[n..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'');
            let Some(q) = quote else { break };
            let Some(end) = after[1..].find(q) else { break };
            steps.push(after[1..1 + end].to_string());
            match after[1 + end + 1..].strip_prefix(']') {
                Some(r) => rest = r,
                None => break,
            }
        } else {
            break;
        }
    }
    Some(steps)
}

/// The names a map-like value has.
fn keys(value: &Value) -> Vec<String> {
    if value.kind() != ValueKind::Map {
        return Vec::new();
    }
    let mut keys: Vec<String> = value
        .try_iter()
        .map(|it| it.filter_map(|k| k.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

fn step(value: &Value, name: &str) -> Option<Value> {
    let next = value.get_attr(name).ok()?;
    (!next.is_undefined()).then_some(next)
}

/// The insides of every `{% ... %}` tag of `source`, without the whitespace-control marks.
fn tags(source: &str) -> impl Iterator<Item = &str> {
    let mut rest = source;
    std::iter::from_fn(move || {
        let open = rest.find("{%")?;
        let inner = &rest[open + 2..];
        let close = inner.find("%}")?;
        rest = &inner[close..];
        Some(inner[..close].trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace()))
    })
}

/// The expression a `{% for NAME in EXPR %}` or `{% set NAME = EXPR %}` of `source` binds
/// `name` to, and whether it is a loop (the variable is one item of it).
fn binding<'s>(source: &'s str, name: &str) -> Option<(&'s str, bool)> {
    tags(source).find_map(|tag| {
        let words: Vec<&str> = tag.splitn(4, char::is_whitespace).collect();
        match words.as_slice() {
            ["for", var, "in", expr] if *var == name => Some((*expr, true)),
            ["set", var, "=", expr] if *var == name => Some((*expr, false)),
            _ => None,
        }
    })
}

/// Looks `steps` up in `ctx`, following loop and `set` variables through `source` (`depth`
/// bounds a chain of them).
fn resolve(source: &str, ctx: &Value, steps: &[String], depth: usize) -> Result<Value, Undefined> {
    let root = &steps[0];
    let mut value = match step(ctx, root) {
        Some(v) => v,
        None => {
            let bound = if depth > 0 {
                binding(source, root)
            } else {
                None
            };
            match bound.and_then(|(expr, is_loop)| Some((path(expr)?, is_loop))) {
                Some((inner, is_loop)) => {
                    let value = resolve(source, ctx, &inner, depth - 1)?;
                    if is_loop {
                        // One item stands for all: the names an item has.
                        value
                            .try_iter()
                            .ok()
                            .and_then(|mut items| items.next())
                            .ok_or_else(|| Undefined {
                                name: root.clone(),
                                known: Vec::new(),
                                within: String::new(),
                            })?
                    } else {
                        value
                    }
                }
                None => {
                    let mut known = keys(ctx);
                    known.extend(loop_and_set_names(source));
                    known.sort();
                    known.dedup();
                    return Err(Undefined {
                        name: root.clone(),
                        known,
                        within: String::new(),
                    });
                }
            }
        }
    };
    for (i, name) in steps.iter().enumerate().skip(1) {
        match step(&value, name) {
            Some(next) => value = next,
            None => {
                return Err(Undefined {
                    name: steps[..=i].join("."),
                    known: keys(&value),
                    within: steps[..i].join("."),
                })
            }
        }
    }
    Ok(value)
}

/// Every name a `for` or `set` tag of `source` binds.
fn loop_and_set_names(source: &str) -> Vec<String> {
    tags(source)
        .filter_map(
            |tag| match tag.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["for" | "set", var, ..] => Some(var.trim_end_matches(',').to_string()),
                _ => None,
            },
        )
        .collect()
}

/// The failing expression at `range` of `source` (minijinja's error range), widened to the
/// start of its path: for an attribute the range may begin at the `.` (`.labels.rack`).
pub fn expression(source: &str, range: std::ops::Range<usize>) -> Option<&str> {
    let bytes = source.as_bytes();
    let mut start = range.start.min(bytes.len());
    while start > 0
        && (bytes[start - 1].is_ascii_alphanumeric() || b"._".contains(&bytes[start - 1]))
    {
        start -= 1;
    }
    source.get(start..range.end)
}

/// The missing step of `expr` (the failing expression, from [`expression`]), rendered from
/// `source` with `ctx`. `None` when every step of its path exists (the error is somewhere
/// else, in a filter's argument, say).
pub fn undefined(source: &str, expr: &str, ctx: &Value) -> Option<Undefined> {
    let steps = path(expr)?;
    resolve(source, ctx, &steps, 4).err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    fn ctx() -> Value {
        let etcd = vec![
            context! { host => "c1", address => "10.0.0.1", port => 2379 },
            context! { host => "c2", address => "10.0.0.2", port => 2379 },
        ];
        context! {
            host => context! { name => "a", address => "10.0.0.9", labels => context! { rack => "r1" } },
            services => context! { etcd => etcd },
            fleet => context! { name => "lab" },
        }
    }

    #[test]
    fn a_missing_attribute_names_what_is_there() {
        let u = undefined("{{ host.adress }}", "host.adress", &ctx()).unwrap();
        assert_eq!(u.name, "host.adress");
        assert_eq!(u.within, "host");
        assert_eq!(u.known, ["address", "labels", "name"]);
        let u = undefined("", "host.labels[\"row\"]", &ctx()).unwrap();
        assert_eq!(
            (u.name.as_str(), u.known.as_slice()),
            ("host.labels.row", &["rack".to_string()][..])
        );
    }

    #[test]
    fn a_missing_top_level_name_lists_the_context_and_the_loops() {
        let source = "{% for p in services.etcd %}{{ p.host }}{% endfor %}{{ service.etcd }}";
        let u = undefined(source, "service.etcd", &ctx()).unwrap();
        assert_eq!(u.name, "service");
        assert_eq!(u.known, ["fleet", "host", "p", "services"]);
    }

    #[test]
    fn a_loop_variable_has_the_names_of_an_item() {
        let source = "{% for p in services.etcd %}{{ p.adress }}:{{ p.port }}{% endfor %}";
        let u = undefined(source, "p.adress", &ctx()).unwrap();
        assert_eq!(u.name, "p.adress");
        assert_eq!(u.known, ["address", "host", "port"]);
        let source = "{% for p in services.etdc %}{{ p }}{% endfor %}";
        let u = undefined(source, "services.etdc", &ctx()).unwrap();
        assert_eq!(
            (u.name.as_str(), u.known.as_slice()),
            ("services.etdc", &["etcd".to_string()][..])
        );
    }

    #[test]
    fn the_expression_starts_where_its_path_does() {
        let src = "rack={{ host.labels.rack }}";
        assert_eq!(expression(src, 12..24), Some("host.labels.rack"));
        assert_eq!(expression(src, 8..24), Some("host.labels.rack"));
    }

    #[test]
    fn a_path_that_exists_is_not_the_culprit() {
        assert_eq!(undefined("", "host.name", &ctx()), None);
        assert_eq!(undefined("", "'literal'", &ctx()), None);
    }
}
