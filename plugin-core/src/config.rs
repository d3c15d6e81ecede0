//! The plugin's JSON config, validated at construction (`SESSION_QUERY_INVALID_CONFIG` otherwise).

use std::path::PathBuf;

use host_api::abi::{ErrorCode, PluginError};
use serde::Deserialize;

/// What the host passes to the plugin's constructor. Unknown keys are refused so a typo is not silently
/// ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// The derived SQLite index. Only the plugin opens it, one generation at a time.
    pub index_path: Option<PathBuf>,
    /// Overrides the sessions root the host lends through `HostContext`.
    pub sessions_root: Option<PathBuf>,
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
            sessions_root: None,
            read_window_max: default_read_window_max(),
            max_references: default_max_references(),
            candidate_limit: default_candidate_limit(),
            max_reference_bytes: default_max_reference_bytes(),
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
        let config: Self = serde_json::from_str(text).map_err(|e| {
            PluginError::new(
                ErrorCode::SessionQueryInvalidConfig,
                format!("invalid plugin config: {e}"),
            )
        })?;
        if let Some(path) = &config.index_path {
            if path.as_os_str().is_empty() {
                return Err(PluginError::new(
                    ErrorCode::SessionQueryInvalidConfig,
                    "indexPath is empty",
                ));
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_defaults_and_refuses_unknown_keys() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse(r#"{"indexPath":"/tmp/i.sqlite","readWindowMax":3}"#).unwrap();
        assert_eq!(c.read_window_max, 3);
        let err = Config::parse(r#"{"indexPth":"x"}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryInvalidConfig);
        assert!(err.message.contains("indexPth"));
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
}
