//! The filters of `filterSessions` and `filterEvents` (spec §4.2, §4.3, §5): checking them, and testing a
//! session record or an event document against them.
//!
//! A filter list is an AND of clauses; the values inside one clause are OR-ed; an empty values list
//! matches nothing; ranges are inclusive and compared as numbers (a fractional bound works as in
//! JavaScript: `seq >= 1.5` holds from 2). The typed ABI already rules out unknown kinds and values, so
//! what is left to check is the ranges: each bound finite, `from ≤ to`.
//!
//! The `text` clause of `filterEvents` is DSH's `new RegExp(parts.map(escape).join('\\s+'), 'iu')`: a
//! literal, case-insensitive, whitespace-flexible substring test. It is implemented without a regex
//! engine: the needle's words must appear in order, separated in the text by runs of JavaScript
//! whitespace, with characters compared after [`fold_case`].

use dsh_codec::json::{is_js_whitespace, trim_js};
use dsh_codec::log::Event;
use host_api::abi::{
    Availability, ErrorCode, EventFilter, EventScanFilter, PluginError, Range, SessionFilter,
    SessionRecord, Surface,
};

use crate::corpus::LoadedSession;

fn invalid(message: String) -> PluginError {
    PluginError::new(ErrorCode::SessionQueryInvalidFilter, message)
}

/// A range is valid when every present bound is finite and `from ≤ to`.
fn check_range(kind: &str, range: &Range) -> Result<(), PluginError> {
    let (from, to) = (range.from, range.to);
    for (name, bound) in [("from", from), ("to", to)] {
        if let Some(v) = bound {
            if !v.is_finite() {
                return Err(invalid(format!(
                    "{kind} filter: {name} must be a finite number; got {v}"
                )));
            }
        }
    }
    if let (Some(f), Some(t)) = (from, to) {
        if f > t {
            return Err(invalid(format!(
                "{kind} filter: from ({f}) is greater than to ({t})"
            )));
        }
    }
    Ok(())
}

/// Checks session filters before any I/O.
pub(super) fn check_session_filters(filters: &[SessionFilter]) -> Result<(), PluginError> {
    for filter in filters {
        if let SessionFilter::CreatedAt(range) = filter {
            check_range("created-at", range)?;
        }
    }
    Ok(())
}

/// Whether a session record passes every clause.
pub(super) fn session_matches(filters: &[SessionFilter], record: &SessionRecord) -> bool {
    let h = &record.header;
    filters.iter().all(|filter| match filter {
        SessionFilter::Id(values) => values.iter().any(|v| v == &h.id),
        SessionFilter::Cwd(values) => values.iter().any(|v| v == &h.cwd),
        SessionFilter::CreatedAt(range) => range.contains(h.created_at as f64),
        SessionFilter::Parent(values) => values.iter().any(|v| v == &h.parent_session),
        SessionFilter::Availability(values) => values.iter().any(|a| match a {
            Availability::Live => record.live,
            Availability::Persisted => record.persisted,
        }),
    })
}

/// Checks the range clauses of event filters (before the session is loaded).
pub(super) fn check_event_ranges(filters: &[EventScanFilter]) -> Result<(), PluginError> {
    for filter in filters {
        match filter {
            EventScanFilter::Metadata(EventFilter::Seq(range)) => check_range("seq", range)?,
            EventScanFilter::Metadata(EventFilter::Time(range)) => check_range("time", range)?,
            EventScanFilter::Metadata(EventFilter::Type(_) | EventFilter::Surface(_))
            | EventScanFilter::Text(_) => {}
        }
    }
    Ok(())
}

/// Event filters ready to test documents, text clauses compiled.
pub(super) struct EventMatcher<'a> {
    filters: &'a [EventScanFilter],
    needles: Vec<TextNeedle>,
}

impl<'a> EventMatcher<'a> {
    /// Compiles the text clauses; a blank one is `INVALID_FILTER`.
    pub(super) fn new(
        filters: &'a [EventScanFilter],
        session: &LoadedSession,
    ) -> Result<Self, PluginError> {
        let mut needles = Vec::new();
        for filter in filters {
            if let EventScanFilter::Text(text) = filter {
                let needle = TextNeedle::new(text).ok_or_else(|| {
                    invalid(format!(
                        "filterEvents on {}: the text filter is blank",
                        session.describe()
                    ))
                })?;
                needles.push(needle);
            }
        }
        Ok(Self { filters, needles })
    }

    /// Whether a document (an event with its label and non-empty text) passes every clause.
    pub(super) fn matches(&self, event: &Event, surface: Surface, text: &str) -> bool {
        let metadata = self.filters.iter().all(|filter| match filter {
            EventScanFilter::Metadata(EventFilter::Seq(range)) => range.contains(event.seq as f64),
            EventScanFilter::Metadata(EventFilter::Time(range)) => {
                range.contains(event.time as f64)
            }
            EventScanFilter::Metadata(EventFilter::Type(values)) => {
                values.iter().any(|v| v.as_str() == event.kind)
            }
            EventScanFilter::Metadata(EventFilter::Surface(values)) => values.contains(&surface),
            EventScanFilter::Text(_) => true,
        });
        if !metadata || self.needles.is_empty() {
            return metadata;
        }
        let haystack: Vec<char> = text.chars().map(fold_case).collect();
        self.needles.iter().all(|n| n.found_in(&haystack))
    }
}

/// A compiled text clause: its words, case-folded.
pub(super) struct TextNeedle {
    words: Vec<Vec<char>>,
}

impl TextNeedle {
    /// `None` when the text is blank after JavaScript's `trim`.
    pub(super) fn new(text: &str) -> Option<Self> {
        let words: Vec<Vec<char>> = trim_js(text)
            .split(is_js_whitespace)
            .filter(|w| !w.is_empty())
            .map(|w| w.chars().map(fold_case).collect())
            .collect();
        (!words.is_empty()).then_some(Self { words })
    }

    /// Whether the words occur in order, separated by whitespace runs, anywhere in `haystack` (already
    /// case-folded).
    pub(super) fn found_in(&self, haystack: &[char]) -> bool {
        (0..haystack.len()).any(|start| self.matches_at(haystack, start))
    }

    fn matches_at(&self, haystack: &[char], start: usize) -> bool {
        let mut at = start;
        for (i, word) in self.words.iter().enumerate() {
            if i > 0 {
                // `\s+` before a word that starts with non-whitespace can only take the whole run.
                let run = haystack[at.min(haystack.len())..]
                    .iter()
                    .take_while(|c| is_js_whitespace(**c))
                    .count();
                if run == 0 {
                    return false;
                }
                at += run;
            }
            match haystack.get(at..at + word.len()) {
                Some(slice) if slice == word.as_slice() => at += word.len(),
                _ => return false,
            }
        }
        true
    }
}

/// One character's case-insensitive identity: the lower case of its upper case, when each is a single
/// character. This approximates the simple case folding JavaScript's `iu` regexes use: it equates
/// `ς`/`σ`/`Σ`, `ſ`/`s`, `K` (Kelvin)/`k`, `ẞ`/`ß`, and leaves characters whose case mapping expands
/// (`ß` upper-cases to `SS`, `İ` lower-cases to `i̇`) as themselves. Dotless `ı` has no simple folding in
/// Unicode, so it stays itself too rather than becoming `i` through `I`.
pub(super) fn fold_case(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    if c == '\u{0131}' {
        return c;
    }
    let upper = single(c.to_uppercase()).unwrap_or(c);
    single(upper.to_lowercase()).unwrap_or(upper)
}

fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_api::abi::Header;

    fn needle(text: &str) -> TextNeedle {
        TextNeedle::new(text).unwrap()
    }

    fn found(needle_text: &str, haystack: &str) -> bool {
        let hay: Vec<char> = haystack.chars().map(fold_case).collect();
        needle(needle_text).found_in(&hay)
    }

    #[test]
    fn text_scan_is_literal_case_insensitive_and_whitespace_flexible() {
        assert!(found("stack trace", "the Stack\n\t Trace was long"));
        assert!(
            found("  STACK  ", "a stacktrace"),
            "a substring, not a token match"
        );
        assert!(
            found("a.b*c", "x A.B*C y"),
            "regex metacharacters are literal"
        );
        assert!(!found("a.b", "axb"));
        assert!(
            !found("stack trace", "stacktrace"),
            "a space in the needle needs whitespace in the text"
        );
        assert!(!found("stack trace", "stack-trace"));
        assert!(
            found("stack trace", "stack\u{3000}trace"),
            "JavaScript whitespace counts"
        );
        assert!(
            !found("stack trace", "stack\u{0085}trace"),
            "U+0085 is not JavaScript whitespace"
        );
        assert!(found("ΣΟΦΟΣ", "σοφος"), "final sigma folds with sigma");
        assert!(found("straße", "STRAẞE"));
        assert!(found("café", "CAFÉ"));
        assert!(!found("cafe", "café"), "no diacritic folding in a regex");
        assert!(!found("i", "ı"));
        assert!(
            found("aab", "aaab"),
            "a failed start does not skip the next one"
        );
        assert!(!found("ab", "a"));
    }

    #[test]
    fn blank_needles_are_refused() {
        assert!(TextNeedle::new("").is_none());
        assert!(TextNeedle::new(" \u{FEFF}\u{3000}\n").is_none());
        assert_eq!(needle("  a   b ").words.len(), 2);
    }

    fn range(from: Option<f64>, to: Option<f64>) -> Range {
        Range { from, to }
    }

    #[test]
    fn ranges_must_be_finite_and_ordered() {
        assert!(check_range("seq", &range(None, None)).is_ok());
        assert!(check_range("seq", &range(Some(1.0), Some(1.0))).is_ok());
        for bad in [
            range(Some(f64::NAN), None),
            range(None, Some(f64::INFINITY)),
            range(Some(2.0), Some(1.0)),
        ] {
            assert_eq!(
                check_range("seq", &bad).unwrap_err().code,
                ErrorCode::SessionQueryInvalidFilter
            );
        }
        assert!(range(Some(1.5), Some(2.0)).contains(2.0));
        assert!(!range(Some(1.5), None).contains(1.0));
    }

    fn rec(
        id: &str,
        cwd: Option<&str>,
        parent: Option<&str>,
        created_at: i64,
        live: bool,
        persisted: bool,
    ) -> SessionRecord {
        SessionRecord {
            header: Header {
                version: 0,
                id: id.into(),
                created_at,
                cwd: cwd.map(String::from),
                parent_session: parent.map(String::from),
                seed_length: None,
                origin: None,
                delegation_depth: Some(0),
                agent_preset: None,
            },
            live,
            persisted,
        }
    }

    #[test]
    fn session_clauses_and_or() {
        let a = rec("a", Some("/w"), None, 10, true, false);
        let b = rec("b", None, Some("a"), 20, false, true);
        let m = |filters: Vec<SessionFilter>, r: &SessionRecord| session_matches(&filters, r);
        assert!(m(vec![], &a));
        assert!(
            !m(vec![SessionFilter::Id(Vec::new())], &a),
            "an empty list matches nothing"
        );
        assert!(m(vec![SessionFilter::Id(vec!["x".into(), "a".into()])], &a));
        assert!(m(vec![SessionFilter::Cwd(vec![None])], &b));
        assert!(!m(vec![SessionFilter::Cwd(vec![None])], &a));
        assert!(m(vec![SessionFilter::Parent(vec![Some("a".into())])], &b));
        assert!(m(vec![SessionFilter::Parent(vec![None])], &a));
        assert!(m(
            vec![SessionFilter::Availability(vec![Availability::Live])],
            &a
        ));
        assert!(!m(
            vec![SessionFilter::Availability(vec![Availability::Live])],
            &b
        ));
        assert!(m(
            vec![SessionFilter::Availability(vec![
                Availability::Live,
                Availability::Persisted
            ])],
            &b
        ));
        let created = SessionFilter::CreatedAt(range(Some(15.0), None));
        assert!(!m(vec![created.clone()], &a) && m(vec![created.clone()], &b));
        assert!(
            !m(vec![created, SessionFilter::Id(vec!["a".into()])], &b),
            "clauses are AND-ed"
        );
    }
}
