//! Reading logs whole off the writer's thread: reader threads that prefetch a bounded number of logs
//! each, every read made ready to write (documents packed, fold and checkpoint kept) where it was read.

use super::*;

/// A log read whole with everything its write needs made ready: its packed documents, row, resume state
/// (stored), and the fold of its stored events with the checkpoint after them (kept in memory). Made
/// where the log is read, so the events themselves are freed there too.
pub(super) struct ReadyLog {
    pub(super) header: HitHeader,
    pub(super) title: Option<String>,
    pub(super) count: u64,
    pub(super) docs: Vec<PackedDoc>,
    pub(super) resume: Option<Vec<u8>>,
    /// Where a DSH log resumes: the fold of its stored events and the checkpoint after them. Another
    /// harness's transcript has none: it is read whole whenever it changes.
    pub(super) resume_from: Option<(SurfaceFold, ReadCheckpoint)>,
}

/// What a whole read of a log gives.
pub(super) type WholeRead = Result<ReadyLog, LogError>;

/// How a listed log is read: it must still be the session it was listed as.
pub(super) fn read_options(listed: &ListedSession) -> ReadOptions {
    ReadOptions {
        expected_id: Some(listed.header.id.clone()),
        ..ReadOptions::default()
    }
}

/// Threads reading new logs while the refresh writes (the machine this was measured on had 2 cores:
/// the writer keeps one about a third busy).
pub(super) const READERS: usize = 2;

/// Logs each reader reads ahead of the writer, at most: each is a whole session, ready, in memory.
pub(super) const PREFETCH: usize = 2;

/// Reads whole, in order, every `step`-th of `logs` from the `first`, on the calling thread, making each
/// ready and handing it to `out`; stops when the receiver is gone (the refresh stopped).
pub(super) fn prefetch(
    sources: &Sources,
    logs: &[&ListedSession],
    first: usize,
    step: usize,
    out: std::sync::mpsc::SyncSender<WholeRead>,
) {
    for listed in logs.iter().skip(first).step_by(step.max(1)) {
        if out
            .send(read_ready(sources, listed, &read_options(listed)))
            .is_err()
        {
            return;
        }
    }
}

/// Reads a log whole (DSH's `inspect()`: lenient header, crash closers) and makes it ready to write. The
/// fold runs once: over the stored events (where a later resume goes on), then on over the closers (a
/// log that does not fold is corrupt, as DSH's inspect() constructing a Session says).
pub(super) fn read_ready(
    sources: &Sources,
    listed: &ListedSession,
    opts: &ReadOptions,
) -> WholeRead {
    let path = &listed.path;
    if sources.kind_of(path).is_some() {
        return read_imported(sources, listed);
    }
    let (log, checkpoint) = read_log_with_checkpoint(path, opts).map_err(|e| e.at_path(path))?;
    if !log.header.compatible_with(&listed.header) {
        return Err(LogError::new(
            LogErrorCode::IdMismatch,
            "the header read with the log differs from the listed header (the file changed while it was read)",
        )
        .at_path(path));
    }
    let fold_error = |e: dsh_codec::surface::FoldError| LogError::from(e).at_path(path);
    let mut fold = SurfaceFold::new();
    let pre_closers =
        fold_to_checkpoint(&mut fold, &log, &checkpoint, false).map_err(fold_error)?;
    let data = Arc::new(SessionData::new(
        log.header,
        log.events.into_iter().map(Arc::new).collect(),
    ));
    let docs = docs(data.events(), &fold).collect();
    let session = LoadedSession {
        data: data.clone(),
        live: false,
        path: Some(path.clone()),
    };
    let pre_closers = pre_closers.unwrap_or(fold);
    Ok(ReadyLog {
        header: hit_header(data.header()),
        title: title_json(&session),
        count: data.events().len() as u64,
        docs,
        resume: encode_resume(&pre_closers, &checkpoint),
        resume_from: Some((pre_closers, checkpoint)),
    })
}

/// [`read_ready`] for another harness's transcript: its importer's events, folded once.
pub(super) fn read_imported(sources: &Sources, listed: &ListedSession) -> WholeRead {
    let path = &listed.path;
    let imported = sources.read(listed)?;
    let fold =
        SurfaceFold::fold(imported.events.iter()).map_err(|e| LogError::from(e).at_path(path))?;
    let data = Arc::new(SessionData::new(
        imported.header,
        imported.events.into_iter().map(Arc::new).collect(),
    ));
    let docs = docs(data.events(), &fold).collect();
    let session = LoadedSession {
        data: data.clone(),
        live: false,
        path: Some(path.clone()),
    };
    Ok(ReadyLog {
        header: hit_header(data.header()),
        title: title_json(&session),
        count: data.events().len() as u64,
        docs,
        resume: None,
        resume_from: None,
    })
}

/// Folds every event of `log` into `fold` and returns the fold as it was at `checkpoint` (where a
/// later resume goes on): before the first event the checkpoint does not cover, which is a crash
/// closer or an event salvaged from a torn zstd frame (the checkpoint stays at that frame's start, so
/// the frame, once complete, is read again from its first event). `None` when that is the end state
/// and `always` is false (the caller then keeps `fold` itself, sparing a copy).
pub(super) fn fold_to_checkpoint(
    fold: &mut SurfaceFold,
    log: &SessionLog,
    checkpoint: &ReadCheckpoint,
    always: bool,
) -> Result<Option<SurfaceFold>, dsh_codec::surface::FoldError> {
    let covered = checkpoint.next_seq();
    let mut at_checkpoint = None;
    for (k, event) in log.events.iter().enumerate() {
        let uncovered = k >= log.stored().len() || event.seq >= covered;
        if uncovered && at_checkpoint.is_none() {
            at_checkpoint = Some(fold.clone());
        }
        fold.apply(event)?;
    }
    Ok(at_checkpoint.or_else(|| always.then(|| fold.clone())))
}

/// A codec error without its path (the report names the path): `line N: seq S: message`.
pub(super) fn log_error_text(e: &LogError) -> String {
    let mut out = String::new();
    if let Some(line) = e.line {
        out.push_str(&format!("line {line}: "));
    }
    if let Some(seq) = e.seq {
        out.push_str(&format!("seq {seq}: "));
    }
    out.push_str(&e.message);
    out
}
