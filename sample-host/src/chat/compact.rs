//! `/compact`: a real compaction of a live session (spec §2.3, §6.6).
//!
//! All but the newest few surface messages are replaced by one checkpoint `user/message` whose source
//! is the compaction marker `{kind:"plugin", plugin:"compact", compactionId}`, with
//! `surfaceOp: {op:"replace", start, end}` over the replaced surface range and `sourceEventSeqs` naming
//! the start marker, the summary and every replaced node; the replaced events become `shadowed`. The
//! summary is built deterministically from the replaced messages' text, so no model is involved.

use dsh_codec::build::{checkpoint_text, compaction_marker_data, compaction_summary_data, Script};
use dsh_codec::log::Event;
use dsh_codec::surface::{derive_event_message, SurfaceFold};
use dsh_codec::text::content_text;
use serde_json::Value;

/// Why a compaction was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    #[error(
        "nothing to compact: the surface holds {messages} messages and the newest {keep} are kept"
    )]
    TooShort { messages: usize, keep: usize },
}

/// The compaction events to append after `events` (folded into `fold`): `compaction/start`,
/// `compaction/summary`, the checkpoint replacing the surface from its first node to the one before the
/// newest `keep`, and `compaction/end`, as one batch.
pub fn compaction_batch(
    session_id: &str,
    events: &[Event],
    fold: &SurfaceFold,
    keep: usize,
    time: i64,
) -> Result<Vec<Event>, CompactError> {
    let nodes = fold.nodes();
    if nodes.len() <= keep {
        return Err(CompactError::TooShort {
            messages: nodes.len(),
            keep,
        });
    }
    let replaced = &nodes[..nodes.len() - keep];
    let (start, end) = (replaced[0], replaced[replaced.len() - 1]);
    let first_seq = events.len() as u64;
    let compaction_id = format!("{session_id}-compaction-{first_seq}");
    let summary = summarise(events, replaced);

    // Every event at `time`; the ids name the compaction by its first seq, unique in the session.
    let mut script = Script::new(session_id, time)
        .from_seq(first_seq)
        .time_step(0);
    let marker = compaction_marker_data(&compaction_id, None);
    let start_seq = script.plain("compaction/start", marker.clone());
    let data = compaction_summary_data(
        &compaction_id,
        &summary,
        (start, end),
        replaced,
        (summary.len() / 4) as u64,
        super::model::PROVIDER,
        super::model::MODEL,
    );
    let summary_seq = script.plain("compaction/summary", data);
    let mut sources = vec![start_seq, summary_seq];
    sources.extend_from_slice(replaced);
    let id = format!("{compaction_id}-checkpoint");
    let text = checkpoint_text(&summary);
    script.checkpoint(&id, &compaction_id, &text, start, end, &sources);
    script.plain("compaction/end", marker);
    Ok(script.events)
}

/// One line per replaced message: its role and the start of its text.
fn summarise(events: &[Event], replaced: &[u64]) -> String {
    let mut lines = vec![format!("{} earlier messages:", replaced.len())];
    for &seq in replaced {
        let Some(message) = usize::try_from(seq)
            .ok()
            .and_then(|i| events.get(i))
            .and_then(derive_event_message)
        else {
            continue;
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
        let text = message
            .get("content")
            .map(content_text)
            .unwrap_or_default()
            .replace('\n', " ");
        let mut head: String = text.chars().take(100).collect();
        if text.chars().count() > 100 {
            head.push('…');
        }
        lines.push(format!("- {role} (seq {seq}): {head}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_codec::surface::Label;
    use serde_json::json;

    fn user(seq: u64, text: &str) -> Event {
        let data = dsh_codec::build::user_data(&format!("u{seq}"), text);
        Event::appended("user/message", seq, 0, data)
    }

    fn log() -> Vec<Event> {
        vec![
            Event::new("turn/start", 0, 0, json!({"turn": 1})),
            user(1, "first question"),
            user(2, "second question"),
            user(3, "third question"),
        ]
    }

    #[test]
    fn the_checkpoint_replaces_all_but_the_kept_messages_and_shadows_them() {
        let events = log();
        let fold = SurfaceFold::fold(&events).unwrap();
        let batch = compaction_batch("s", &events, &fold, 1, 5).unwrap();
        let kinds: Vec<&str> = batch.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "compaction/start",
                "compaction/summary",
                "user/message",
                "compaction/end"
            ]
        );
        let checkpoint = &batch[2];
        assert_eq!(
            checkpoint.surface_op,
            Some(json!({"op": "replace", "start": 1, "end": 2}))
        );
        assert_eq!(checkpoint.source_event_seqs, Some(json!([4, 5, 1, 2])));
        assert_eq!(checkpoint.data["source"]["plugin"], "compact");
        let text = checkpoint.data["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("- user (seq 1): first question"));
        assert!(!text.contains("third question"));

        let mut all = events.clone();
        all.extend(batch);
        let fold = SurfaceFold::fold(&all).unwrap();
        assert_eq!(fold.nodes(), &[6, 3]);
        assert_eq!(fold.label(1), Some(Label::Shadowed));
        assert_eq!(fold.label(2), Some(Label::Shadowed));
        assert_eq!(fold.label(3), Some(Label::Current));
    }

    #[test]
    fn a_second_compaction_replaces_the_first_checkpoint() {
        let mut events = log();
        let fold = SurfaceFold::fold(&events).unwrap();
        events.extend(compaction_batch("s", &events, &fold, 1, 5).unwrap());
        events.push(user(8, "fourth"));
        let fold = SurfaceFold::fold(&events).unwrap();
        let batch = compaction_batch("s", &events, &fold, 1, 6).unwrap();
        // Surface order: checkpoint 6, then 3; the range runs from 6 to 3 although 6 > 3.
        assert_eq!(
            batch[2].surface_op,
            Some(json!({"op": "replace", "start": 6, "end": 3}))
        );
        events.extend(batch);
        let fold = SurfaceFold::fold(&events).unwrap();
        assert_eq!(fold.label(6), Some(Label::Shadowed));
        assert_eq!(fold.nodes(), &[11, 8]);
    }

    #[test]
    fn too_short_a_surface_is_refused() {
        let events = vec![user(0, "only")];
        let fold = SurfaceFold::fold(&events).unwrap();
        assert_eq!(
            compaction_batch("s", &events, &fold, 2, 0),
            Err(CompactError::TooShort {
                messages: 1,
                keep: 2
            })
        );
    }
}
