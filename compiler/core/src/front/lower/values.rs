//! Typed values of resource fields (debconf answers, booleans, modes, lists, …) and the checks
//! of a resource's name and fields against the tools that will read them.

use super::*;

impl Lowerer<'_> {
    /// `wait-for "SERVICE" count=N timeout=T`: `count` defaults to 1, `timeout` to 10 minutes.
    pub(super) fn wait_for(&mut self, file: FileId, node: &KdlNode) -> Option<WaitFor> {
        self.no_children(file, node);
        let (service, name_span) = self.name_arg(file, node, "service")?;
        let mut ok = true;
        if let Err(invalid) = validate::resource_name(&service) {
            self.invalid(file, name_span.source_span(), invalid);
            ok = false;
        }
        let mut count = 1;
        let mut timeout = DEFAULT_WAIT_TIMEOUT;
        for (key, entry) in self.props(node) {
            match key {
                "count" => match entry.value() {
                    KdlValue::Integer(n) if (1..=10_000).contains(n) => count = *n as u32,
                    _ => {
                        self.diags.push(LowerError::InvalidValue {
                            message: "`count` of `wait-for` must be a whole number from 1 to 10000"
                                .into(),
                            span: entry.span(),
                            help: "how many providers must be ready, such as `count=2`".into(),
                            file,
                        });
                        ok = false;
                    }
                },
                "timeout" => {
                    let secs = match entry.value() {
                        KdlValue::Integer(n) => u64::try_from(*n).ok(),
                        KdlValue::String(text) if !text.bytes().all(|b| b.is_ascii_digit()) => {
                            validate::duration(text)
                        }
                        _ => None,
                    };
                    match secs.filter(|s| (1..=MAX_WAIT_TIMEOUT).contains(s)) {
                        Some(secs) => timeout = secs,
                        None => {
                            self.diags.push(LowerError::InvalidValue {
                                message:
                                    "`timeout` of `wait-for` must be a duration from 1s to 24h"
                                        .into(),
                                span: entry.span(),
                                help: "such as `timeout=\"10m\"`; on timeout the resource is \
                                       `waiting` and tried again at the next run"
                                    .into(),
                                file,
                            });
                            ok = false;
                        }
                    }
                }
                _ => {
                    self.unknown_prop(file, "wait-for", entry, &["count", "timeout"]);
                    ok = false;
                }
            }
        }
        ok.then(|| WaitFor {
            service,
            count,
            timeout,
            span: self.span(file, node.span()),
        })
    }

    pub(super) fn debconf(&mut self, file: FileId, node: &KdlNode) -> Option<Debconf> {
        self.no_children(file, node);
        let (question, _) = self.name_arg(file, node, "debconf question")?;
        let mut kind = None;
        let mut value = None;
        let mut from_file = None;
        for (key, entry) in self.props(node) {
            match key {
                "type" => kind = self.string(file, "type", entry),
                "file" => {
                    from_file = self
                        .string(file, "file", entry)
                        .map(|path| (path, entry.span()))
                }
                "value" => {
                    value = match entry.value() {
                        KdlValue::Bool(b) => Some(b.to_string()),
                        KdlValue::String(s) => Some(s.clone()),
                        KdlValue::Integer(i) => Some(i.to_string()),
                        other => {
                            self.wrong_type(
                                file,
                                "value",
                                "a string or a boolean",
                                other,
                                entry.span(),
                            );
                            None
                        }
                    }
                }
                _ => self.unknown_prop(file, "debconf", entry, &["type", "value", "file"]),
            }
        }
        const TYPES: &[&str] = &[
            "boolean",
            "string",
            "select",
            "multiselect",
            "note",
            "text",
            "password",
            "title",
            "error",
            "seen",
        ];
        let Some(kind) = kind else {
            self.missing(
                file,
                node.name().span(),
                "debconf",
                "`type`",
                format!("debconf types: {}", TYPES.join(", ")),
            );
            return None;
        };
        if !TYPES.contains(&kind.as_str()) {
            let help = match validate::did_you_mean(&kind, TYPES.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("debconf types: {}", TYPES.join(", ")),
            };
            self.diags.push(LowerError::InvalidValue {
                message: format!("unknown debconf type `{kind}`"),
                span: node.span(),
                help,
                file,
            });
            return None;
        }
        // A password answer may come from an encrypted file of the spec's tree instead.
        let from_file_given = from_file.is_some();
        let value = match (value, from_file) {
            (Some(_), Some((_, at))) => {
                self.diags.push(LowerError::InvalidValue {
                    message: "a debconf answer has either `value` or `file`".into(),
                    span: at,
                    help: "drop `value`: the answer is what the encrypted file holds".into(),
                    file,
                });
                return None;
            }
            (None, Some((_, at))) if kind != "password" => {
                self.diags.push(LowerError::InvalidValue {
                    message: format!("a `{kind}` answer is no secret: only a password comes from an encrypted file"),
                    span: at,
                    help: "write the answer as `value=`, or make it type=\"password\"".into(),
                    file,
                });
                return None;
            }
            (None, Some((relative, at))) => Some(self.open_secret(file, &relative, at)?),
            (value, None) => value,
        };
        let Some(value) = value else {
            self.missing(
                file,
                node.name().span(),
                "debconf",
                "`value`",
                "write `debconf \"pkg/question\" type=\"boolean\" value=#false`",
            );
            return None;
        };
        // A password file written by an editor ends with a newline: not part of the answer.
        let value = match from_file_given {
            true => value.strip_suffix('\n').unwrap_or(&value).to_string(),
            false => value,
        };
        if value.contains('\n') {
            self.diags.push(LowerError::InvalidValue {
                message: "a debconf answer cannot span lines".into(),
                span: node.span(),
                help: "debconf-set-selections reads one answer per line".into(),
                file,
            });
            return None;
        }
        Some(Debconf {
            question,
            kind,
            value,
        })
    }

    pub(super) fn typed_value(
        &mut self,
        file: FileId,
        node: &str,
        field: &FieldSchema,
        entry: &KdlEntry,
    ) -> Option<Value> {
        let what = format!("{node} {}", field.name);
        let value = entry.value();
        match field.ty {
            FieldType::Bool => self.bool(file, &what, entry).map(Value::Bool),
            FieldType::BoolOrStr => match value {
                KdlValue::Bool(b) => Some(Value::Bool(*b)),
                KdlValue::String(s) => Some(Value::Str(s.clone())),
                other => {
                    self.wrong_type(file, &what, &field.ty.describe(), other, entry.span());
                    None
                }
            },
            FieldType::Str => self.string(file, &what, entry).map(Value::Str),
            FieldType::IntOrStr => match value {
                KdlValue::Integer(i) => Some(Value::Str(i.to_string())),
                // A number is a number: `value="65536"` is refused as `sudo="true"` is.
                KdlValue::String(s) if s.parse::<i64>().is_ok() => {
                    self.wrong_type(file, &what, "a number or a word", value, entry.span());
                    None
                }
                KdlValue::String(s) => Some(Value::Str(s.clone())),
                other => {
                    self.wrong_type(file, &what, "a number or a string", other, entry.span());
                    None
                }
            },
            FieldType::Count => match value {
                KdlValue::Integer(i) if (0..=i64::MAX as i128).contains(i) => {
                    Some(Value::Int(*i as i64))
                }
                KdlValue::String(s) if s == "infinite" => Some(Value::Str(s.clone())),
                other => {
                    self.wrong_type(
                        file,
                        &what,
                        "a whole number of times (or \"infinite\")",
                        other,
                        entry.span(),
                    );
                    None
                }
            },
            FieldType::Duration | FieldType::DurationOrInfinite => {
                let parsed = match value {
                    KdlValue::String(s)
                        if s == "infinite" && field.ty == FieldType::DurationOrInfinite =>
                    {
                        return Some(Value::Str(s.clone()));
                    }
                    KdlValue::String(s) if s.parse::<i64>().is_ok() => {
                        self.diags.push(LowerError::WrongType {
                            what,
                            expected: field.ty.describe(),
                            found: describe_value(value),
                            span: entry.span(),
                            help: format!(
                                "numbers are written without quotes: `{s}` (seconds), or give \
                                 the unit: \"{s}s\""
                            ),
                            file,
                        });
                        return None;
                    }
                    KdlValue::Integer(i) => u64::try_from(*i).ok(),
                    KdlValue::String(s) => validate::duration(s),
                    _ => None,
                };
                match parsed.and_then(|secs| i64::try_from(secs).ok()) {
                    Some(secs) => Some(Value::Int(secs)),
                    None => {
                        self.diags.push(LowerError::WrongType {
                            what,
                            expected: field.ty.describe(),
                            found: describe_value(value),
                            span: entry.span(),
                            help: "write a whole number of seconds (`90`), or a whole number \
                                   with its unit in quotes: `s` seconds, `m` minutes, `h` hours, \
                                   such as \"90s\", \"5m\" or \"1h\""
                                .into(),
                            file,
                        });
                        None
                    }
                }
            }
            FieldType::Mode => {
                let text = match value {
                    KdlValue::String(s) => s.clone(),
                    other => {
                        let help_value = match other {
                            KdlValue::Integer(i) => format!("\"{i:04}\""),
                            _ => "\"0644\"".into(),
                        };
                        self.diags.push(LowerError::WrongType {
                            what,
                            expected: "an octal mode string".into(),
                            found: describe_value(other),
                            span: entry.span(),
                            help: format!("write the mode in quotes, such as {help_value}, so that it is read as octal"),
                            file,
                        });
                        return None;
                    }
                };
                match validate::file_mode(&text) {
                    Ok(_) => Some(Value::Str(text)),
                    Err(invalid) => {
                        self.invalid(file, entry.span(), invalid);
                        None
                    }
                }
            }
            FieldType::Enum(values) => {
                let text = self.string(file, &what, entry)?;
                if values.contains(&text.as_str()) {
                    Some(Value::Str(text))
                } else {
                    let help = match validate::did_you_mean(&text, values.iter().copied()) {
                        Some(s) => format!("did you mean \"{s}\"?"),
                        None => format!("use {}", field.ty.describe()),
                    };
                    self.diags.push(LowerError::InvalidValue {
                        message: format!("`{what}` cannot be \"{text}\""),
                        span: entry.span(),
                        help,
                        file,
                    });
                    None
                }
            }
            FieldType::Strings
            | FieldType::StrMap
            | FieldType::OnOffMap
            | FieldType::DebconfList
            | FieldType::WaitList => self
                .string(file, &what, entry)
                .map(|s| Value::List(vec![s])),
        }
    }

    /// Checks of a resource's name that depend on its kind.
    pub(super) fn check_name(&mut self, file: FileId, kind: Kind, name: &str, span: Span) {
        if let Err(invalid) = kind.check_name(name) {
            self.invalid(file, span.source_span(), invalid);
        }
    }

    /// Checks of field values that do not need the other layers.
    pub(super) fn check_fields(&mut self, file: FileId, decl: &ResourceDecl) {
        for (name, field) in &decl.fields {
            let check = decl
                .kind
                .schema()
                .iter()
                .find(|f| f.name == *name)
                .and_then(|f| f.check);
            let result = match (&field.value, check) {
                (Value::List(refs), _) if *name == "after" => {
                    refs.iter().try_for_each(|r| parse_ref(r).map(|_| ()))
                }
                // Lists (`ssh-key`) were checked entry by entry where they were written.
                // A secret a review did not open has nothing to check.
                (Value::Str(s), Some(_)) if s == crate::source::UNOPENED_SECRET => Ok(()),
                (Value::Str(s), Some(check)) => check(s),
                _ => Ok(()),
            };
            if let Err(invalid) = result {
                self.invalid(file, field.span.source_span(), invalid);
            }
        }
    }
}

/// How long a `wait-for` waits unless it says (the seed notes' `service_blocker` example).
pub const DEFAULT_WAIT_TIMEOUT: u64 = 600;
/// A wait holds the host's lock: a day at most.
const MAX_WAIT_TIMEOUT: u64 = 24 * 3600;
