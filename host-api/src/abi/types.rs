//! The records of the exact reads (spec §5) and what they share with search: the JSON documents that
//! cross the boundary.
//!
//! Records never cross as `#[repr(C)]` structs: a struct's layout cannot grow without breaking every
//! plugin built before, so each call carries a JSON document in the spec's own shape (camelCase keys).
//! A later minor may append fields; a reader ignores fields it does not know and gives a missing field
//! its documented default (`#[serde(default)]`). Since they only ever cross as JSON text, they hold plain
//! `String`/`Vec`/`Option`: abi_stable's types are for what crosses as a struct (the vtables, errors).
//!
//! Field names follow the spec's camelCase names in snake_case. Event envelopes and message contents are
//! arbitrary JSON and cross as JSON text (a `String` embedded as it is); everything with a fixed shape is
//! typed. The filter unions and [`Range`] are shared with search ([`super::wire::search`]): exact reads
//! and search validate the same clauses into the same types.

use serde::{Deserialize, Serialize};

use dsh_codec::log::SessionHeader;
use dsh_codec::surface::Label;

/// A session header (spec §1.3 `SessionHeader`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub version: i64,
    pub id: String,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_depth: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
}

/// `Header` is the codec's `SessionHeader` field for field; it stays a type of its own so that a codec
/// change never moves the contract's wire shape. One field list serves both directions.
macro_rules! copy_header {
    ($h:expr => $to:ident) => {
        copy_header!($h => $to, clone)
    };
    // `$take` is `clone` for a borrowed header, `into` for one given up (its strings moved, not copied).
    ($h:expr => $to:ident, $take:ident) => {{
        let h = $h;
        $to {
            version: h.version,
            id: h.id.$take(),
            created_at: h.created_at,
            cwd: h.cwd.$take(),
            parent_session: h.parent_session.$take(),
            seed_length: h.seed_length,
            origin: h.origin.$take(),
            delegation_depth: h.delegation_depth,
            agent_preset: h.agent_preset.$take(),
        }
    }};
}

impl From<SessionHeader> for Header {
    fn from(h: SessionHeader) -> Self {
        copy_header!(h => Header, into)
    }
}

impl From<&SessionHeader> for Header {
    fn from(h: &SessionHeader) -> Self {
        copy_header!(h => Header)
    }
}

impl From<&Header> for SessionHeader {
    fn from(h: &Header) -> Self {
        copy_header!(h => SessionHeader)
    }
}

/// The three-state label of an event (spec §2.2), decided only by `dsh_codec::surface`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Surface {
    Current,
    Shadowed,
    LogOnly,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        Label::from(self).as_str()
    }
}

impl From<Label> for Surface {
    fn from(l: Label) -> Self {
        match l {
            Label::Current => Self::Current,
            Label::Shadowed => Self::Shadowed,
            Label::LogOnly => Self::LogOnly,
        }
    }
}

impl From<Surface> for Label {
    fn from(s: Surface) -> Self {
        match s {
            Surface::Current => Self::Current,
            Surface::Shadowed => Self::Shadowed,
            Surface::LogOnly => Self::LogOnly,
        }
    }
}

/// Where a session is available (spec §4.1 `availability`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Availability {
    Live,
    Persisted,
}

/// `SessionRecord`: a session in the merged corpus and where it came from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub header: Header,
    pub live: bool,
    pub persisted: bool,
}

/// `SessionEventRecord`: one raw event's metadata and label.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    pub session_id: String,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub time: i64,
    pub surface: Surface,
}

/// `SessionEventSearchDocument`: an event that yields searchable text (spec §3).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventDocument {
    pub session_id: String,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub time: i64,
    pub surface: Surface,
    pub text: String,
}

/// An inclusive numeric range; either end may be open. Bounds are numbers as in the spec (fractional
/// bounds are allowed: `seq >= 1.5` holds from 2); NaN and infinities are `INVALID_FILTER`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Range {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<f64>,
}

impl Range {
    /// Whether `value` lies within the bounds, compared as numbers (as SQLite and JavaScript do).
    pub fn contains(&self, value: f64) -> bool {
        self.from.is_none_or(|f| value >= f) && self.to.is_none_or(|t| value <= t)
    }
}

/// `SessionResultFilter` (spec §4.1), on the wire `{"kind":"id","values":[…]}`,
/// `{"kind":"created-at","from":…,"to":…}`, …: what `filterSessions` and search both hold once a
/// request is read.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(into = "RawFilter", try_from = "RawFilter")]
pub enum SessionFilter {
    Id(Vec<String>),
    /// `None` matches a session without cwd.
    Cwd(Vec<Option<String>>),
    CreatedAt(Range),
    /// `None` matches a root session.
    Parent(Vec<Option<String>>),
    Availability(Vec<Availability>),
}

/// `SessionEventMetadataFilter` (spec §4.1): the event clauses of search and of `filterEvents`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(into = "RawFilter", try_from = "RawFilter")]
pub enum EventFilter {
    Seq(Range),
    Time(Range),
    Type(Vec<String>),
    Surface(Vec<Surface>),
}

/// A clause of `filterEvents` (spec §5): a metadata clause, or the scan-only `text` clause that search
/// does not have (kept out of [`EventFilter`] so that search cannot be handed one).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(into = "RawFilter", try_from = "RawFilter")]
pub enum EventScanFilter {
    Metadata(EventFilter),
    /// Literal, case-insensitive, whitespace-flexible substring.
    Text(String),
}

impl From<EventFilter> for EventScanFilter {
    fn from(f: EventFilter) -> Self {
        Self::Metadata(f)
    }
}

/// `readSession`: the header and every event (for a persisted session: as inspected, closers included).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvents {
    pub session: Header,
    /// Event envelopes as JSON text, in seq order (objects on the wire).
    #[serde(with = "json_text::vec")]
    pub events: Vec<String>,
}

/// `readSurface`: the current surface in model order.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceSnapshot {
    pub session: Header,
    /// Seq of the last raw event observed; `None` for an empty log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_through_seq: Option<u64>,
    /// Event envelopes of the current surface nodes, JSON text, in surface order (objects on the wire).
    #[serde(with = "json_text::vec")]
    pub events: Vec<String>,
}

/// `readEvent` request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReadEventRequest {
    pub session_id: String,
    /// Signed so that a negative seq reaches the plugin and gets `EVENT_NOT_FOUND`.
    pub seq: i64,
    pub before: i64,
    pub after: i64,
}

/// `readEvent` response: the target and a raw window around it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventWindow {
    pub session: Header,
    #[serde(with = "json_text::one")]
    pub target: String,
    #[serde(with = "json_text::vec")]
    pub events: Vec<String>,
    pub start_seq: u64,
    pub end_seq: u64,
}

/// One descendant in a lineage, flattened in pre-order (children after their parent, siblings by
/// `createdAt` then id). `parent_id` names the node it hangs under; `depth` is 1 for direct children.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descendant {
    pub session: SessionRecord,
    pub parent_id: String,
    pub depth: u32,
}

/// `traceSession`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SessionLineage {
    pub target: SessionRecord,
    /// Immediate parent first.
    pub ancestors: Vec<SessionRecord>,
    pub descendants: Vec<Descendant>,
    pub complete: bool,
    /// Present when `complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<SessionRecord>,
    /// Present when not `complete`: the first parent id missing from the corpus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved_parent_id: Option<String>,
}

/// `traceEvent`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventTrace {
    pub session: Header,
    pub target: EventRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<u64>,
    pub replacement_chain: Vec<u64>,
    pub replaced_event_seqs: Vec<u64>,
    pub source_event_seqs: Vec<u64>,
    pub derived_event_seqs: Vec<u64>,
}

/// A folded `session/title` (spec §7.1).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Title {
    pub title: String,
    pub message_seqs: Vec<u64>,
    /// The title's `source` object as JSON text (an object on the wire).
    #[serde(with = "json_text::one")]
    pub source: String,
    pub event_seq: u64,
    pub updated_at: i64,
}

/// One entry of `readTitleSnapshots`: fulfilled with the header and title (if any), or rejected.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TitleSnapshot {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Header>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<Title>,
    /// Present when this id was rejected (not found, corrupt, conflict, fold error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<super::PluginError>,
}

/// A session or log the corpus could not read; it is left out and everything else keeps working
/// (DESIGN.md deviation 2).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CorpusProblem {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The log codec's code, e.g. `LOG_SEQ_GAP`.
    pub code: String,
    pub message: String,
}

/// The wire form of both filter unions: one object with a `kind` and that kind's fields. Open like
/// every record: a field this build does not know is ignored (the plugin reports it in diagnostics).
#[derive(Serialize, Deserialize)]
struct RawFilter {
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    values: Option<Vec<Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

impl RawFilter {
    fn list(kind: &str, values: impl IntoIterator<Item = Option<String>>) -> Self {
        Self {
            kind: kind.into(),
            values: Some(values.into_iter().collect()),
            from: None,
            to: None,
            text: None,
        }
    }

    fn strings<'a>(kind: &str, values: impl IntoIterator<Item = &'a str>) -> Self {
        Self::list(kind, values.into_iter().map(|v| Some(v.to_string())))
    }

    fn range(kind: &str, r: Range) -> Self {
        Self {
            kind: kind.into(),
            values: None,
            from: r.from,
            to: r.to,
            text: None,
        }
    }

    fn range_of(&self) -> Result<Range, String> {
        if self.values.is_some() || self.text.is_some() {
            return Err(format!("a {:?} filter takes only from/to", self.kind));
        }
        Ok(Range {
            from: self.from,
            to: self.to,
        })
    }

    /// The values of a list clause; `nullable` says whether `null` entries are allowed.
    fn nullable(&self) -> Result<Vec<Option<String>>, String> {
        if self.from.is_some() || self.to.is_some() || self.text.is_some() {
            return Err(format!("a {:?} filter takes only values", self.kind));
        }
        self.values
            .clone()
            .ok_or_else(|| format!("a {:?} filter needs a values list", self.kind))
    }

    fn strings_of(&self) -> Result<Vec<String>, String> {
        self.nullable()?
            .into_iter()
            .map(|v| v.ok_or_else(|| format!("{:?} filter values must be strings", self.kind)))
            .collect()
    }

    /// A list clause whose values are names `parse` knows.
    fn names_of<T>(&self, parse: impl Fn(&str) -> Option<T>, what: &str) -> Result<Vec<T>, String> {
        self.strings_of()?
            .iter()
            .map(|v| parse(v).ok_or_else(|| format!("unknown {what} {v:?}")))
            .collect()
    }
}

impl Availability {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Persisted => "persisted",
        }
    }

    /// Exact spellings only, as on the wire.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "live" => Some(Self::Live),
            "persisted" => Some(Self::Persisted),
            _ => None,
        }
    }
}

impl Surface {
    /// Exact spellings only, as on the wire.
    pub fn parse(name: &str) -> Option<Self> {
        name.parse::<Label>().ok().map(Self::from)
    }
}

impl From<SessionFilter> for RawFilter {
    fn from(f: SessionFilter) -> Self {
        match f {
            SessionFilter::Id(v) => RawFilter::list("id", v.into_iter().map(Some)),
            SessionFilter::Cwd(v) => RawFilter::list("cwd", v),
            SessionFilter::CreatedAt(r) => RawFilter::range("created-at", r),
            SessionFilter::Parent(v) => RawFilter::list("parent", v),
            SessionFilter::Availability(v) => {
                RawFilter::strings("availability", v.iter().map(|a| a.as_str()))
            }
        }
    }
}

impl TryFrom<RawFilter> for SessionFilter {
    type Error = String;

    fn try_from(raw: RawFilter) -> Result<Self, String> {
        Ok(match raw.kind.as_str() {
            "id" => SessionFilter::Id(raw.strings_of()?),
            "cwd" => SessionFilter::Cwd(raw.nullable()?),
            "created-at" => SessionFilter::CreatedAt(raw.range_of()?),
            "parent" => SessionFilter::Parent(raw.nullable()?),
            "availability" => {
                SessionFilter::Availability(raw.names_of(Availability::parse, "availability")?)
            }
            other => return Err(format!("unknown session filter kind {other:?}")),
        })
    }
}

impl From<EventFilter> for RawFilter {
    fn from(f: EventFilter) -> Self {
        match f {
            EventFilter::Seq(r) => RawFilter::range("seq", r),
            EventFilter::Time(r) => RawFilter::range("time", r),
            EventFilter::Type(v) => RawFilter::list("type", v.into_iter().map(Some)),
            EventFilter::Surface(v) => RawFilter::strings("surface", v.iter().map(|s| s.as_str())),
        }
    }
}

impl TryFrom<RawFilter> for EventFilter {
    type Error = String;

    fn try_from(raw: RawFilter) -> Result<Self, String> {
        Ok(match raw.kind.as_str() {
            "seq" => EventFilter::Seq(raw.range_of()?),
            "time" => EventFilter::Time(raw.range_of()?),
            "type" => EventFilter::Type(raw.strings_of()?),
            "surface" => EventFilter::Surface(raw.names_of(Surface::parse, "surface label")?),
            other => return Err(format!("unknown event filter kind {other:?}")),
        })
    }
}

impl From<EventScanFilter> for RawFilter {
    fn from(f: EventScanFilter) -> Self {
        match f {
            EventScanFilter::Metadata(f) => f.into(),
            EventScanFilter::Text(t) => RawFilter {
                kind: "text".into(),
                values: None,
                from: None,
                to: None,
                text: Some(t),
            },
        }
    }
}

impl TryFrom<RawFilter> for EventScanFilter {
    type Error = String;

    fn try_from(raw: RawFilter) -> Result<Self, String> {
        if raw.kind != "text" {
            return EventFilter::try_from(raw).map(Self::Metadata);
        }
        raw.text
            .map(Self::Text)
            .ok_or_else(|| "a \"text\" filter needs a text string".into())
    }
}

/// Event envelopes are JSON text inside the plugin and the host, and JSON objects on the wire: embedded
/// as they are (no re-encoding as strings, no re-parsing into a tree).
mod json_text {
    use serde_json::value::RawValue;

    pub mod one {
        use super::*;
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        pub fn serialize<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
            let raw = RawValue::from_string(text.to_string()).map_err(serde::ser::Error::custom)?;
            raw.serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
            let raw = Box::<RawValue>::deserialize(d)?;
            Ok(raw.get().to_string())
        }
    }

    pub mod vec {
        use super::*;
        use serde::ser::SerializeSeq;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(texts: &[String], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(texts.len()))?;
            for text in texts {
                let raw = RawValue::from_string(text.clone()).map_err(serde::ser::Error::custom)?;
                seq.serialize_element(&raw)?;
            }
            seq.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
            let raws = Vec::<Box<RawValue>>::deserialize(d)?;
            Ok(raws.iter().map(|r| r.get().to_string()).collect())
        }
    }
}

/// A live session as the host holds it (`HostContext::live_sessions`): its header, how many events it
/// has now, and its epoch. The epoch changes on anything other than a pure append (the session was
/// recreated, truncated or rewritten), so a cache keyed by (id, epoch, event count) never serves a stale
/// prefix.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    pub header: Header,
    pub event_count: u64,
    /// Added in contract 2.0; a host that sends none is read as epoch 0.
    #[serde(default)]
    pub epoch: u64,
}

/// A request with nothing in it yet (`{}`); later minors may add optional fields.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmptyRequest {}

/// A request naming one session.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SessionRequest {
    pub session_id: String,
}

/// `filterSessions` request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FilterSessionsRequest {
    pub filters: Vec<SessionFilter>,
}

/// `filterEvents` request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FilterEventsRequest {
    pub session_id: String,
    pub filters: Vec<EventScanFilter>,
}

/// `traceEvent` request. `seq` is signed so that a negative seq reaches the plugin and gets
/// `EVENT_NOT_FOUND`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TraceEventRequest {
    pub session_id: String,
    pub seq: i64,
}

/// `readTitleSnapshots` request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TitleSnapshotsRequest {
    pub session_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A header given up converts to the wire header a borrowed one does, every field carried, and
    /// back again.
    #[test]
    fn a_header_converts_the_same_moved_or_borrowed() {
        let h = SessionHeader {
            version: 0,
            id: "s1".into(),
            created_at: 5,
            cwd: Some("/w".into()),
            parent_session: Some("p".into()),
            seed_length: Some(3),
            origin: Some("subagent".into()),
            delegation_depth: Some(1),
            agent_preset: Some("coder".into()),
        };
        let borrowed = Header::from(&h);
        assert_eq!(Header::from(h.clone()), borrowed);
        assert_eq!(SessionHeader::from(&borrowed), h);
    }

    #[test]
    fn one_filter_union_reads_and_writes_the_spec_shapes() {
        let wire = json!([
            {"kind": "id", "values": ["a"]},
            {"kind": "cwd", "values": [null, "/w"]},
            {"kind": "created-at", "from": 1.5},
            {"kind": "availability", "values": ["live", "persisted"]},
        ]);
        let filters: Vec<SessionFilter> = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(
            filters[3],
            SessionFilter::Availability(vec![Availability::Live, Availability::Persisted])
        );
        assert_eq!(serde_json::to_value(&filters).unwrap(), wire);
        let wire = json!([
            {"kind": "seq", "to": 9.0},
            {"kind": "surface", "values": ["log-only"]},
            {"kind": "text", "text": "stack trace"},
        ]);
        let scan: Vec<EventScanFilter> = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(scan[2], EventScanFilter::Text("stack trace".into()));
        assert_eq!(serde_json::to_value(&scan).unwrap(), wire);
    }

    #[test]
    fn a_text_clause_is_not_an_event_metadata_filter() {
        let err = serde_json::from_value::<EventFilter>(json!({"kind": "text", "text": "x"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown event filter kind \"text\""), "{err}");
        for bad in [
            json!({"kind": "surface", "values": ["hidden"]}),
            json!({"kind": "type", "values": [null]}),
            json!({"kind": "seq", "values": []}),
        ] {
            assert!(
                serde_json::from_value::<EventScanFilter>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn range_bounds_are_inclusive_and_compared_as_numbers() {
        let r = Range {
            from: Some(1.5),
            to: Some(3.0),
        };
        assert!(!r.contains(1.0) && r.contains(2.0) && r.contains(3.0) && !r.contains(4.0));
        assert!(Range::default().contains(f64::MIN));
    }
}
