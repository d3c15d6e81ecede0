//! The write step of one session: a log read whole or resumed, a live session, a failure recorded;
//! each one step of the open batch, its row stamped with exactly what it holds.

use super::*;

/// What a row of `sessions` holds besides its key, stamp and resume state.
pub(super) struct Rows {
    pub(super) header: HitHeader,
    pub(super) title: Option<String>,
    pub(super) count: u64,
    /// A log's header record (see `store::listed_sessions`).
    pub(super) listed: Option<String>,
}

impl Engine {
    /// Whether the listed log may be read from its row's checkpoint: only the same file grown longer
    /// (its bytes before the checkpoint are then proven unchanged by the reader). A replaced file, or
    /// one whose times changed at the same size or shorter, and a log without a row, are read whole.
    pub(super) fn may_resume(&self, listed: &ListedSession) -> bool {
        self.rows
            .get(&RowKey::Persisted(listed.path.clone()))
            .is_some_and(|row| {
                row.stamp
                    .parse::<Revision>()
                    .is_ok_and(|before| listed.revision.may_only_have_grown_from(&before))
            })
    }

    /// Indexes one new or changed log; `Ok(true)` when the index was written. A log that only grew
    /// since it was last read (in this process) is read from its checkpoint: only the appended bytes
    /// are read, the fold goes on from where it stopped, and the crash closers the last read appended
    /// are replaced by what really followed. Anything else is read whole.
    ///
    /// `prefetched` is the whole read of a log that may not resume ([`Engine::may_resume`]), done ahead
    /// on another thread.
    pub(super) fn index_log(
        &mut self,
        sources: &Sources,
        listed: &ListedSession,
        prefetched: Option<WholeRead>,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let key = RowKey::Persisted(listed.path.clone());
        let stamp = listed.revision.to_string();
        let old = self.rows.get(&key).cloned();
        let opts = read_options(listed);
        let may_resume = self.may_resume(listed);
        let state = match &old {
            Some(row) if may_resume => self.resume_state(row)?,
            Some(_) => {
                self.take_resume(&listed.path);
                None
            }
            None => None,
        };
        if let (Some(row), Some(state)) = (&old, state) {
            let resumed = match LogReader::resume(&listed.path, &state.checkpoint, &opts) {
                Ok(Resumed::Continue(reader)) => Some(reader.into_log_with_checkpoint()),
                Ok(Resumed::ReRead(_)) => None,
                Err(e) => Some(Err(e)),
            };
            match resumed {
                Some(Ok((log, checkpoint))) => {
                    let from = state.checkpoint.next_seq();
                    match self.append_log(
                        row,
                        state.fold,
                        from,
                        log,
                        checkpoint,
                        stamp.clone(),
                        listed,
                        generation,
                    ) {
                        Ok(()) => {
                            self.reads.resumed += 1;
                            return Ok(true);
                        }
                        Err(Failure::Log(e)) => {
                            return self.log_failed(
                                listed,
                                stamp,
                                old.map(|r| r.sid),
                                &e,
                                generation,
                            )
                        }
                        Err(Failure::Plugin(e)) => return Err(e),
                    }
                }
                Some(Err(e)) => {
                    return self.log_failed(
                        listed,
                        stamp,
                        old.map(|r| r.sid),
                        &e.at_path(&listed.path),
                        generation,
                    )
                }
                None => {}
            }
        }
        let read = match prefetched {
            Some(read) if !may_resume => read,
            _ => read_ready(sources, listed, &opts),
        };
        let ready = match read {
            Ok(ready) => ready,
            Err(e) => return self.log_failed(listed, stamp, old.map(|r| r.sid), &e, generation),
        };
        let rows = Rows {
            header: ready.header,
            title: ready.title,
            count: ready.count,
            // Another harness's transcript has no checkpoint: its listing stats and reads it itself.
            listed: ready
                .resume_from
                .as_ref()
                .map(|(_, checkpoint)| checkpoint.header_line().to_owned()),
        };
        self.write_rows(
            key,
            rows,
            ready.docs,
            stamp,
            old.map(|r| r.sid),
            ready.resume.as_deref(),
            generation,
        )?;
        self.reads.whole += 1;
        self.forget_failure(&listed.path);
        if let Some((fold, checkpoint)) = ready.resume_from {
            self.remember_resume(&listed.path, fold, checkpoint);
        }
        Ok(true)
    }

    /// Writes what a resumed read of a grown log found.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append_log(
        &mut self,
        row: &SessionRow,
        mut fold: SurfaceFold,
        from: u64,
        log: SessionLog,
        checkpoint: ReadCheckpoint,
        stamp: String,
        listed: &ListedSession,
        generation: u64,
    ) -> Result<(), Failure> {
        let fold_error = |e: dsh_codec::surface::FoldError| {
            Failure::Log(LogError::from(e).at_path(&listed.path))
        };
        let pre_closers = fold_to_checkpoint(&mut fold, &log, &checkpoint, true)
            .map_err(fold_error)?
            .unwrap_or_else(|| fold.clone());
        let header = log.header.clone();
        let events: Vec<Arc<Event>> = log.events.into_iter().map(Arc::new).collect();
        let relabel = relabelled(events.iter().map(|e| &**e), &fold, from);
        let count = from + events.len() as u64;
        let title = events.iter().any(|e| e.kind == "session/title").then(|| {
            let data = Arc::new(SessionData::new(header, events.clone()));
            title_json(&LoadedSession {
                data,
                live: false,
                path: Some(listed.path.clone()),
            })
        });
        let resume = encode_resume(&pre_closers, &checkpoint);
        // The closers the earlier read appended give way to the real events that took their seqs.
        let ext = store::Extension {
            drop_from: Some(from),
            resume: resume.as_deref(),
            ..grown(row.sid, &stamp, count, title, &relabel)
        };
        let key = RowKey::Persisted(listed.path.clone());
        self.extend_row(
            &key,
            &ext,
            docs(events.iter().map(|e| &**e), &fold),
            generation,
        )
        .map_err(Failure::Plugin)?;
        self.forget_failure(&listed.path);
        self.remember_resume(&listed.path, pre_closers, checkpoint);
        Ok(())
    }

    /// Extends the indexed session `ext.sid` with `docs` and brings its row under `key` up to date.
    fn extend_row(
        &mut self,
        key: &RowKey,
        ext: &store::Extension<'_>,
        docs: impl IntoIterator<Item = PackedDoc>,
        generation: u64,
    ) -> Result<(), PluginError> {
        store::extend_session(self.conn()?, ext, docs, generation).map_err(index_failed)?;
        if let Some(row) = self.rows.get_mut(key) {
            row.stamp = ext.stamp.to_string();
            row.event_count = ext.event_count;
            row.generation = generation;
            if let Some(title) = &ext.title {
                row.title = title.clone();
            }
        }
        Ok(())
    }

    /// Forgets that the log at `path` failed, here and in the index.
    pub(super) fn forget_failure(&mut self, path: &Path) {
        if self.failed.remove(path).is_some() {
            if let Some(conn) = self.index.connection() {
                failed::forget(conn, path);
            }
        }
    }

    /// Records a log that cannot be indexed (reported in `skipped` until its file changes) and drops
    /// what was indexed of it.
    pub(super) fn log_failed(
        &mut self,
        listed: &ListedSession,
        stamp: String,
        old_sid: Option<i64>,
        e: &LogError,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let report = Skipped {
            id: Some(listed.header.id.clone()),
            path: Some(listed.path.display().to_string()),
            code: e.code.as_str().to_string(),
            reason: log_error_text(e),
        };
        self.reads.failed += 1;
        if let Some(conn) = self.index.connection() {
            failed::put(conn, &listed.path, &stamp, &report);
        }
        self.failed.insert(listed.path.clone(), (stamp, report));
        self.take_resume(&listed.path);
        if let Some(sid) = old_sid {
            store::delete_session(self.conn()?, sid, generation).map_err(index_failed)?;
            self.rows.remove(&RowKey::Persisted(listed.path.clone()));
            return Ok(true);
        }
        Ok(false)
    }

    /// Indexes one changed live session; `Ok(true)` when the index was written.
    pub(super) fn index_live(
        &mut self,
        corpus: &Corpus,
        live: &LiveSession,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let id = live.header.id.to_string();
        let key = RowKey::Live(id.clone());
        let old = self.rows.get(&key).cloned();
        let epoch = live_epoch(live);
        let fail = |this: &mut Self,
                    stamp: String,
                    code: ErrorCode,
                    reason: String|
         -> Result<bool, PluginError> {
            let skipped = Skipped {
                id: Some(id.clone()),
                path: None,
                code: code.as_str().into(),
                reason,
            };
            this.live_failed.insert(id.clone(), (stamp, skipped));
            if let Some(row) = &old {
                store::delete_session(this.conn()?, row.sid, generation).map_err(index_failed)?;
                this.rows.remove(&key);
                return Ok(true);
            }
            Ok(false)
        };
        let stamp_seen = format!("{epoch}:{}", live.event_count);
        let session = match corpus.load_live(&id) {
            Ok(Some(session)) => session,
            // Gone since the listing: the next refresh deletes its row.
            Ok(None) => return Ok(false),
            Err(e) => return fail(self, stamp_seen, e.code, e.message.to_string()),
        };
        let data = session.data.clone();
        let fold = match data.fold() {
            Ok(fold) => fold,
            Err(e) => {
                return fail(
                    self,
                    stamp_seen,
                    ErrorCode::SessionQueryInvalidSurface,
                    format!("invalid session surface: {e}"),
                )
            }
        };
        let count = data.events().len() as u64;
        let stamp = format!("{epoch}:{count}");
        let header = hit_header(data.header());
        self.live_failed.remove(&id);
        match old {
            Some(row)
                if row.header == header
                    && row.stamp.split(':').next() == Some(epoch.to_string().as_str())
                    && row.event_count <= count =>
            {
                let from = row.event_count;
                let new_events = &data.events()[from as usize..];
                let relabel = relabelled(new_events.iter().map(|e| &**e), fold, from);
                let title = new_events
                    .iter()
                    .any(|e| e.kind == "session/title")
                    .then(|| title_json(&session));
                let docs = docs(new_events.iter().map(|e| &**e), fold);
                let ext = grown(row.sid, &stamp, count, title, &relabel);
                self.extend_row(&key, &ext, docs, generation)?;
                Ok(true)
            }
            old => {
                self.write_whole(key, &session, stamp, old.map(|r| r.sid), generation)?;
                Ok(true)
            }
        }
    }

    pub(super) fn write_whole(
        &mut self,
        key: RowKey,
        session: &LoadedSession,
        stamp: String,
        old_sid: Option<i64>,
        generation: u64,
    ) -> Result<(), PluginError> {
        let data: &SessionData = &session.data;
        let fold = data
            .fold()
            .map_err(|e| index_failed(format!("{}: {e}", session.describe())))?;
        let rows = Rows {
            header: hit_header(data.header()),
            title: title_json(session),
            count: data.events().len() as u64,
            listed: None,
        };
        let docs = docs(data.events().iter().map(|e| &**e), fold);
        self.write_rows(key, rows, docs, stamp, old_sid, None, generation)
    }

    /// Replaces (or creates) the row for `key` and its documents, and mirrors the row.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_rows(
        &mut self,
        key: RowKey,
        rows: Rows,
        docs: impl IntoIterator<Item = PackedDoc>,
        stamp: String,
        old_sid: Option<i64>,
        resume: Option<&[u8]>,
        generation: u64,
    ) -> Result<(), PluginError> {
        let Rows {
            header,
            title,
            count,
            listed,
        } = rows;
        let replacement = Replacement {
            key: &key,
            header: &header,
            stamp: &stamp,
            event_count: count,
            title: title.clone(),
            resume,
            listed: listed.as_deref(),
        };
        let sid = store::replace_session(self.conn()?, old_sid, &replacement, docs, generation)
            .map_err(index_failed)?;
        let (source, path) = match &key {
            RowKey::Live(_) => (Source::Live, None),
            RowKey::Persisted(p) => (Source::Persisted, Some(p.clone())),
        };
        self.rows.insert(
            key,
            SessionRow {
                sid,
                source,
                header,
                path,
                stamp,
                event_count: count,
                title,
                generation,
                visible: false,
                is_live: false,
                is_persisted: false,
            },
        );
        Ok(())
    }
}

/// The earlier documents (seq below `from`) whose label the replacements among `new_events` changed,
/// with their label now: what a grown session relabels with an UPDATE instead of re-inserting.
fn relabelled<'a>(
    new_events: impl Iterator<Item = &'a Event>,
    fold: &SurfaceFold,
    from: u64,
) -> Vec<(u64, Label)> {
    new_events
        .filter_map(|e| fold.replacement(e.seq))
        .flat_map(|r| r.shadowed.iter().copied())
        .filter(|&s| s < from)
        .map(|s| (s, fold.label(s).unwrap_or(Label::LogOnly)))
        .collect()
}

/// What a session that grew adds to the index: `count` events in all now, the older documents
/// `relabel` names relabelled, and `title` when the new events retitle it; nothing dropped, no resume
/// state.
fn grown<'a>(
    sid: i64,
    stamp: &'a str,
    count: u64,
    title: Option<Option<String>>,
    relabel: &'a [(u64, Label)],
) -> store::Extension<'a> {
    store::Extension {
        sid,
        stamp,
        event_count: count,
        title,
        relabel,
        drop_from: None,
        resume: None,
    }
}
