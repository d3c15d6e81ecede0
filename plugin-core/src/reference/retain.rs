//! The serialised reference object of one cited source and its retention budget (spec §6.7).
//!
//! The object is `{"sessionId","label","cwd","capturedThroughSeq","conversation":[{"role","text"},…]}`
//! in that key order, measured as tagSafeJSON bytes. Over budget, phase 1 drops whole messages oldest
//! first (never a checkpoint, never the newest item) and phase 2 cuts the middle out of the longest text
//! with [`truncate_with_notice`]'s binary search, which is replicated step for step because the output
//! must be byte-identical to DSH's, not merely a good fit.
//!
//! Cost: sizes are kept running (each text's escaped length is measured once), phase 1 walks the items
//! once, and phase 2's search is arithmetic on one text; only the result is built. A 10 MB source is
//! therefore scanned once, never re-serialised per dropped message.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::project::{Item, Role};
use super::tag_safe::{opt_str_len, str_len, write_opt_str, write_str};

/// The fixed fields of one source's reference object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields<'a> {
    pub session_id: &'a str,
    pub label: &'a str,
    pub cwd: Option<&'a str>,
    pub captured_through_seq: Option<u64>,
}

/// What the budget did to one source (spec §6.7 "Stats").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    pub compacted: bool,
    pub original_messages: u64,
    pub retained_messages: u64,
    pub omitted_messages: u64,
    pub omitted_bytes: u64,
    pub truncated: bool,
}

/// One source, retained and serialised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retained {
    /// The reference object as tagSafeJSON; its length is at most the budget.
    pub json: String,
    pub stats: Stats,
}

/// The budget cannot hold the source: even its fixed fields, or a text that cannot shrink, overflow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the snapshot needs at least {needed} bytes, more than the {max} bytes allowed")]
pub struct DoesNotFit {
    /// The size where retention gave up.
    pub needed: usize,
    pub max: usize,
}

const ITEM_USER: &str = r#"{"role":"user","text":"#;
const ITEM_ASSISTANT: &str = r#"{"role":"assistant","text":"#;

fn item_prefix(role: Role) -> &'static str {
    match role {
        Role::User => ITEM_USER,
        Role::Assistant => ITEM_ASSISTANT,
    }
}

struct Slot<'a> {
    item: Item<'a>,
    /// The text as retained: the original, or a truncation of it.
    text: Cow<'a, str>,
    omitted_bytes: u64,
    /// Serialised size of this item, `{…}` included.
    size: usize,
    alive: bool,
}

fn item_size(role: Role, text: &str) -> usize {
    item_prefix(role).len() + str_len(text) + 1
}

fn fixed_size(f: &Fields<'_>) -> usize {
    r#"{"sessionId":"#.len()
        + str_len(f.session_id)
        + r#","label":"#.len()
        + str_len(f.label)
        + r#","cwd":"#.len()
        + opt_str_len(f.cwd)
        + r#","capturedThroughSeq":"#.len()
        + f.captured_through_seq.map_or(4, |s| s.to_string().len())
        + r#","conversation":["#.len()
        + "]}".len()
}

/// Retains `items` within `max` bytes and serialises the result.
pub fn retain(
    fields: &Fields<'_>,
    items: Vec<Item<'_>>,
    max: usize,
) -> Result<Retained, DoesNotFit> {
    let compacted = items.iter().any(|i| i.checkpoint);
    let original_messages = items.len() as u64;
    let mut slots: Vec<Slot<'_>> = items
        .into_iter()
        .map(|item| Slot {
            size: item_size(item.role, &item.text),
            text: item.text.clone(),
            item,
            omitted_bytes: 0,
            alive: true,
        })
        .collect();
    let mut alive = slots.len();
    let commas = |alive: usize| alive.saturating_sub(1);
    let mut size = fixed_size(fields) + slots.iter().map(|s| s.size).sum::<usize>() + commas(alive);

    // Phase 1. The first droppable slot only moves forward: earlier ones are checkpoints or gone.
    let mut omitted_messages = 0u64;
    let mut dropped_bytes = 0u64;
    let newest = slots.len().checked_sub(1);
    let mut next = 0;
    while size > max {
        while next < slots.len() && slots[next].item.checkpoint {
            next += 1;
        }
        if next >= slots.len() || Some(next) == newest {
            break;
        }
        let slot = &mut slots[next];
        slot.alive = false;
        dropped_bytes += slot.item.text.len() as u64;
        size -= slot.size + usize::from(alive > 1);
        alive -= 1;
        omitted_messages += 1;
        next += 1;
    }

    // Phase 2.
    while size > max {
        let Some(longest) = longest_alive(&slots) else {
            return Err(DoesNotFit { needed: size, max });
        };
        let slot = &mut slots[longest];
        let current = slot.text.len();
        if current == 0 {
            return Err(DoesNotFit { needed: size, max });
        }
        let target = current.saturating_sub(size - max);
        let (text, omitted) = truncate_with_notice(&slot.item.text, target);
        if text == slot.text.as_ref() {
            return Err(DoesNotFit { needed: size, max });
        }
        let new_size = item_size(slot.item.role, &text);
        size = size - slot.size + new_size;
        slot.size = new_size;
        slot.text = Cow::Owned(text);
        slot.omitted_bytes = omitted;
    }

    let mut json = String::with_capacity(size);
    write_fields_open(&mut json, fields);
    let mut first = true;
    let mut retained_omitted = 0u64;
    for slot in slots.iter().filter(|s| s.alive) {
        if !first {
            json.push(',');
        }
        first = false;
        json.push_str(item_prefix(slot.item.role));
        write_str(&mut json, &slot.text);
        json.push('}');
        retained_omitted += slot.omitted_bytes;
    }
    json.push_str("]}");
    debug_assert_eq!(json.len(), size);
    let omitted_bytes = retained_omitted + dropped_bytes;
    Ok(Retained {
        json,
        stats: Stats {
            compacted,
            original_messages,
            retained_messages: alive as u64,
            omitted_messages,
            omitted_bytes,
            truncated: omitted_messages > 0 || omitted_bytes > 0,
        },
    })
}

/// The first alive slot with the most text bytes (strictly greater wins, so ties keep the earliest).
fn longest_alive(slots: &[Slot<'_>]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, s) in slots.iter().enumerate().filter(|(_, s)| s.alive) {
        if best.is_none_or(|(_, len)| s.text.len() > len) {
            best = Some((i, s.text.len()));
        }
    }
    best.map(|(i, _)| i)
}

fn write_fields_open(out: &mut String, f: &Fields<'_>) {
    out.push_str(r#"{"sessionId":"#);
    write_str(out, f.session_id);
    out.push_str(r#","label":"#);
    write_str(out, f.label);
    out.push_str(r#","cwd":"#);
    write_opt_str(out, f.cwd);
    out.push_str(r#","capturedThroughSeq":"#);
    match f.captured_through_seq {
        Some(seq) => {
            let _ = write!(out, "{seq}");
        }
        None => out.push_str("null"),
    }
    out.push_str(r#","conversation":["#);
}

const NOTICE_HEAD: &str = "\n[\u{2026} omitted ";
const NOTICE_TAIL: &str = " UTF-8 bytes \u{2026}]";

/// Keeps the head and tail of `text` within `max_out` bytes, notice included: DSH's `TextRetainer`
/// binary search over the kept byte count `r` (head `ceil(r/2)`, tail `floor(r/2)`, each cut back to
/// whole characters), keeping the last `r` whose result fits. Returns the text and the bytes omitted.
pub fn truncate_with_notice(text: &str, max_out: usize) -> (String, u64) {
    let total = text.len();
    let mut best: Option<(usize, usize)> = None;
    let (mut lo, mut hi) = (0usize, max_out);
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let (head, tail_start) = cut(text, mid);
        let kept = head + (total - tail_start);
        let omitted = total - kept;
        if kept + notice_len(omitted) <= max_out {
            best = Some((head, tail_start));
            lo = mid + 1;
        } else if mid == 0 {
            break;
        } else {
            hi = mid - 1;
        }
    }
    match best {
        None => (String::new(), total as u64),
        Some((head, tail_start)) => {
            let omitted = total - head - (total - tail_start);
            let mut out = String::with_capacity(max_out);
            out.push_str(&text[..head]);
            out.push_str(&text[tail_start..]);
            let _ = write!(out, "{NOTICE_HEAD}{omitted}{NOTICE_TAIL}");
            (out, omitted as u64)
        }
    }
}

/// For `r` kept bytes: the head's end and the tail's start, both on character boundaries. The tail never
/// reaches back into the head (the search only asks for less than the whole text, but a text is never
/// kept twice whatever it asks).
fn cut(text: &str, r: usize) -> (usize, usize) {
    let total = text.len();
    let mut head = r.div_ceil(2).min(total);
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail_start = total - (r / 2).min(total);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    (head, tail_start.max(head))
}

fn notice_len(omitted: usize) -> usize {
    NOTICE_HEAD.len() + decimal_len(omitted) + NOTICE_TAIL.len()
}

fn decimal_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(role: Role, text: &str, checkpoint: bool) -> Item<'static> {
        Item {
            role,
            text: Cow::Owned(text.to_string()),
            checkpoint,
        }
    }

    fn fields() -> Fields<'static> {
        Fields {
            session_id: "source",
            label: "source",
            cwd: None,
            captured_through_seq: Some(15),
        }
    }

    /// Spec §6.7's worked example, byte for byte.
    #[test]
    fn worked_example() {
        let latest = format!("latest-{}", "界".repeat(400));
        let items = vec![
            item(
                Role::User,
                "<compacted-summary>checkpoint</compacted-summary>",
                true,
            ),
            item(Role::User, "recent user", false),
            item(Role::Assistant, "visible answer", false),
            item(Role::Assistant, &latest, false),
        ];
        let r = retain(&fields(), items, 360).unwrap();
        assert_eq!(r.json.len(), 358);
        let truncated = format!(
            "latest-{}\n[\u{2026} omitted 1092 UTF-8 bytes \u{2026}]",
            "界".repeat(36)
        );
        let expected = format!(
            r#"{{"sessionId":"source","label":"source","cwd":null,"capturedThroughSeq":15,"conversation":[{{"role":"user","text":"\u003ccompacted-summary>checkpoint\u003c/compacted-summary>"}},{{"role":"assistant","text":{}}}]}}"#,
            serde_json::to_string(&truncated).unwrap()
        );
        assert_eq!(r.json, expected);
        assert_eq!(
            r.stats,
            Stats {
                compacted: true,
                original_messages: 4,
                retained_messages: 2,
                omitted_messages: 2,
                omitted_bytes: 1117,
                truncated: true,
            }
        );
    }

    #[test]
    fn within_budget_nothing_changes() {
        let items = vec![
            item(Role::User, "hi", false),
            item(Role::Assistant, "yo", false),
        ];
        let r = retain(&fields(), items, 65_536).unwrap();
        assert_eq!(
            r.json,
            r#"{"sessionId":"source","label":"source","cwd":null,"capturedThroughSeq":15,"conversation":[{"role":"user","text":"hi"},{"role":"assistant","text":"yo"}]}"#
        );
        assert!(!r.stats.truncated && !r.stats.compacted);
        assert_eq!(r.stats.retained_messages, 2);
        let empty = retain(&fields(), Vec::new(), 200).unwrap();
        assert!(empty.json.ends_with(r#""conversation":[]}"#));
        assert_eq!(empty.stats, Stats::default());
    }

    #[test]
    fn fixed_fields_that_cannot_fit_fail_whole() {
        let e = retain(&fields(), vec![item(Role::User, "x", false)], 16).unwrap_err();
        assert_eq!(e.max, 16);
        assert!(e.needed > 16);
        assert!(retain(&fields(), Vec::new(), 16).is_err());
    }

    #[test]
    fn checkpoints_are_never_dropped_and_cut_last() {
        // Phase 1 cannot drop the checkpoint, so phase 2 cuts it rather than dropping it.
        let items = vec![
            item(Role::User, &"c".repeat(500), true),
            item(Role::User, "newest", false),
        ];
        let r = retain(&fields(), items, 300).unwrap();
        assert!(r.json.len() <= 300);
        assert_eq!(r.stats.retained_messages, 2);
        assert_eq!(r.stats.omitted_messages, 0);
        assert!(r.json.contains("omitted"));
    }

    #[test]
    fn truncation_keeps_head_and_tail_on_character_boundaries() {
        let (t, omitted) = truncate_with_notice("abcdefghijklmnopqrstuvwxyz0123456789abcdefgh", 40);
        assert!(t.len() <= 40);
        assert!(t.starts_with("abc"));
        assert_eq!(
            omitted as usize,
            44 - (t.len() - notice_len(omitted as usize))
        );
        // Nothing fits: the empty text, every byte omitted.
        assert_eq!(truncate_with_notice("abcdef", 3), (String::new(), 6));
        let (t, _) = truncate_with_notice(&"界".repeat(100), 60);
        assert!(t.starts_with('界'));
    }

    proptest! {
        #[test]
        fn retained_output_fits_and_parses(texts in proptest::collection::vec(("\\PC{0,300}", any::<bool>()), 0..12),
                                          max in 150usize..2000) {
            let items: Vec<Item<'_>> = texts.iter().enumerate()
                .map(|(i, (t, cp))| item(if i % 2 == 0 { Role::User } else { Role::Assistant }, t, *cp))
                .filter(|i| !i.text.is_empty())
                .collect();
            let n = items.len() as u64;
            if let Ok(r) = retain(&fields(), items, max) {
                prop_assert!(r.json.len() <= max);
                let v: serde_json::Value = serde_json::from_str(&r.json).unwrap();
                prop_assert_eq!(v["conversation"].as_array().unwrap().len() as u64, r.stats.retained_messages);
                prop_assert_eq!(r.stats.original_messages, n);
                prop_assert_eq!(r.stats.retained_messages + r.stats.omitted_messages, n);
            }
        }
    }
}
