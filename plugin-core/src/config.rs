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
}

fn default_read_window_max() -> u64 {
    50
}

impl Default for Config {
    fn default() -> Self {
        Self {
            index_path: None,
            sessions_root: None,
            read_window_max: default_read_window_max(),
        }
    }
}

impl Config {
    /// Parses the constructor's JSON text; an empty text is the default config.
    pub fn parse(text: &str) -> Result<Self, PluginError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
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
}
