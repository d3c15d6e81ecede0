//! The resolver's configuration (spec §6.1): `maxReferences` (1…3, default 3), `candidateLimit` (default
//! 50) and `maxReferenceBytes` (default 65,536), each a positive safe integer, else
//! `SESSION_REFERENCE_INVALID_CONFIG`. The keys live in the plugin's config object (`crate::config`).

use dsh_codec::json::safe_uint;
use host_api::abi::PluginError;
use serde_json::Value;

use super::errors::invalid_config;

pub const DEFAULT_MAX_REFERENCES: u64 = 3;
pub const DEFAULT_CANDIDATE_LIMIT: u64 = 50;
pub const DEFAULT_MAX_REFERENCE_BYTES: u64 = 65_536;
/// DSH's upper bound on `maxReferences`.
pub const MAX_REFERENCES_CAP: u64 = 3;

/// The validated limits one resolver works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_references: usize,
    pub candidate_limit: usize,
    pub max_reference_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_references: DEFAULT_MAX_REFERENCES as usize,
            candidate_limit: DEFAULT_CANDIDATE_LIMIT as usize,
            max_reference_bytes: DEFAULT_MAX_REFERENCE_BYTES as usize,
        }
    }
}

impl Limits {
    /// The limits a parsed config names (already validated by [`check_config`]).
    pub fn from_config(config: &crate::config::Config) -> Self {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Self {
            max_references: size(config.max_references),
            candidate_limit: size(config.candidate_limit),
            max_reference_bytes: size(config.max_reference_bytes),
        }
    }
}

/// Checks the three keys of a config object, when present. Run before the config is deserialised, so a
/// bad value is reported with the resolver's code rather than as an unreadable config.
pub fn check_config(config: &Value) -> Result<(), PluginError> {
    for (key, cap) in [
        ("maxReferences", Some(MAX_REFERENCES_CAP)),
        ("candidateLimit", None),
        ("maxReferenceBytes", None),
    ] {
        let Some(value) = config.get(key) else {
            continue;
        };
        let ok = safe_uint(value).filter(|&n| n >= 1 && cap.is_none_or(|cap| n <= cap));
        if ok.is_none() {
            let range = match cap {
                Some(cap) => format!("an integer from 1 to {cap}"),
                None => "a positive safe integer".to_string(),
            };
            return Err(invalid_config(format!(
                "invalid plugin config: {key} must be {range}; got {value}"
            )));
        }
    }
    Ok(())
}

/// Deserialises a count the way JavaScript reads a number (`2.0` is 2); [`check_config`] has already
/// refused anything else with its own code.
pub(crate) fn de_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::Deserialize;
    let value = Value::deserialize(d)?;
    safe_uint(&value).ok_or_else(|| serde::de::Error::custom(format!("{value} is not a count")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_api::abi::ErrorCode;
    use serde_json::json;

    #[test]
    fn accepts_positive_safe_integers_within_range() {
        check_config(&json!({})).unwrap();
        check_config(&json!({"maxReferences": 1, "candidateLimit": 2.0, "maxReferenceBytes": 9007199254740991u64}))
            .unwrap();
    }

    #[test]
    fn refuses_everything_else_with_the_resolver_code() {
        for bad in [
            json!({"maxReferences": 0}),
            json!({"maxReferences": 4}),
            json!({"maxReferences": "3"}),
            json!({"candidateLimit": -1}),
            json!({"candidateLimit": 1.5}),
            json!({"candidateLimit": null}),
            json!({"maxReferenceBytes": 9007199254740992u64}),
        ] {
            let e = check_config(&bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::SessionReferenceInvalidConfig, "{bad}");
            let key = bad.as_object().unwrap().keys().next().unwrap().clone();
            assert!(e.message.contains(&key), "{}", e.message);
        }
    }
}
