//! Reading logs whole off the writer's thread: reader threads that read ahead of the writer within a
//! bounded window, every read made ready to write (documents packed, fold and checkpoint kept) where
//! it was read.
//!
//! The readers take the next log from one shared counter and hand it back under its place in the
//! listing; the writer takes them in listing order. So a large log holds up only the writer's turn for
//! it, never the other reader (which, when each reader took every other log and could hold two ready,
//! soon stopped too: a cold build kept about 1.2 of 2 cores busy), and what is written, and the order
//! it is written in, does not depend on the threads' timing.

use dsh_codec::log::EventRef;

use super::*;
use crate::reads::TITLE_EVENT;

/// A log read whole with everything its write needs made ready: its packed documents, row, resume state
/// (stored), and the fold of its stored events with the checkpoint after them (kept in memory). Made
/// where the log is read, so the events themselves are freed there too.
#[derive(Debug, PartialEq)]
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

/// Threads reading new logs while the refresh writes (the machine this was measured on had 2 cores).
pub(super) const READERS: usize = 2;

/// How far the readers read ahead of the writer, at most: logs taken but not yet written, counted by
/// their size on disk (each is held whole, ready, in memory). At least one log is always taken, so a
/// log larger than this is still read, alone. In a cold build the writer, not the readers, sets the
/// pace; the window is what lets the readers go on while the writer commits a batch (FTS5's insert
/// of a batch's documents, a second or so at 1 GB), so the writer never waits for the next log. At
/// 10,000 sessions a window of 128 logs (about 8 MB) left the writer waiting and the build 25% slower
/// than 512; the window's documents are most of a build's memory above the index's own caches. Each
/// step wider kept both cores a little busier in interleaved pairs of builds: 64 MiB and 512 logs
/// rather than 48 MiB and 384, 86% of the time against 84% (four pairs); 96 MiB and 768 logs, 86.3%
/// against 85.0% (three pairs), for a peak of 166-172 MB instead of 146-147 (since resume states kept
/// in memory were bounded lower: `resume::RESUME_EVENTS`).
pub(super) const AHEAD_BYTES: u64 = 96 << 20;

/// At most this many logs taken but not yet written, whatever their size.
pub(super) const AHEAD_LOGS: usize = 768;

/// Lowers the calling reader thread's scheduling priority (Linux `nice` 10, the thread alone) so
/// that on a busy machine a core goes to the writer first: every log a reader reads ahead waits for
/// the writer anyway, and with three threads on two cores the writer lost about a tenth of the wall
/// time to its own readers. The readers still take whatever the writer leaves idle.
pub(super) fn yield_to_the_writer() {
    // SAFETY: `gettid` has no preconditions; `setpriority` on this thread's id changes only this
    // thread's nice value and reads nothing from us. A failure (a sandbox that forbids it) only
    // leaves the priority as it was.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}

/// The logs of one refresh, read ahead of the writer by reader threads (see the module docs).
pub(super) struct ReadAhead<'a> {
    logs: &'a [&'a ListedSession],
    state: std::sync::Mutex<Ahead>,
    /// Signalled when a read is handed back, the writer takes one, or the refresh stops.
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct Ahead {
    /// The next log a reader takes.
    next: usize,
    /// The next log the writer takes.
    written: usize,
    /// Bytes of the logs taken and not yet written.
    bytes: u64,
    ready: HashMap<usize, WholeRead>,
    stopped: bool,
    /// Reader threads still running (one that panicked is gone too): the writer stops waiting for a
    /// log no reader is left to read, and reads it itself.
    readers: usize,
}

impl<'a> ReadAhead<'a> {
    /// Read ahead by `readers` threads, each running [`ReadAhead::read`].
    pub(super) fn new(logs: &'a [&'a ListedSession], readers: usize) -> Self {
        Self {
            logs,
            state: std::sync::Mutex::new(Ahead {
                readers,
                ..Ahead::default()
            }),
            changed: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ahead> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A reader's loop: takes the next log while the window allows, reads it with `read`, hands it
    /// back; returns when every log is taken or the refresh stopped.
    pub(super) fn read(&self, read: impl Fn(&ListedSession) -> WholeRead) {
        // Counted out however the thread ends. A reader that panicked leaves a log it took unread, which
        // the writer would wait for: the read-ahead stops, and the writer reads the rest itself.
        struct Leaving<'r, 'a>(&'r ReadAhead<'a>);
        impl Drop for Leaving<'_, '_> {
            fn drop(&mut self) {
                let mut ahead = self.0.lock();
                ahead.readers -= 1;
                if std::thread::panicking() {
                    ahead.stopped = true;
                    ahead.ready.clear();
                }
                drop(ahead);
                self.0.changed.notify_all();
            }
        }
        let _leaving = Leaving(self);
        loop {
            let (at, listed) = {
                let mut ahead = self.lock();
                loop {
                    if ahead.stopped || ahead.next >= self.logs.len() {
                        return;
                    }
                    let size = self.logs[ahead.next].revision.size;
                    let room = ahead.next == ahead.written
                        || (ahead.next - ahead.written < AHEAD_LOGS
                            && ahead.bytes + size <= AHEAD_BYTES);
                    if room {
                        break;
                    }
                    ahead = self.changed.wait(ahead).unwrap_or_else(|p| p.into_inner());
                }
                let at = ahead.next;
                ahead.next += 1;
                ahead.bytes += self.logs[at].revision.size;
                (at, self.logs[at])
            };
            let read = read(listed);
            let mut ahead = self.lock();
            if ahead.stopped {
                return;
            }
            ahead.ready.insert(at, read);
            drop(ahead);
            self.changed.notify_all();
        }
    }

    /// The writer's turn for the next log in listing order: waits until a reader has read it. `None`
    /// when every log was taken already, or the readers are gone without it.
    pub(super) fn take(&self) -> Option<WholeRead> {
        let mut ahead = self.lock();
        let at = ahead.written;
        if at >= self.logs.len() {
            return None;
        }
        loop {
            if let Some(read) = ahead.ready.remove(&at) {
                ahead.written += 1;
                ahead.bytes = ahead.bytes.saturating_sub(self.logs[at].revision.size);
                drop(ahead);
                self.changed.notify_all();
                return Some(read);
            }
            if ahead.stopped || ahead.readers == 0 {
                return None;
            }
            ahead = self.changed.wait(ahead).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Stops the readers (they finish the read in hand and drop it) and wakes everyone.
    pub(super) fn stop(&self) {
        let mut ahead = self.lock();
        ahead.stopped = true;
        ahead.ready.clear();
        drop(ahead);
        self.changed.notify_all();
    }

    /// [`ReadAhead::stop`] when the returned guard drops: however the writes end.
    pub(super) fn stop_when_dropped(&self) -> impl Drop + '_ {
        struct Stop<'r, 'a>(&'r ReadAhead<'a>);
        impl Drop for Stop<'_, '_> {
            fn drop(&mut self) {
                self.0.stop();
            }
        }
        Stop(self)
    }
}

/// Reads a log whole (DSH's `inspect()`: lenient header, crash closers) and makes it ready to write. The
/// fold runs once: over the stored events (where a later resume goes on), then on over the closers (a
/// log that does not fold is corrupt, as DSH's inspect() constructing a Session says).
///
/// The events stream through the borrowed read (`LogReader::next_ref`): each is folded and, when it
/// has text, packed as it comes, and none is kept. Holding a log's events whole (a vector of owned
/// events grown by doubling, a payload per chunk delta) was about a quarter of a reader's CPU in a cold
/// build, and most of the memory a log read ahead held. A document's label is the one thing that must
/// wait for the whole fold: it is set once the stream ends.
pub(super) fn read_ready(
    sources: &Sources,
    listed: &ListedSession,
    opts: &ReadOptions,
) -> WholeRead {
    let path = &listed.path;
    if sources.kind_of(path).is_some() {
        return read_imported(sources, listed);
    }
    let at_path = |e: LogError| e.at_path(path);
    // The closers are taken from the reader after the stored events (the same ones it would append),
    // so the fold where a resume goes on is the fold before them, with no copy.
    let stream_opts = ReadOptions {
        crash_closers: false,
        ..opts.clone()
    };
    let mut reader = LogReader::open(path, &stream_opts).map_err(at_path)?;
    if !reader.header().compatible_with(&listed.header) {
        return Err(changed_while_read(path));
    }
    let fold_error = |e: dsh_codec::surface::FoldError| LogError::from(e).at_path(path);
    let mut fold = SurfaceFold::new();
    let mut docs: Vec<PackedDoc> = Vec::new();
    let mut title: Option<Event> = None;
    // How many stored events were read, and the seq after the last one.
    let (mut stored, mut end_seq) = (0u64, 0u64);
    while let Some(event) = reader.next_ref() {
        let event = event.map_err(at_path)?;
        fold.apply_ref(event).map_err(fold_error)?;
        stored += 1;
        end_seq = event.seq().saturating_add(1);
        if event.is_chunk() {
            continue;
        }
        if event.kind() == TITLE_EVENT {
            title = Some(event.to_event());
        }
        let text = dsh_codec::text::event_ref_text(event);
        if !text.is_empty() {
            docs.push(pack_doc(&event, text, Label::LogOnly));
        }
    }
    let checkpoint = reader.checkpoint();
    if checkpoint.next_seq() < end_seq {
        // Events salvaged from a torn zstd frame: the checkpoint stays at the frame's start, so the fold
        // where a resume goes on is one taken inside the stream. Rare (a frame caught mid-write): read
        // again the way that keeps every event.
        return read_ready_whole(listed, opts);
    }
    let closers = if opts.crash_closers {
        reader.closers()
    } else {
        Vec::new()
    };
    let mut at_checkpoint = None;
    if !closers.is_empty() {
        at_checkpoint = Some(fold.clone());
        for closer in &closers {
            fold.apply(closer).map_err(fold_error)?;
            let text = dsh_codec::text::event_text(closer);
            if !text.is_empty() {
                docs.push(pack_doc(&closer.into(), text, Label::LogOnly));
            }
        }
    }
    for doc in &mut docs {
        doc.label = fold.label(doc.seq).unwrap_or(Label::LogOnly);
    }
    let title = title_json_of(title_in(title.iter(), || {
        crate::corpus::describe(&listed.header.id, Some(path))
    }));
    let pre_closers = at_checkpoint.unwrap_or(fold);
    Ok(ReadyLog {
        header: hit_header(reader.header()),
        title,
        count: stored + closers.len() as u64,
        docs,
        resume: encode_resume(&pre_closers, &checkpoint),
        resume_from: Some((pre_closers, checkpoint)),
    })
}

/// A document of an event, packed as it is stored.
pub(super) fn pack_doc(event: &EventRef<'_>, text: String, label: Label) -> PackedDoc {
    Doc {
        seq: event.seq(),
        kind: event.kind(),
        time: event.time(),
        label,
        text: text.into(),
    }
    .pack()
}

fn changed_while_read(path: &Path) -> LogError {
    LogError::new(
        LogErrorCode::IdMismatch,
        "the header read with the log differs from the listed header (the file changed while it was read)",
    )
    .at_path(path)
}

/// [`read_ready`] with every event held in memory: for a log whose checkpoint does not cover every
/// event it yields (a torn zstd frame's salvaged events), where the resume's fold is taken inside the
/// events.
fn read_ready_whole(listed: &ListedSession, opts: &ReadOptions) -> WholeRead {
    let path = &listed.path;
    let (log, checkpoint) = read_log_with_checkpoint(path, opts).map_err(|e| e.at_path(path))?;
    if !log.header.compatible_with(&listed.header) {
        return Err(changed_while_read(path));
    }
    let fold_error = |e: dsh_codec::surface::FoldError| LogError::from(e).at_path(path);
    let mut fold = SurfaceFold::new();
    let pre_closers =
        fold_to_checkpoint(&mut fold, &log, &checkpoint, false).map_err(fold_error)?;
    let docs = docs(&log.events, &fold).collect();
    let title = title_json_of(title_in(log.events.iter(), || {
        crate::corpus::describe(&log.header.id, Some(path))
    }));
    let pre_closers = pre_closers.unwrap_or(fold);
    Ok(ReadyLog {
        header: hit_header(&log.header),
        title,
        count: log.events.len() as u64,
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
    let docs = docs(&imported.events, &fold).collect();
    let title = title_json_of(title_in(imported.events.iter(), || {
        crate::corpus::describe(&imported.header.id, Some(path))
    }));
    Ok(ReadyLog {
        header: hit_header(&imported.header),
        title,
        count: imported.events.len() as u64,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn logs(n: usize, size: u64) -> Vec<ListedSession> {
        (0..n)
            .map(|i| ListedSession {
                header: SessionHeader::new(format!("s{i}"), 0, None),
                diagnostics: Vec::new(),
                path: PathBuf::from(format!("/r/p/s{i}/session.jsonl")),
                compression: Compression::None,
                revision: Revision {
                    dev: 1,
                    ino: i as u64,
                    size,
                    mtime_ns: 0,
                    ctime_ns: 0,
                },
            })
            .collect()
    }

    /// Every way a log can end for [`read_ready`]: each of the real DSH logs, a turn left open (crash
    /// closers), a title, a zstd log whole and with its last frame torn (read again the way that keeps
    /// every event), a line that does not parse. The streamed read makes each ready exactly as a read
    /// holding every event does: the same documents with the same labels, title, count, resume state,
    /// fold and checkpoint, or the same error.
    #[test]
    fn a_streamed_read_makes_a_log_ready_exactly_as_a_read_of_every_event() {
        use crate::corpus::testing::{corpus, header, LogBuilder};
        use dsh_codec::log::layout::session_log_path;
        use dsh_codec::log::zstd_frames::compress_frame;

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        std::fs::create_dir_all(&root).unwrap();
        let (_state, corpus) = corpus(Some(&root));
        let listed = |path: &Path| {
            let (header, diagnostics, compression) =
                read_header(path, &ReadOptions::default()).unwrap();
            ListedSession {
                header,
                diagnostics,
                path: path.to_path_buf(),
                compression,
                revision: Revision {
                    dev: 0,
                    ino: 0,
                    size: 0,
                    mtime_ns: 0,
                    ctime_ns: 0,
                },
            }
        };
        let write = |id: &str, compression, bytes: &[u8]| {
            let path = session_log_path(&root, &header(id, 1), compression).unwrap();
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let mut log = LogBuilder::new();
        log.turn_start(1);
        log.user("a question about quinces");
        log.assistant(1, "an answer about quinces");
        log.turn_end(1);
        log.title("Quinces", serde_json::json!({"kind": "user"}));
        log.turn_start(2);
        log.user("and the damsons?");
        let text = log.text(&header("open", 1));
        let mut paths = vec![
            write("open", Compression::None, text.as_bytes()),
            write(
                "garbled",
                Compression::None,
                {
                    // The last message's surface marker made one no fold accepts.
                    let at = text.rfind("\"surfaceOp\":\"append\"").unwrap();
                    format!("{}\"surfaceOp\":7{}", &text[..at], &text[at + 20..])
                }
                .as_bytes(),
            ),
        ];
        // A zstd log of one frame per two lines, whole and with its last frame cut short.
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut zstd = compress_frame(lines[0].as_bytes());
        for pair in lines[1..].chunks(2) {
            zstd.extend(compress_frame(pair.concat().as_bytes()));
        }
        paths.push(write("zstd", Compression::Zstd, &zstd));
        paths.push(write("torn", Compression::Zstd, &zstd[..zstd.len() - 3]));
        let real = dsh_fixtures::real_fixture_logs().unwrap_or_default();
        paths.extend(real.iter().cloned());
        let mut compared = 0;
        let mut ready = Vec::new();
        for path in &paths {
            let listed = listed(path);
            let opts = read_options(&listed);
            let streamed = read_ready(corpus.sources(), &listed, &opts);
            let whole = read_ready_whole(&listed, &opts);
            assert_eq!(streamed, whole, "{}", path.display());
            compared += usize::from(streamed.is_ok());
            ready.push(streamed);
        }
        assert!(
            compared >= 3 + real.len() / 2,
            "too few logs read: {compared}"
        );
        // The cases are what they claim: events past the checkpoint (closers; a torn frame's salvaged
        // events and closers), a title, a refusal.
        let beyond = |r: &WholeRead| {
            let r = r.as_ref().unwrap();
            r.count - r.resume_from.as_ref().unwrap().1.next_seq()
        };
        assert!(beyond(&ready[0]) > 0, "the open turn gets closers");
        let title = ready[0].as_ref().unwrap().title.as_deref().unwrap();
        assert!(
            title.contains("Quinces") && !title.contains("error"),
            "{title}"
        );
        assert!(
            ready[1].is_err(),
            "the garbled line is refused: {:?}",
            ready[1]
        );
        assert_eq!(
            beyond(&ready[2]),
            beyond(&ready[0]),
            "zstd: the same closers"
        );
        assert!(
            beyond(&ready[3]) > beyond(&ready[2]),
            "the torn frame's events are salvaged"
        );
    }

    /// A stand-in read: the log's id as the error's message, so the writer can tell which it got.
    fn named(listed: &ListedSession) -> WholeRead {
        Err(LogError::new(
            LogErrorCode::Layout,
            listed.header.id.clone(),
        ))
    }

    fn id_of(read: Option<WholeRead>) -> Option<String> {
        match read? {
            Err(e) => Some(e.message),
            Ok(_) => None,
        }
    }

    /// Readers of uneven speed: the writer still takes every log once, in listing order, and the
    /// readers never start a log more than the window ahead of the writer.
    #[test]
    fn the_writer_takes_every_log_in_listing_order_within_the_window() {
        let listed = logs(3 * AHEAD_LOGS, 1);
        let refs: Vec<&ListedSession> = listed.iter().collect();
        let ahead = ReadAhead::new(&refs, READERS);
        let started = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for reader in 0..READERS {
                let (ahead, started) = (&ahead, &started);
                scope.spawn(move || {
                    ahead.read(|l| {
                        started.fetch_add(1, Ordering::SeqCst);
                        if reader == 0 && l.revision.ino % 7 == 0 {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        named(l)
                    })
                });
            }
            for (taken, l) in listed.iter().enumerate() {
                assert!(
                    started.load(Ordering::SeqCst) <= taken + AHEAD_LOGS,
                    "readers ran more than the window ahead"
                );
                assert_eq!(id_of(ahead.take()), Some(l.header.id.clone()));
            }
            assert!(ahead.take().is_none(), "every log was taken");
        });
    }

    /// Logs larger than the byte window are read one at a time: no log is started before the writer
    /// took the one before it.
    #[test]
    fn logs_larger_than_the_byte_window_are_read_one_at_a_time() {
        let listed = logs(6, AHEAD_BYTES);
        let refs: Vec<&ListedSession> = listed.iter().collect();
        let ahead = ReadAhead::new(&refs, READERS);
        let started = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..READERS {
                let (ahead, started) = (&ahead, &started);
                scope.spawn(move || {
                    ahead.read(|l| {
                        started.fetch_add(1, Ordering::SeqCst);
                        named(l)
                    })
                });
            }
            for (taken, l) in listed.iter().enumerate() {
                std::thread::sleep(Duration::from_millis(5));
                assert!(started.load(Ordering::SeqCst) <= taken + 1);
                assert_eq!(id_of(ahead.take()), Some(l.header.id.clone()));
            }
        });
    }

    /// A reader that panics on a log never leaves the writer waiting for it: the writer's turns end
    /// (it reads the rest itself), and the panic reaches the scope. (On a thread of its own, so a
    /// writer left waiting fails the test instead of hanging it.)
    #[test]
    fn a_reader_that_panics_leaves_the_writer_to_read_the_rest_itself() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // More logs than the window: the other reader stops for room, as it would on a large root.
            let listed = logs(3 * AHEAD_LOGS, 1);
            let refs: Vec<&ListedSession> = listed.iter().collect();
            let ahead = ReadAhead::new(&refs, READERS);
            let mut got = Vec::new();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                std::thread::scope(|scope| {
                    for _ in 0..READERS {
                        let ahead = &ahead;
                        scope.spawn(move || {
                            ahead.read(|l| {
                                if l.header.id == "s5" {
                                    panic!("a read that panics");
                                }
                                named(l)
                            })
                        });
                    }
                    while let Some(id) = id_of(ahead.take()) {
                        got.push(id);
                    }
                })
            }));
            let _ = done.send((outcome.is_err(), got));
        });
        let (panicked, got) = finished
            .recv_timeout(Duration::from_secs(20))
            .expect("the writer was left waiting for the log the reader dropped");
        assert!(panicked, "the reader's panic reaches the scope");
        let expected: Vec<String> = (0..got.len()).map(|i| format!("s{i}")).collect();
        assert_eq!(got, expected, "what was taken came in order");
        assert!(got.len() <= 5, "s5 was never handed over: {got:?}");
    }
}
