//! The human view of a chat (the third ledger): what a person reads, never the model's JSON.
//!
//! A citation shows as one line, `[cited: <label>, 12 messages, 3.1 KiB, 2 omitted]`, built from the
//! `summary` `prepare` returns; the snapshot itself goes only to the model.

use host_api::abi::wire::reference::CitedSource;
use serde_json::Value;

/// What a person is told about one cited session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    pub label: String,
    pub retained_messages: u64,
    pub bytes: u64,
    pub omitted_messages: u64,
}

impl Citation {
    /// The citations `prepare` reported: its `summary`, or else the references recorded in the context
    /// message's source (without sizes, which only the summary carries).
    pub fn from_prepared(prepared: &Value) -> Vec<Citation> {
        let number = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
        if let Some(Value::Array(summary)) = prepared.get("summary") {
            return summary
                .iter()
                .map(|s| Citation {
                    label: s
                        .get("label")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string(),
                    retained_messages: number(s, "retainedMessages"),
                    bytes: number(s, "bytes"),
                    omitted_messages: number(s, "omittedMessages"),
                })
                .collect();
        }
        let references = prepared
            .pointer("/additionalContext/source/references")
            .and_then(Value::as_array);
        references
            .into_iter()
            .flatten()
            .map(|r| Citation {
                label: r
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                retained_messages: number(r, "retainedMessages"),
                bytes: 0,
                omitted_messages: number(r, "omittedMessages"),
            })
            .collect()
    }

    /// `[cited: <label>, 12 messages, 3.1 KiB, 2 omitted]`, worded as the plugin's own summary is.
    pub fn line(&self) -> String {
        CitedSource {
            session_id: String::new(),
            label: self.label.clone(),
            retained_messages: self.retained_messages,
            omitted_messages: self.omitted_messages,
            omitted_bytes: 0,
            bytes: self.bytes,
        }
        .describe()
    }
}

/// Sizes as a person reads them (`512 B`, `3.1 KiB`, `2.0 MiB`); the one wording host and plugin share.
pub use host_api::abi::wire::reference::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_citation_is_one_readable_line() {
        let c = Citation {
            label: "CI fix".into(),
            retained_messages: 12,
            bytes: 3174,
            omitted_messages: 2,
        };
        assert_eq!(c.line(), "[cited: CI fix, 12 messages, 3.1 KiB, 2 omitted]");
        let c = Citation {
            omitted_messages: 0,
            retained_messages: 1,
            bytes: 900,
            ..c
        };
        assert_eq!(c.line(), "[cited: CI fix, 1 message, 900 B]");
    }

    #[test]
    fn citations_come_from_the_summary_or_else_the_context_source() {
        let prepared = json!({"summary": [{"label": "a", "retainedMessages": 3, "bytes": 10, "omittedMessages": 1}]});
        assert_eq!(
            Citation::from_prepared(&prepared)[0].line(),
            "[cited: a, 3 messages, 10 B, 1 omitted]"
        );
        let prepared = json!({"additionalContext": {"source": {"references": [{"label": "b", "retainedMessages": 2, "omittedMessages": 0}]}}});
        assert_eq!(
            Citation::from_prepared(&prepared)[0].line(),
            "[cited: b, 2 messages, 0 B]"
        );
        assert!(Citation::from_prepared(&json!({"content": []})).is_empty());
    }

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
    }
}
