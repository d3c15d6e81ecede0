//! The surface fold state machine (spec §2.1–§2.3), run one event at a time.
//!
//! [`SurfaceFold::apply`] validates an event against the state (plan) and only then mutates it (commit),
//! so a rejected event leaves the state exactly as it was: a reader can stop at the first bad event and
//! still hold the fold of the valid prefix, and a host can validate a candidate event before appending it.
//! The batch fold ([`SurfaceFold::fold`]) is this same state run over a whole log, never a second
//! implementation.
//!
//! Error messages use the reference implementation's wording, prefixed by [`FoldError`]'s `Display` with
//! "invalid session surface: ".
//!
//! Memory: the state keeps one label byte per event, the current node list, the replacement history and,
//! for current `tool/result` nodes only, their data with the tool output nulled out (what the content-only
//! rewrite rule compares). It never keeps event payloads in general.
//!
//! The state is serialisable (serde), so a consumer that keeps a log indexed can store the fold of what it
//! read and fold only what is appended later. Stored, labels are one letter per event (`c`, `s`, `l`)
//! and the shadowed-by map is left out (the replacements imply it); reading it back checks that the
//! parts agree, so a damaged state is an error rather than a fold that labels wrongly.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::label::Label;
use crate::json::{js_equal, safe_uint};
use crate::log::event::{is_surface_type, Event};
use crate::log::event_ref::EventRef;
use crate::log::message::Closing;
use crate::log::{LogError, LogErrorCode};

const ASSISTANT_MESSAGE: &str = "assistant/message";
const TOOL_RESULT: &str = "tool/result";

/// One committed replacement: event `seq` took the place of `shadowed` (surface order) on the surface.
/// `start`/`end` are the seqs the event declared; `shadowed` is what actually lay between them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Replacement {
    pub seq: u64,
    pub start: u64,
    pub end: u64,
    pub shadowed: Vec<u64>,
}

/// What one applied event did to the surface.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Applied {
    /// Not a message event: labelled `log-only`, surface untouched.
    LogOnly,
    /// `surfaceOp: "append"`: the event joined the end of the surface.
    Appended,
    /// A replace: the event took the place of `shadowed` (surface order), which are now `shadowed`.
    Replaced { shadowed: Vec<u64> },
}

/// A log event that breaks a surface rule. `seq` is the offending event's own seq; `message` is the
/// rule broken, in the reference implementation's wording.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FoldError {
    pub seq: u64,
    pub message: String,
}

impl fmt::Display for FoldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid session surface: {}", self.message)
    }
}

impl std::error::Error for FoldError {}

impl From<FoldError> for LogError {
    fn from(err: FoldError) -> Self {
        LogError::new(LogErrorCode::InvalidSurface, err.to_string()).at_seq(err.seq)
    }
}

/// The comparison key of a current `tool/result` node: its data with `message.content` reduced to the
/// first block with that block's `content` nulled. `None` when the data has no `message.content` array
/// to reduce, which the reference implementation cannot compare either (it throws). Shared, so that a
/// message read typed (which carries its key) costs no copy of it.
type ToolResultKey = Option<Arc<Value>>;

/// The incremental surface fold. Cheap to clone (no event payloads), so a consumer can snapshot it, and
/// serialisable (see the module doc), so it can store it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(try_from = "FoldState")]
pub struct SurfaceFold {
    /// One label per folded event, indexed by seq; kept final for the folded prefix.
    labels: Vec<Label>,
    /// The current surface in model order.
    nodes: Vec<u64>,
    /// Every committed replacement, in log (seq) order.
    replacements: Vec<Replacement>,
    /// Shadowed seq → the replacement event that directly shadowed it.
    replaced_by: HashMap<u64, u64>,
    /// Current `tool/result` nodes → their content-only comparison key.
    tool_results: HashMap<u64, ToolResultKey>,
}

/// The validated, not yet committed, effect of one event.
enum Plan {
    LogOnly,
    Append {
        tool_key: Option<ToolResultKey>,
    },
    Replace {
        start: u64,
        end: u64,
        start_idx: usize,
        end_idx: usize,
        tool_key: Option<ToolResultKey>,
    },
}

/// A syntactically valid `surfaceOp`.
enum SurfaceOp {
    Append,
    Replace { start: u64, end: u64 },
}

impl SurfaceFold {
    /// The fold of an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds a whole log. Stops at the first invalid event: one bad event makes the whole log invalid.
    pub fn fold<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Self, FoldError> {
        let mut fold = Self::new();
        for event in events {
            fold.apply(event)?;
        }
        Ok(fold)
    }

    /// Applies the next event (its seq must equal [`Self::folded`]). All-or-nothing: on `Err` the state
    /// is unchanged.
    pub fn apply(&mut self, event: &Event) -> Result<Applied, FoldError> {
        self.apply_ref(EventRef::Event(event))
    }

    /// [`Self::apply`] for a borrowed event (see [`EventRef`]): the same checks and the same effect.
    pub fn apply_ref(&mut self, event: EventRef<'_>) -> Result<Applied, FoldError> {
        let seq = self.folded();
        let plan = self.plan(event, seq).map_err(|message| FoldError {
            seq: event.seq(),
            message,
        })?;
        Ok(self.commit(seq, plan))
    }

    /// Checks that `event` could be applied next, without applying it.
    pub fn validate_next(&self, event: &Event) -> Result<(), FoldError> {
        self.plan(EventRef::Event(event), self.folded())
            .map(|_| ())
            .map_err(|message| FoldError {
                seq: event.seq,
                message,
            })
    }

    /// Number of events applied; the seq the next event must carry.
    pub fn folded(&self) -> u64 {
        self.labels.len() as u64
    }

    /// The label of a folded event; `None` for `seq >= folded()`.
    pub fn label(&self, seq: u64) -> Option<Label> {
        self.labels.get(usize::try_from(seq).ok()?).copied()
    }

    /// Every folded event's label, indexed by seq.
    pub fn labels(&self) -> &[Label] {
        &self.labels
    }

    /// The current surface, in surface (model) order, which after a replacement is not seq order.
    pub fn nodes(&self) -> &[u64] {
        &self.nodes
    }

    /// Every committed replacement, in log order.
    pub fn replacements(&self) -> &[Replacement] {
        &self.replacements
    }

    /// The replacement made by event `seq`, if that event was a replace.
    pub fn replacement(&self, seq: u64) -> Option<&Replacement> {
        let idx = self
            .replacements
            .binary_search_by_key(&seq, |r| r.seq)
            .ok()?;
        self.replacements.get(idx)
    }

    /// The replacement event that directly shadowed `seq` (spec §2.3 `replacedBy`).
    pub fn replaced_by(&self, seq: u64) -> Option<u64> {
        self.replaced_by.get(&seq).copied()
    }

    /// `replaced_by` followed to the end: for A shadowed by R1, itself shadowed by R2, `[R1, R2]`.
    pub fn replacement_chain(&self, seq: u64) -> Vec<u64> {
        let mut chain = Vec::new();
        let mut at = seq;
        // Each step moves to a strictly later seq, so this ends.
        while let Some(next) = self.replaced_by(at) {
            chain.push(next);
            at = next;
        }
        chain
    }

    fn plan(&self, event: EventRef<'_>, seq: u64) -> Result<Plan, String> {
        if event.seq() != seq {
            return Err(format!(
                "session event seq {} is not contiguous; expected {seq}",
                event.seq()
            ));
        }
        let kind = event.kind();
        if !is_surface_type(kind) {
            if event.surface_op().is_some() {
                return Err(format!(
                    "session event \"{kind}\" is not surface-eligible and cannot carry surfaceOp"
                ));
            }
            if event.source_event_seqs().is_some() {
                return Err(format!(
                    "session event \"{kind}\" is not surface-eligible and cannot carry sourceEventSeqs"
                ));
            }
            return Ok(Plan::LogOnly);
        }
        let is_tool_result = kind == TOOL_RESULT;
        match parse_surface_op(kind, event.surface_op())? {
            SurfaceOp::Append => {
                check_provenance(event, seq, &[])?;
                let tool_key = is_tool_result.then(|| tool_result_key_of(event));
                Ok(Plan::Append { tool_key })
            }
            SurfaceOp::Replace { start, end } => {
                let start_idx = self.position(start).ok_or_else(|| {
                    format!("surface replace: start seq {start} not found in surface")
                })?;
                let end_idx = self.position(end).ok_or_else(|| {
                    format!("surface replace: end seq {end} not found in surface")
                })?;
                if start_idx > end_idx {
                    return Err(format!(
                        "surface replace: start seq {start} (index {start_idx}) is after end seq {end} (index {end_idx})"
                    ));
                }
                let shadowed = &self.nodes[start_idx..=end_idx];
                check_provenance(event, seq, shadowed)?;
                let tool_key = if is_tool_result {
                    Some(self.check_tool_result_rewrite(event, shadowed)?)
                } else {
                    None
                };
                Ok(Plan::Replace {
                    start,
                    end,
                    start_idx,
                    end_idx,
                    tool_key,
                })
            }
        }
    }

    fn commit(&mut self, seq: u64, plan: Plan) -> Applied {
        match plan {
            Plan::LogOnly => {
                self.labels.push(Label::LogOnly);
                Applied::LogOnly
            }
            Plan::Append { tool_key } => {
                self.labels.push(Label::Current);
                self.nodes.push(seq);
                if let Some(key) = tool_key {
                    self.tool_results.insert(seq, key);
                }
                Applied::Appended
            }
            Plan::Replace {
                start,
                end,
                start_idx,
                end_idx,
                tool_key,
            } => {
                let shadowed: Vec<u64> = self.nodes.splice(start_idx..=end_idx, [seq]).collect();
                for &old in &shadowed {
                    if let Some(label) = usize::try_from(old)
                        .ok()
                        .and_then(|i| self.labels.get_mut(i))
                    {
                        *label = Label::Shadowed;
                    }
                    self.replaced_by.insert(old, seq);
                    // A shadowed node never returns to the surface, so its key is dead weight.
                    self.tool_results.remove(&old);
                }
                self.labels.push(Label::Current);
                if let Some(key) = tool_key {
                    self.tool_results.insert(seq, key);
                }
                self.replacements.push(Replacement {
                    seq,
                    start,
                    end,
                    shadowed: shadowed.clone(),
                });
                Applied::Replaced { shadowed }
            }
        }
    }

    /// Surface position of `seq`, the `nodes.indexOf` of the spec. The label answers "not on the
    /// surface" in O(1), which is the common failure, before the linear search.
    fn position(&self, seq: u64) -> Option<usize> {
        if self.label(seq) != Some(Label::Current) {
            return None;
        }
        self.nodes.iter().rposition(|&node| node == seq)
    }

    /// The tool/result restriction (spec §2.1 step 4): a `tool/result` replacement may only rewrite the
    /// tool output of exactly one current `tool/result`. Returns the replacement's own key, which becomes
    /// the node's key once committed (so a re-prune is checked against the previous replacement).
    fn check_tool_result_rewrite(
        &self,
        event: EventRef<'_>,
        shadowed: &[u64],
    ) -> Result<ToolResultKey, String> {
        let [target] = shadowed else {
            return Err(
                "tool/result surface replacement must rewrite exactly one current node".into(),
            );
        };
        let Some(original) = self.tool_results.get(target) else {
            return Err("tool/result surface replacement must target a current tool/result".into());
        };
        let key = tool_result_key_of(event);
        match (original, &key) {
            (Some(original), Some(replacement)) if js_equal(original, replacement) => Ok(key),
            _ => Err("tool/result surface replacement may change only content".into()),
        }
    }
}

/// Step 2 of spec §2.1 for an eligible type: the marker must be the exact string `"append"` or an
/// object with exactly `op: "replace"`, `start`, `end` (safe integers ≥ 0).
fn parse_surface_op(kind: &str, op: Option<&Value>) -> Result<SurfaceOp, String> {
    match op {
        None => Err(format!(
            "session event \"{kind}\" is surface-eligible and requires a surfaceOp marker"
        )),
        Some(Value::String(s)) if s == "append" => Ok(SurfaceOp::Append),
        Some(Value::Object(map)) => match replace_range(map) {
            Some((start, end)) => Ok(SurfaceOp::Replace { start, end }),
            None => Err(format!(
                "session event \"{kind}\" carries an invalid replace surfaceOp"
            )),
        },
        Some(_) => Err(format!(
            "session event \"{kind}\" carries an invalid surfaceOp"
        )),
    }
}

/// `{op: "replace", start, end}` with exactly those three keys and seq-shaped bounds.
fn replace_range(map: &Map<String, Value>) -> Option<(u64, u64)> {
    if map.len() != 3 || map.get("op").and_then(Value::as_str) != Some("replace") {
        return None;
    }
    Some((safe_uint(map.get("start")?)?, safe_uint(map.get("end")?)?))
}

/// Provenance rules (spec §2.1 step 5) plus the replace rule that `sourceEventSeqs` covers every
/// shadowed node. Checks run in the reference order: array, non-empty (except assistant), element type
/// (first bad element), duplicates, earlier-only (first late element), coverage.
fn check_provenance(event: EventRef<'_>, seq: u64, shadowed: &[u64]) -> Result<(), String> {
    let kind = event.kind();
    let mut sorted: Vec<u64> = Vec::new();
    if let Some(raw) = event.source_event_seqs() {
        let Value::Array(items) = raw else {
            return Err(format!(
                "sourceEventSeqs on event at seq {seq} must be an array when present"
            ));
        };
        if items.is_empty() && kind != ASSISTANT_MESSAGE {
            return Err("sourceEventSeqs must not be empty except on assistant/message".into());
        }
        // Writers list sources ascending, so duplicates are usually ruled out by one pass without
        // allocating; only an unordered list or a replace (which needs a lookup set) pays for a sort.
        let mut increasing = true;
        let mut previous: Option<u64> = None;
        let mut first_late: Option<u64> = None;
        for item in items {
            let source = safe_uint(item).ok_or_else(|| {
                format!("session event \"{kind}\" sourceEventSeqs must densely contain non-negative safe integers")
            })?;
            if previous.is_some_and(|p| source <= p) {
                increasing = false;
            }
            previous = Some(source);
            if first_late.is_none() && source >= seq {
                first_late = Some(source);
            }
        }
        if !increasing || !shadowed.is_empty() {
            sorted = items.iter().filter_map(safe_uint).collect();
            sorted.sort_unstable();
            if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
                return Err("sourceEventSeqs must not contain duplicates".into());
            }
        }
        if let Some(late) = first_late {
            return Err(format!(
                "sourceEventSeqs must reference earlier events: {late} >= current seq {seq}"
            ));
        }
    }
    let missing: Vec<String> = shadowed
        .iter()
        .filter(|node| sorted.binary_search(node).is_err())
        .map(u64::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// [`tool_result_key`] of a `tool/result` event; a message read typed carries its key.
fn tool_result_key_of(event: EventRef<'_>) -> ToolResultKey {
    let data = event.data();
    match data.message_facts(event.kind()).map(|f| &f.closing) {
        Some(Closing::ToolResult { key, .. }) => Some(Arc::clone(key)),
        _ => tool_result_key(data).map(Arc::new),
    }
}

/// The value the content-only rule compares (spec §2.1 step 4): `data` with `message.content` replaced
/// by `[{...content[0], content: null}]`. Built field by field so the tool output itself, usually the
/// bulk of the event, is never cloned.
///
/// Shapes the reference cannot compare (no `message` object, no `content` array) give `None`, which
/// fails the rule. A first block that is not an object spreads to nothing in JavaScript (`{content:
/// null}`), except strings and arrays, which spread into indexed keys; those also give `None` here.
/// Message validation (spec §1.7 step 4) rejects all of these before a log reaches the fold.
pub(crate) fn tool_result_key(data: &Value) -> Option<Value> {
    let data = data.as_object()?;
    let message = data.get("message")?.as_object()?;
    let blocks = message.get("content")?.as_array()?;
    let mut block = Map::new();
    match blocks.first() {
        Some(Value::Object(first)) => {
            for (key, value) in first {
                if key != "content" {
                    block.insert(key.clone(), value.clone());
                }
            }
        }
        None | Some(Value::Null | Value::Bool(_) | Value::Number(_)) => {}
        Some(Value::String(_) | Value::Array(_)) => return None,
    }
    block.insert("content".into(), Value::Null);
    let mut reduced_message = Map::with_capacity(message.len());
    for (key, value) in message {
        if key != "content" {
            reduced_message.insert(key.clone(), value.clone());
        }
    }
    reduced_message.insert("content".into(), Value::Array(vec![Value::Object(block)]));
    let mut reduced = Map::with_capacity(data.len());
    for (key, value) in data {
        if key != "message" {
            reduced.insert(key.clone(), value.clone());
        }
    }
    reduced.insert("message".into(), Value::Object(reduced_message));
    Some(Value::Object(reduced))
}

/// The stored form of a [`SurfaceFold`] (see the module doc).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FoldState {
    labels: String,
    nodes: Vec<u64>,
    replacements: Vec<Replacement>,
    /// Sorted by seq, so equal folds serialise to equal bytes.
    tool_results: Vec<(u64, Option<Value>)>,
}

/// A stored fold state whose parts disagree (see the module doc); the message names the first problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid stored surface fold: {0}")]
pub struct FoldStateError(String);

fn label_code(label: Label) -> char {
    match label {
        Label::Current => 'c',
        Label::Shadowed => 's',
        Label::LogOnly => 'l',
    }
}

impl Serialize for SurfaceFold {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct StateRef<'a> {
            labels: String,
            nodes: &'a [u64],
            replacements: &'a [Replacement],
            tool_results: Vec<(u64, Option<&'a Value>)>,
        }
        let mut tool_results: Vec<(u64, Option<&Value>)> = self
            .tool_results
            .iter()
            .map(|(&k, v)| (k, v.as_deref()))
            .collect();
        tool_results.sort_unstable_by_key(|&(seq, _)| seq);
        StateRef {
            labels: self.labels.iter().copied().map(label_code).collect(),
            nodes: &self.nodes,
            replacements: &self.replacements,
            tool_results,
        }
        .serialize(serializer)
    }
}

impl TryFrom<FoldState> for SurfaceFold {
    type Error = FoldStateError;

    fn try_from(state: FoldState) -> Result<Self, Self::Error> {
        let bad = |message: String| Err(FoldStateError(message));
        let labels = state
            .labels
            .chars()
            .enumerate()
            .map(|(seq, c)| match c {
                'c' => Ok(Label::Current),
                's' => Ok(Label::Shadowed),
                'l' => Ok(Label::LogOnly),
                other => Err(FoldStateError(format!(
                    "label {other:?} of seq {seq} is not c, s or l"
                ))),
            })
            .collect::<Result<Vec<Label>, _>>()?;
        let label = |seq: u64| {
            usize::try_from(seq)
                .ok()
                .and_then(|i| labels.get(i))
                .copied()
        };
        let current = labels.iter().filter(|&&l| l == Label::Current).count();
        let mut on_surface = std::collections::HashSet::with_capacity(state.nodes.len());
        for &node in &state.nodes {
            if label(node) != Some(Label::Current) || !on_surface.insert(node) {
                return bad(format!(
                    "surface node {node} is not a current event, or is listed twice"
                ));
            }
        }
        if on_surface.len() != current {
            return bad(format!(
                "{current} events are labelled current but the surface holds {}",
                on_surface.len()
            ));
        }
        let mut replaced_by = HashMap::new();
        let mut previous: Option<u64> = None;
        for r in &state.replacements {
            if previous.is_some_and(|p| p >= r.seq)
                || !matches!(label(r.seq), Some(Label::Current | Label::Shadowed))
            {
                return bad(format!(
                    "replacement {} is out of order or not a message event",
                    r.seq
                ));
            }
            previous = Some(r.seq);
            for &old in &r.shadowed {
                let earlier = old < r.seq && label(old) == Some(Label::Shadowed);
                if !earlier || replaced_by.insert(old, r.seq).is_some() {
                    return bad(format!(
                        "seq {old} shadowed by {} is not an earlier shadowed event, or is shadowed twice",
                        r.seq
                    ));
                }
            }
        }
        let shadowed = labels.iter().filter(|&&l| l == Label::Shadowed).count();
        if replaced_by.len() != shadowed {
            return bad(format!(
                "{shadowed} events are labelled shadowed but replacements shadow {}",
                replaced_by.len()
            ));
        }
        let mut tool_results = HashMap::with_capacity(state.tool_results.len());
        for (seq, key) in state.tool_results {
            if !on_surface.contains(&seq) || tool_results.insert(seq, key.map(Arc::new)).is_some() {
                return bad(format!(
                    "tool result key of seq {seq} is not for a current surface node, or is listed twice"
                ));
            }
        }
        Ok(Self {
            labels,
            nodes: state.nodes,
            replacements: state.replacements,
            replaced_by,
            tool_results,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_result(seq: u64, text: &str) -> Event {
        Event::appended(
            TOOL_RESULT,
            seq,
            0,
            json!({"turn":1,"step":1,"message":{"id":"m","role":"user","source":{"kind":"tool","callId":"c"},
                "content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":text}]}]}}),
        )
    }

    fn roundtrip(fold: &SurfaceFold) -> SurfaceFold {
        serde_json::from_str(&serde_json::to_string(fold).unwrap()).unwrap()
    }

    #[test]
    fn stored_fold_reads_back_equal_and_folds_on_the_same() {
        let mut fold = SurfaceFold::new();
        fold.apply(&Event::new("turn/start", 0, 0, json!({"turn":1})))
            .unwrap();
        fold.apply(&tool_result(1, "a")).unwrap();
        let mut prune = tool_result(2, "b");
        prune.surface_op = Some(json!({"op":"replace","start":1,"end":1}));
        prune.source_event_seqs = Some(json!([1]));
        fold.apply(&prune).unwrap();
        let text = serde_json::to_string(&fold).unwrap();
        assert!(text.contains(r#""labels":"lsc""#), "{text}");
        let mut back = roundtrip(&fold);
        assert_eq!(back, fold);
        assert_eq!(back.replaced_by(1), Some(2));
        // The content-only rule still holds against the stored key of the current node.
        let mut again = tool_result(3, "c");
        again.surface_op = Some(json!({"op":"replace","start":2,"end":2}));
        again.source_event_seqs = Some(json!([2]));
        let mut wrong = again.clone();
        wrong.data["message"]["id"] = json!("other");
        assert!(back.apply(&wrong).is_err());
        assert_eq!(back.apply(&again), fold.apply(&again));
        assert_eq!(back, fold);
    }

    #[test]
    fn stored_fold_whose_parts_disagree_is_refused() {
        let good = r#"{"labels":"lsc","nodes":[2],"replacements":[{"seq":2,"start":1,"end":1,"shadowed":[1]}],"tool_results":[[2,null]]}"#;
        assert!(serde_json::from_str::<SurfaceFold>(good).is_ok());
        let cases = [
            (r#""labels":"lsc""#, r#""labels":"lxc""#, "not c, s or l"),
            (r#""nodes":[2]"#, r#""nodes":[0]"#, "not a current event"),
            (r#""nodes":[2]"#, r#""nodes":[]"#, "surface holds 0"),
            (
                r#""shadowed":[1]"#,
                r#""shadowed":[0]"#,
                "not an earlier shadowed",
            ),
            (
                r#""shadowed":[1]"#,
                r#""shadowed":[]"#,
                "replacements shadow 0",
            ),
            (
                r#""seq":2,"start""#,
                r#""seq":0,"start""#,
                "not a message event",
            ),
            (
                r#"[[2,null]]"#,
                r#"[[1,null]]"#,
                "not for a current surface node",
            ),
            (
                r#""tool_results""#,
                r#""extra":1,"tool_results""#,
                "unknown field",
            ),
        ];
        for (from, to, why) in cases {
            let bad = good.replace(from, to);
            assert_ne!(bad, good);
            let err = serde_json::from_str::<SurfaceFold>(&bad).unwrap_err();
            assert!(err.to_string().contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn tool_result_key_nulls_only_the_inner_content() {
        let a = tool_result(0, "long output");
        let b = tool_result(0, "[pruned]");
        let ka = tool_result_key(&a.data).unwrap();
        assert!(js_equal(&ka, &tool_result_key(&b.data).unwrap()));
        assert_eq!(ka["message"]["content"][0]["content"], Value::Null);
        assert_eq!(ka["message"]["content"][0]["toolCallId"], "c");
        assert_eq!(tool_result_key(&json!({"message":{"content":"x"}})), None);
        assert_eq!(tool_result_key(&json!({"message":{"content":["x"]}})), None);
        assert_eq!(
            tool_result_key(&json!({"message":{"content":[]}})),
            Some(json!({"message":{"content":[{"content":null}]}}))
        );
    }

    #[test]
    fn shadowed_tool_results_release_their_key() {
        let mut fold = SurfaceFold::new();
        fold.apply(&tool_result(0, "a")).unwrap();
        let mut prune = tool_result(1, "b");
        prune.surface_op = Some(json!({"op":"replace","start":0,"end":0}));
        prune.source_event_seqs = Some(json!([0]));
        fold.apply(&prune).unwrap();
        assert_eq!(fold.tool_results.len(), 1);
        assert!(fold.tool_results.contains_key(&1));
    }
}
