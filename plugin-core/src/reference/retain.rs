//! The serialised reference object of one cited source and its retention budget (spec §6.7).
//!
//! The object is `{"sessionId","label","cwd","capturedThroughSeq","conversation":[{"role","text"},…]}`
//! in that key order, measured as tagSafeJSON bytes. Over budget, phase 1 drops whole messages oldest
//! first (never a checkpoint, never the newest item) and phase 2 cuts the middle out of the longest text
//! with [`truncate_with_notice`]'s binary search, which is replicated step for step because the output
//! must be byte-identical to DSH's, not merely a good fit.
//!
//! Cost: sizes are kept running, phase 1 walks the items once from the newest and measures the escaped
//! length only of what it keeps (a dropped text costs nothing but its byte count), and phase 2's search
//! is arithmetic on one text; only the result is built. A 10 MB source is never re-serialised, and
//! most of it is never even scanned. A test checks the result against the algorithm transcribed
//! literally (re-serialising for every check).

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
    /// The truncation of the original text, once phase 2 has cut it.
    cut: Option<String>,
    omitted_bytes: u64,
    /// Serialised size of this item, `{…}` included.
    size: usize,
    alive: bool,
}

impl Slot<'_> {
    /// The text as retained: the original, or its truncation.
    fn text(&self) -> &str {
        self.cut.as_deref().unwrap_or(&self.item.text)
    }
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
            size: 0,
            cut: None,
            item,
            omitted_bytes: 0,
            alive: true,
        })
        .collect();

    // Phase 1 drops the oldest droppable messages (not checkpoints, not the newest) until the object
    // fits. The size only shrinks as they go, so the messages it keeps are the longest run of newest
    // droppables that fits beside the fixed fields, the checkpoints and the newest message: found by
    // walking back from the newest, measuring only what is kept (plus the one message that does not fit),
    // never the text of everything older.
    let newest = slots.len().checked_sub(1);
    let mut alive = 0usize;
    let mut size = fixed_size(fields);
    for (i, slot) in slots.iter_mut().enumerate() {
        if slot.item.checkpoint || Some(i) == newest {
            slot.size = item_size(slot.item.role, &slot.item.text);
            size += slot.size;
            alive += 1;
        }
    }
    let commas = |alive: usize| alive.saturating_sub(1);
    let mut omitted_messages = 0u64;
    let mut dropped_bytes = 0u64;
    let mut overflowed = false;
    for i in (0..newest.unwrap_or(0)).rev() {
        let slot = &mut slots[i];
        if slot.item.checkpoint {
            continue;
        }
        if !overflowed {
            let with = |item: usize| size + item + commas(alive + 1);
            // The raw bytes bound the escaped size from below, so a huge text that cannot fit is never
            // scanned.
            let at_least = item_prefix(slot.item.role).len() + slot.item.text.len() + 3;
            if with(at_least) <= max {
                slot.size = item_size(slot.item.role, &slot.item.text);
                if with(slot.size) <= max {
                    size += slot.size;
                    alive += 1;
                    continue;
                }
            }
            overflowed = true;
        }
        slot.alive = false;
        dropped_bytes += slot.item.text.len() as u64;
        omitted_messages += 1;
    }
    size += commas(alive);

    // Phase 2.
    while size > max {
        let Some(longest) = longest_alive(&slots) else {
            return Err(DoesNotFit { needed: size, max });
        };
        let slot = &mut slots[longest];
        let current = slot.text().len();
        if current == 0 {
            return Err(DoesNotFit { needed: size, max });
        }
        let target = current.saturating_sub(size - max);
        let (text, omitted) = truncate_with_notice(&slot.item.text, target);
        if text == slot.text() {
            return Err(DoesNotFit { needed: size, max });
        }
        let new_size = item_size(slot.item.role, &text);
        size = size - slot.size + new_size;
        slot.size = new_size;
        slot.cut = Some(text);
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
        write_str(&mut json, slot.text());
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
        if best.is_none_or(|(_, len)| s.text().len() > len) {
            best = Some((i, s.text().len()));
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
    use std::borrow::Cow;

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

    /// The spec's `truncateWithNotice` transcribed literally: every candidate built as a string.
    fn literal_truncate(text: &str, max_out: usize) -> (String, u64) {
        let bytes = text.as_bytes();
        let total = bytes.len();
        let mut best = (String::new(), total as u64);
        let (mut lo, mut hi) = (0i64, max_out as i64);
        while lo <= hi {
            let r = ((lo + hi) / 2) as usize;
            let mut head = &bytes[..r.div_ceil(2).min(total)];
            while std::str::from_utf8(head).is_err() {
                head = &head[..head.len() - 1];
            }
            let mut tail = &bytes[total - (r / 2).min(total)..];
            while tail.first().is_some_and(|b| b & 0xC0 == 0x80) {
                tail = &tail[1..];
            }
            let kept = format!(
                "{}{}",
                std::str::from_utf8(head).unwrap(),
                std::str::from_utf8(tail).unwrap()
            );
            let omitted = total - kept.len();
            let candidate = format!("{kept}\n[\u{2026} omitted {omitted} UTF-8 bytes \u{2026}]");
            if candidate.len() <= max_out {
                best = (candidate, omitted as u64);
                lo = r as i64 + 1;
            } else {
                hi = r as i64 - 1;
            }
        }
        best
    }

    /// Spec §6.7 transcribed literally: the whole object re-serialised for every size check.
    fn literal_retain(
        f: &Fields<'_>,
        items: &[(Role, String, bool)],
        max: usize,
    ) -> Option<(String, Stats)> {
        struct R {
            role: Role,
            text: String,
            original: String,
            checkpoint: bool,
            omitted: u64,
        }
        let mut retained: Vec<R> = items
            .iter()
            .map(|(role, t, c)| R {
                role: *role,
                text: t.clone(),
                original: t.clone(),
                checkpoint: *c,
                omitted: 0,
            })
            .collect();
        let serialise = |retained: &[R]| {
            let conversation: Vec<serde_json::Value> = retained
                .iter()
                .map(|r| {
                    let role = if r.role == Role::User {
                        "user"
                    } else {
                        "assistant"
                    };
                    serde_json::json!({"role": role, "text": r.text})
                })
                .collect();
            serde_json::json!({"sessionId": f.session_id, "label": f.label, "cwd": f.cwd,
                "capturedThroughSeq": f.captured_through_seq, "conversation": conversation})
            .to_string()
            .replace('<', "\\u003c")
        };
        let (mut omitted_messages, mut dropped) = (0u64, 0u64);
        while serialise(&retained).len() > max {
            let newest = retained.len().wrapping_sub(1);
            let Some(k) = (0..retained.len()).find(|&k| !retained[k].checkpoint && k != newest)
            else {
                break;
            };
            dropped += retained[k].original.len() as u64;
            retained.remove(k);
            omitted_messages += 1;
        }
        while serialise(&retained).len() > max {
            let mut longest: Option<usize> = None;
            for (i, r) in retained.iter().enumerate() {
                if longest.is_none_or(|l| r.text.len() > retained[l].text.len()) {
                    longest = Some(i);
                }
            }
            let l = longest?;
            if retained[l].text.is_empty() {
                return None;
            }
            let excess = serialise(&retained).len() - max;
            let target = retained[l].text.len().saturating_sub(excess);
            let (text, omitted) = literal_truncate(&retained[l].original, target);
            if text == retained[l].text {
                return None;
            }
            retained[l].text = text;
            retained[l].omitted = omitted;
        }
        let omitted_bytes = retained.iter().map(|r| r.omitted).sum::<u64>() + dropped;
        let stats = Stats {
            compacted: items.iter().any(|i| i.2),
            original_messages: items.len() as u64,
            retained_messages: retained.len() as u64,
            omitted_messages,
            omitted_bytes,
            truncated: omitted_messages > 0 || omitted_bytes > 0,
        };
        Some((serialise(&retained), stats))
    }

    proptest! {
        #[test]
        fn retention_equals_the_literal_algorithm(
            texts in proptest::collection::vec(("[a<\"\\\\\n界😀 ]{1,120}", 0u8..10), 0..14),
            max in 100usize..1500,
        ) {
            let f = fields();
            let items: Vec<(Role, String, bool)> = texts
                .iter()
                .enumerate()
                .map(|(i, (t, k))| (if i % 3 == 1 { Role::Assistant } else { Role::User }, t.clone(), *k == 0))
                .collect();
            let ours = retain(
                &f,
                items.iter().map(|(r, t, c)| item(*r, t, *c)).collect(),
                max,
            );
            let literal = literal_retain(&f, &items, max);
            match (ours, literal) {
                (Ok(r), Some((json, stats))) => {
                    prop_assert_eq!(r.json, json);
                    prop_assert_eq!(r.stats, stats);
                }
                (Err(_), None) => {}
                (ours, literal) => prop_assert!(false, "ours {:?}, literal {:?}", ours, literal),
            }
        }

        #[test]
        fn truncation_is_the_spec_search_byte_for_byte(text in "\\PC{1,400}", cut in 0usize..400) {
            let max_out = cut.min(text.len() - 1);
            prop_assert_eq!(truncate_with_notice(&text, max_out), literal_truncate(&text, max_out));
        }

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
