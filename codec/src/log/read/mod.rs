//! The public session log reader: a file (raw JSONL or zstd) in, validated [`Event`]s out, streaming.
//!
//! This is where the read path of [`super`] comes together. [`LogReader::open`] detects the encoding by
//! the zstd magic, reads and checks the header eagerly, and then yields events one at a time:
//!
//! ```text
//! bytes ─┬─ raw:  LF-terminated lines ─────────────────────────────┐
//!        └─ zstd: frames (zstd_frames) → plaintext → lines ────────┤
//!   scan (contiguity, packed rows, torn tail) → obsolete vocabulary → legacy upgrade → message shape
//!   → unknown type → envelope (Event::from_value) → request/header → closer tracking → Event
//! after the last stored event: crash closers (repair), when asked for
//! ```
//!
//! The line's parse ([`super::line`]) already answers for most events: those of types no check reads
//! (and turn lines of the shapes the checks pass unchanged) skip to the envelope, a message read typed
//! has passed its checks and only records its id for the upgrader, and a packed row's members, checked
//! whole with their row, go straight from the row to the caller.
//!
//! Memory stays bounded by the line cap ([`ReadOptions::max_line_bytes`], [`MAX_LINE_BYTES`] by default:
//! at most cap + 1 bytes of one line are ever held) plus, for zstd, a bounded read-ahead of compressed bytes, one block and one decoding step
//! ([`zstd_frames::DECODE_STEP`]) of its plaintext, whatever the frame's size (see [`zstd_input`]), plus one
//! message id per message event for the legacy upgrades. Only regular files are opened
//! ([`super::bounds`]), a line past the cap is [`LogErrorCode::LineTooLong`] as soon as it passes it, and
//! after a scanner issue lines that cannot hold a `turn/end` are counted without parsing, so hostile input
//! costs time proportional to the bytes actually read. Events are yielded before the end of the file is known;
//! an error found later (damage before a committed `turn/end`, a broken zstd frame) ends the iteration
//! with `Err` after them, so a consumer that needs all-or-nothing uses [`read_log`].
//!
//! A reader can be checkpointed and resumed ([`LogReader::checkpoint`], [`LogReader::resume`]; the
//! checkpoint and its guards are [`super::checkpoint`]): a log that only grew is then read from where the
//! last read stopped. Crash closers are synthetic: [`LogReader::yielding_closers`] and
//! [`SessionLog::closer_count`] tell them from stored events, and no checkpoint covers them.
//!
//! Documented choices where the spec leaves room:
//! - Lenient reads (the default) also accept a `request/header` that breaks the config rule of spec §1.7
//!   step 7 (DSH's recorded test sessions have `config: {model: "fake"}`), noting it in [`ReadNotes`];
//!   `strict_header` refuses it.
//! - DSH validates the whole log step by step (all of step 2, then all of step 3, …); this reader runs the
//!   steps per event, so when a log breaks two rules the first *event* that breaks one is reported.
//! - In zstd mode a complete frame whose plaintext does not end in LF is an error at once
//!   ([`LogErrorCode::ZstdTornRecord`]); a line never spans frames.
//! - An unparsable or seq-gapped line in a complete zstd frame is [`LogErrorCode::ZstdTornRecord`] unless a
//!   later `turn/end` makes it the scanner's own hard error first, as in DSH (which scans before it checks).

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use serde_json::Value;

use super::bounds::{line_too_long, open_regular, read_line_capped, RawLine};
use super::checkpoint::{
    self, Counted, GuardWindow, ReReadReason, ReadCheckpoint, Tracking, CHECKPOINT_VERSION,
};
use super::error::{clip_for_message, LogError, LogErrorCode};
use super::event_ref::{ChunkRef, EventRef};
use super::header::{HeaderDiagnostic, SessionHeader};
use super::legacy::LegacyUpgrader;
use super::notes::NotesState;
pub use super::notes::ReadNotes;
use super::repair::CloserTracker;
use super::row::Member;
use super::scan::{Accepted, LineScanner, Scanned};
use super::validate;
use super::zstd_frames::{self, FrameDecoder};
use super::{Compression, Event};

pub use super::bounds::MAX_LINE_BYTES;

mod zstd_input;
use zstd_input::{advance_zstd, read_zstd_header, FrameSource, ZstdInput, ZSTD_CHUNK};

/// Read buffer for raw logs: large enough that a read syscall is rare next to parsing (one per 64 KiB
/// costs well under 1% of parsing them), small enough that zeroing it once (see [`raw_buffer`]) costs
/// little next to the sessions it serves.
const RAW_BUFFER: usize = 64 * 1024;
/// Read size of the header-only listing path (spec §1.2: 8 KiB chunks).
const HEADER_CHUNK: usize = 8 * 1024;

/// The raw read buffer for an input of `len` bytes: the whole input when it is smaller than
/// [`RAW_BUFFER`]. The buffer is zeroed once before its first read (the source is read through
/// `Read::read`), which for the typical 100 KB session cost more than its parse of the header; one byte
/// more than the input lets the read that finds the end share the buffer.
fn raw_buffer(len: Option<u64>) -> usize {
    let Some(len) = len.and_then(|len| usize::try_from(len).ok()) else {
        return RAW_BUFFER;
    };
    // Never the listing's size: that size is how `from_source` tells the listing apart.
    len.saturating_add(1).clamp(HEADER_CHUNK + 1, RAW_BUFFER)
}

/// How to read a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read header records to the letter instead of leniently (DESIGN.md deviation 3): the session header
    /// (spec §1.3: a missing `version`/`delegationDepth` or a non-absolute `cwd` is refused) and the
    /// `request/header` config rule of spec §1.7 step 7 (a config without `provider`, as DSH's own
    /// recorded test sessions have, is refused). Leniently, both are read and reported: header
    /// [`LogReader::diagnostics`], request headers in [`LogReader::notes`].
    pub strict_header: bool,
    /// The id the log was looked up by; a header with another id is [`LogErrorCode::IdMismatch`].
    pub expected_id: Option<String>,
    /// Append DSH's in-memory crash closers (spec §1.9) after the last stored event of a log that ends
    /// inside a turn.
    pub crash_closers: bool,
    /// The longest line accepted, in bytes without its LF (header included; zstd: of the decompressed
    /// text); a longer one is [`LogErrorCode::LineTooLong`]. [`MAX_LINE_BYTES`] by default.
    pub max_line_bytes: usize,
}

impl Default for ReadOptions {
    /// Lenient header, no expected id, crash closers on (what DSH's `inspect()` returns).
    fn default() -> Self {
        Self {
            strict_header: false,
            expected_id: None,
            crash_closers: true,
            max_line_bytes: MAX_LINE_BYTES,
        }
    }
}

/// What a read salvaged past: the damaged or incomplete end of a log that a crash mid-append leaves.
/// Reading stops before it; nothing in it is an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Why the tail was not read: the scanner's first issue ([`LogErrorCode::UnparsableLine`],
    /// [`LogErrorCode::SeqGap`], [`LogErrorCode::InvalidPackedRow`]), or [`LogErrorCode::TornLine`] /
    /// [`LogErrorCode::ZstdTornFrame`] for a plain torn write.
    pub code: LogErrorCode,
    /// The 1-based line (header = 1) of the first issue, where there is one.
    pub line: Option<u64>,
    /// Raw: the byte offset just after the last accepted line. Zstd: the start of the torn final frame.
    /// Either way, where a repairing writer would truncate.
    pub offset: u64,
    pub message: String,
}

/// A whole log in memory (see [`read_log`]).
#[derive(Debug, Clone)]
pub struct SessionLog {
    pub header: SessionHeader,
    pub diagnostics: Vec<HeaderDiagnostic>,
    /// The stored events, then the crash closers (when asked for): see [`SessionLog::stored`] and
    /// [`SessionLog::closers`] for the two apart.
    pub events: Vec<Event>,
    /// How many of the last `events` are synthetic crash closers (spec §1.9), never stored in the log.
    pub closer_count: usize,
    pub torn_tail: Option<TornTail>,
    pub compression: Compression,
}

impl SessionLog {
    /// The events stored in the log, without the crash closers.
    pub fn stored(&self) -> &[Event] {
        let stored = self.events.len().saturating_sub(self.closer_count);
        self.events.get(..stored).unwrap_or_default()
    }

    /// The synthetic crash closers appended after the stored events (empty unless a turn was open and
    /// closers were asked for).
    pub fn closers(&self) -> &[Event] {
        let stored = self.events.len().saturating_sub(self.closer_count);
        self.events.get(stored..).unwrap_or_default()
    }
}

/// What [`LogReader::resume`] found.
// The reader is the common outcome and is moved on at once; boxing it would cost every resume.
#[allow(clippy::large_enum_variant)]
pub enum Resumed {
    /// A reader that continues at the checkpoint: it yields the stored events from
    /// [`ReadCheckpoint::next_seq`] on (then the crash closers, if asked for and a turn is still open).
    Continue(LogReader),
    /// The log changed other than by appending, or the checkpoint is unusable: read it whole.
    ReRead(ReReadReason),
}

impl std::fmt::Debug for Resumed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Continue(reader) => f
                .debug_struct("Continue")
                .field("next_seq", &reader.checkpoint().next_seq)
                .finish_non_exhaustive(),
            Self::ReRead(why) => f.debug_tuple("ReRead").field(why).finish(),
        }
    }
}

/// Reads a whole log: every event (and the closers, if asked for), or the first error.
pub fn read_log(path: &Path, opts: &ReadOptions) -> Result<SessionLog, LogError> {
    LogReader::open(path, opts)?.into_log()
}

/// Reads a whole log as [`read_log`] does, and the checkpoint after its last stored event, from which
/// [`LogReader::resume`] reads only what is appended later.
pub fn read_log_with_checkpoint(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(SessionLog, ReadCheckpoint), LogError> {
    LogReader::open(path, opts)?.into_log_with_checkpoint()
}

/// Reads only the header, as a listing does: raw logs up to the first LF, zstd logs only the first frame
/// (read in 8 KiB chunks). Applies the same header and id checks, and the same bounds, as a full read: a
/// FIFO, a device or an endless header line is an error, never a hang.
pub fn read_header(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(SessionHeader, Vec<HeaderDiagnostic>, Compression), LogError> {
    let file = open_regular(path)?;
    let reader = LogReader::from_source(Box::new(file), path, opts, HEADER_CHUNK)?;
    Ok((reader.header, reader.diagnostics, reader.compression))
}

type Source = Box<dyn Read + Send>;

enum Input {
    Raw {
        reader: BufReader<Source>,
        line: Vec<u8>,
        /// The file offset the scanner's input starts at: the end of the header, or a resume offset.
        header_len: u64,
        fragment_line: Option<u64>,
        cap: usize,
    },
    Zstd(Box<ZstdInput>),
}

enum Phase {
    Events,
    Closers(std::vec::IntoIter<Event>),
    Done,
}

/// A streaming reader of one session log: an iterator of validated events (see the module doc).
pub struct LogReader {
    path: PathBuf,
    crash_closers: bool,
    strict: bool,
    notes: ReadNotes,
    header: SessionHeader,
    diagnostics: Vec<HeaderDiagnostic>,
    compression: Compression,
    input: Input,
    scanner: LineScanner,
    pending: VecDeque<Accepted>,
    next_seq: u64,
    legacy: LegacyUpgrader,
    closers: CloserTracker,
    phase: Phase,
    torn_tail: Option<TornTail>,
    track: Tracking,
    /// The event [`LogReader::next_ref`] lent out last.
    current: Option<Item>,
}

impl LogReader {
    /// Opens a log file: detects raw vs zstd by the zstd magic in the first 4 bytes and reads and checks
    /// the header (and the expected id) before returning. Only a regular file (or a symlink to one) is
    /// read: anything else is [`LogErrorCode::NotRegularFile`].
    pub fn open(path: &Path, opts: &ReadOptions) -> Result<Self, LogError> {
        let file = open_regular(path)?;
        let len = file.metadata().ok().map(|m| m.len());
        Self::from_source(Box::new(file), path, opts, raw_buffer(len))
    }

    /// Reads a log held in memory, as [`LogReader::open`] reads a file; `label` names it in errors.
    pub fn from_bytes(bytes: Vec<u8>, label: &Path, opts: &ReadOptions) -> Result<Self, LogError> {
        let len = u64::try_from(bytes.len()).ok();
        Self::from_source(Box::new(Cursor::new(bytes)), label, opts, raw_buffer(len))
    }

    /// Reads a log from any byte stream positioned at its start; `label` names it in errors.
    pub fn from_reader(
        reader: impl Read + Send + 'static,
        label: &Path,
        opts: &ReadOptions,
    ) -> Result<Self, LogError> {
        Self::from_source(Box::new(reader), label, opts, raw_buffer(None))
    }

    fn from_source(
        src: Source,
        path: &Path,
        opts: &ReadOptions,
        raw_capacity: usize,
    ) -> Result<Self, LogError> {
        // The header-only listing reads in small chunks, whatever the encoding.
        let chunk = if raw_capacity == HEADER_CHUNK {
            HEADER_CHUNK
        } else {
            ZSTD_CHUNK
        };
        let count = Arc::new(AtomicU64::new(0));
        let mut src: Source = Box::new(Counted::new(src, Arc::clone(&count)));
        let mut track = Tracking::new(count, 0);
        let at = |e: LogError| e.at_path(path);
        let mut prefix = Vec::with_capacity(4);
        (&mut src)
            .take(4)
            .read_to_end(&mut prefix)
            .map_err(|e| LogError::io(path, &e))?;
        let zstd = zstd_frames::has_zstd_magic(&prefix);
        let src: Source = Box::new(Cursor::new(prefix).chain(src));
        let cap = opts.max_line_bytes;
        let (header_bytes, input) = if zstd {
            read_zstd_header(src, chunk, cap, &mut track.window).map_err(at)?
        } else {
            read_raw_header(
                BufReader::with_capacity(raw_capacity, src),
                cap,
                &mut track.window,
            )
            .map_err(|e| not_zstd_as_named(e, zstd, path))
            .map_err(at)?
        };
        let (header, diagnostics) = SessionHeader::parse(&header_bytes, opts.strict_header)
            .map_err(|e| not_zstd_as_named(e, zstd, path))
            .map_err(at)?;
        check_expected_id(&header, opts, path)?;
        let header_end = match &input {
            Input::Raw { header_len, .. } => *header_len,
            Input::Zstd(z) => z.committed,
        };
        track.header_guard = track.window.at_end(header_end);
        track.header_line = String::from_utf8_lossy(&header_bytes).into_owned();
        Ok(Self {
            path: path.to_path_buf(),
            crash_closers: opts.crash_closers,
            strict: opts.strict_header,
            notes: ReadNotes::default(),
            legacy: LegacyUpgrader::new(&header.id),
            header,
            diagnostics,
            compression: if zstd {
                Compression::Zstd
            } else {
                Compression::None
            },
            input,
            scanner: LineScanner::new(2),
            pending: VecDeque::new(),
            next_seq: 0,
            closers: CloserTracker::new(),
            phase: Phase::Events,
            torn_tail: None,
            track,
            current: None,
        })
    }

    /// The header, as read (with the lenient defaults filled in).
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// What the lenient header reading accepted that a strict reader would refuse.
    pub fn diagnostics(&self) -> &[HeaderDiagnostic] {
        &self.diagnostics
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The torn tail the read salvaged past, if any. Meaningful once iteration has ended.
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn_tail.as_ref()
    }

    /// The 1-based physical line (header = 1; zstd: of the decompressed text) of the event the iterator
    /// returned last, so a consumer that rejects an event (the surface fold, say) can say where it is.
    /// Crash closers have no line; after them this is the last line read.
    pub fn line(&self) -> u64 {
        self.scanner.line()
    }

    /// File bytes known good so far: raw, through the last accepted line; zstd, through the last complete
    /// frame. Once iteration has ended without error, where a repairing writer could append.
    pub fn committed_bytes(&self) -> u64 {
        match &self.input {
            Input::Raw { header_len, .. } => header_len.saturating_add(self.scanner.committed()),
            Input::Zstd(z) => z.committed,
        }
    }

    /// Zstd logs: the plaintext bytes decoded so far, the header's included (0 for raw logs). A reader
    /// never decodes more than cap + 1 bytes past the end of the last line it scanned, so this shows
    /// where a read of a frame that expands without bound stopped.
    pub fn decompressed_bytes(&self) -> u64 {
        match &self.input {
            Input::Raw { .. } => 0,
            Input::Zstd(z) => z.decoded,
        }
    }

    /// How many events were read in a legacy shape and upgraded (spec §1.8), so far.
    pub fn legacy_upgrades(&self) -> u64 {
        self.legacy.upgraded()
    }

    /// What the read accepted leniently so far (see [`ReadNotes`]).
    pub fn notes(&self) -> ReadNotes {
        ReadNotes {
            legacy_upgrades: self.legacy.upgraded(),
            ..self.notes.clone()
        }
    }

    /// Reads everything that is left into a [`SessionLog`].
    pub fn into_log(mut self) -> Result<SessionLog, LogError> {
        let (events, closer_count) = self.drain()?;
        Ok(self.into_session_log(events, closer_count))
    }

    /// Runs one scanned event through the logical pipeline.
    fn process(&mut self, scanned: Scanned) -> Result<Item, LogError> {
        // The scanner proved the seq equals the event's index.
        let seq = self.next_seq;
        self.next_seq = seq.saturating_add(1);
        let line = self.scanner.line();
        let locate = |e: LogError| e.at_path(&self.path).at_line(line).at_seq(seq);
        let mut value = match scanned {
            // Steps 2–5 and the request/header rule do not apply to these types: envelope rules only.
            Scanned::Plain(parts) => {
                let event = parts.into_event().map_err(locate)?;
                self.closers.observe(&event);
                return Ok(Item::Event(event));
            }

            // Steps 2–5 passed in the line's parse, with no upgrade to apply: the upgrader only
            // records the message id, as it does for every message event, and the envelope remains.
            Scanned::Message(parts) => {
                let facts = parts
                    .kind()
                    .and_then(|kind| parts.data()?.message_facts(kind));
                if let Some(facts) = facts {
                    self.legacy.record(seq, &facts.id);
                }
                let event = parts.into_event().map_err(locate)?;
                self.closers.observe(&event);
                return Ok(Item::Event(event));
            }
            Scanned::Value(value) => value,
        };
        // Most events (chunks, steps, titles) are of a type steps 2–5 never look at: skip the lookups.
        let plain = value
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(validate::is_plain_known);
        let event = (|| {
            if !plain {
                validate::check_obsolete(&value)?;
                self.legacy.upgrade(seq, &mut value)?;
                validate::check_message_shape(&value)?;
                validate::check_known_type(&value)?;
            }
            Event::from_value(value)
        })()
        .map_err(locate)?;
        if let Err(e) = validate::check_request_header(&event) {
            if self.strict {
                return Err(locate(e));
            }
            self.notes.invalid_request_headers =
                self.notes.invalid_request_headers.saturating_add(1);
            self.notes
                .first_invalid_request_header
                .get_or_insert_with(|| locate(e));
        }
        self.closers.observe(&event);
        Ok(Item::Event(event))
    }

    /// Feeds the next line to the scanner. `Ok(false)` at the end of the input.
    fn advance(&mut self) -> Result<bool, LogError> {
        match &mut self.input {
            Input::Raw {
                reader,
                line,
                fragment_line,
                cap,
                ..
            } => {
                let io = |e: io::Error| LogError::io(&self.path, &e);
                if self.scanner.issue().is_some() {
                    loop {
                        let skipped = self.scanner.skip_inert(reader.fill_buf().map_err(io)?);
                        if skipped == 0 {
                            break;
                        }
                        reader.consume(skipped);
                    }
                }
                // A line whole in the read buffer (nearly every line) is parsed where it lies.
                match reader.fill_buf() {
                    Ok(buf) => {
                        let window = buf.get(..cap.saturating_add(1)).unwrap_or(buf);
                        if let Some(lf) = memchr::memchr(b'\n', window) {
                            let whole = window.get(..=lf).unwrap_or_default();
                            let committed = self.scanner.committed();
                            let fed = self.scanner.feed(whole, &mut self.pending);
                            if fed.is_ok() && self.scanner.committed() != committed {
                                self.track.window.push(whole);
                            }
                            reader.consume(lf + 1);
                            fed?;
                            return Ok(true);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io(e)),
                }
                match read_line_capped(reader, line, *cap).map_err(io)? {
                    RawLine::Eof => Ok(false),
                    RawLine::Fragment => {
                        self.scanner.note_fragment(line.len());
                        *fragment_line = Some(self.scanner.line().saturating_add(1));
                        Ok(false)
                    }
                    RawLine::TooLong => {
                        Err(line_too_long(self.scanner.line().saturating_add(1), *cap))
                    }
                    RawLine::Line => {
                        // Every committed line enters the window (a packed row may hold no event).
                        let committed = self.scanner.committed();
                        self.scanner.feed(line, &mut self.pending)?;
                        if self.scanner.committed() != committed {
                            self.track.window.push(line);
                        }
                        Ok(true)
                    }
                }
            }
            Input::Zstd(z) => {
                let salvaging = z.torn_start.is_some();
                let more = advance_zstd(
                    z,
                    &mut self.scanner,
                    &mut self.pending,
                    &mut self.track.window,
                )?;
                let wants_snapshot = z.upcoming.is_some() && z.snapshot.is_none();
                let torn_now = !salvaging && z.torn_start.is_some();
                let snapshot = if torn_now { z.snapshot.take() } else { None };
                if wants_snapshot {
                    // Nothing of the upcoming frame is decoded yet: the state is the committed one.
                    let at_start = Box::new(self.checkpoint_here());
                    if let Input::Zstd(z) = &mut self.input {
                        z.snapshot = Some(at_start);
                    }
                } else if torn_now {
                    self.track.torn =
                        Some(snapshot.unwrap_or_else(|| Box::new(self.checkpoint_here())));
                }
                Ok(more)
            }
        }
    }

    /// The end of the stored events: final checks, the torn tail, and the closers.
    fn finish(&mut self) -> Result<Vec<Event>, LogError> {
        let issue = self.scanner.issue();
        self.torn_tail = match &mut self.input {
            Input::Raw {
                header_len,
                fragment_line,
                ..
            } => {
                let offset = header_len.saturating_add(self.scanner.committed());
                match (issue, fragment_line) {
                    (Some(issue), _) => Some(TornTail {
                        code: issue.code,
                        line: issue.line,
                        offset,
                        message: issue.message.clone(),
                    }),
                    (None, Some(line)) => Some(TornTail {
                        code: LogErrorCode::TornLine,
                        line: Some(*line),
                        offset,
                        message: format!("torn final line {line} without LF"),
                    }),
                    (None, None) => None,
                }
            }
            Input::Zstd(z) => {
                if let Some(violation) = z.violation.take() {
                    return Err(violation);
                }
                z.torn_start.map(|offset| match issue {
                    Some(issue) => TornTail {
                        code: issue.code,
                        line: issue.line,
                        offset,
                        message: format!(
                            "{} (in the torn final zstd frame at offset {offset})",
                            issue.message
                        ),
                    },
                    None => TornTail {
                        code: LogErrorCode::ZstdTornFrame,
                        line: None,
                        offset,
                        message: format!("torn final zstd frame at offset {offset}"),
                    },
                })
            }
        };
        Ok(if self.crash_closers {
            self.closers.closers()
        } else {
            Vec::new()
        })
    }
}

impl Iterator for LogReader {
    type Item = Result<Event, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_item()? {
            Ok(()) => self.current.take().map(|item| Ok(item.into_event())),
            Err(e) => Some(Err(e)),
        }
    }
}

/// One event out of the read pipeline: built whole, or a packed row's member not made an [`Event`] (see
/// [`EventRef`]).
// `Event` is the common variant next to `Member`; boxing either would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
enum Item {
    Event(Event),
    Chunk(Member),
}

impl Item {
    fn into_event(self) -> Event {
        match self {
            Self::Event(event) => event,
            Self::Chunk(member) => member.into_event(),
        }
    }

    fn as_ref(&self) -> EventRef<'_> {
        match self {
            Self::Event(event) => EventRef::Event(event),
            Self::Chunk(member) => EventRef::Chunk(ChunkRef(member)),
        }
    }
}

/// The borrowed read: the same pipeline as the iterator, without making an owned event of each chunk.
impl LogReader {
    /// The next event, borrowed until the next call: what [`Iterator::next`] would return (the same
    /// events, errors and end, and the same state after it), as an [`EventRef`]. A consumer that only
    /// folds and extracts (see [`crate::surface::SurfaceFold::apply_ref`], [`crate::text::event_ref_text`])
    /// never pays for an owned event per chunk delta.
    pub fn next_ref(&mut self) -> Option<Result<EventRef<'_>, LogError>> {
        match self.next_item()? {
            Ok(()) => self.current.as_ref().map(|item| Ok(item.as_ref())),
            Err(e) => Some(Err(e)),
        }
    }

    /// Puts the next event in `current` (an error leaves it as it was).
    fn next_item(&mut self) -> Option<Result<(), LogError>> {
        loop {
            match &mut self.phase {
                Phase::Done => return None,
                Phase::Closers(closers) => match closers.next() {
                    Some(event) => {
                        self.current = Some(Item::Event(event));
                        return Some(Ok(()));
                    }
                    None => self.phase = Phase::Done,
                },
                Phase::Events => match self.pending.front_mut() {
                    // Most events: a packed row's member, which the row's checks covered. It goes
                    // straight from the row to `current`, with only its seq and time observed.
                    Some(Accepted::Row(row)) => {
                        let Some(member) = row.next_member() else {
                            self.pending.pop_front();
                            continue;
                        };
                        if row.is_done() {
                            self.pending.pop_front();
                        }
                        let seq = self.next_seq;
                        self.next_seq = seq.saturating_add(1);
                        if seq < self.track.skip_below {
                            // Yielded before a resume: read again only because it shares a packed
                            // row with what follows.
                            continue;
                        }
                        self.closers.observe_ref(EventRef::Chunk(ChunkRef(&member)));
                        self.current = Some(Item::Chunk(member));
                        return Some(Ok(()));
                    }
                    Some(Accepted::One(_)) => {
                        let Some(Accepted::One(scanned)) = self.pending.pop_front() else {
                            continue;
                        };
                        if self.next_seq < self.track.skip_below {
                            // Yielded before a resume: decoded again only because it shares a zstd
                            // frame with what follows.
                            self.next_seq = self.next_seq.saturating_add(1);
                            continue;
                        }
                        return Some(match self.process(scanned) {
                            Ok(item) => {
                                self.current = Some(item);
                                Ok(())
                            }
                            Err(e) => {
                                // Not yielded: a checkpoint taken now still ends before it.
                                self.next_seq = self.next_seq.saturating_sub(1);
                                self.phase = Phase::Done;
                                Err(e)
                            }
                        });
                    }
                    None => {
                        let step = self.advance().and_then(|more| {
                            if more {
                                Ok(None)
                            } else {
                                self.finish().map(Some)
                            }
                        });
                        match step {
                            Ok(None) => {}
                            Ok(Some(closers)) => self.phase = Phase::Closers(closers.into_iter()),
                            Err(e) => {
                                self.phase = Phase::Done;
                                return Some(Err(e.at_path(&self.path)));
                            }
                        }
                    }
                },
            }
        }
    }
}

/// Checkpoints and resuming (see [`super::checkpoint`]).
impl LogReader {
    /// The checkpoint after the stored events yielded so far: a reader resumed from it yields the next
    /// stored event on. It never covers a crash closer or anything of a torn tail (the events salvaged
    /// from a torn final zstd frame are yielded, but the checkpoint stays at that frame's start). Taken
    /// after the iteration ended in an error, it covers the events yielded before the error, and a
    /// resume from it meets the same error (unless the log was replaced meanwhile).
    pub fn checkpoint(&self) -> ReadCheckpoint {
        if let Some(torn) = &self.track.torn {
            return (**torn).clone();
        }
        match &self.input {
            Input::Zstd(z) if z.decoding.is_some() => match &z.snapshot {
                Some(at_start) => (**at_start).clone(),
                None => self.checkpoint_here(),
            },
            _ => self.checkpoint_here(),
        }
    }

    /// Continues reading the log at `path` where `checkpoint` was taken, reading nothing before its
    /// offset but the guard bytes (see [`super::checkpoint`]). The checkpoint's header is used as it
    /// was (checked again against `opts`: strictness, expected id); `opts.crash_closers` applies anew.
    /// [`Resumed::ReRead`] when the log changed other than by appending or the checkpoint does not fit;
    /// `Err` when the file cannot be opened or read, or the header fails `opts`.
    pub fn resume(
        path: &Path,
        checkpoint: &ReadCheckpoint,
        opts: &ReadOptions,
    ) -> Result<Resumed, LogError> {
        let reopened = match checkpoint::reopen(path, checkpoint)? {
            Ok(reopened) => reopened,
            Err(why) => return Ok(Resumed::ReRead(why)),
        };
        let (header, diagnostics) =
            SessionHeader::parse(checkpoint.header_line.as_bytes(), opts.strict_header)
                .map_err(|e| e.at_path(path))?;
        check_expected_id(&header, opts, path)?;
        let legacy = match LegacyUpgrader::restore(
            &header.id,
            checkpoint.legacy.clone(),
            checkpoint.next_seq,
        ) {
            Ok(legacy) => legacy,
            Err(why) => return Ok(Resumed::ReRead(ReReadReason::InvalidCheckpoint(why))),
        };
        let offset = checkpoint.offset;
        let resume_buffer = raw_buffer(
            reopened
                .file
                .metadata()
                .ok()
                .map(|m| m.len().saturating_sub(offset)),
        );
        let count = Arc::new(AtomicU64::new(0));
        let src: Source = Box::new(Counted::new(reopened.file, Arc::clone(&count)));
        let input = match checkpoint.compression {
            Compression::None => Input::Raw {
                reader: BufReader::with_capacity(resume_buffer, src),
                line: Vec::new(),
                header_len: offset,
                fragment_line: None,
                cap: opts.max_line_bytes,
            },
            Compression::Zstd => Input::Zstd(Box::new(ZstdInput {
                frames: FrameSource {
                    src,
                    buf: Vec::new(),
                    offset,
                    eof: false,
                    chunk: ZSTD_CHUNK,
                    max_frame: usize::MAX,
                },
                decoder: FrameDecoder::new(),
                decoding: None,
                plain: Vec::new(),
                pos: 0,
                searched: 0,
                cap: opts.max_line_bytes,
                decoded: 0,
                committed: offset,
                torn_start: None,
                upcoming: None,
                snapshot: None,
                pending_violation: None,
                violation: None,
                frame_start: offset,
                frame_line: checkpoint.line,
                frame_seq: checkpoint.scan_seq,
            })),
        };
        let mut track = Tracking::new(count, offset);
        track.header_line = checkpoint.header_line.clone();
        track.header_guard = checkpoint.header_guard;
        track.window = GuardWindow::seeded(&reopened.tail, reopened.prefix);
        track.guard_read = reopened.bytes_read;
        track.verified = reopened.verified;
        track.skip_below = checkpoint.next_seq;
        Ok(Resumed::Continue(Self {
            path: path.to_path_buf(),
            crash_closers: opts.crash_closers,
            strict: opts.strict_header,
            notes: checkpoint.notes.clone().into_notes(path),
            legacy,
            header,
            diagnostics,
            compression: checkpoint.compression,
            input,
            scanner: LineScanner::resume(checkpoint.line, checkpoint.scan_seq),
            pending: VecDeque::new(),
            next_seq: checkpoint.scan_seq,
            closers: checkpoint.closers.clone(),
            phase: Phase::Events,
            torn_tail: None,
            track,
            current: None,
        }))
    }

    /// Every byte this reader has read from its file (or stream): for a resumed reader, the guard bytes
    /// and what follows the checkpoint, which is how a test tells a resume from a re-read.
    pub fn bytes_read(&self) -> u64 {
        self.track.bytes_read()
    }

    /// For a resumed reader, the bytes before the checkpoint's offset it read and hashed to prove that
    /// the log only grew (0 for a reader that started at the beginning). Not in [`Self::bytes_read`]:
    /// those bytes are hashed, never parsed.
    pub fn verified_bytes(&self) -> u64 {
        self.track.verified
    }

    /// Whether the event the iterator returned last is a synthetic crash closer (spec §1.9) rather than
    /// a stored event. Closers come after every stored event.
    pub fn yielding_closers(&self) -> bool {
        matches!(self.phase, Phase::Closers(_))
    }

    /// The crash closers the stored events yielded so far would get (empty when no turn is open),
    /// whether or not this reader appends them.
    pub fn closers(&self) -> Vec<Event> {
        self.closers.closers()
    }

    /// Reads everything that is left into a [`SessionLog`], and the checkpoint after its last stored
    /// event.
    pub fn into_log_with_checkpoint(mut self) -> Result<(SessionLog, ReadCheckpoint), LogError> {
        let (events, closer_count) = self.drain()?;
        let checkpoint = self.checkpoint();
        Ok((self.into_session_log(events, closer_count), checkpoint))
    }

    /// The rest of the events, and how many of them are closers.
    fn drain(&mut self) -> Result<(Vec<Event>, usize), LogError> {
        let mut events = Vec::new();
        let mut closer_count = 0usize;
        while let Some(event) = self.next() {
            events.push(event?);
            if self.yielding_closers() {
                closer_count = closer_count.saturating_add(1);
            }
        }
        Ok((events, closer_count))
    }

    fn into_session_log(self, events: Vec<Event>, closer_count: usize) -> SessionLog {
        SessionLog {
            header: self.header,
            diagnostics: self.diagnostics,
            events,
            closer_count,
            torn_tail: self.torn_tail,
            compression: self.compression,
        }
    }

    /// The checkpoint at the current position, ignoring a torn frame's snapshot.
    fn checkpoint_here(&self) -> ReadCheckpoint {
        let scanner = &self.scanner;
        let window = &self.track.window;
        let next_seq = self.next_seq.max(self.track.skip_below);
        // Every event the scanner accepted is covered (none pending, none refused by a later check).
        let all_covered = next_seq >= scanner.next_seq();
        let at_end = (scanner.committed_line(), scanner.next_seq(), true);
        // `unit_end`: the offset is where the last unit the window saw ends, not where it starts.
        let (offset, (line, scan_seq, unit_end)) = match &self.input {
            Input::Raw { header_len, .. } => {
                if all_covered {
                    (header_len.saturating_add(scanner.committed()), at_end)
                } else {
                    // Inside a packed row: resume at the row's line.
                    let (start, seq0) = scanner.last_line_start();
                    let line = scanner.committed_line().saturating_sub(1);
                    (header_len.saturating_add(start), (line, seq0, false))
                }
            }
            Input::Zstd(z) => {
                let frame = (z.frame_line, z.frame_seq);
                if z.torn_start.is_some() {
                    // The torn frame never enters the window: its end is the frame's start.
                    (z.frame_start, (frame.0, frame.1, true))
                } else if all_covered && z.pos >= z.plain.len() && z.decoding.is_none() {
                    (z.committed, at_end)
                } else {
                    // Inside a frame: resume at its start.
                    (z.frame_start, (frame.0, frame.1, false))
                }
            }
        };
        let (tail_guard, prefix) = if unit_end {
            (window.at_end(offset), window.prefix.at_end())
        } else {
            (window.before_unit(offset), window.prefix.before_unit())
        };
        ReadCheckpoint {
            version: CHECKPOINT_VERSION,
            compression: self.compression,
            offset,
            line,
            scan_seq,
            next_seq,
            file_len: self.track.seen().max(offset),
            header_line: self.track.header_line.clone(),
            header_guard: self.track.header_guard,
            tail_guard,
            prefix,
            legacy: self.legacy.state_before(next_seq),
            closers: self.closers.clone(),
            notes: NotesState::of(&self.notes),
        }
    }
}

fn check_expected_id(
    header: &SessionHeader,
    opts: &ReadOptions,
    path: &Path,
) -> Result<(), LogError> {
    match &opts.expected_id {
        Some(expected) if &header.id != expected => {
            let message = format!(
                "header id {:?} differs from the requested id {:?}",
                clip_for_message(&header.id),
                clip_for_message(expected)
            );
            Err(LogError::new(LogErrorCode::IdMismatch, message)
                .at_path(path)
                .at_line(1))
        }
        _ => Ok(()),
    }
}

fn read_raw_header(
    mut reader: BufReader<Source>,
    cap: usize,
    window: &mut GuardWindow,
) -> Result<(Vec<u8>, Input), LogError> {
    let mut line = Vec::new();
    let end = read_line_capped(&mut reader, &mut line, cap)
        .map_err(|e| LogError::new(LogErrorCode::Io, e.to_string()))?;
    match end {
        RawLine::Line => {}
        RawLine::TooLong => return Err(line_too_long(1, cap)),
        RawLine::Eof | RawLine::Fragment => {
            return Err(LogError::new(
                LogErrorCode::MissingHeader,
                "empty or header-less session log (no complete first line)",
            ))
        }
    }
    window.push(&line);
    let header_len = line.len() as u64;
    line.pop();
    let input = Input::Raw {
        reader,
        line: Vec::new(),
        header_len,
        fragment_line: None,
        cap,
    };
    Ok((line, input))
}

/// A file named `….zstd` whose bytes are no zstd stream (random bytes, say) is read as raw text, as the
/// spec detects compression by content; when that fails too, the reason a person needs is that it is
/// not a zstd stream, not what the raw reader made of its bytes.
fn not_zstd_as_named(e: LogError, zstd: bool, path: &Path) -> LogError {
    let named_zstd = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".zstd"));
    if zstd || !named_zstd {
        return e;
    }
    let message = format!(
        "not a zstd stream: the file is named .zstd but does not start with a Zstandard frame (read as text: {})",
        e.message
    );
    LogError { message, ..e }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zstd_frames::compress_frame;

    const HEADER: &str =
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

    #[test]
    fn the_read_buffer_is_sized_to_the_file_within_its_bounds() {
        assert_eq!(raw_buffer(None), RAW_BUFFER);
        assert_eq!(raw_buffer(Some(0)), HEADER_CHUNK + 1);
        assert_eq!(raw_buffer(Some(50_000)), 50_001);
        assert_eq!(raw_buffer(Some(100_000)), RAW_BUFFER);
        assert_eq!(raw_buffer(Some(u64::MAX)), RAW_BUFFER);
    }

    /// The buffer is sized to the file as it was at open; a live session grows after that.
    #[test]
    fn a_log_that_grew_past_its_size_at_open_reads_to_its_new_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let step = |seq: u64| {
            format!("{{\"type\":\"step/start\",\"seq\":{seq},\"time\":0,\"data\":{{}}}}\n")
        };
        std::fs::write(&path, format!("{HEADER}\n{}", step(0))).unwrap();
        let mut reader = LogReader::open(&path, &ReadOptions::default()).unwrap();
        let mut more = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        for seq in 1..2_000 {
            io::Write::write_all(&mut more, step(seq).as_bytes()).unwrap();
        }
        let mut seqs = Vec::new();
        while let Some(event) = reader.next_ref() {
            seqs.push(event.unwrap().seq());
        }
        assert_eq!(seqs, (0..2_000).collect::<Vec<u64>>());
    }

    /// A source that hands out a few bytes per read, so lines reach the reader in pieces.
    struct Trickle(Cursor<Vec<u8>>, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = self.1 % 7 + 1;
            let n = buf.len().min(self.1);
            self.0.read(&mut buf[..n])
        }
    }

    /// Lines are parsed where they lie in the read buffer when whole there, and copied out first when a
    /// read ends inside them: either way the same events, torn tail and checkpoint.
    #[test]
    fn lines_whole_in_the_read_buffer_or_split_across_reads_read_the_same() {
        let mut text = format!("{HEADER}\n{}", ev(0, "turn/start"));
        for seq in 1..40 {
            text.push_str(&ev(seq, "session/title"));
        }
        text.push_str("{\"type\":\"tur");
        let whole = LogReader::from_bytes(
            text.clone().into_bytes(),
            Path::new("t"),
            &Default::default(),
        )
        .unwrap();
        let split = LogReader::from_reader(
            Trickle(Cursor::new(text.into_bytes()), 0),
            Path::new("t"),
            &Default::default(),
        )
        .unwrap();
        let (mut whole, mut split) = (whole, split);
        let a: Vec<Event> = whole.by_ref().map(Result::unwrap).collect();
        let b: Vec<Event> = split.by_ref().map(Result::unwrap).collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 41, "40 stored events and the closing turn end");
        assert_eq!(whole.torn_tail(), split.torn_tail());
        assert_eq!(whole.checkpoint(), split.checkpoint());
    }

    fn read(
        bytes: Vec<u8>,
        opts: &ReadOptions,
    ) -> Result<(Vec<Event>, Option<TornTail>), LogError> {
        let log = LogReader::from_bytes(bytes, Path::new("t.jsonl"), opts)?.into_log()?;
        Ok((log.events, log.torn_tail))
    }

    fn ev(seq: u64, kind: &str) -> String {
        let data = if kind == "turn/end" {
            r#"{"turn":1,"reason":{"kind":"completed"}}"#
        } else {
            r#"{"turn":1}"#
        };
        format!("{{\"type\":\"{kind}\",\"seq\":{seq},\"time\":{seq},\"data\":{data}}}\n")
    }

    #[test]
    fn raw_log_streams_events_and_closers() {
        let text = format!(
            "{HEADER}\n{}{}",
            ev(0, "turn/start"),
            ev(1, "session/title")
        );
        let (events, torn) = read(text.clone().into_bytes(), &ReadOptions::default()).unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[2].kind, "turn/end");
        assert!(torn.is_none());
        let no_closers = ReadOptions {
            crash_closers: false,
            ..ReadOptions::default()
        };
        assert_eq!(read(text.into_bytes(), &no_closers).unwrap().0.len(), 2);
    }

    #[test]
    fn raw_torn_fragment_is_a_torn_tail_at_the_committed_offset() {
        let committed = format!("{HEADER}\n{}", ev(0, "session/title"));
        let text = format!("{committed}{{\"type\":\"tur");
        let mut reader =
            LogReader::from_bytes(text.into_bytes(), Path::new("t"), &ReadOptions::default())
                .unwrap();
        assert_eq!(reader.by_ref().count(), 1);
        let torn = reader.torn_tail().unwrap();
        assert_eq!(
            (torn.code, torn.line, torn.offset),
            (LogErrorCode::TornLine, Some(3), committed.len() as u64)
        );
        assert_eq!(reader.committed_bytes(), committed.len() as u64);
    }

    #[test]
    fn zstd_log_reads_frame_by_frame() {
        let mut bytes = compress_frame(format!("{HEADER}\n").as_bytes());
        bytes.extend(compress_frame(
            format!("{}{}", ev(0, "turn/start"), ev(1, "step/start")).as_bytes(),
        ));
        let complete = bytes.len() as u64;
        bytes.extend(compress_frame(ev(2, "turn/end").as_bytes()));
        let mut reader =
            LogReader::from_bytes(bytes.clone(), Path::new("t"), &ReadOptions::default()).unwrap();
        assert_eq!(reader.compression(), Compression::Zstd);
        assert_eq!(
            reader.by_ref().map(|e| e.unwrap().seq).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(reader.committed_bytes(), bytes.len() as u64);
        // Cutting the last frame short leaves a torn tail at its start.
        bytes.truncate(bytes.len() - 3);
        let (events, torn) = read(bytes, &ReadOptions::default()).unwrap();
        assert_eq!(
            events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
            ["turn/start", "step/start", "turn/end"]
        );
        let torn = torn.unwrap();
        assert_eq!(
            (torn.code, torn.offset),
            (LogErrorCode::ZstdTornFrame, complete)
        );
    }

    #[test]
    fn header_only_read_stops_after_the_header() {
        let err = read(Vec::new(), &ReadOptions::default()).unwrap_err();
        assert_eq!(err.code, LogErrorCode::MissingHeader);
        let opts = ReadOptions {
            expected_id: Some("other".into()),
            ..ReadOptions::default()
        };
        let err = read(format!("{HEADER}\n").into_bytes(), &opts).unwrap_err();
        assert_eq!((err.code, err.line), (LogErrorCode::IdMismatch, Some(1)));
    }
}
