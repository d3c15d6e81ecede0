//! The records of the exact reads (spec §5) and what they share with search: the JSON documents that
//! cross the boundary.
//!
//! Records never cross as `#[repr(C)]` structs: a struct's layout cannot grow without breaking every
//! plugin built before, so each call carries a JSON document in the spec's own shape (camelCase keys).
//! A later minor may append fields; a reader ignores fields it does not know and gives a missing field
//! its documented default (`#[serde(default)]`). The abi_stable string and vector types are kept inside
//! so the plugin's builders stay as they are; they serialise like `String` and `Vec`.
//!
//! Field names follow the spec's camelCase names in snake_case. Event envelopes and message contents are
//! arbitrary JSON and cross as JSON text ([`RString`]); everything with a fixed shape is typed.

use abi_stable::std_types::{ROption, RString, RVec};
use serde::{Deserialize, Serialize};

use dsh_codec::log::SessionHeader;
use dsh_codec::surface::Label;

/// A session header (spec §1.3 `SessionHeader`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub version: i64,
    pub id: RString,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub cwd: ROption<RString>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub parent_session: ROption<RString>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub seed_length: ROption<u64>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub origin: ROption<RString>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub delegation_depth: ROption<u64>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub agent_preset: ROption<RString>,
}

fn ropt(s: &Option<String>) -> ROption<RString> {
    s.as_deref().map(RString::from).into()
}

fn opt(s: &ROption<RString>) -> Option<String> {
    s.as_ref().map(|s| s.to_string()).into_option()
}

impl From<&SessionHeader> for Header {
    fn from(h: &SessionHeader) -> Self {
        Self {
            version: h.version,
            id: h.id.as_str().into(),
            created_at: h.created_at,
            cwd: ropt(&h.cwd),
            parent_session: ropt(&h.parent_session),
            seed_length: h.seed_length.into(),
            origin: ropt(&h.origin),
            delegation_depth: h.delegation_depth.into(),
            agent_preset: ropt(&h.agent_preset),
        }
    }
}

impl From<&Header> for SessionHeader {
    fn from(h: &Header) -> Self {
        Self {
            version: h.version,
            id: h.id.to_string(),
            created_at: h.created_at,
            cwd: opt(&h.cwd),
            parent_session: opt(&h.parent_session),
            seed_length: h.seed_length.into_option(),
            origin: opt(&h.origin),
            delegation_depth: h.delegation_depth.into_option(),
            agent_preset: opt(&h.agent_preset),
        }
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
    pub session_id: RString,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: RString,
    pub time: i64,
    pub surface: Surface,
}

/// `SessionEventSearchDocument`: an event that yields searchable text (spec §3).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventDocument {
    pub session_id: RString,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: RString,
    pub time: i64,
    pub surface: Surface,
    pub text: RString,
}

/// An inclusive numeric range; either end may be open. Bounds are numbers as in the spec (fractional
/// bounds are allowed and compared after truncation); NaN and infinities are `INVALID_FILTER`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Range {
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub from: ROption<f64>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub to: ROption<f64>,
}

/// `SessionResultFilter` (spec §4.1), on the wire `{"kind":"id","values":[…]}`,
/// `{"kind":"created-at","from":…,"to":…}`, ….
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(into = "RawFilter", try_from = "RawFilter")]
pub enum SessionFilter {
    Id(RVec<RString>),
    /// `None` matches a session without cwd.
    Cwd(RVec<ROption<RString>>),
    CreatedAt(Range),
    /// `None` matches a root session.
    Parent(RVec<ROption<RString>>),
    Availability(RVec<Availability>),
}

/// `SessionEventMetadataFilter`, plus the scan-only `text` clause of `filter_events` (spec §4.1, §5).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(into = "RawFilter", try_from = "RawFilter")]
pub enum EventFilter {
    Seq(Range),
    Time(Range),
    Type(RVec<RString>),
    Surface(RVec<Surface>),
    /// Literal, case-insensitive, whitespace-flexible substring; only `filter_events` accepts it.
    Text(RString),
}

/// `readSession`: the header and every event (for a persisted session: as inspected, closers included).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvents {
    pub session: Header,
    /// Event envelopes as JSON text, in seq order (objects on the wire).
    #[serde(with = "json_text::vec")]
    pub events: RVec<RString>,
}

/// `readSurface`: the current surface in model order.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceSnapshot {
    pub session: Header,
    /// Seq of the last raw event observed; `None` for an empty log.
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub captured_through_seq: ROption<u64>,
    /// Event envelopes of the current surface nodes, JSON text, in surface order (objects on the wire).
    #[serde(with = "json_text::vec")]
    pub events: RVec<RString>,
}

/// `readEvent` request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReadEventRequest {
    pub session_id: RString,
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
    pub target: RString,
    #[serde(with = "json_text::vec")]
    pub events: RVec<RString>,
    pub start_seq: u64,
    pub end_seq: u64,
}

/// One descendant in a lineage, flattened in pre-order (children after their parent, siblings by
/// `createdAt` then id). `parent_id` names the node it hangs under; `depth` is 1 for direct children.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descendant {
    pub session: SessionRecord,
    pub parent_id: RString,
    pub depth: u32,
}

/// `traceSession`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SessionLineage {
    pub target: SessionRecord,
    /// Immediate parent first.
    pub ancestors: RVec<SessionRecord>,
    pub descendants: RVec<Descendant>,
    pub complete: bool,
    /// Present when `complete`.
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub root: ROption<SessionRecord>,
    /// Present when not `complete`: the first parent id missing from the corpus.
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub unresolved_parent_id: ROption<RString>,
}

/// `traceEvent`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventTrace {
    pub session: Header,
    pub target: EventRecord,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub replaced_by: ROption<u64>,
    pub replacement_chain: RVec<u64>,
    pub replaced_event_seqs: RVec<u64>,
    pub source_event_seqs: RVec<u64>,
    pub derived_event_seqs: RVec<u64>,
}

/// A folded `session/title` (spec §7.1).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Title {
    pub title: RString,
    pub message_seqs: RVec<u64>,
    /// The title's `source` object as JSON text (an object on the wire).
    #[serde(with = "json_text::one")]
    pub source: RString,
    pub event_seq: u64,
    pub updated_at: i64,
}

/// One entry of `readTitleSnapshots`: fulfilled with the header and title (if any), or rejected.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TitleSnapshot {
    pub session_id: RString,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub session: ROption<Header>,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub title: ROption<Title>,
    /// Present when this id was rejected (not found, corrupt, conflict, fold error).
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub error: ROption<super::PluginError>,
}

/// A session or log the corpus could not read; it is left out and everything else keeps working
/// (DESIGN.md deviation 2).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CorpusProblem {
    pub path: RString,
    #[serde(default, skip_serializing_if = "ROption::is_none")]
    pub session_id: ROption<RString>,
    /// The log codec's code, e.g. `LOG_SEQ_GAP`.
    pub code: RString,
    pub message: RString,
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

    fn range(kind: &str, r: Range) -> Self {
        Self {
            kind: kind.into(),
            values: None,
            from: r.from.into_option(),
            to: r.to.into_option(),
            text: None,
        }
    }

    fn range_of(&self) -> Result<Range, String> {
        if self.values.is_some() || self.text.is_some() {
            return Err(format!("a {:?} filter takes only from/to", self.kind));
        }
        Ok(Range {
            from: self.from.into(),
            to: self.to.into(),
        })
    }

    /// The values of a list clause; `nullable` says whether `null` entries are allowed.
    fn values_of(&self, nullable: bool) -> Result<Vec<Option<String>>, String> {
        if self.from.is_some() || self.to.is_some() || self.text.is_some() {
            return Err(format!("a {:?} filter takes only values", self.kind));
        }
        let values = self
            .values
            .clone()
            .ok_or_else(|| format!("a {:?} filter needs a values list", self.kind))?;
        if !nullable && values.iter().any(Option::is_none) {
            return Err(format!("{:?} filter values must be strings", self.kind));
        }
        Ok(values)
    }

    fn strings(&self) -> Result<RVec<RString>, String> {
        Ok(self
            .values_of(false)?
            .into_iter()
            .map(|v| RString::from(v.unwrap_or_default()))
            .collect())
    }

    fn nullable(&self) -> Result<RVec<ROption<RString>>, String> {
        Ok(self
            .values_of(true)?
            .into_iter()
            .map(|v| v.map(RString::from).into())
            .collect())
    }
}

fn strs(values: &RVec<RString>) -> impl Iterator<Item = Option<String>> + '_ {
    values.iter().map(|v| Some(v.to_string()))
}

fn nullable_strs(values: &RVec<ROption<RString>>) -> impl Iterator<Item = Option<String>> + '_ {
    values
        .iter()
        .map(|v| v.as_ref().map(|s| s.to_string()).into_option())
}

impl From<SessionFilter> for RawFilter {
    fn from(f: SessionFilter) -> Self {
        match &f {
            SessionFilter::Id(v) => RawFilter::list("id", strs(v)),
            SessionFilter::Cwd(v) => RawFilter::list("cwd", nullable_strs(v)),
            SessionFilter::CreatedAt(r) => RawFilter::range("created-at", *r),
            SessionFilter::Parent(v) => RawFilter::list("parent", nullable_strs(v)),
            SessionFilter::Availability(v) => RawFilter::list(
                "availability",
                v.iter().map(|a| {
                    Some(match a {
                        Availability::Live => "live".to_string(),
                        Availability::Persisted => "persisted".to_string(),
                    })
                }),
            ),
        }
    }
}

impl TryFrom<RawFilter> for SessionFilter {
    type Error = String;

    fn try_from(raw: RawFilter) -> Result<Self, String> {
        Ok(match raw.kind.as_str() {
            "id" => SessionFilter::Id(raw.strings()?),
            "cwd" => SessionFilter::Cwd(raw.nullable()?),
            "created-at" => SessionFilter::CreatedAt(raw.range_of()?),
            "parent" => SessionFilter::Parent(raw.nullable()?),
            "availability" => SessionFilter::Availability(
                raw.strings()?
                    .iter()
                    .map(|v| match v.as_str() {
                        "live" => Ok(Availability::Live),
                        "persisted" => Ok(Availability::Persisted),
                        other => Err(format!("unknown availability {other:?}")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            other => return Err(format!("unknown session filter kind {other:?}")),
        })
    }
}

impl From<EventFilter> for RawFilter {
    fn from(f: EventFilter) -> Self {
        match &f {
            EventFilter::Seq(r) => RawFilter::range("seq", *r),
            EventFilter::Time(r) => RawFilter::range("time", *r),
            EventFilter::Type(v) => RawFilter::list("type", strs(v)),
            EventFilter::Surface(v) => {
                RawFilter::list("surface", v.iter().map(|s| Some(s.as_str().to_string())))
            }
            EventFilter::Text(t) => RawFilter {
                kind: "text".into(),
                values: None,
                from: None,
                to: None,
                text: Some(t.to_string()),
            },
        }
    }
}

impl TryFrom<RawFilter> for EventFilter {
    type Error = String;

    fn try_from(raw: RawFilter) -> Result<Self, String> {
        Ok(match raw.kind.as_str() {
            "seq" => EventFilter::Seq(raw.range_of()?),
            "time" => EventFilter::Time(raw.range_of()?),
            "type" => EventFilter::Type(raw.strings()?),
            "surface" => EventFilter::Surface(
                raw.strings()?
                    .iter()
                    .map(|v| match v.as_str() {
                        "current" => Ok(Surface::Current),
                        "shadowed" => Ok(Surface::Shadowed),
                        "log-only" => Ok(Surface::LogOnly),
                        other => Err(format!("unknown surface label {other:?}")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            "text" => EventFilter::Text(
                raw.text
                    .ok_or("a \"text\" filter needs a text string")?
                    .into(),
            ),
            other => return Err(format!("unknown event filter kind {other:?}")),
        })
    }
}

/// Event envelopes are JSON text inside the plugin and the host, and JSON objects on the wire: embedded
/// as they are (no re-encoding as strings, no re-parsing into a tree).
mod json_text {
    use serde_json::value::RawValue;

    pub mod one {
        use super::*;
        use abi_stable::std_types::RString;
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        pub fn serialize<S: Serializer>(text: &RString, s: S) -> Result<S::Ok, S::Error> {
            let raw = RawValue::from_string(text.to_string()).map_err(serde::ser::Error::custom)?;
            raw.serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RString, D::Error> {
            let raw = Box::<RawValue>::deserialize(d)?;
            Ok(RString::from(raw.get()))
        }
    }

    pub mod vec {
        use super::*;
        use abi_stable::std_types::{RString, RVec};
        use serde::ser::SerializeSeq;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(texts: &RVec<RString>, s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(texts.len()))?;
            for text in texts.iter() {
                let raw =
                    RawValue::from_string(text.to_string()).map_err(serde::ser::Error::custom)?;
                seq.serialize_element(&raw)?;
            }
            seq.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RVec<RString>, D::Error> {
            let raws = Vec::<Box<RawValue>>::deserialize(d)?;
            Ok(raws.iter().map(|r| RString::from(r.get())).collect())
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
    pub filters: Vec<EventFilter>,
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
