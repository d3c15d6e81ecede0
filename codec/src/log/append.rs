//! The one validator for appends: every rule a reader applies to an event, checked before the event is
//! written, so that nothing a writer (or a host ingesting live events) accepts can make the log unreadable
//! later.
//!
//! A reader checks, per event: the envelope (spec §1.4), obsolete vocabulary (§1.7 step 2), legacy shapes
//! (step 3), message shapes (step 4), known types (step 5), the `request/header` rule (step 7), seq
//! contiguity, the line cap, and the surface fold (§2). [`AppendValidator`] runs the same functions in
//! the same order, keyed to the state of the log it guards (its header id, the next seq, the fold so far).
//! Two deliberate differences from reading:
//! - a legacy shape (§1.8) is refused, not upgraded: readers upgrade old logs, writers write current ones;
//! - for an [`Event`] handed to the writer, seq and time keep the writer's own code,
//!   [`LogErrorCode::InvalidWrite`], as they always had (an event given as JSON text to
//!   [`AppendValidator::check_json`] meets the envelope rule first, [`LogErrorCode::InvalidEnvelope`]).
//!
//! A batch is all-or-nothing: [`AppendValidator::check_batch`] leaves the validator untouched and hands
//! back a [`CheckedBatch`]; [`AppendValidator::commit`] applies it once the bytes are durable, so a batch
//! that fails to write leaves the state as it was too.

use serde_json::Value;

use super::bounds::MAX_LINE_BYTES;
use super::error::{clip_for_message, LogError, LogErrorCode};
use super::event::Event;
use super::header::SessionHeader;
use super::legacy::{self, LegacyUpgrader};
use super::validate;
use crate::json::{is_safe_i64, parse_lossy, MAX_SAFE_INTEGER};
use crate::surface::SurfaceFold;

/// The state of one log as far as appends are concerned, and the checks an append must pass.
#[derive(Debug, Clone)]
pub struct AppendValidator {
    session_id: String,
    next_seq: u64,
    fold: SurfaceFold,
    strict_request_headers: bool,
    max_line_bytes: usize,
}

/// A batch that passed every check against a validator's state: what [`AppendValidator::commit`] applies.
#[derive(Debug, Clone)]
#[must_use = "a checked batch changes nothing until it is committed"]
pub struct CheckedBatch {
    /// The next seq of the state the batch was checked against.
    base: u64,
    next_seq: u64,
    fold: SurfaceFold,
}

impl AppendValidator {
    /// A validator for the empty log of the session `header` starts.
    pub fn new(header: &SessionHeader) -> Self {
        Self::with_fold(header, SurfaceFold::new())
    }

    /// A validator for a log whose stored events folded to `fold` (the next seq is `fold.folded()`).
    pub fn with_fold(header: &SessionHeader, fold: SurfaceFold) -> Self {
        Self {
            session_id: header.id.clone(),
            next_seq: fold.folded(),
            fold,
            strict_request_headers: false,
            max_line_bytes: MAX_LINE_BYTES,
        }
    }

    /// A validator for a log holding `events` (in seq order from 0), which must fold.
    pub fn for_events<'a>(
        header: &SessionHeader,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Self, LogError> {
        let fold = SurfaceFold::fold(events).map_err(LogError::from)?;
        Ok(Self::with_fold(header, fold))
    }

    /// Refuse a `request/header` that breaks the config rule of spec §1.7 step 7, as a strict read does.
    /// Off by default, matching the default (lenient) read: DSH's own recorded sessions break that rule.
    pub fn strict_request_headers(mut self, strict: bool) -> Self {
        self.strict_request_headers = strict;
        self
    }

    /// The longest line an event may serialise to: [`MAX_LINE_BYTES`] by default, the default read cap,
    /// so that every default read can read back what was appended.
    pub fn max_line_bytes(mut self, cap: usize) -> Self {
        self.max_line_bytes = cap;
        self
    }

    /// The seq the next appended event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The surface fold of everything committed so far.
    pub fn fold(&self) -> &SurfaceFold {
        &self.fold
    }

    /// Checks a batch against the current state without changing it. The batch must be non-empty, with
    /// seqs continuing from [`AppendValidator::next_seq`], and every event must pass every rule in turn
    /// (each seeing the fold of the events before it in the batch). The error names the rule (its code)
    /// and the seq of the first event that breaks one.
    pub fn check_batch(&self, batch: &[Event]) -> Result<CheckedBatch, LogError> {
        if batch.is_empty() {
            return Err(LogError::new(
                LogErrorCode::InvalidWrite,
                "an append batch must hold at least one event",
            ));
        }
        let mut fold = self.fold.clone();
        for (i, event) in batch.iter().enumerate() {
            let expected = self.next_seq.checked_add(i as u64);
            self.check_event(event, expected, i)?;
            fold.apply(event).map_err(LogError::from)?;
        }
        Ok(CheckedBatch {
            base: self.next_seq,
            next_seq: self.next_seq.saturating_add(batch.len() as u64),
            fold,
        })
    }

    /// Applies a batch [`AppendValidator::check_batch`] passed. It must have been checked against this
    /// state; a batch checked against another state is refused and changes nothing.
    pub fn commit(&mut self, checked: CheckedBatch) -> Result<(), LogError> {
        // Seqs only grow, so the state a batch was checked against is known by its next seq.
        if checked.base != self.next_seq {
            return Err(LogError::new(
                LogErrorCode::InvalidWrite,
                "the batch was checked against another state of the log",
            ));
        }
        self.next_seq = checked.next_seq;
        self.fold = checked.fold;
        Ok(())
    }

    /// Checks and commits a batch in one step: all of it or, on `Err`, nothing.
    pub fn append(&mut self, batch: &[Event]) -> Result<(), LogError> {
        let checked = self.check_batch(batch)?;
        self.commit(checked)
    }

    /// Validates one live event given as envelope JSON text (read as a reader reads a line: lossy UTF-8,
    /// lone surrogates replaced) and, when it passes, commits it and returns it. On `Err` nothing changes.
    pub fn check_json(&mut self, text: &str) -> Result<Event, LogError> {
        if text.len() > self.max_line_bytes {
            return Err(line_cap_error(
                self.next_seq,
                text.len(),
                self.max_line_bytes,
            ));
        }
        let value = parse_lossy(text.as_bytes()).map_err(|e| {
            LogError::new(
                LogErrorCode::InvalidEnvelope,
                format!("the event is not JSON: {e}"),
            )
        })?;
        let event = self.check_value(value)?;
        self.append(std::slice::from_ref(&event))?;
        Ok(event)
    }

    /// The reading pipeline's per-event checks, on the envelope as a JSON value, then the envelope itself.
    fn check_value(&self, value: Value) -> Result<Event, LogError> {
        let seq = value
            .get("seq")
            .and_then(crate::json::safe_uint)
            .unwrap_or(self.next_seq);
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        if !validate::is_plain_known(kind) {
            validate::check_obsolete(&value)?;
            if legacy::concerns(kind) {
                let mut upgraded = value.clone();
                let changed = LegacyUpgrader::new(&self.session_id).upgrade(seq, &mut upgraded)?;
                validate::check_message_shape(&value)?;
                if changed {
                    return Err(LogError::new(
                        LogErrorCode::MalformedLegacy,
                        format!(
                            "{} event in a legacy shape (spec §1.8): readers upgrade it, appends must be written in the current shape",
                            clip_for_message(kind)
                        ),
                    )
                    .at_seq(seq));
                }
            } else {
                validate::check_message_shape(&value)?;
            }
            validate::check_known_type(&value)?;
        }
        Event::from_value(value).map_err(|e| if e.seq.is_some() { e } else { e.at_seq(seq) })
    }

    /// Every rule for the event at batch index `i`, which must carry seq `expected`.
    fn check_event(&self, event: &Event, expected: Option<u64>, i: usize) -> Result<(), LogError> {
        let max = MAX_SAFE_INTEGER.unsigned_abs();
        let expected = expected.filter(|s| *s <= max);
        if Some(event.seq) != expected {
            let expected = expected.map_or_else(
                || "none (past the safe integer range)".into(),
                |s| s.to_string(),
            );
            return Err(LogError::new(
                LogErrorCode::InvalidWrite,
                format!(
                    "event {i} of the batch has seq {}, expected {expected}: seqs continue contiguously from the log",
                    event.seq
                ),
            )
            .at_seq(event.seq));
        }
        if !is_safe_i64(event.time) {
            return Err(LogError::new(
                LogErrorCode::InvalidWrite,
                format!("time {} is not a safe integer", event.time),
            )
            .at_seq(event.seq));
        }
        let line = event.to_json_line();
        if line.len() > self.max_line_bytes {
            return Err(line_cap_error(event.seq, line.len(), self.max_line_bytes));
        }
        let stored = self.check_value(event.to_value())?;
        if self.strict_request_headers {
            validate::check_request_header(&stored)?;
        }
        Ok(())
    }
}

fn line_cap_error(seq: u64, len: usize, cap: usize) -> LogError {
    LogError::new(
        LogErrorCode::LineTooLong,
        format!("the event is {len} bytes as a line, over the line cap of {cap} bytes that readers apply"),
    )
    .at_seq(seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validator() -> AppendValidator {
        AppendValidator::new(&SessionHeader::new("s", 0, None))
    }

    fn user(seq: u64, id: &str) -> Event {
        Event::appended(
            "user/message",
            seq,
            0,
            json!({"id": id, "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}),
        )
    }

    #[test]
    fn a_valid_batch_advances_seq_and_fold() {
        let mut v = validator();
        v.append(&[
            user(0, "m0"),
            Event::new("turn/start", 1, 0, json!({"turn": 1})),
        ])
        .unwrap();
        assert_eq!((v.next_seq(), v.fold().folded()), (2, 2));
    }

    #[test]
    fn each_rule_is_named_by_its_code_and_the_seq() {
        let v = validator();
        let cases = [
            (
                Event::new("no/such-type", 0, 0, json!({})),
                LogErrorCode::UnknownEventType,
            ),
            (
                Event::new("mode/set", 0, 0, json!({})),
                LogErrorCode::ObsoleteVocabulary,
            ),
            (
                Event::appended("user/message", 0, 0, json!({"id": "m", "content": []})),
                LogErrorCode::InvalidMessage,
            ),
            (
                Event::new("turn/end", 0, 0, json!({"turn": 1, "reason": {"kind": 5}})),
                LogErrorCode::MalformedLegacy,
            ),
            (user(1, "m"), LogErrorCode::InvalidWrite),
        ];
        for (event, code) in cases {
            let err = v.check_batch(std::slice::from_ref(&event)).unwrap_err();
            assert_eq!((err.code, err.seq), (code, Some(event.seq)), "{err}");
        }
        let mut bad_op = user(0, "m");
        bad_op.surface_op = Some(json!("sideways"));
        let err = v.check_batch(&[bad_op]).unwrap_err();
        assert_eq!(
            (err.code, err.seq),
            (LogErrorCode::InvalidSurface, Some(0)),
            "{err}"
        );
        let mut min_time = user(0, "m");
        min_time.time = i64::MIN;
        assert_eq!(
            v.check_batch(&[min_time]).unwrap_err().code,
            LogErrorCode::InvalidWrite
        );
    }

    #[test]
    fn fold_rules_apply_within_the_batch() {
        let mut v = validator();
        v.append(&[user(0, "m0")]).unwrap();
        let mut replace = user(1, "m1");
        replace.surface_op = Some(json!({"replace": {"start": 5, "end": 9}}));
        let err = v.check_batch(&[replace]).unwrap_err();
        assert_eq!((err.code, err.seq), (LogErrorCode::InvalidSurface, Some(1)));
    }

    #[test]
    fn a_bad_third_event_refuses_the_whole_batch_and_keeps_the_state() {
        let mut v = validator();
        let before = (v.next_seq(), v.fold().clone());
        let batch = [
            user(0, "m0"),
            Event::new("turn/start", 1, 0, json!({"turn": 1})),
            Event::new("no/such-type", 2, 0, json!({})),
        ];
        let err = v.append(&batch).unwrap_err();
        assert_eq!(
            (err.code, err.seq),
            (LogErrorCode::UnknownEventType, Some(2))
        );
        assert_eq!((v.next_seq(), v.fold().clone()), before);
        v.append(&batch[..2]).unwrap();
        assert_eq!(v.next_seq(), 2);
    }

    #[test]
    fn a_stale_checked_batch_is_refused() {
        let mut v = validator();
        let first = v.check_batch(&[user(0, "m0")]).unwrap();
        let again = first.clone();
        v.commit(first).unwrap();
        assert_eq!(
            v.commit(again).unwrap_err().code,
            LogErrorCode::InvalidWrite
        );
        assert_eq!(v.next_seq(), 1);
    }

    #[test]
    fn check_json_reads_like_a_reader_and_commits_only_good_events() {
        let mut v = validator();
        let text = r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"m0","role":"user","content":[{"type":"text","text":"\uD800"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let event = v.check_json(text).unwrap();
        assert_eq!(event.data["content"][0]["text"], "\u{FFFD}");
        assert_eq!(v.next_seq(), 1);
        for (bad, code) in [
            ("{not json", LogErrorCode::InvalidEnvelope),
            (
                r#"{"type":"user/message","seq":1,"time":0,"data":{"content":[]},"surfaceOp":"append"}"#,
                LogErrorCode::InvalidMessage,
            ),
            (
                r#"{"type":"step/start","seq":1,"time":-9223372036854775808,"data":{}}"#,
                LogErrorCode::InvalidEnvelope,
            ),
            (
                r#"{"type":"step/start","seq":1,"time":0,"data":{},"extra":1}"#,
                LogErrorCode::InvalidEnvelope,
            ),
            (
                r#"{"type":"zzz","seq":1,"time":0,"data":{}}"#,
                LogErrorCode::UnknownEventType,
            ),
            (
                r#"{"type":"step/start","seq":3,"time":0,"data":{}}"#,
                LogErrorCode::InvalidWrite,
            ),
        ] {
            let err = v.check_json(bad).unwrap_err();
            assert_eq!(err.code, code, "{bad}: {err}");
            assert_eq!(v.next_seq(), 1, "{bad}");
        }
    }

    #[test]
    fn lines_over_the_cap_are_refused() {
        let v = validator().max_line_bytes(200);
        let mut big = user(0, "m0");
        big.data["content"][0]["text"] = json!("x".repeat(300));
        let err = v.check_batch(&[big]).unwrap_err();
        assert_eq!((err.code, err.seq), (LogErrorCode::LineTooLong, Some(0)));
    }

    #[test]
    fn request_headers_are_lenient_unless_asked_to_be_strict() {
        let header = Event::new(
            "request/header",
            0,
            0,
            json!({"reason": "initial", "header": {"config": {"model": "fake"}}}),
        );
        let lenient = validator();
        let strict = validator().strict_request_headers(true);
        assert!(lenient.check_batch(std::slice::from_ref(&header)).is_ok());
        let err = strict.check_batch(&[header]).unwrap_err();
        assert_eq!(
            (err.code, err.seq),
            (LogErrorCode::InvalidRequestHeader, Some(0))
        );
    }
}
