//! uamlite: users, their keys, sudo and passwords; `purge_expired_users`.

use super::*;

impl Mapper {
    pub(super) fn uamlite(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &["purge_expired_users", "users"];
        const USER: &[&str] = &[
            "user_name",
            "user_crypt_passwd",
            "user_sudo",
            "user_sshkeys",
        ];
        for (key, value) in self.entries(conf, path) {
            match key.scalar().unwrap_or_default() {
                "purge_expired_users" => {
                    if let Some(purge) = self.boolean(value, &format!("{path}.purge_expired_users"))
                    {
                        let mut node = NodeText::singleton("users");
                        node.prop("purge-expired", format!("#{purge}"));
                        self.out.decls.push(node.decl(value.span));
                    }
                }
                "users" => {
                    let users_path = format!("{path}.users");
                    // Divingbell runs every entry in turn; an entry that repeats an earlier
                    // one exactly changes nothing (spyglass lists some users twice).
                    let mut seen: Vec<(&str, usize, &Node)> = Vec::new();
                    for (i, user) in self.items(value, &users_path).iter().enumerate() {
                        let here = format!("{users_path}[{i}]");
                        let Some(name) = user.get("user_name").and_then(Node::scalar) else {
                            self.shape(user, &here, "a user with a `user_name`");
                            continue;
                        };
                        if let Some((_, first, earlier)) = seen.iter().find(|(n, _, _)| *n == name)
                        {
                            if !earlier.same(user) {
                                self.out.notes.push(Note {
                                    span: user.get("user_name").map_or(user.span, |n| n.span),
                                    message: format!("`{here}` declares user `{name}` again, otherwise than `{users_path}[{first}]`: Divingbell runs both in turn, which one bellc user cannot say"),
                                    help: format!("merge the two entries of `{name}` into one"),
                                    kind: NoteKind::SpecRefuses,
                                });
                            }
                            continue;
                        }
                        seen.push((name, i, user));
                        let mut node = NodeText::new("user", name);
                        for (key, value) in self.entries(user, &here) {
                            let field = key.scalar().unwrap_or_default();
                            let at = format!("{here}.{field}");
                            node.from(value.span);
                            match field {
                                "user_name" => {}
                                "user_sudo" => {
                                    if let Some(sudo) = self.boolean(value, &at) {
                                        node.prop("sudo", format!("#{sudo}"));
                                    }
                                }
                                "user_crypt_passwd" => {
                                    if let Some(hash) = self.text(value, &at) {
                                        node.child("password", string(&hash));
                                    }
                                }
                                "user_sshkeys" => {
                                    let keys = self.words(value, &at);
                                    let empty = value.items().is_some_and(<[Node]>::is_empty);
                                    if empty && !self.rules.empty_ssh_keys_unmanaged() {
                                        self.refuse(value, &at, "charts before 4c6ac47 fail to render an empty list; write `[ Unmanaged ]`, or import with the --divingbell-version your site ran");
                                    } else if empty
                                        || keys.len() == 1
                                            && keys[0].eq_ignore_ascii_case("unmanaged")
                                    {
                                        // `[]` is unmanaged since 4c6ac47: treasuremap writes it
                                        // before Deckhand substitutes the keys.
                                        node.child("ssh-keys", string("unmanaged"));
                                    } else {
                                        let spans: Vec<Span> = match value.items() {
                                            Some(items) if items.len() == keys.len() => {
                                                items.iter().map(|i| i.span).collect()
                                            }
                                            _ => vec![value.span; keys.len()],
                                        };
                                        for (key, span) in keys.iter().zip(spans) {
                                            node.from(span);
                                            node.child("ssh-key", string(key));
                                        }
                                    }
                                }
                                _ => self.unknown(key, &here, USER),
                            }
                        }
                        self.out
                            .decls
                            .push(node.decl(user.get("user_name").map_or(user.span, |n| n.span)));
                    }
                }
                _ => self.unknown(key, path, KNOWN),
            }
        }
    }
}
