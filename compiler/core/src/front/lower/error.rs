//! The errors of lowering: each points at the node or value in its file.

use super::*;

#[derive(Debug, Error, Diagnostic)]
pub enum LowerError {
    #[error("{message}")]
    #[diagnostic(code(bell::parse::syntax))]
    Syntax {
        message: String,
        #[label("{label}")]
        span: SourceSpan,
        label: String,
        #[help]
        help: Option<String>,
        file: FileId,
    },
    #[error("unknown node `{name}` {context}")]
    #[diagnostic(code(bell::lower::unknown_node))]
    UnknownNode {
        name: String,
        context: &'static str,
        #[label("not a node bellc knows here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("unknown property `{name}` on `{node}`")]
    #[diagnostic(code(bell::lower::unknown_property))]
    UnknownProperty {
        name: String,
        node: String,
        #[label("unknown property")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{node}` takes {expected}")]
    #[diagnostic(code(bell::lower::unexpected_argument))]
    UnexpectedArgument {
        node: String,
        expected: &'static str,
        #[label("unexpected")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{what}` expects {expected}, found {found}")]
    #[diagnostic(code(bell::lower::wrong_type))]
    WrongType {
        what: String,
        expected: String,
        found: String,
        #[label("expected {expected}")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{node}` is missing its required {what}")]
    #[diagnostic(code(bell::lower::missing_property))]
    Missing {
        node: String,
        what: String,
        #[label("needs {what}")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{what} `{name}` is declared twice")]
    #[diagnostic(code(bell::lower::duplicate))]
    Duplicate {
        what: &'static str,
        name: String,
        #[label("declared again here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("address {address} is given to `{host}` and to `{first}`")]
    #[diagnostic(code(bell::lower::duplicate_address), severity(Warning))]
    DuplicateAddress {
        address: String,
        host: String,
        first: String,
        #[label("also the address of `{first}`")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::lower::invalid_value))]
    InvalidValue {
        message: String,
        #[label("here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("cannot read {what} `{path}`: {reason}")]
    #[diagnostic(code(bell::load::unreadable))]
    Unreadable {
        what: &'static str,
        path: String,
        reason: String,
        #[label("this file")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("a secret is written in the spec in the clear")]
    #[diagnostic(code(bell::lower::plaintext_secret_in_spec), severity(Warning))]
    PlaintextSecretInSpec {
        #[label("whoever reads the repository reads this")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("cannot open the encrypted secret `{path}`: {reason}")]
    #[diagnostic(code(bell::lower::secret_unopened))]
    SecretUnopened {
        path: String,
        reason: String,
        #[label("this file")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("cannot read the spec `{path}`: {reason}")]
    #[diagnostic(
        code(bell::load::unreadable),
        help("name a spec file, e.g. `bellc build bell.kdl`; bellc reads ./bell.kdl when none is named")
    )]
    UnreadableSpec { path: String, reason: String },
    #[error("{what} is not UTF-8 text")]
    #[diagnostic(
        code(bell::load::not_utf8),
        help("a spec is UTF-8 text; re-save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)")
    )]
    NotUtf8 {
        what: String,
        #[label("the first byte that is not UTF-8")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("blocks nest deeper than {max} levels")]
    #[diagnostic(
        code(bell::load::too_deep),
        help("a spec nests a few levels (override → resource → setting); flatten the blocks")
    )]
    TooDeep {
        max: usize,
        #[label("level {}", max + 1)]
        span: SourceSpan,
        file: FileId,
    },
    #[error("commented-out blocks (`/- {{` or `/- node {{`) nest deeper than {max} levels")]
    #[diagnostic(
        code(bell::load::commented_out_too_deep),
        help(
            "each commented-out block left open inside another multiplies the parser's work; \
             close each one's `{{` with its `}}`, and drop a `/-` inside a commented-out \
             node: what it comments out is commented out already"
        )
    )]
    CommentedOutTooDeep {
        max: usize,
        #[label("level {}", max + 1)]
        span: SourceSpan,
        file: FileId,
    },
    #[error("include cycle: {chain}")]
    #[diagnostic(
        code(bell::load::include_cycle),
        help("a spec file may include another only once along any chain of includes; move the shared nodes into a file both include")
    )]
    IncludeCycle {
        chain: String,
        #[label("this include closes the cycle")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("`{pattern}` matches no file")]
    #[diagnostic(
        code(bell::load::empty_glob),
        severity(Warning),
        help("the pattern is relative to the directory of the file that includes it")
    )]
    EmptyGlob {
        pattern: String,
        #[label("no match")]
        span: SourceSpan,
        file: FileId,
    },
    #[error(
        "secrets are shipped in the clear: every host and every reader of the mirror can read them"
    )]
    #[diagnostic(
        code(bell::lower::plaintext_secrets),
        severity(Warning),
        help("give every host that has secrets an `identity=\"ssh-ed25519 …\"` and drop secrets=\"plaintext\": each host's secrets are then sealed to it")
    )]
    PlaintextSecrets {
        #[label("said here")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::inventory::invalid))]
    Inventory {
        message: String,
        #[label("here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl LowerError {
    fn file_id(&self) -> Option<FileId> {
        use LowerError::*;
        match self {
            Syntax { file, .. }
            | UnknownNode { file, .. }
            | UnknownProperty { file, .. }
            | UnexpectedArgument { file, .. }
            | WrongType { file, .. }
            | Missing { file, .. }
            | Duplicate { file, .. }
            | DuplicateAddress { file, .. }
            | InvalidValue { file, .. }
            | Unreadable { file, .. }
            | SecretUnopened { file, .. }
            | PlaintextSecretInSpec { file, .. }
            | IncludeCycle { file, .. }
            | EmptyGlob { file, .. }
            | PlaintextSecrets { file, .. }
            | Inventory { file, .. }
            | NotUtf8 { file, .. }
            | TooDeep { file, .. }
            | CommentedOutTooDeep { file, .. } => Some(*file),
            UnreadableSpec { .. } => None,
        }
    }
}
crate::spec_diagnostic!(LowerError);
