//! The one place the chat parses and formats `@[label](dsh-session:…)` mentions (spec §6.3).
//!
//! Host and plugin must agree on one mention syntax, so this module only adapts
//! `host_api::mention` to the chat's error type: the chat reports every failure as a [`PluginError`]
//! with the spec's code, as the plugin's own refusals are reported.

use host_api::abi::PluginError;
use serde_json::{json, Value};

/// A user line with its mentions replaced by `@label`, and the references they named in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLine {
    pub text: String,
    /// `{sessionId, label}` objects, as `prepare` takes them.
    pub references: Vec<Value>,
}

/// Parses the mentions of one user line. A malformed mention is `SESSION_REFERENCE_INVALID_REFERENCE`.
pub fn parse(line: &str) -> Result<ParsedLine, PluginError> {
    let parsed = host_api::mention::parse_mentions(line).map_err(PluginError::from)?;
    Ok(ParsedLine {
        text: parsed.text,
        references: parsed
            .references
            .into_iter()
            .map(|r| json!({"sessionId": r.session_id, "label": r.label}))
            .collect(),
    })
}

/// The mention a user types to cite `session_id`.
pub fn format(session_id: &str, label: Option<&str>) -> String {
    host_api::mention::format_mention(session_id, label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_api::abi::ErrorCode;

    #[test]
    fn a_formatted_mention_parses_back_to_its_reference() {
        let line = format!("see {} please", format("demo-ci-fix", Some("CI [fix]")));
        let parsed = parse(&line).unwrap();
        assert_eq!(parsed.text, "see @CI [fix] please");
        assert_eq!(
            parsed.references,
            vec![json!({"sessionId": "demo-ci-fix", "label": "CI [fix]"})]
        );
    }

    #[test]
    fn a_malformed_mention_is_an_invalid_reference() {
        let err = parse("look at @[x](dsh-session:!!!)").unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionReferenceInvalidReference);
    }

    #[test]
    fn a_line_without_mentions_is_unchanged() {
        let parsed = parse("plain words, dsh-session: and all").unwrap();
        assert_eq!(parsed.text, "plain words, dsh-session: and all");
        assert!(parsed.references.is_empty());
    }
}
