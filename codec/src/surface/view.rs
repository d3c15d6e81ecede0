//! Views derived from a fold and the events it folded (spec §2.4): the current surface, the model's
//! messages, and the human transcript.
//!
//! `events` is always the folded log indexed by seq (`events[seq].seq == seq`). A seq the slice does not
//! hold (a caller passing a shorter slice than the fold saw) is skipped rather than panicking.

use serde_json::Value;

use super::fold::SurfaceFold;
use crate::log::event::{is_surface_type, Event};

/// The current surface's events, in surface (model) order.
pub fn current_surface<'a>(fold: &SurfaceFold, events: &'a [Event]) -> Vec<&'a Event> {
    fold.nodes()
        .iter()
        .filter_map(|&seq| event_at(events, seq))
        .collect()
}

/// The messages the model sees, in order: the current surface projected by `deriveEventMessage` — a
/// user message's data verbatim, an assistant message's `data.message` unless its content is empty (a
/// usage-only step), a tool result's `data.message`.
pub fn model_messages(fold: &SurfaceFold, events: &[Event]) -> Vec<Value> {
    current_surface(fold, events)
        .into_iter()
        .filter_map(|event| derive_event_message(event).cloned())
        .collect()
}

/// The message one event projects to, if any (`deriveEventMessage`).
pub fn derive_event_message(event: &Event) -> Option<&Value> {
    match event.kind.as_str() {
        "user/message" => Some(event.data.as_value()),
        "assistant/message" => {
            let message = event.data.get("message")?;
            let empty = match message.get("content") {
                Some(Value::Array(blocks)) => blocks.is_empty(),
                Some(Value::String(text)) => text.is_empty(),
                _ => false,
            };
            (!empty).then_some(message)
        }
        "tool/result" => event.data.get("message"),
        _ => None,
    }
}

/// The human transcript: message events that entered the surface by `surfaceOp: "append"`, in log
/// order, shadowed ones included. Replacements (compaction checkpoints, pruned tool output) are
/// model-only and left out, so a person keeps seeing what compaction hid from the model.
pub fn human_transcript(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|event| is_surface_type(&event.kind) && event.is_append())
        .collect()
}

fn event_at(events: &[Event], seq: u64) -> Option<&Event> {
    events.get(usize::try_from(seq).ok()?)
}
