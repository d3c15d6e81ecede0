//! The embedded SQLite index behind [`IndexBackend`]: delegates to `index::store` (rows, documents,
//! FTS5 queue, generation) and `search::sql` (the FTS5 statement with `dsh_spans`), so the trait sees
//! the very FTS5 tables and span counts the embedded search ranks by. The embedded search itself keeps
//! its own faster paths (hot phrases, spans-first reads) over the same file.
//!
//! A row's collection travels in its path column (`<collection>\n<id>`): the embedded index has one
//! collection per file, so nothing else reads it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_api::abi::host::DiskOnlyHost;

use super::{
    Applied, BackendError, DocBody, DocMatch, IndexBackend, MatchQuery, StoredSession, Write,
};
use crate::index::store::{self, label_of, Doc, Replacement, RowKey, SessionRow, Visibility};
use crate::index::{cjk, Index};

/// One FTS5 match: (sid, seq, time, len, spans).
type Found = (i64, i64, i64, i64, i64);

pub struct SqliteBackend {
    index: Index,
}

fn key_of(collection: &str, id: &str) -> PathBuf {
    PathBuf::from(format!("{collection}\n{id}"))
}

fn collection_of(row: &SessionRow) -> String {
    row.path
        .as_ref()
        .and_then(|p| p.to_str())
        .and_then(|p| p.split_once('\n'))
        .map(|(c, _)| c.to_string())
        .unwrap_or_default()
}

impl SqliteBackend {
    /// Opens (creating if missing) the index file at `path`, guarded as the embedded index is.
    pub fn open(path: &Path) -> Result<Self, BackendError> {
        let index = Index::open(path, Arc::new(DiskOnlyHost::default().boxed())).map_err(|e| {
            BackendError::Failed {
                server: path.display().to_string(),
                cause: e.message.to_string(),
            }
        })?;
        Ok(Self { index })
    }

    fn fail(&self, e: impl std::fmt::Display) -> BackendError {
        BackendError::Failed {
            server: self.server(),
            cause: e.to_string(),
        }
    }

    fn rows(&mut self) -> Result<Vec<SessionRow>, BackendError> {
        let conn = self
            .index
            .connection()
            .ok_or_else(|| self.fail("the index is closed"))?;
        store::load_rows(conn).map_err(|e| self.fail(e))
    }
}

impl IndexBackend for SqliteBackend {
    fn server(&self) -> String {
        self.index.path().display().to_string()
    }

    fn generation(&mut self) -> Result<u64, BackendError> {
        let conn = self
            .index
            .connection()
            .ok_or_else(|| self.fail("the index is closed"))?;
        store::state(conn).map(|s| s.0).map_err(|e| self.fail(e))
    }

    fn sessions(&mut self) -> Result<Vec<StoredSession>, BackendError> {
        Ok(self
            .rows()?
            .into_iter()
            .map(|r| StoredSession {
                collection: collection_of(&r),
                header: r.header,
                stamp: r.stamp,
                checkpoint: None,
                title: r.title,
                event_count: r.event_count,
                generation: r.generation,
            })
            .collect())
    }

    fn apply(&mut self, batch: Vec<Write>) -> Result<Applied, BackendError> {
        let rows: HashMap<String, (i64, String)> = self
            .rows()?
            .into_iter()
            .map(|r| (r.header.id.clone(), (r.sid, collection_of(&r))))
            .collect();
        let generation = self.generation()? + 1;
        let server = self.server();
        let fail = |e: rusqlite::Error| BackendError::Failed {
            server: server.clone(),
            cause: e.to_string(),
        };
        let conn = self
            .index
            .connection_mut()
            .ok_or_else(|| BackendError::Failed {
                server: server.clone(),
                cause: "the index is closed".into(),
            })?;
        store::begin_batch(conn).map_err(fail)?;
        let mut conflicts = Vec::new();
        let mut run = |conn: &mut rusqlite::Connection| -> rusqlite::Result<()> {
            let mut current = rows.clone();
            for w in &batch {
                match w {
                    Write::Remove { collection, id } => {
                        if let Some((sid, c)) = current.get(id) {
                            if c == collection {
                                store::delete_session(conn, *sid, generation)?;
                                current.remove(id);
                            }
                        }
                    }
                    Write::Put(p) => {
                        let id = &p.header.id;
                        let old = match current.get(id) {
                            Some((_, c)) if *c != p.collection => {
                                conflicts.push(id.clone());
                                continue;
                            }
                            Some((sid, _)) => Some(*sid),
                            None => None,
                        };
                        let key = RowKey::Persisted(key_of(&p.collection, id));
                        let docs = p.docs.iter().map(|d| {
                            Doc {
                                seq: d.seq,
                                kind: &d.kind,
                                time: d.time,
                                label: d.label,
                                text: d.text.as_str().into(),
                            }
                            .pack()
                        });
                        let sid = store::replace_session(
                            conn,
                            old,
                            &Replacement {
                                key: &key,
                                header: &p.header,
                                stamp: &p.stamp,
                                event_count: p.event_count,
                                title: p.title.clone(),
                                resume: None,
                                listed: None,
                            },
                            docs,
                            generation,
                        )?;
                        let visible = Visibility {
                            visible: true,
                            is_live: false,
                            is_persisted: true,
                        };
                        store::set_visibility(conn, &[(sid, visible)], generation)?;
                        current.insert(id.clone(), (sid, p.collection.clone()));
                    }
                }
            }
            Ok(())
        };
        match run(conn) {
            Ok(()) => store::commit_batch(conn).map_err(fail)?,
            Err(e) => {
                let _ = store::rollback_batch(conn);
                return Err(fail(e));
            }
        }
        Ok(Applied {
            generation,
            conflicts,
        })
    }

    fn matches(&mut self, q: &MatchQuery<'_>) -> Result<Vec<DocMatch>, BackendError> {
        // The tokens as FTS5 phrases: joined by the CJK separator (a declared separator), so they
        // tokenise back to exactly themselves.
        let phrase: String = q
            .phrases
            .iter()
            .map(|p| {
                let words: Vec<String> = p
                    .iter()
                    .map(|t| String::from_utf8_lossy(t).into_owned())
                    .collect();
                format!(
                    "\"{}\"",
                    words.join(&cjk::SEP.to_string()).replace('"', "\"\"")
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        let ids: HashMap<i64, String> = self
            .rows()?
            .into_iter()
            .map(|r| (r.sid, r.header.id))
            .collect();
        let sql = crate::search::sql::matches_query(&phrase, q.events);
        let conn = self
            .index
            .connection()
            .ok_or_else(|| self.fail("the index is closed"))?;
        let run = || -> rusqlite::Result<Vec<Found>> {
            let mut stmt = conn.prepare(&sql.text)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(sql.params.iter()), |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?;
            rows.collect()
        };
        let found = run().map_err(|e| self.fail(e))?;
        Ok(found
            .into_iter()
            .filter_map(|(sid, seq, time, len, spans)| {
                let session = ids.get(&sid)?.clone();
                if q.session.is_some_and(|s| s != session) {
                    return None;
                }
                Some(DocMatch {
                    session,
                    seq: seq as u64,
                    time,
                    len,
                    spans,
                })
            })
            .collect())
    }

    fn bodies(&mut self, docs: &[(String, u64)]) -> Result<Vec<DocBody>, BackendError> {
        let sids: HashMap<String, i64> = self
            .rows()?
            .into_iter()
            .map(|r| (r.header.id, r.sid))
            .collect();
        let conn = self
            .index
            .connection()
            .ok_or_else(|| self.fail("the index is closed"))?;
        let mut out = Vec::with_capacity(docs.len());
        for (id, seq) in docs {
            let rowid = sids.get(id).and_then(|sid| store::doc_rowid(*sid, *seq));
            let row = rowid.map(|rowid| {
                conn.query_row(
                    "SELECT type, surface, text, len FROM docs WHERE rowid = ?1",
                    [rowid],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, Vec<u8>>(2)?,
                            r.get::<_, i64>(3)?,
                        ))
                    },
                )
            });
            let Some(Ok((kind, label, stored, len))) = row else {
                return Err(self.fail(format!("document {seq} of session {id:?} is gone")));
            };
            let text =
                store::unpack_text(&stored, len.max(0) as usize).map_err(|e| self.fail(e))?;
            out.push(DocBody {
                kind,
                label: label_of(label),
                text,
            });
        }
        Ok(out)
    }
}
