//! Where a session comes from: DSH's own logs, or another harness's logs read read-only (DESIGN.md
//! deviation 8). The source is carried by the session id's namespace (`claude:<uuid>`, `codex:<uuid>`),
//! so host and plugin derive it from the id the same way and no ABI record has to grow a field for it.

use std::fmt;

/// The harness whose log a session was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceKind {
    Dsh,
    Claude,
    Codex,
}

impl SourceKind {
    /// Every source, DSH first.
    pub const ALL: [SourceKind; 3] = [SourceKind::Dsh, SourceKind::Claude, SourceKind::Codex];

    /// The name used in records and plain output: `dsh`, `claude`, `codex`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Dsh => "dsh",
            SourceKind::Claude => "claude",
            SourceKind::Codex => "codex",
        }
    }

    /// The id prefix of an imported source (`claude:`), `None` for DSH ids, which are not namespaced.
    pub fn namespace(self) -> Option<&'static str> {
        match self {
            SourceKind::Dsh => None,
            SourceKind::Claude => Some("claude:"),
            SourceKind::Codex => Some("codex:"),
        }
    }

    /// The source a session id names by its namespace; any id outside both namespaces is a DSH id.
    pub fn of_id(id: &str) -> SourceKind {
        if id.starts_with("claude:") {
            SourceKind::Claude
        } else if id.starts_with("codex:") {
            SourceKind::Codex
        } else {
            SourceKind::Dsh
        }
    }

    /// The namespaced id of a session this source calls `native`.
    pub fn session_id(self, native: &str) -> String {
        match self.namespace() {
            Some(ns) => format!("{ns}{native}"),
            None => native.to_string(),
        }
    }

    /// Parses `dsh` / `claude` / `codex`.
    pub fn parse(name: &str) -> Option<SourceKind> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The event type an importer gives a record that is kept only as log text (structural records and
/// record types it does not know). Its searchable text is `data.text` (see `text::event_text`).
pub const IMPORTED_RECORD: &str = "import/record";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_name_the_source_and_round_trip() {
        assert_eq!(SourceKind::of_id("claude:1234"), SourceKind::Claude);
        assert_eq!(SourceKind::of_id("codex:ab"), SourceKind::Codex);
        assert_eq!(SourceKind::of_id("0b1c-uuid"), SourceKind::Dsh);
        assert_eq!(SourceKind::of_id("claudex:1"), SourceKind::Dsh);
        for s in SourceKind::ALL {
            assert_eq!(SourceKind::of_id(&s.session_id("x")), s);
            assert_eq!(SourceKind::parse(s.as_str()), Some(s));
        }
    }
}
