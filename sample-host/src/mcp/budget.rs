//! Fitting a tool's answer into its byte budget (`maxBytes`): items are taken in order while they fit;
//! an item that cannot fit even alone is cut (its longest texts shortened, with a marker saying how
//! much was left out), so every page makes progress and no answer is ever larger than asked.

use serde_json::{json, Map, Value};

/// The budget when a call gives none: a few thousand tokens, small next to a model's context.
pub const DEFAULT_MAX_BYTES: usize = 20_000;
/// A citation is read whole more often than not; its default fits the largest one the plugin makes
/// for a single source, and stays below what clients such as Claude Code accept from one tool call.
pub const DEFAULT_CITE_MAX_BYTES: usize = 90_000;
/// The smallest budget a call may ask for: room for the page's frame and one cut item.
pub const MIN_MAX_BYTES: usize = 1_024;
/// The largest budget a call may ask for.
pub const MAX_MAX_BYTES: usize = 1_048_576;

/// Length of `value` as compact JSON text.
pub fn json_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(0, |s| s.len())
}

/// Items taken for one page.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    pub items: Vec<Value>,
    /// How many input items were used up (taken, cut, or passed over by `keep`).
    pub consumed: usize,
    /// Whether an item had to be cut to fit.
    pub cut: bool,
}

/// Takes items in order while their JSON (with the commas between them) fits in `room` bytes. The
/// first item kept is always taken, cut to `room` if it is larger. Items `keep` refuses are used up
/// without being taken (the calling session, left out of results).
pub fn take(
    items: impl IntoIterator<Item = Value>,
    room: usize,
    keep: impl Fn(&Value) -> bool,
) -> Taken {
    let mut taken = Taken {
        items: Vec::new(),
        consumed: 0,
        cut: false,
    };
    let mut used = 0usize;
    for item in items {
        if !keep(&item) {
            taken.consumed += 1;
            continue;
        }
        let comma = usize::from(!taken.items.is_empty());
        let len = json_len(&item);
        if used + comma + len <= room {
            used += comma + len;
            taken.items.push(item);
            taken.consumed += 1;
            continue;
        }
        if taken.items.is_empty() {
            let item = cut_to_fit(item, room);
            used += json_len(&item);
            taken.items.push(item);
            taken.consumed += 1;
            taken.cut = true;
        }
        break;
    }
    debug_assert!(used <= room || room < MIN_ITEM_ROOM);
    taken
}

/// Below this, even a placeholder may not fit; the callers' minimum budget keeps room above it.
const MIN_ITEM_ROOM: usize = 160;

/// Strings no longer than this are never cut: they are ids, types and labels, not bulk text.
const SHORT: usize = 48;

/// `value`, cut to at most `room` bytes of JSON: its longest strings are shortened (each ending with a
/// marker saying how many bytes were left out) until it fits; if it still does not (very many short
/// strings), a placeholder keeps its short scalar fields and says how large it was.
pub fn cut_to_fit(mut value: Value, room: usize) -> Value {
    let original = json_len(&value);
    loop {
        let len = json_len(&value);
        if len <= room {
            return value;
        }
        let Some(longest) = longest_string(&mut value) else {
            break;
        };
        if longest.len() <= SHORT {
            break;
        }
        let excess = len - room;
        let full = longest.len();
        // The marker's own length, and slack for escapes in what is kept, come out of the kept part.
        let marker_room = 40;
        let keep = full.saturating_sub(excess + marker_room);
        let keep = floor_char_boundary(longest, keep.min(full));
        let marker = format!("…[cut {} bytes]", full - keep);
        longest.truncate(keep);
        longest.push_str(&marker);
        if longest.len() >= full {
            // Nothing left to gain from this string; only a placeholder will do.
            break;
        }
    }
    placeholder(&value, original, room)
}

fn placeholder(value: &Value, original: usize, room: usize) -> Value {
    let mut kept = Map::new();
    if let Value::Object(fields) = value {
        for (key, field) in fields {
            let short = match field {
                Value::String(s) => s.len() <= SHORT,
                Value::Number(_) | Value::Bool(_) | Value::Null => true,
                _ => false,
            };
            if short {
                kept.insert(key.clone(), field.clone());
            }
        }
    }
    kept.insert(
        "omitted".into(),
        json!(format!(
            "this item is {original} bytes of JSON; ask for it alone with a larger maxBytes"
        )),
    );
    let mut out = Value::Object(kept);
    // Keys are dropped from the end until it fits (the earlier keys name the item).
    while json_len(&out) > room {
        let Value::Object(fields) = &mut out else {
            break;
        };
        let Some(last) = fields.keys().rev().find(|k| *k != "omitted").cloned() else {
            break;
        };
        fields.shift_remove(&last);
    }
    out
}

fn longest_string(value: &mut Value) -> Option<&mut String> {
    fn walk<'a>(value: &'a mut Value, best: &mut Option<&'a mut String>) {
        match value {
            Value::String(s) if best.as_ref().is_none_or(|b| s.len() > b.len()) => {
                *best = Some(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, best)),
            Value::Object(fields) => fields.values_mut().for_each(|v| walk(v, best)),
            _ => {}
        }
    }
    let mut best = None;
    walk(value, &mut best);
    best
}

/// The largest char boundary of `s` at or below `at`.
pub fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Fills `frame[list]` with what fits of `items` in `budget` bytes and sets `nextCursor`: the cursor
/// of the items consumed (`cursor_at`) when some are left, else `end`. `worst` is the longest cursor
/// this page could carry, reserved before the items are taken, so the whole answer stays in budget.
#[allow(clippy::too_many_arguments)]
pub fn page(
    mut frame: Map<String, Value>,
    list: &str,
    items: Vec<Value>,
    budget: usize,
    keep: &dyn Fn(&Value) -> bool,
    worst: Option<usize>,
    cursor_at: &dyn Fn(usize) -> String,
    end: Option<String>,
) -> Value {
    let total = items.len();
    let mut sized = frame.clone();
    sized.insert(
        "nextCursor".into(),
        json!("x".repeat(worst.unwrap_or(0).max(4))),
    );
    sized.insert("cut".into(), json!(true));
    let room = budget.saturating_sub(json_len(&Value::Object(sized)));
    let taken = take(items, room, keep);
    let next = if taken.consumed < total {
        Some(cursor_at(taken.consumed))
    } else {
        end
    };
    frame.insert(list.into(), Value::Array(taken.items));
    frame.insert("nextCursor".into(), json!(next));
    if taken.cut {
        frame.insert("cut".into(), json!(true));
    }
    Value::Object(frame)
}

/// Inserts `items` as `frame[key]`, as many as fit in `room` bytes; when some do not, also
/// `"<key>Omitted": N`.
pub fn insert_bounded(frame: &mut Map<String, Value>, key: &str, items: Vec<Value>, room: usize) {
    let total = items.len();
    let taken = take(items, room, |_| true);
    let kept = if taken.cut {
        taken.items.len() - 1
    } else {
        taken.items.len()
    };
    let mut items = taken.items;
    items.truncate(kept);
    frame.insert(key.into(), Value::Array(items));
    if kept < total {
        frame.insert(format!("{key}Omitted"), json!(total - kept));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, text: &str) -> Value {
        json!({"seq": seq, "type": "tool/result", "data": {"output": text}})
    }

    #[test]
    fn items_are_taken_while_they_fit_and_the_rest_is_left() {
        let items: Vec<Value> = (0..10).map(|i| event(i, "0123456789")).collect();
        let one = json_len(&items[0]);
        let taken = take(items.clone(), one * 3 + 2, |_| true);
        assert_eq!(taken.items, items[..3].to_vec());
        assert_eq!(taken.consumed, 3);
        assert!(!taken.cut);
        let all = take(items.clone(), 100_000, |_| true);
        assert_eq!(all.consumed, 10);
    }

    #[test]
    fn an_item_too_large_alone_is_cut_to_the_room_with_a_marker() {
        let big = event(7, &"é".repeat(50_000));
        let taken = take(vec![big, event(8, "next")], 2_000, |_| true);
        assert_eq!(taken.consumed, 1, "the next item waits for the next page");
        assert!(taken.cut);
        let cut = &taken.items[0];
        assert!(json_len(cut) <= 2_000, "{}", json_len(cut));
        assert_eq!(cut["seq"], 7);
        let output = cut["data"]["output"].as_str().unwrap();
        assert!(
            output.starts_with("éé") && output.contains("…[cut "),
            "{output}"
        );
    }

    #[test]
    fn many_short_strings_fall_back_to_a_placeholder_that_names_the_item() {
        let many: Vec<String> = (0..2_000).map(|i| format!("s{i}")).collect();
        let item = json!({"seq": 3, "type": "x", "data": many});
        let cut = cut_to_fit(item, 300);
        assert!(json_len(&cut) <= 300);
        assert_eq!(cut["seq"], 3);
        assert!(cut["omitted"].as_str().unwrap().contains("bytes"), "{cut}");
    }

    #[test]
    fn a_page_with_its_cursor_never_exceeds_its_budget() {
        let items: Vec<Value> = (0..60)
            .map(|i| event(i, &"x".repeat(i as usize * 40)))
            .collect();
        let cursor = |n: usize| format!("c{n:0>60}");
        for budget in [MIN_MAX_BYTES, 1_500, 4_000, 20_000] {
            let mut frame = Map::new();
            frame.insert("items".into(), json!([]));
            frame.insert("nextCursor".into(), Value::Null);
            insert_bounded(
                &mut frame,
                "skipped",
                vec![json!({"path": "p".repeat(6_000)})],
                budget / 4,
            );
            let out = page(
                frame,
                "items",
                items.clone(),
                budget,
                &|_| true,
                Some(cursor(60).len()),
                &cursor,
                None,
            );
            assert!(json_len(&out) <= budget, "{budget}: {}", json_len(&out));
            let n = out["items"].as_array().unwrap().len();
            assert_eq!(out["nextCursor"], json!(cursor(n)), "{budget}");
            assert!(
                out.get("skippedOmitted").is_some(),
                "a 6000-byte problem does not fit {}",
                budget / 4
            );
        }
        let mut frame = Map::new();
        frame.insert("items".into(), json!([]));
        frame.insert("nextCursor".into(), Value::Null);
        let out = page(
            frame,
            "items",
            items[..2].to_vec(),
            20_000,
            &|_| true,
            None,
            &cursor,
            Some("end".into()),
        );
        assert_eq!(out["nextCursor"], "end", "all taken: the page's own end");
    }

    #[test]
    fn refused_items_are_used_up_but_not_taken() {
        let items: Vec<Value> = (0..4).map(|i| event(i, "x")).collect();
        let taken = take(items, 10_000, |v| v["seq"] != 1);
        assert_eq!(taken.consumed, 4);
        let seqs: Vec<u64> = taken
            .items
            .iter()
            .map(|v| v["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [0, 2, 3]);
    }
}
