//! The plugin's JSON config, validated at construction (`SESSION_QUERY_INVALID_CONFIG` otherwise).

use std::path::PathBuf;

use host_api::abi::{ErrorCode, PluginError};
use serde::Deserialize;

/// What the host passes to the plugin's constructor. The document is open: a key this build does not
/// know (one a newer host added, or a typo) is ignored, never refused, and listed in `diagnostics`
/// (`unknownConfigKeys`) and the host's log, so a typo is still seen.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The derived SQLite index. Only the plugin opens it, one generation at a time.
    #[serde(default, deserialize_with = "de_path")]
    pub index_path: Option<PathBuf>,
    /// The index as a location: a `postgresql://` URL (a team's shared index) or a path (the embedded
    /// SQLite index, as `indexPath`). After parsing it holds only a URL; a path moved to `index_path`.
    #[serde(default)]
    pub index: Option<String>,
    /// The team collection this host publishes into (with a URL `index`); default `<user>@<host>`.
    #[serde(default)]
    pub collection: Option<String>,
    /// Overrides the sessions root the host lends through `HostContext` (whose string cannot hold
    /// a name that is not UTF-8; here it can: `{"bytes": [..]}`).
    #[serde(default, deserialize_with = "de_path")]
    pub sessions_root: Option<PathBuf>,
    /// Claude Code's `projects` folder, read read-only beside the sessions root. No default here: the
    /// host decides whether `~/.claude/projects` is read.
    #[serde(default, deserialize_with = "de_path")]
    pub claude_projects: Option<PathBuf>,
    /// Codex's home folder (`sessions/`, `archived_sessions/`), read read-only. No default here.
    #[serde(default, deserialize_with = "de_path")]
    pub codex_home: Option<PathBuf>,
    /// `readEvent`'s largest `before`/`after` (spec §4.9 `readWindowMax`).
    #[serde(default = "default_read_window_max")]
    pub read_window_max: u64,
    /// Most distinct sessions one citation may name (spec §6.1 `maxReferences`, 1…3).
    #[serde(
        default = "default_max_references",
        deserialize_with = "crate::reference::de_count"
    )]
    pub max_references: u64,
    /// Candidates listed when a request names no limit (spec §6.1 `candidateLimit`).
    #[serde(
        default = "default_candidate_limit",
        deserialize_with = "crate::reference::de_count"
    )]
    pub candidate_limit: u64,
    /// Byte budget of each cited session's snapshot (spec §6.1 `maxReferenceBytes`).
    #[serde(
        default = "default_max_reference_bytes",
        deserialize_with = "crate::reference::de_count"
    )]
    pub max_reference_bytes: u64,
    /// Search page size when a request names none (spec §4.9 `defaultLimit`).
    #[serde(default = "default_default_limit")]
    pub default_limit: u64,
    /// Largest search page a request may ask for (spec §4.9 `maxLimit`).
    #[serde(default = "default_max_limit")]
    pub max_limit: u64,
    /// Snippet length in code points (spec §4.5 `snippetChars`).
    #[serde(default = "default_snippet_chars")]
    pub snippet_chars: u64,
    /// When the search index opens (spec §4.9 `openAt`).
    #[serde(default)]
    pub open_at: OpenAt,
    /// Whether the host lives long (a chat, a watcher, an embedding host): the sessions root is then
    /// watched, and swept by `stat` now and then, so a search looks only at what changed. `false` for
    /// a process that answers once and exits: no watch is set up, and each refresh compares the root
    /// against the index by `stat` alone.
    #[serde(default = "default_long_lived")]
    pub long_lived: bool,
    /// The keys of the document this build does not know, as paths (`a.b`), in document order.
    #[serde(skip)]
    pub unknown_keys: Vec<String>,
}

/// A path key: a string, or `{"bytes": [..]}` for a path that is not UTF-8 (null: none).
fn de_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    if value.is_null() {
        return Ok(None);
    }
    host_api::abi::config::path_from_value(&value)
        .map(Some)
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "a path must be a string or {{\"bytes\": [..]}}, not {value}"
            ))
        })
}

fn default_long_lived() -> bool {
    true
}

/// When the search index is opened (spec §4.9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenAt {
    /// While the instance is built; a failure fails the build.
    #[default]
    Startup,
    /// On the first search; a failure is remembered and every later search reports it.
    FirstSearch,
    /// Never: both searches answer `SESSION_QUERY_SEARCH_DISABLED`; exact reads keep working.
    Never,
}

/// The largest limit a JS caller could express and add one to (spec §4.2: `2^53 − 2`).
pub const LIMIT_CEILING: u64 = (1 << 53) - 2;

fn default_default_limit() -> u64 {
    20
}

fn default_max_limit() -> u64 {
    100
}

fn default_snippet_chars() -> u64 {
    240
}

fn default_read_window_max() -> u64 {
    50
}

fn default_max_references() -> u64 {
    crate::reference::DEFAULT_MAX_REFERENCES
}

fn default_candidate_limit() -> u64 {
    crate::reference::DEFAULT_CANDIDATE_LIMIT
}

fn default_max_reference_bytes() -> u64 {
    crate::reference::DEFAULT_MAX_REFERENCE_BYTES
}

impl Default for Config {
    fn default() -> Self {
        Self {
            index_path: None,
            index: None,
            collection: None,
            sessions_root: None,
            claude_projects: None,
            codex_home: None,
            read_window_max: default_read_window_max(),
            max_references: default_max_references(),
            candidate_limit: default_candidate_limit(),
            max_reference_bytes: default_max_reference_bytes(),
            default_limit: default_default_limit(),
            max_limit: default_max_limit(),
            snippet_chars: default_snippet_chars(),
            open_at: OpenAt::default(),
            long_lived: default_long_lived(),
            unknown_keys: Vec::new(),
        }
    }
}

impl Config {
    /// Parses the constructor's JSON text; an empty text is the default config.
    pub fn parse(text: &str) -> Result<Self, PluginError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        // The citation keys are checked first so that a bad one gets the resolver's own error code.
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            crate::reference::check_config(&value)?;
        }
        let mut unknown = Vec::new();
        let mut config: Self =
            serde_ignored::deserialize(&mut serde_json::Deserializer::from_str(text), |path| {
                unknown.push(path.to_string())
            })
            .map_err(|e| {
                PluginError::new(
                    ErrorCode::SessionQueryInvalidConfig,
                    format!("invalid plugin config: {e}"),
                )
            })?;
        config.unknown_keys = unknown;
        for (name, path) in [
            ("indexPath", &config.index_path),
            ("claudeProjects", &config.claude_projects),
            ("codexHome", &config.codex_home),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err(PluginError::new(
                    ErrorCode::SessionQueryInvalidConfig,
                    format!("{name} is empty"),
                ));
            }
        }
        config.resolve_index()?;
        config.check_search_limits()?;
        Ok(config)
    }

    /// `index`: a URL stays, a path becomes `index_path`; both keys at once, or an empty one, is refused.
    fn resolve_index(&mut self) -> Result<(), PluginError> {
        let invalid = |what: &str| PluginError::new(ErrorCode::SessionQueryInvalidConfig, what);
        if self
            .collection
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(invalid("collection is empty"));
        }
        let Some(index) = self.index.take() else {
            return Ok(());
        };
        if index.is_empty() {
            return Err(invalid("index is empty"));
        }
        if self.index_path.is_some() {
            return Err(invalid(
                "index and indexPath both name the index: give one of them",
            ));
        }
        if crate::backend::postgres::is_url(&index) {
            self.index = Some(index);
        } else {
            self.index_path = Some(PathBuf::from(index));
        }
        Ok(())
    }

    /// The search keys' ranges (spec §4.9): both limits in `1..=2^53−2`, `defaultLimit ≤ maxLimit`,
    /// `snippetChars ≥ 1`.
    fn check_search_limits(&self) -> Result<(), PluginError> {
        let invalid = |what: String| PluginError::new(ErrorCode::SessionQueryInvalidConfig, what);
        for (name, value) in [
            ("defaultLimit", self.default_limit),
            ("maxLimit", self.max_limit),
        ] {
            if !(1..=LIMIT_CEILING).contains(&value) {
                return Err(invalid(format!(
                    "{name} is {value}; it must be an integer from 1 to {LIMIT_CEILING}"
                )));
            }
        }
        if self.default_limit > self.max_limit {
            return Err(invalid(format!(
                "defaultLimit ({}) is larger than maxLimit ({})",
                self.default_limit, self.max_limit
            )));
        }
        if self.snippet_chars == 0 {
            return Err(invalid("snippetChars is 0; it must be at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_a_server_url_or_a_path_never_both_keys() {
        let c =
            Config::parse(r#"{"index":"postgresql://u@/db?host=/s","collection":"a@b"}"#).unwrap();
        assert_eq!(c.index.as_deref(), Some("postgresql://u@/db?host=/s"));
        assert_eq!((c.index_path, c.collection.as_deref()), (None, Some("a@b")));
        let c = Config::parse(r#"{"index":"/tmp/i.sqlite"}"#).unwrap();
        assert_eq!(
            (c.index, c.index_path),
            (None, Some(PathBuf::from("/tmp/i.sqlite")))
        );
        for bad in [
            r#"{"index":"postgresql://x","indexPath":"/tmp/i.sqlite"}"#,
            r#"{"index":""}"#,
            r#"{"index":"postgresql://x","collection":" "}"#,
        ] {
            assert_eq!(
                Config::parse(bad).unwrap_err().code,
                ErrorCode::SessionQueryInvalidConfig,
                "{bad}"
            );
        }
    }

    #[test]
    fn parses_defaults_and_keeps_unknown_keys_as_a_report_not_a_refusal() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse(r#"{"indexPath":"/tmp/i.sqlite","readWindowMax":3}"#).unwrap();
        assert_eq!(c.read_window_max, 3);
        assert!(c.unknown_keys.is_empty());
        let c = Config::parse(r#"{"indexPth":"x","fromANewerHost":{"deep":1},"readWindowMax":4}"#)
            .unwrap();
        assert_eq!(c.unknown_keys, ["indexPth", "fromANewerHost"]);
        assert_eq!((c.index_path, c.read_window_max), (None, 4));
        assert_eq!(
            Config::parse(r#"{"readWindowMax":-1}"#).unwrap_err().code,
            ErrorCode::SessionQueryInvalidConfig
        );
        assert_eq!(
            Config::parse(r#"{"indexPath":""}"#).unwrap_err().code,
            ErrorCode::SessionQueryInvalidConfig
        );
    }

    #[test]
    fn source_folders_are_optional_and_never_empty() {
        let c =
            Config::parse(r#"{"claudeProjects":"/h/.claude/projects","codexHome":"/h/.codex"}"#)
                .unwrap();
        assert_eq!(
            c.claude_projects,
            Some(PathBuf::from("/h/.claude/projects"))
        );
        assert_eq!(c.codex_home, Some(PathBuf::from("/h/.codex")));
        assert_eq!(Config::parse("{}").unwrap().claude_projects, None);
        let c =
            Config::parse(r#"{"sessionsRoot":{"bytes":[47,115,255]},"indexPath":null}"#).unwrap();
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(c.sessions_root.unwrap().as_os_str().as_bytes(), b"/s\xff");
        assert_eq!(c.index_path, None);
        assert_eq!(
            Config::parse(r#"{"sessionsRoot":7}"#).unwrap_err().code,
            ErrorCode::SessionQueryInvalidConfig
        );
        for bad in [r#"{"claudeProjects":""}"#, r#"{"codexHome":""}"#] {
            let err = Config::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::SessionQueryInvalidConfig, "{bad}");
        }
    }

    #[test]
    fn citation_limits_default_and_refuse_with_the_resolver_code() {
        let c = Config::parse("{}").unwrap();
        assert_eq!(
            (c.max_references, c.candidate_limit, c.max_reference_bytes),
            (3, 50, 65_536)
        );
        let c = Config::parse(r#"{"maxReferences":1,"candidateLimit":7,"maxReferenceBytes":2.0}"#)
            .unwrap();
        assert_eq!(
            (c.max_references, c.candidate_limit, c.max_reference_bytes),
            (1, 7, 2)
        );
        for bad in [
            r#"{"maxReferences":4}"#,
            r#"{"candidateLimit":0}"#,
            r#"{"maxReferenceBytes":-5}"#,
            r#"{"maxReferenceBytes":"big"}"#,
        ] {
            assert_eq!(
                Config::parse(bad).unwrap_err().code,
                ErrorCode::SessionReferenceInvalidConfig,
                "{bad}"
            );
        }
    }

    #[test]
    fn search_keys_have_spec_defaults_and_ranges() {
        let c = Config::default();
        assert_eq!(
            (c.default_limit, c.max_limit, c.snippet_chars),
            (20, 100, 240)
        );
        assert_eq!(c.open_at, OpenAt::Startup);
        assert!(
            c.long_lived,
            "an embedding host lives long unless it says otherwise"
        );
        assert!(!Config::parse(r#"{"longLived":false}"#).unwrap().long_lived);
        assert_eq!(
            Config::parse(r#"{"longLived":"no"}"#).unwrap_err().code,
            ErrorCode::SessionQueryInvalidConfig
        );
        let c = Config::parse(
            r#"{"defaultLimit":5,"maxLimit":5,"snippetChars":1,"openAt":"first-search"}"#,
        )
        .unwrap();
        assert_eq!((c.default_limit, c.max_limit, c.snippet_chars), (5, 5, 1));
        assert_eq!(c.open_at, OpenAt::FirstSearch);
        assert_eq!(
            Config::parse(r#"{"openAt":"never"}"#).unwrap().open_at,
            OpenAt::Never
        );
        for bad in [
            r#"{"defaultLimit":0}"#,
            r#"{"maxLimit":0}"#,
            r#"{"maxLimit":9007199254740992}"#,
            r#"{"defaultLimit":30,"maxLimit":20}"#,
            r#"{"snippetChars":0}"#,
            r#"{"snippetChars":1.5}"#,
            r#"{"openAt":"later"}"#,
        ] {
            let err = Config::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::SessionQueryInvalidConfig, "{bad}");
        }
        let err = Config::parse(r#"{"defaultLimit":30,"maxLimit":20}"#).unwrap_err();
        assert!(err.message.contains("defaultLimit (30)"), "{}", err.message);
    }
}
