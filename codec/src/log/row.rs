//! A checked packed row (spec §1.6) as the reader holds it: one value its members share, yielded one at
//! a time.
//!
//! Members of packed rows are most events of a real log, and the consumers of a read look at nothing of
//! them but their seq and time. A row used to become one event (a text string, a payload box, a queue
//! slot) per member as soon as it was read; now its texts are read into one buffer, the row is checked
//! whole by [`super::packed`] (all or nothing, as before), and the reader takes members from a
//! [`RowCursor`] as it yields them. A [`Member`] is the row (shared), its index, seq and time; its
//! `data` is built from the row only if something asks for it ([`Member::data`], then
//! [`super::payload::Payload`]'s own laziness).

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Number, Value};

use super::event::Event;
use super::packed::RowKind;
use super::payload::{ChunkDelta, Payload};

/// A row's member texts (`texts` or `args`), one after another in one string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RowTexts {
    buf: String,
    /// Where each text ends in `buf`.
    ends: Vec<usize>,
}

impl RowTexts {
    /// Texts of at most `bytes` bytes in all (a bound, such as the length of the line they are read
    /// from), about `count` of them.
    pub(crate) fn with_capacity(bytes: usize, count: usize) -> Self {
        Self {
            buf: String::with_capacity(bytes),
            ends: Vec::with_capacity(count),
        }
    }

    pub(crate) fn push(&mut self, text: &str) {
        self.buf.push_str(text);
        self.ends.push(self.buf.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The text of member `k` (empty past the end).
    pub(crate) fn get(&self, k: usize) -> &str {
        let start = match k.checked_sub(1) {
            Some(before) => self.ends.get(before).copied().unwrap_or(0),
            None => 0,
        };
        let end = self.ends.get(k).copied().unwrap_or(start);
        self.buf.get(start..end).unwrap_or_default()
    }
}

/// A packed row whose every rule held (see [`super::packed`]): what its members share and each one's
/// text. Built only by the row checks.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) kind: RowKind,
    pub(crate) turn: Number,
    pub(crate) step: Number,
    pub(crate) index: Number,
    /// Tool-call rows: the call id (empty otherwise).
    pub(crate) id: String,
    /// Tool-call rows: the call name, when the row has one.
    pub(crate) name: Option<String>,
    pub(crate) seq0: u64,
    pub(crate) time0: i64,
    /// The gaps between members' times, each checked to keep the running time a safe integer.
    pub(crate) dt: Vec<i64>,
    /// Non-empty.
    pub(crate) texts: RowTexts,
}

impl Row {
    /// Members in the row.
    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    /// Member `k`'s `data` as the row expands it, keys in DSH's order: `{turn, step, chunk: {type,
    /// index, …}}`.
    pub(crate) fn member_data(&self, k: usize) -> Value {
        let text = Value::String(self.texts.get(k).to_owned());
        let mut chunk = Map::with_capacity(5);
        chunk.insert("type".into(), self.kind.delta_type().into());
        chunk.insert("index".into(), Value::Number(self.index.clone()));
        match self.kind {
            RowKind::ToolCall => {
                chunk.insert("id".into(), Value::String(self.id.clone()));
                if let Some(name) = &self.name {
                    chunk.insert("name".into(), Value::String(name.clone()));
                }
                chunk.insert("argumentsDelta".into(), text);
            }
            RowKind::Text | RowKind::Reasoning => {
                chunk.insert("text".into(), text);
            }
        }
        let mut data = Map::with_capacity(3);
        data.insert("turn".into(), Value::Number(self.turn.clone()));
        data.insert("step".into(), Value::Number(self.step.clone()));
        data.insert("chunk".into(), Value::Object(chunk));
        Value::Object(data)
    }

    /// The members, in order.
    pub(crate) fn members(self: &Arc<Self>) -> impl Iterator<Item = Member> {
        let mut cursor = RowCursor::new(Arc::clone(self));
        std::iter::from_fn(move || cursor.next_member())
    }
}

/// The members of a row not yet yielded.
#[derive(Debug)]
pub(crate) struct RowCursor {
    row: Arc<Row>,
    next: usize,
    /// The time of member `next`.
    time: i64,
}

impl RowCursor {
    pub(crate) fn new(row: Arc<Row>) -> Self {
        let time = row.time0;
        Self { row, next: 0, time }
    }

    /// The seq of the row's first member.
    pub(crate) fn seq0(&self) -> u64 {
        self.row.seq0
    }

    /// Members in the row, yielded or not.
    pub(crate) fn len(&self) -> usize {
        self.row.len()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.next >= self.row.len()
    }

    /// The next member, if any.
    pub(crate) fn next_member(&mut self) -> Option<Member> {
        let k = self.next;
        if k >= self.row.len() {
            return None;
        }
        let member = Member {
            // The row checks proved `seq0 + k` and every running time safe integers.
            seq: self.row.seq0.saturating_add(k as u64),
            time: self.time,
            row: Arc::clone(&self.row),
            k,
            data: OnceLock::new(),
        };
        self.next += 1;
        if let Some(gap) = self.row.dt.get(k) {
            self.time = self.time.saturating_add(*gap);
        }
        Some(member)
    }
}

/// One member of a packed row: an `assistant/chunk` event with no surface keys and a safe seq and time,
/// whose data is built only if something reads it.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) seq: u64,
    pub(crate) time: i64,
    row: Arc<Row>,
    k: usize,
    data: OnceLock<Payload>,
}

impl Member {
    pub(crate) const KIND: &'static str = "assistant/chunk";

    /// The member's `data`: a payload that builds its value on first look.
    pub(crate) fn data(&self) -> &Payload {
        self.data.get_or_init(|| self.payload())
    }

    fn payload(&self) -> Payload {
        Payload::chunk(ChunkDelta {
            row: Arc::clone(&self.row),
            k: self.k,
        })
    }

    pub(crate) fn into_event(self) -> Event {
        let data = match self.data.into_inner() {
            Some(data) => data,
            None => Payload::chunk(ChunkDelta {
                row: self.row,
                k: self.k,
            }),
        };
        Event::with_payload(Self::KIND, self.seq, self.time, data)
    }

    /// [`Member::into_event`] for a member that stays where it is (a borrowed read).
    pub(crate) fn to_event(&self) -> Event {
        Event::with_payload(Self::KIND, self.seq, self.time, self.data().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(texts: &[&str], dt: Vec<i64>) -> Arc<Row> {
        let mut all = RowTexts::default();
        for text in texts {
            all.push(text);
        }
        Arc::new(Row {
            kind: RowKind::Text,
            turn: 1.into(),
            step: 2.into(),
            index: 0.into(),
            id: String::new(),
            name: None,
            seq0: 7,
            time0: 100,
            dt,
            texts: all,
        })
    }

    #[test]
    fn texts_in_one_buffer_give_each_member_its_own() {
        let mut texts = RowTexts::default();
        for text in ["he", "", "llo", "é"] {
            texts.push(text);
        }
        let got: Vec<&str> = (0..5).map(|k| texts.get(k)).collect();
        assert_eq!(got, ["he", "", "llo", "é", ""]);
        assert_eq!(texts.len(), 4);
    }

    #[test]
    fn a_cursor_yields_members_with_running_times_and_consecutive_seqs() {
        let row = row(&["a", "b", "c"], vec![5, -2]);
        let got: Vec<(u64, i64)> = row.members().map(|m| (m.seq, m.time)).collect();
        assert_eq!(got, [(7, 100), (8, 105), (9, 103)]);
        let mut cursor = RowCursor::new(row);
        assert_eq!(
            (cursor.seq0(), cursor.len(), cursor.is_done()),
            (7, 3, false)
        );
        while cursor.next_member().is_some() {}
        assert!(cursor.is_done());
    }

    #[test]
    fn a_member_builds_its_data_only_when_asked_and_once() {
        let row = row(&["x", "y"], vec![1]);
        let member = row.members().nth(1).unwrap();
        assert!(member.data.get().is_none());
        let data = member.data();
        assert!(!data.is_built());
        assert_eq!(
            data.to_string(),
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"y"}}"#
        );
        assert!(std::ptr::eq(member.data(), data));
        assert_eq!(member.to_event(), member.into_event());
    }
}
