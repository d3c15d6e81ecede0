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
//! Memory stays bounded by the line cap ([`ReadOptions::max_line_bytes`], [`MAX_LINE_BYTES`] by default:
//! at most cap + 1 bytes of one line are ever held) plus, for zstd, one compressed frame and one decoding
//! step ([`zstd_frames::DECODE_STEP`]) of its plaintext, plus one message id per message event for the legacy upgrades. Only regular files are opened
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
    self, Counted, Guard, GuardWindow, ReReadReason, ReadCheckpoint, Tracking, CHECKPOINT_VERSION,
};
use super::error::{clip_for_message, LogError, LogErrorCode};
use super::header::{HeaderDiagnostic, SessionHeader};
use super::legacy::LegacyUpgrader;
use super::notes::NotesState;
pub use super::notes::ReadNotes;
use super::repair::CloserTracker;
use super::scan::{LineScanner, Scanned};
use super::validate;
use super::zstd_frames::{self, FrameDecoder, FrameDefect, FrameScan, Step};
use super::{Compression, Event};

pub use super::bounds::MAX_LINE_BYTES;

/// Read buffer for raw logs: large enough that a read syscall is rare next to parsing.
const RAW_BUFFER: usize = 256 * 1024;
/// Minimum read size while looking for the end of a zstd frame.
const ZSTD_CHUNK: usize = 64 * 1024;
/// Compressed bytes read ahead at a frame's start: a frame that ends within them (every append batch
/// of an ordinary log) is known complete or torn before it is decoded; a larger one is streamed, so
/// the reader never holds more than this (plus a block) of any frame.
const ZSTD_READAHEAD: usize = 1 << 20;
/// Read size of the header-only listing path (spec §1.2: 8 KiB chunks).
const HEADER_CHUNK: usize = 8 * 1024;

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

/// The zstd side of the physical layer: the compressed bytes of the current frame, read on demand.
struct FrameSource {
    src: Source,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    offset: u64,
    eof: bool,
    chunk: usize,
    /// The largest frame accepted, in compressed bytes (the header frame is bounded by the line cap).
    max_frame: usize,
}

/// Where the next frame lies in [`FrameSource::buf`]: always at its start.
struct FrameAt {
    start: u64,
    len: usize,
    complete: bool,
}

enum FrameFailure {
    Io(io::Error),
    Defect(FrameDefect, u64),
    /// The frame at this offset needs more than `max_frame` bytes.
    TooLarge(u64),
}

impl FrameSource {
    /// Finds the next frame; `None` at a clean end of file.
    fn next_frame(&mut self) -> Result<Option<FrameAt>, FrameFailure> {
        loop {
            match zstd_frames::scan_frame(&self.buf) {
                FrameScan::Complete(len) => {
                    return Ok(Some(FrameAt {
                        start: self.offset,
                        len,
                        complete: true,
                    }))
                }
                FrameScan::Corrupt(defect) => {
                    return Err(FrameFailure::Defect(defect, self.offset))
                }
                FrameScan::Incomplete { needed } => {
                    if needed > self.max_frame {
                        return Err(FrameFailure::TooLarge(self.offset));
                    }
                    if self.eof {
                        let len = self.buf.len();
                        return Ok((len > 0).then_some(FrameAt {
                            start: self.offset,
                            len,
                            complete: false,
                        }));
                    }
                    let want = needed.saturating_sub(self.buf.len()).max(self.chunk);
                    let got = (&mut self.src)
                        .take(want as u64)
                        .read_to_end(&mut self.buf)
                        .map_err(FrameFailure::Io)?;
                    if got < want {
                        self.eof = true;
                    }
                }
            }
        }
    }

    /// File offset of the end of what is buffered.
    fn avail(&self) -> u64 {
        self.offset.saturating_add(self.buf.len() as u64)
    }

    /// Reads up to `want` more bytes (at least one chunk); sets `eof` when the source has no more.
    fn fill(&mut self, want: usize) -> Result<(), FrameFailure> {
        let want = want.max(self.chunk);
        let got = (&mut self.src)
            .take(want as u64)
            .read_to_end(&mut self.buf)
            .map_err(FrameFailure::Io)?;
        if got < want {
            self.eof = true;
        }
        Ok(())
    }

    /// Drops the buffered bytes before file offset `upto`.
    fn discard(&mut self, upto: u64) {
        let n = upto.saturating_sub(self.offset).min(self.buf.len() as u64) as usize;
        self.buf.drain(..n);
        self.offset = self.offset.saturating_add(n as u64);
    }

    /// Walks the structure of the frame `d` over what is buffered.
    fn walk(&self, d: &mut Decoding) -> FrameScan {
        let base = self.offset.saturating_sub(d.start) as usize;
        d.walker.advance(&self.buf, base)
    }

    /// Starts the next frame: reads ahead up to [`ZSTD_READAHEAD`] compressed bytes, which settles
    /// whether a frame of ordinary size is complete or torn before any of it is decoded; a larger frame
    /// is streamed with that question open. `None` at a clean end of file.
    fn begin_frame(&mut self) -> Result<Option<Decoding>, FrameFailure> {
        let mut d = Decoding {
            start: self.offset,
            walker: zstd_frames::FrameWalker::default(),
            status: FrameStatus::Unknown,
            known_end: self.offset,
            fed: self.offset,
        };
        loop {
            match self.walk(&mut d) {
                FrameScan::Complete(len) => {
                    d.status = FrameStatus::Complete;
                    d.known_end = d.start.saturating_add(len as u64);
                    return Ok(Some(d));
                }
                FrameScan::Corrupt(defect) => return Err(FrameFailure::Defect(defect, d.start)),
                FrameScan::Incomplete { needed } => {
                    d.known_end = d.start.saturating_add(needed as u64);
                    if self.eof {
                        if self.buf.is_empty() {
                            return Ok(None);
                        }
                        d.status = FrameStatus::Torn;
                        return Ok(Some(d));
                    }
                    if self.buf.len() >= ZSTD_READAHEAD {
                        return Ok(Some(d));
                    }
                    let short = needed.saturating_sub(self.buf.len());
                    self.fill(short.min(ZSTD_READAHEAD - self.buf.len()))?;
                }
            }
        }
    }

    /// Settles a streamed frame's status after its decoding stopped short, reading on (and dropping
    /// what the walk has passed) until its structural end or the end of the file.
    fn settle(&mut self, d: &mut Decoding) -> Result<(), FrameFailure> {
        while d.status == FrameStatus::Unknown {
            self.discard(d.start.saturating_add(d.walker.position() as u64));
            match self.walk(d) {
                FrameScan::Complete(len) => {
                    d.status = FrameStatus::Complete;
                    d.known_end = d.start.saturating_add(len as u64);
                }
                FrameScan::Corrupt(defect) => return Err(FrameFailure::Defect(defect, d.start)),
                FrameScan::Incomplete { needed } if self.eof => {
                    d.known_end = d.start.saturating_add(needed as u64);
                    d.status = FrameStatus::Torn;
                }
                FrameScan::Incomplete { needed } => {
                    let end = d.start.saturating_add(needed as u64);
                    self.fill(end.saturating_sub(self.avail()) as usize)?;
                }
            }
        }
        Ok(())
    }

    /// Takes the frame's bytes out of the buffer.
    fn take(&mut self, at: &FrameAt) -> Vec<u8> {
        let len = at.len.min(self.buf.len());
        let rest = self.buf.split_off(len);
        self.offset = self.offset.saturating_add(len as u64);
        std::mem::replace(&mut self.buf, rest)
    }
}

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

/// Whether the frame being decoded is known to be whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameStatus {
    /// Its structural end is buffered or was read: a decode failure is damage.
    Complete,
    /// The file ends inside it: the torn final frame, salvaged.
    Torn,
    /// Larger than the read-ahead and not yet walked to its end: its events are yielded as they are
    /// decoded, but nothing of it is committed (no checkpoint covers it, a torn-record issue waits)
    /// until the walk finds its end.
    Unknown,
}

/// The frame [`ZstdInput`] is decoding, streamed: its compressed bytes pass through
/// [`FrameSource::buf`] and are dropped once the decoder and the structural walk are past them.
struct Decoding {
    /// The frame's file offset.
    start: u64,
    walker: zstd_frames::FrameWalker,
    status: FrameStatus,
    /// File offset up to which the bytes are known to belong to this frame (its end once complete).
    known_end: u64,
    /// File offset up to which the decoder was fed.
    fed: u64,
}

struct ZstdInput {
    frames: FrameSource,
    decoder: FrameDecoder,
    decoding: Option<Decoding>,
    /// Decoded text not yet scanned (`plain[pos..]`); never more than one capped line and one step.
    plain: Vec<u8>,
    pos: usize,
    /// `plain[pos..searched]` holds no LF: the search for the end of a long line resumes there.
    searched: usize,
    cap: usize,
    /// Plaintext bytes decoded so far, the header frame's included.
    decoded: u64,
    /// End of the last complete frame.
    committed: u64,
    /// Start of the torn final frame once it is being salvaged.
    torn_start: Option<u64>,
    /// A frame whose completeness the read-ahead could not settle, waiting for the reader to take the
    /// checkpoint before it ([`ZstdInput::snapshot`]) before its decoding begins.
    upcoming: Option<Decoding>,
    /// While a frame that is not known complete is decoded: the checkpoint at its start, which is as
    /// far as a checkpoint may go until the frame proves complete (and what a torn one leaves).
    snapshot: Option<Box<ReadCheckpoint>>,
    /// A torn-record issue met in a frame not yet known complete: a violation if it completes.
    pending_violation: Option<LogError>,
    /// A complete frame held an unacceptable line: fatal at the end unless the scanner fails first.
    violation: Option<LogError>,
    /// Where the frame being read starts, with the scanner's line and seq there: a checkpoint taken
    /// before all of its events are yielded resumes at its start.
    frame_start: u64,
    frame_line: u64,
    frame_seq: u64,
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
    pending: VecDeque<Scanned>,
    next_seq: u64,
    legacy: LegacyUpgrader,
    closers: CloserTracker,
    phase: Phase,
    torn_tail: Option<TornTail>,
    track: Tracking,
}

impl LogReader {
    /// Opens a log file: detects raw vs zstd by the zstd magic in the first 4 bytes and reads and checks
    /// the header (and the expected id) before returning. Only a regular file (or a symlink to one) is
    /// read: anything else is [`LogErrorCode::NotRegularFile`].
    pub fn open(path: &Path, opts: &ReadOptions) -> Result<Self, LogError> {
        let file = open_regular(path)?;
        Self::from_source(Box::new(file), path, opts, ZSTD_CHUNK)
    }

    /// Reads a log held in memory, as [`LogReader::open`] reads a file; `label` names it in errors.
    pub fn from_bytes(bytes: Vec<u8>, label: &Path, opts: &ReadOptions) -> Result<Self, LogError> {
        Self::from_source(Box::new(Cursor::new(bytes)), label, opts, ZSTD_CHUNK)
    }

    /// Reads a log from any byte stream positioned at its start; `label` names it in errors.
    pub fn from_reader(
        reader: impl Read + Send + 'static,
        label: &Path,
        opts: &ReadOptions,
    ) -> Result<Self, LogError> {
        Self::from_source(Box::new(reader), label, opts, ZSTD_CHUNK)
    }

    fn from_source(
        src: Source,
        path: &Path,
        opts: &ReadOptions,
        chunk: usize,
    ) -> Result<Self, LogError> {
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
            let capacity = if chunk == HEADER_CHUNK {
                HEADER_CHUNK
            } else {
                RAW_BUFFER
            };
            read_raw_header(
                BufReader::with_capacity(capacity, src),
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
        track.header_guard = Guard::of(track.window.at_end(), header_end);
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
    fn process(&mut self, scanned: Scanned) -> Result<Event, LogError> {
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
                return Ok(event);
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
        Ok(event)
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
        loop {
            match &mut self.phase {
                Phase::Done => return None,
                Phase::Closers(closers) => match closers.next() {
                    Some(event) => return Some(Ok(event)),
                    None => self.phase = Phase::Done,
                },
                Phase::Events => {
                    if let Some(value) = self.pending.pop_front() {
                        if self.next_seq < self.track.skip_below {
                            // Yielded before a resume: decoded again only because it shares a packed
                            // row or a zstd frame with what follows.
                            self.next_seq = self.next_seq.saturating_add(1);
                            continue;
                        }
                        let result = self.process(value);
                        if result.is_err() {
                            // Not yielded: a checkpoint taken now still ends before it.
                            self.next_seq = self.next_seq.saturating_sub(1);
                            self.phase = Phase::Done;
                        }
                        return Some(result);
                    }
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
        let count = Arc::new(AtomicU64::new(0));
        let src: Source = Box::new(Counted::new(reopened.file, Arc::clone(&count)));
        let input = match checkpoint.compression {
            Compression::None => Input::Raw {
                reader: BufReader::with_capacity(RAW_BUFFER, src),
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
        let (guard, prefix) = if unit_end {
            (window.at_end(), window.prefix.at_end())
        } else {
            (window.before_unit(), window.prefix.before_unit())
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
            tail_guard: Guard::of(guard, offset),
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

fn frame_error(failure: FrameFailure) -> LogError {
    match failure {
        FrameFailure::Io(e) => LogError::new(LogErrorCode::Io, e.to_string()),
        FrameFailure::Defect(FrameDefect::BadMagic, at) => LogError::new(
            LogErrorCode::ZstdBadMagic,
            format!("invalid frame magic at offset {at}"),
        ),
        FrameFailure::Defect(defect, at) => LogError::new(
            LogErrorCode::ZstdBadFrame,
            format!("invalid zstd frame at offset {at}: {}", defect.describe()),
        ),
        FrameFailure::TooLarge(at) => LogError::new(
            LogErrorCode::LineTooLong,
            format!(
                "the zstd frame at offset {at} is larger than any frame holding one line within the line cap"
            ),
        )
        .at_line(1),
    }
}

/// The header frame must hold exactly one line within the cap, so its compressed size is bounded too: a
/// listing never buffers a huge first frame. Slack covers the frame header and checksum.
fn header_frame_bound(cap: usize) -> usize {
    zstd::zstd_safe::compress_bound(cap.saturating_add(1)).saturating_add(1024)
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

fn read_zstd_header(
    src: Source,
    chunk: usize,
    cap: usize,
    window: &mut GuardWindow,
) -> Result<(Vec<u8>, Input), LogError> {
    let mut frames = FrameSource {
        src,
        buf: Vec::new(),
        offset: 0,
        eof: false,
        chunk,
        max_frame: header_frame_bound(cap),
    };
    let at = match frames.next_frame().map_err(frame_error)? {
        Some(at) if at.complete => at,
        _ => {
            // Say which: nothing at all, bytes that are no zstd stream, or a frame that never ends.
            let why = if frames.buf.is_empty() {
                "empty Zstandard session log (no bytes)"
            } else if !zstd_frames::has_zstd_magic(&frames.buf) && frames.buf.len() >= 4 {
                "not a zstd stream: the file does not start with a Zstandard frame"
            } else {
                "header-less Zstandard session log (the first frame is incomplete)"
            };
            return Err(LogError::new(LogErrorCode::MissingHeader, why));
        }
    };
    frames.max_frame = usize::MAX;
    let frame = frames.take(&at);
    window.push(&frame);
    let committed = at.start.saturating_add(at.len as u64);
    let failed = |e: zstd_frames::DecodeFailure| {
        LogError::new(
            LogErrorCode::ZstdChecksum,
            format!("header frame failed validation: {}", e.0),
        )
        .at_line(1)
    };
    let not_one_line = || {
        LogError::new(
            LogErrorCode::ZstdHeaderFrame,
            "first frame is not exactly one header line",
        )
        .at_line(1)
    };
    let mut decoder = FrameDecoder::new();
    decoder.begin().map_err(failed)?;
    let mut plain = Vec::new();
    let mut in_pos = 0;
    // Decode until the header line is whole (or past the cap), then on to the frame's end, which must add
    // nothing: one extra byte is enough to refuse the frame, so nothing past it is decoded.
    loop {
        let searched = plain.len();
        let room = cap.saturating_add(1).saturating_sub(plain.len());
        let step = decoder
            .step(&frame, &mut in_pos, &mut plain, room)
            .map_err(failed)?;
        if let Some(lf) = memchr::memchr(b'\n', plain.get(searched..).unwrap_or_default()) {
            if searched + lf + 1 != plain.len() {
                return Err(not_one_line());
            }
            let end =
                finish_header_frame(&mut decoder, step, &frame, &mut in_pos).map_err(failed)?;
            if !end {
                return Err(not_one_line());
            }
            break;
        }
        if plain.len() > cap {
            return Err(line_too_long(1, cap));
        }
        match step {
            Step::Progress => {}
            Step::Finished if in_pos == frame.len() => return Err(not_one_line()),
            Step::Finished => {
                return Err(failed(zstd_frames::DecodeFailure(
                    "frame ended before its structural end".into(),
                )))
            }
            Step::Stalled => {
                return Err(failed(zstd_frames::DecodeFailure(
                    "frame is truncated".into(),
                )))
            }
        }
    }
    let decoded = plain.len() as u64;
    plain.pop();
    let input = ZstdInput {
        frames,
        decoder,
        decoding: None,
        plain: Vec::new(),
        pos: 0,
        searched: 0,
        cap,
        decoded,
        committed,
        torn_start: None,
        upcoming: None,
        snapshot: None,
        pending_violation: None,
        violation: None,
        frame_start: committed,
        frame_line: 1,
        frame_seq: 0,
    };
    Ok((plain, Input::Zstd(Box::new(input))))
}

/// Decodes the rest of the header frame after its LF (`last` is the step that produced the LF):
/// `Ok(true)` when it ends there exactly (checksum verified), `Ok(false)` when it holds more text.
fn finish_header_frame(
    decoder: &mut FrameDecoder,
    mut last: Step,
    frame: &[u8],
    in_pos: &mut usize,
) -> Result<bool, zstd_frames::DecodeFailure> {
    let mut extra = Vec::new();
    loop {
        match last {
            Step::Progress => {}
            Step::Finished if *in_pos == frame.len() => return Ok(true),
            Step::Finished => {
                return Err(zstd_frames::DecodeFailure(
                    "frame ended before its structural end".into(),
                ))
            }
            Step::Stalled => return Err(zstd_frames::DecodeFailure("frame is truncated".into())),
        }
        last = decoder.step(frame, in_pos, &mut extra, 1)?;
        if !extra.is_empty() {
            return Ok(false);
        }
    }
}

fn advance_zstd(
    z: &mut ZstdInput,
    scanner: &mut LineScanner,
    pending: &mut VecDeque<Scanned>,
    window: &mut GuardWindow,
) -> Result<bool, LogError> {
    loop {
        if scanner.issue().is_some() {
            let skipped = scanner.skip_inert(z.plain.get(z.pos..).unwrap_or_default());
            z.pos = z.pos.saturating_add(skipped);
            z.searched = z.searched.max(z.pos);
        }
        let unsearched = z.plain.get(z.searched..).unwrap_or_default();
        if let Some(lf) = memchr::memchr(b'\n', unsearched) {
            let end = z.searched + lf + 1;
            let line = z.plain.get(z.pos..end).unwrap_or_default();
            let had_issue = scanner.issue().is_some();
            let fed = scanner.feed(line, pending);
            z.pos = end;
            z.searched = end;
            fed?;
            if z.torn_start.is_none() && z.violation.is_none() && !had_issue {
                if let Some(issue) = scanner.issue() {
                    let message = format!(
                        "complete frame contains a torn JSONL record: {}",
                        issue.message
                    );
                    let mut err = LogError::new(LogErrorCode::ZstdTornRecord, message);
                    err.line = issue.line;
                    err.seq = issue.seq;
                    let unsure = z
                        .decoding
                        .as_ref()
                        .is_some_and(|d| d.status == FrameStatus::Unknown);
                    if unsure {
                        z.pending_violation = Some(err);
                    } else {
                        z.violation = Some(err);
                    }
                }
            }
            return Ok(true);
        }
        z.searched = z.plain.len();
        let partial = z.plain.len().saturating_sub(z.pos);
        if partial > z.cap {
            return Err(line_too_long(scanner.line().saturating_add(1), z.cap));
        }
        if z.decoding.is_some() {
            // Keep only the unscanned partial line before decoding more.
            z.plain.drain(..z.pos.min(z.plain.len()));
            z.searched -= z.pos.min(z.searched);
            z.pos = 0;
            let room = z.cap.saturating_add(1).saturating_sub(partial);
            decode_some(z, window, room)?;
            continue;
        }
        if partial > 0 {
            if z.torn_start.is_some() {
                // The salvage of a torn frame may stop mid-line: that fragment is the torn tail.
                scanner.note_fragment(partial);
                z.pos = z.plain.len();
                return Ok(false);
            }
            let line = scanner.line().saturating_add(1);
            let message = format!(
                "complete frame contains a torn JSONL record: the frame ending at offset {} does not end in LF (line {line})",
                z.committed
            );
            return Err(LogError::new(LogErrorCode::ZstdTornRecord, message).at_line(line));
        }
        if z.torn_start.is_some() {
            return Ok(false);
        }
        let d = match z.upcoming.take() {
            Some(d) => d,
            None => {
                let Some(d) = z.frames.begin_frame().map_err(frame_error)? else {
                    return Ok(false);
                };
                if d.status != FrameStatus::Complete {
                    // The reader takes the checkpoint before this frame first (see `LogReader::advance`).
                    z.upcoming = Some(d);
                    return Ok(true);
                }
                d
            }
        };
        z.frame_start = d.start;
        z.frame_line = scanner.line();
        z.frame_seq = scanner.next_seq();
        z.decoder
            .begin()
            .map_err(|e| frame_decode_error(d.start, &e.0))?;
        if d.status == FrameStatus::Torn {
            z.torn_start = Some(d.start);
        } else {
            window.begin_unit();
        }
        z.decoding = Some(d);
    }
}

/// One decoding step of the current frame, reading compressed bytes as the decoder needs them; ends
/// the frame (`z.decoding = None`) when it is finished, or when a torn frame's salvage stops.
fn decode_some(z: &mut ZstdInput, window: &mut GuardWindow, room: usize) -> Result<(), LogError> {
    let Some(d) = z.decoding.as_mut() else {
        return Ok(());
    };
    let frames = &mut z.frames;
    loop {
        let limit = match d.status {
            FrameStatus::Torn => frames.avail(),
            _ => d.known_end.min(frames.avail()),
        };
        let all_fed = d.status == FrameStatus::Complete && d.fed >= d.known_end;
        if d.fed >= limit && !all_fed && d.status != FrameStatus::Torn {
            // The decoder has everything buffered: read on, and walk what arrives.
            if frames.eof {
                if d.status == FrameStatus::Unknown {
                    d.status = FrameStatus::Torn;
                    z.torn_start = Some(d.start);
                    z.pending_violation = None;
                }
                continue;
            }
            frames.fill(0).map_err(frame_error)?;
            if d.status == FrameStatus::Unknown {
                match frames.walk(d) {
                    FrameScan::Complete(len) => {
                        d.status = FrameStatus::Complete;
                        d.known_end = d.start.saturating_add(len as u64);
                        z.snapshot = None;
                        if z.violation.is_none() {
                            z.violation = z.pending_violation.take();
                        }
                    }
                    FrameScan::Incomplete { needed } => {
                        d.known_end = d.start.saturating_add(needed as u64);
                    }
                    FrameScan::Corrupt(defect) => {
                        return Err(frame_error(FrameFailure::Defect(defect, d.start)))
                    }
                }
            }
            continue;
        }
        let lo = d.fed.saturating_sub(frames.offset) as usize;
        let hi = limit.saturating_sub(frames.offset) as usize;
        let input = frames.buf.get(lo..hi).unwrap_or_default();
        let before = z.plain.len();
        let mut used = 0;
        let step = z.decoder.step(input, &mut used, &mut z.plain, room);
        if d.status != FrameStatus::Torn {
            window.extend(input.get(..used).unwrap_or_default());
        }
        d.fed = d.fed.saturating_add(used as u64);
        z.decoded = z
            .decoded
            .saturating_add(z.plain.len().saturating_sub(before) as u64);
        frames.discard(
            d.fed
                .min(d.start.saturating_add(d.walker.position() as u64)),
        );
        if matches!(step, Ok(Step::Progress)) {
            return Ok(());
        }
        if d.status == FrameStatus::Unknown {
            // Stopped short of an end the walk has not reached: damage if the frame is whole, the end
            // of the salvage if the file ends inside it.
            frames.settle(d).map_err(frame_error)?;
            if d.status == FrameStatus::Torn {
                z.torn_start = Some(d.start);
                z.pending_violation = None;
            } else {
                z.snapshot = None;
                if z.violation.is_none() {
                    z.violation = z.pending_violation.take();
                }
            }
        }
        let end = d.known_end;
        let result = match (d.status, step) {
            (FrameStatus::Complete, Ok(Step::Finished)) if d.fed == end => {
                z.committed = end;
                Ok(())
            }
            (FrameStatus::Complete, Ok(Step::Finished)) => Err(frame_decode_error(
                d.start,
                "frame ended before its structural end",
            )),
            (FrameStatus::Complete, Ok(_)) => {
                Err(frame_decode_error(d.start, "frame is truncated"))
            }
            (FrameStatus::Complete, Err(e)) => Err(frame_decode_error(d.start, &e.0)),
            // A torn frame's salvage simply ends where the decoder stops producing.
            _ => Ok(()),
        };
        if d.status == FrameStatus::Torn {
            frames.discard(frames.avail());
        }
        z.decoding = None;
        return result;
    }
}

fn frame_decode_error(start: u64, why: &str) -> LogError {
    LogError::new(
        LogErrorCode::ZstdChecksum,
        format!("zstd frame at offset {start} failed decompression or checksum: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use zstd_frames::compress_frame;

    const HEADER: &str =
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

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
