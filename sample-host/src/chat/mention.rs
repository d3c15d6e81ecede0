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

/// The form every error about a mention shows.
pub const EXPECTED_FORM: &str =
    "a mention is @[label](dsh-session:SESSION-ID) (`candidates` prints each session's, ready to paste)";

/// Parses the mentions of one user line. A malformed mention, a raw id where the URI belongs and an
/// unterminated mention (`@[label](dsh-session:… ` without its `)`) are all
/// `SESSION_REFERENCE_INVALID_REFERENCE`, saying the expected form.
pub fn parse(line: &str) -> Result<ParsedLine, PluginError> {
    let parsed = host_api::mention::parse_mentions(line).map_err(|e| {
        let e = PluginError::from(e);
        PluginError::new(e.code, format!("{}; {EXPECTED_FORM}", e.message))
    })?;
    // What is left of `@[` after the well-formed mentions were replaced is a mention that did not end.
    if let Some(at) = parsed.text.find("@[") {
        let rest = &parsed.text[at..];
        let shown: String = rest.chars().take(40).collect();
        return Err(PluginError::new(
            host_api::abi::ErrorCode::SessionReferenceInvalidReference,
            format!(
                "an unterminated or malformed mention: {shown:?}{}; {EXPECTED_FORM}",
                if rest.chars().count() > 40 { "…" } else { "" }
            ),
        ));
    }
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
    fn an_unterminated_mention_or_a_raw_id_is_an_error_with_the_expected_form() {
        let line = format!(
            "{} and @[other](dsh-session:demo-docs",
            format("demo-ci-fix", Some("CI"))
        );
        let err = parse(&line).unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionReferenceInvalidReference);
        assert!(err.message.contains("@[label](dsh-session:"), "{err}");
        let line = format!("{} and @[other label", format("demo-ci-fix", Some("CI")));
        let err = parse(&line).unwrap_err();
        assert!(
            err.message.contains("unterminated") && err.message.contains("@[label](dsh-session:"),
            "{err}"
        );
        let err = parse("see @[x](335e97f7-1111)").unwrap_err();
        assert!(
            err.message.contains("@[label](dsh-session:SESSION-ID)"),
            "{err}"
        );
    }

    #[test]
    fn a_line_without_mentions_is_unchanged() {
        let parsed = parse("plain words, dsh-session: and all").unwrap();
        assert_eq!(parsed.text, "plain words, dsh-session: and all");
        assert!(parsed.references.is_empty());
    }
}
