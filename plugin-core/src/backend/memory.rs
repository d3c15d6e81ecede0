//! The in-memory twin: the [`IndexBackend`] promises with nothing but maps, for unit tests and as the
//! reference the other backends are checked against.

use std::collections::BTreeMap;

use super::lexer::{self, Lexer};
use super::{
    event_passes, Applied, BackendError, DocBody, DocMatch, IndexBackend, MatchQuery,
    StoredSession, Write,
};
use crate::index::cjk;

struct Doc {
    seq: u64,
    kind: String,
    time: i64,
    label: dsh_codec::surface::Label,
    text: String,
    len: i64,
    tokens: Vec<Vec<u8>>,
}

/// Sessions by id, each with its documents.
#[derive(Default)]
pub struct MemoryBackend {
    sessions: BTreeMap<String, (StoredSession, Vec<Doc>)>,
    generation: u64,
    /// When set, the next [`IndexBackend::apply`] fails after doing its work (all of which is dropped):
    /// tests of "never half a batch".
    pub fail_next_apply: bool,
}

impl MemoryBackend {
    pub fn new() -> Self {
        Self::default()
    }
}

impl IndexBackend for MemoryBackend {
    fn server(&self) -> String {
        "memory".into()
    }

    fn generation(&mut self) -> Result<u64, BackendError> {
        Ok(self.generation)
    }

    fn sessions(&mut self) -> Result<Vec<StoredSession>, BackendError> {
        Ok(self.sessions.values().map(|(s, _)| s.clone()).collect())
    }

    fn apply(&mut self, batch: Vec<Write>) -> Result<Applied, BackendError> {
        let lexer = Lexer::new()?;
        // Work on a copy of the touched entries so a failure leaves everything as it was.
        let mut next: BTreeMap<String, Option<(StoredSession, Vec<Doc>)>> = BTreeMap::new();
        let mut conflicts = Vec::new();
        let generation = self.generation + 1;
        for w in batch {
            match w {
                Write::Remove { collection, id } => {
                    let owned = match next.get(&id) {
                        Some(Some((s, _))) => s.collection == collection,
                        Some(None) => false,
                        None => self
                            .sessions
                            .get(&id)
                            .is_some_and(|(s, _)| s.collection == collection),
                    };
                    if owned {
                        next.insert(id, None);
                    }
                }
                Write::Put(p) => {
                    let id = p.header.id.clone();
                    let holder = match next.get(&id) {
                        Some(Some((s, _))) => Some(s.collection.clone()),
                        Some(None) => None,
                        None => self.sessions.get(&id).map(|(s, _)| s.collection.clone()),
                    };
                    if holder.is_some_and(|c| c != p.collection) {
                        conflicts.push(id);
                        continue;
                    }
                    let mut docs = Vec::with_capacity(p.docs.len());
                    for d in p.docs {
                        let text = cjk::sanitize(&d.text).into_owned();
                        docs.push(Doc {
                            seq: d.seq,
                            kind: d.kind,
                            time: d.time,
                            label: d.label,
                            len: dsh_codec::text::codepoint_len(&text) as i64,
                            tokens: lexer.tokens(&text)?,
                            text,
                        });
                    }
                    let stored = StoredSession {
                        collection: p.collection,
                        header: p.header,
                        stamp: p.stamp,
                        checkpoint: p.checkpoint,
                        title: p.title,
                        event_count: p.event_count,
                        generation,
                    };
                    next.insert(id, Some((stored, docs)));
                }
            }
        }
        if std::mem::take(&mut self.fail_next_apply) {
            return Err(BackendError::Failed {
                server: self.server(),
                cause: "injected failure".into(),
            });
        }
        for (id, entry) in next {
            match entry {
                Some(e) => self.sessions.insert(id, e),
                None => self.sessions.remove(&id),
            };
        }
        self.generation = generation;
        Ok(Applied {
            generation,
            conflicts,
        })
    }

    fn matches(&mut self, q: &MatchQuery<'_>) -> Result<Vec<DocMatch>, BackendError> {
        let mut out = Vec::new();
        for (id, (_, docs)) in &self.sessions {
            if q.session.is_some_and(|s| s != id) {
                continue;
            }
            for d in docs {
                if !event_passes(d.seq, &d.kind, d.time, d.label, q.events) {
                    continue;
                }
                if let Some(spans) = lexer::spans(&d.tokens, q.phrases) {
                    out.push(DocMatch {
                        session: id.clone(),
                        seq: d.seq,
                        time: d.time,
                        len: d.len,
                        spans,
                    });
                }
            }
        }
        Ok(out)
    }

    fn bodies(&mut self, docs: &[(String, u64)]) -> Result<Vec<DocBody>, BackendError> {
        docs.iter()
            .map(|(id, seq)| {
                self.sessions
                    .get(id)
                    .and_then(|(_, ds)| ds.iter().find(|d| d.seq == *seq))
                    .map(|d| DocBody {
                        kind: d.kind.clone(),
                        label: d.label,
                        text: d.text.clone(),
                    })
                    .ok_or_else(|| BackendError::Failed {
                        server: "memory".into(),
                        cause: format!("document {seq} of session {id:?} is gone"),
                    })
            })
            .collect()
    }
}
