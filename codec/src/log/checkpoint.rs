//! Read checkpoints: where a [`LogReader`](super::read::LogReader) stopped, with what it needs to go on from there when the log
//! has grown, and the checks that tell a grown log from a rewritten one.
//!
//! A checkpoint covers exactly the stored events a reader yielded (never a crash closer, never a torn
//! tail). It holds a resume offset at a boundary the reader can restart at (raw: the start of a line;
//! zstd: the start of a frame), the seq expected there, the physical line before it, and the state the
//! read pipeline carries between lines (the legacy upgrader's message ids, the crash-closer tracker, the
//! lenient-read notes). When the consumer stopped inside a packed row or a zstd frame, the offset is the
//! start of that row or frame and the resumed reader skips the events below [`ReadCheckpoint::next_seq`].
//!
//! Guards against a log that changed other than by appending (DESIGN.md, "Data flow: a search"):
//! - the file must not be shorter than the reader had seen it ([`ReReadReason::Shrunk`]);
//! - its encoding must be the same ([`ReReadReason::CompressionChanged`]);
//! - a hash of the last (up to) [`GUARD_BYTES`] bytes of the header record and a hash of the last (up to)
//!   [`GUARD_BYTES`] bytes before the offset must match ([`ReReadReason::HeaderChanged`],
//!   [`ReReadReason::Rewritten`]).
//!
//! - every committed byte before the offset must be as it was ([`ReReadReason::Rewritten`]): the
//!   checkpoint holds a [`PrefixDigest`], BLAKE3 over the hashes of the prefix's [`PREFIX_CHUNK`]-byte
//!   chunks (raw lines or zstd frames alike: file bytes, so a zstd log is checked without decoding).
//!
//! The guards are cheap (a few KiB) and name the likely cause; the digest is the proof. A resume
//! reads and hashes the whole prefix once (at about the speed of a plain read: see ARCHITECTURE.md,
//! "Freshness"), keeping nothing of it but the chunk hashes and the last partial chunk, which the
//! resumed reader goes on hashing from. So the consumer decides *when* to resume (a changed file
//! revision: an unchanged one needs no read at all), and a resume always proves the file only grew.
//! The digest is cryptographic, so not even a deliberate same-length edit (a scrubbed secret) passes
//! as an append. The partly yielded row or frame between the offset and the first uncovered event is
//! decoded again and its covered events skipped by seq.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::bounds::open_regular;
use super::error::LogError;
use super::legacy::LegacyState;
use super::notes::NotesState;
use super::repair::CloserTracker;
use super::zstd_frames;
use super::Compression;

/// The version of the checkpoint's own layout. A stored checkpoint of another version is not used
/// ([`ReReadReason::InvalidCheckpoint`]): the log is read whole instead.
pub const CHECKPOINT_VERSION: u32 = 2;

/// How many bytes before an offset a guard hashes.
pub const GUARD_BYTES: usize = 4096;

/// How many file bytes each chunk hash of a [`PrefixDigest`] covers. Small enough that the last partial
/// chunk (kept in memory, hashed when a checkpoint is taken) stays small; large enough that a 1 GB log's
/// chunk hashes are 0.5 MB in memory while it is read (only the digest is stored).
pub const PREFIX_CHUNK: usize = 64 << 10;

/// The digest of the first `len` bytes of a log file (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PrefixDigest {
    pub len: u64,
    /// BLAKE3, hex.
    pub hash: String,
}

/// Domain separation, so a digest can never be confused with another BLAKE3 use (cursors use it too).
const PREFIX_CONTEXT: &str = "dsh-session-search read checkpoint prefix digest v1";

impl PrefixDigest {
    /// The digest of a prefix given as the hashes of its whole chunks and its last partial chunk.
    fn of(chunks: &[[u8; 32]], partial: &[u8]) -> Self {
        let len = (chunks.len() as u64)
            .saturating_mul(PREFIX_CHUNK as u64)
            .saturating_add(partial.len() as u64);
        let mut hasher = blake3::Hasher::new_derive_key(PREFIX_CONTEXT);
        hasher.update(&(PREFIX_CHUNK as u64).to_le_bytes());
        hasher.update(&len.to_le_bytes());
        for chunk in chunks {
            hasher.update(chunk);
        }
        hasher.update(blake3::hash(partial).as_bytes());
        Self {
            len,
            hash: hasher.finalize().to_hex().to_string(),
        }
    }
}

/// Hashes the committed bytes of a log as a reader pushes them, chunk by chunk, and can give the
/// digest at the end of the last pushed unit or at its start (see [`GuardWindow`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct PrefixHasher {
    chunks: Vec<[u8; 32]>,
    /// The bytes after the last whole chunk (fewer than [`PREFIX_CHUNK`]).
    partial: Vec<u8>,
    /// At the start of the last unit: how many whole chunks there were, and the partial chunk then
    /// (`None`: it is `partial[..before_len]`, the unit having completed no chunk).
    before_chunks: usize,
    before_partial: Option<Vec<u8>>,
    before_len: usize,
    /// A chunk-sized buffer to take `partial`'s place when `partial` becomes `before_partial`.
    spare: Vec<u8>,
}

impl PrefixHasher {
    /// The state after a verified prefix: its chunk hashes and its last partial chunk.
    pub(crate) fn seeded(chunks: Vec<[u8; 32]>, partial: Vec<u8>) -> Self {
        Self {
            before_chunks: chunks.len(),
            before_len: partial.len(),
            chunks,
            partial,
            before_partial: None,
            spare: Vec::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn push(&mut self, unit: &[u8]) {
        self.begin_unit();
        self.extend(unit);
    }

    /// Starts a unit whose bytes arrive in pieces ([`PrefixHasher::extend`]): a zstd frame streamed
    /// through the decoder.
    pub(crate) fn begin_unit(&mut self) {
        self.before_chunks = self.chunks.len();
        self.before_len = self.partial.len();
        if let Some(mut before) = self.before_partial.take() {
            before.clear();
            self.spare = before;
        }
    }

    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        if self.partial.capacity() == 0 {
            // It fills up to a chunk; growing it there a line at a time would copy it over and over.
            self.partial.reserve_exact(PREFIX_CHUNK);
        }
        let mut rest = bytes;
        while self.partial.len() + rest.len() >= PREFIX_CHUNK {
            let (piece, after) = rest.split_at(PREFIX_CHUNK - self.partial.len());
            let hash = if self.partial.is_empty() {
                blake3::hash(piece)
            } else {
                self.partial.extend_from_slice(piece);
                blake3::hash(&self.partial)
            };
            self.chunks.push(*hash.as_bytes());
            if self.before_partial.is_none() {
                // The first chunk to end inside this unit: the partial chunk as the unit began is
                // kept by setting its buffer aside, cut back to it (when the unit arrived in pieces,
                // the earlier ones are in `partial` too, and are not before the unit), not by a copy
                // of up to a chunk for every chunk of a log read a line at a time.
                self.partial.truncate(self.before_len);
                let spare = std::mem::take(&mut self.spare);
                self.before_partial = Some(std::mem::replace(&mut self.partial, spare));
                if self.partial.capacity() == 0 {
                    self.partial.reserve_exact(PREFIX_CHUNK);
                }
            } else {
                self.partial.clear();
            }
            rest = after;
        }
        self.partial.extend_from_slice(rest);
    }

    pub(crate) fn at_end(&self) -> PrefixDigest {
        PrefixDigest::of(&self.chunks, &self.partial)
    }

    pub(crate) fn before_unit(&self) -> PrefixDigest {
        let partial = match &self.before_partial {
            Some(p) => p.as_slice(),
            None => self.partial.get(..self.before_len).unwrap_or_default(),
        };
        PrefixDigest::of(
            self.chunks.get(..self.before_chunks).unwrap_or_default(),
            partial,
        )
    }
}

/// A hash of the (up to) [`GUARD_BYTES`] bytes that end at file offset `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Guard {
    pub end: u64,
    /// How many bytes the hash covers: `min(GUARD_BYTES, end)`.
    pub len: u32,
    pub hash: u64,
}

impl Guard {
    /// The guard of `bytes`, which end at file offset `end`.
    pub fn of(bytes: &[u8], end: u64) -> Self {
        let tail = bytes
            .get(bytes.len().saturating_sub(GUARD_BYTES)..)
            .unwrap_or(bytes);
        Self {
            end,
            len: tail.len() as u32,
            hash: fnv1a(tail),
        }
    }

    /// [`Guard::of`] the bytes of `before` followed by those of `bytes`, without joining them.
    fn of_parts(before: &[u8], bytes: &[u8], end: u64) -> Self {
        let (before, bytes) = tail_of_parts(before, bytes);
        let hash = bytes.iter().fold(fnv1a(before), fnv1a_step);
        Self {
            end,
            len: (before.len() + bytes.len()) as u32,
            hash,
        }
    }

    fn start(&self) -> u64 {
        self.end.saturating_sub(u64::from(self.len))
    }
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    bytes.iter().fold(OFFSET_BASIS, fnv1a_step)
}

fn fnv1a_step(hash: u64, &byte: &u8) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    (hash ^ u64::from(byte)).wrapping_mul(PRIME)
}

/// Where a read stopped and what it needs to continue (see the module doc). Serialisable (JSON or any
/// serde format) so an index can store it beside what it indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadCheckpoint {
    pub(crate) version: u32,
    pub(crate) compression: Compression,
    /// The resume offset: a line start (raw) or frame start (zstd).
    pub(crate) offset: u64,
    /// The physical line (header = 1; zstd: of the decompressed text) that ends at `offset`.
    pub(crate) line: u64,
    /// The seq of the first event that begins at `offset`.
    pub(crate) scan_seq: u64,
    /// The first seq not covered: events from `scan_seq` up to here are skipped on resume.
    pub(crate) next_seq: u64,
    /// How much of the file the reader had seen (its whole length once a read reached the end).
    pub(crate) file_len: u64,
    /// The header record as read (lossy UTF-8, which is how it is parsed anyway), so a resume does
    /// not read it again; its guard tells whether the file still starts with it.
    pub(crate) header_line: String,
    pub(crate) header_guard: Guard,
    pub(crate) tail_guard: Guard,
    /// Every byte before `offset`.
    pub(crate) prefix: PrefixDigest,
    pub(crate) legacy: LegacyState,
    pub(crate) closers: CloserTracker,
    pub(crate) notes: NotesState,
}

impl ReadCheckpoint {
    /// The resume offset in the file: the start of a line (raw) or of a zstd frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The seq of the first event a reader resumed here yields: the number of stored events covered.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The physical line (header = 1; zstd: of the decompressed text) that ends at the offset.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The file's length as far as the reader had read it when the checkpoint was taken (its whole
    /// length once the read had reached the end). A log shorter than this was not only appended to.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The header record as the reader read it (lossy UTF-8), for a listing that must not open the log
    /// again to know its header.
    pub fn header_line(&self) -> &str {
        &self.header_line
    }

    /// Checks what can be checked without the file; `Err` says why the checkpoint cannot be used.
    pub(crate) fn check_consistent(&self) -> Result<(), String> {
        if self.version != CHECKPOINT_VERSION {
            return Err(format!(
                "checkpoint layout version {} is not this build's {CHECKPOINT_VERSION}",
                self.version
            ));
        }
        let guard_ok = |g: &Guard| {
            usize::try_from(g.len).is_ok_and(|len| len <= GUARD_BYTES)
                && u64::from(g.len) <= g.end
                && (u64::from(g.len) == g.end || g.len as usize == GUARD_BYTES)
        };
        if !guard_ok(&self.header_guard) || !guard_ok(&self.tail_guard) {
            return Err("a guard covers more or fewer bytes than it should".to_owned());
        }
        if self.tail_guard.end != self.offset
            || self.prefix.len != self.offset
            || self.header_guard.end == 0
            || self.header_guard.end > self.offset
            || self.offset > self.file_len
        {
            return Err(format!(
                "offsets out of order: header ends at {}, resume offset {}, guard ends at {}, file seen to {}",
                self.header_guard.end, self.offset, self.tail_guard.end, self.file_len
            ));
        }
        if self.scan_seq > self.next_seq || self.line == 0 {
            return Err(format!(
                "seq {} at the offset is past the first uncovered seq {} (line {})",
                self.scan_seq, self.next_seq, self.line
            ));
        }
        if self
            .closers
            .last_seq()
            .is_some_and(|last| last >= self.next_seq)
        {
            return Err("the crash-closer state has seen events past the checkpoint".to_owned());
        }
        Ok(())
    }
}

/// Why a checkpoint cannot be resumed from: the log must be read whole again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReReadReason {
    #[error("the log is {len} bytes, shorter than the {seen} bytes read before: it was truncated or replaced")]
    Shrunk { len: u64, seen: u64 },
    #[error("the log is now {now:?}, not {was:?} as when it was checkpointed: it was replaced")]
    CompressionChanged { was: Compression, now: Compression },
    #[error("the log's header changed since it was checkpointed: it was replaced")]
    HeaderChanged,
    #[error("the bytes before offset {offset} changed since the checkpoint: the log was rewritten in place")]
    Rewritten { offset: u64 },
    #[error("the checkpoint cannot be used: {0}")]
    InvalidCheckpoint(String),
}

/// What a reader keeps for its checkpoints besides the pipeline state it already has.
#[derive(Debug)]
pub(crate) struct Tracking {
    /// The header record's text (lossy UTF-8, which is how it is parsed anyway).
    pub header_line: String,
    pub header_guard: Guard,
    pub window: GuardWindow,
    /// Bytes read from the source so far, shared with the [`Counted`] wrapper under the input.
    pub source_read: Arc<AtomicU64>,
    /// The file offset the source starts at: 0, or the offset of the checkpoint resumed from.
    pub source_base: u64,
    /// Bytes a resume read before the offset (guards and magic).
    pub guard_read: u64,
    /// Bytes a resume read and hashed to prove the prefix unchanged (not counted in `bytes_read`).
    pub verified: u64,
    /// Events below this seq were yielded before a resume; they are decoded again only because they
    /// share a packed row or zstd frame with what follows, and skipped.
    pub skip_below: u64,
    /// While a torn final zstd frame is salvaged: the checkpoint at its start, which is as far as a
    /// checkpoint may go (its events are not committed).
    pub torn: Option<Box<ReadCheckpoint>>,
}

impl Tracking {
    /// Tracking for a read that starts at file offset `base`, counting through `source_read`.
    pub fn new(source_read: Arc<AtomicU64>, base: u64) -> Self {
        Self {
            header_line: String::new(),
            header_guard: Guard::of(&[], 0),
            window: GuardWindow::default(),
            source_read,
            source_base: base,
            guard_read: 0,
            verified: 0,
            skip_below: 0,
            torn: None,
        }
    }

    /// Every byte read from the file (or stream) so far.
    pub fn bytes_read(&self) -> u64 {
        self.guard_read
            .saturating_add(self.source_read.load(Ordering::Relaxed))
    }

    /// How far into the file the reader has read.
    pub fn seen(&self) -> u64 {
        self.source_base
            .saturating_add(self.source_read.load(Ordering::Relaxed))
    }
}

/// A byte stream that counts what is read through it (for [`LogReader::bytes_read`](super::read::LogReader::bytes_read)); the count is
/// shared because the stream itself disappears into the reader's buffers.
pub(crate) struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R> Counted<R> {
    pub fn new(inner: R, count: Arc<AtomicU64>) -> Self {
        Self { inner, count }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A log file reopened at a checkpoint, positioned at its offset, its guards and prefix checked.
pub(crate) struct Reopened {
    pub file: File,
    /// The guard bytes before the offset (the last up to [`GUARD_BYTES`]).
    pub tail: Vec<u8>,
    /// The verified prefix's hash state, for the resumed reader to go on from.
    pub prefix: PrefixHasher,
    /// Bytes read to check the guards and the magic.
    pub bytes_read: u64,
    /// Bytes read to check the prefix digest: every byte before the offset.
    pub verified: u64,
}

/// Opens `path` for a resume at `checkpoint`: checks consistency, length, encoding, both guards and
/// the prefix digest (reading every byte before the offset once), then seeks to the offset.
pub(crate) fn reopen(
    path: &Path,
    checkpoint: &ReadCheckpoint,
) -> Result<Result<Reopened, ReReadReason>, LogError> {
    if let Err(why) = checkpoint.check_consistent() {
        return Ok(Err(ReReadReason::InvalidCheckpoint(why)));
    }
    let io = |e: io::Error| LogError::io(path, &e);
    let mut file = open_regular(path)?;
    let len = file.metadata().map_err(io)?.len();
    if len < checkpoint.file_len {
        return Ok(Err(ReReadReason::Shrunk {
            len,
            seen: checkpoint.file_len,
        }));
    }
    let (header, tail) = (&checkpoint.header_guard, &checkpoint.tail_guard);
    let spans = merge_spans([
        (0, 4),
        (header.start(), header.end),
        (tail.start(), tail.end),
    ]);
    let mut read = Vec::with_capacity(spans.len());
    let mut bytes_read = 0u64;
    for (start, end) in spans {
        let mut buf = vec![0; usize::try_from(end - start).unwrap_or(0)];
        match file.read_exact_at(&mut buf, start) {
            Ok(()) => {}
            // Shorter than its stat said a moment ago: truncated under us.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Ok(Err(ReReadReason::Shrunk {
                    len: start,
                    seen: checkpoint.file_len,
                }))
            }
            Err(e) => return Err(io(e)),
        }
        bytes_read = bytes_read.saturating_add(buf.len() as u64);
        read.push((start, buf));
    }
    let span = |start: u64, end: u64| -> &[u8] {
        read.iter()
            .find(|(s, buf)| *s <= start && s.saturating_add(buf.len() as u64) >= end)
            .and_then(|(s, buf)| buf.get((start - s) as usize..(end - s) as usize))
            .unwrap_or_default()
    };
    let now = if zstd_frames::has_zstd_magic(span(0, 4)) {
        Compression::Zstd
    } else {
        Compression::None
    };
    if now != checkpoint.compression {
        return Ok(Err(ReReadReason::CompressionChanged {
            was: checkpoint.compression,
            now,
        }));
    }
    if Guard::of(span(header.start(), header.end), header.end) != *header {
        return Ok(Err(ReReadReason::HeaderChanged));
    }
    let tail_bytes = span(tail.start(), tail.end).to_vec();
    if Guard::of(&tail_bytes, tail.end) != *tail {
        return Ok(Err(ReReadReason::Rewritten {
            offset: checkpoint.offset,
        }));
    }
    let prefix = match hash_prefix(&file, checkpoint.offset).map_err(io)? {
        Some(prefix) if prefix.at_end() == checkpoint.prefix => prefix,
        Some(_) => {
            return Ok(Err(ReReadReason::Rewritten {
                offset: checkpoint.offset,
            }))
        }
        None => {
            return Ok(Err(ReReadReason::Shrunk {
                len: checkpoint.offset,
                seen: checkpoint.file_len,
            }))
        }
    };
    file.seek(SeekFrom::Start(checkpoint.offset)).map_err(io)?;
    Ok(Ok(Reopened {
        file,
        tail: tail_bytes,
        prefix,
        bytes_read,
        verified: checkpoint.offset,
    }))
}

/// Reads and hashes the first `len` bytes of `file` in [`PREFIX_CHUNK`] steps (one buffer of that
/// size); `None` when the file is shorter (truncated under us).
fn hash_prefix(file: &File, len: u64) -> io::Result<Option<PrefixHasher>> {
    let mut chunks = Vec::with_capacity(usize::try_from(len / PREFIX_CHUNK as u64).unwrap_or(0));
    let mut buf = vec![0u8; PREFIX_CHUNK];
    let mut at = 0u64;
    while len - at >= PREFIX_CHUNK as u64 {
        match file.read_exact_at(&mut buf, at) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        chunks.push(*blake3::hash(&buf).as_bytes());
        at += PREFIX_CHUNK as u64;
    }
    let rest = usize::try_from(len - at).unwrap_or(0);
    buf.truncate(rest);
    match file.read_exact_at(&mut buf, at) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    Ok(Some(PrefixHasher::seeded(chunks, buf)))
}

/// The byte ranges to read, sorted, overlapping or touching ones merged, so no byte is read twice.
fn merge_spans<const N: usize>(spans: [(u64, u64); N]) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = spans.into_iter().filter(|(s, e)| s < e).collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The bytes just before the reader's possible resume points, kept while reading so a checkpoint can
/// hash them without reading the file again.
///
/// The reader pushes each unit it commits, in file order: the header record, then each accepted line
/// (raw) or each complete frame (zstd). A checkpoint is taken either at the end of the last unit or at
/// its start (a packed row or frame only partly yielded), so its guard hashes the [`GUARD_BYTES`] that
/// end at one or the other. The prefix hasher holds every byte since the last whole chunk already, so
/// the window keeps only what it does not: the last [`GUARD_BYTES`] of that chunk (copied once per
/// chunk), and the guard bytes before the last unit's start once a chunk ends inside the unit. No byte
/// is copied for the guards otherwise.
#[derive(Debug, Clone, Default)]
pub(crate) struct GuardWindow {
    /// Every unit pushed, hashed: the checkpoint's prefix digest.
    pub(crate) prefix: PrefixHasher,
    /// The last (up to) [`GUARD_BYTES`] before the prefix hasher's partial chunk.
    behind: Vec<u8>,
    /// The guard bytes before the last unit's start, when they are no longer `behind` and the partial
    /// chunk up to the unit (a chunk ended inside the unit; or a seeded window, which has none).
    unit_guard: Option<Vec<u8>>,
}

impl GuardWindow {
    /// A window whose last unit is `bytes`, as a resumed reader starts: the guard bytes before its offset,
    /// and the hash state of everything before it.
    pub(crate) fn seeded(bytes: &[u8], prefix: PrefixHasher) -> Self {
        let bytes = tail_of(bytes);
        // `bytes` ends with the partial chunk, as both were read from the file before the offset.
        let behind = bytes.len().saturating_sub(prefix.partial.len());
        Self {
            behind: bytes.get(..behind).unwrap_or_default().to_vec(),
            prefix,
            unit_guard: Some(Vec::new()),
        }
    }

    pub(crate) fn push(&mut self, unit: &[u8]) {
        self.begin_unit();
        self.extend(unit);
    }

    /// Starts a unit whose bytes arrive in pieces: a zstd frame is never held whole.
    pub(crate) fn begin_unit(&mut self) {
        self.prefix.begin_unit();
        self.unit_guard = None;
    }

    /// Adds bytes to the unit begun last. They reach the prefix hasher cut at its chunk boundaries,
    /// which hashes them exactly as whole (see [`PrefixHasher::extend`]); before a chunk leaves it, what
    /// the guards still need of it is kept.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        loop {
            let room = PREFIX_CHUNK.saturating_sub(self.prefix.partial.len());
            if rest.len() < room {
                self.prefix.extend(rest);
                return;
            }
            let (piece, after) = rest.split_at(room);
            let partial = &self.prefix.partial;
            if self.unit_guard.is_none() {
                let before = partial.get(..self.prefix.before_len).unwrap_or_default();
                let (older, newer) = tail_of_parts(&self.behind, before);
                self.unit_guard = Some([older, newer].concat());
            }
            let (older, newer) = tail_of_parts(partial, piece);
            self.behind = [older, newer].concat();
            self.prefix.extend(piece);
            rest = after;
        }
    }

    /// The guard of the bytes that end where the last unit ends, at file offset `end`.
    pub(crate) fn at_end(&self, end: u64) -> Guard {
        Guard::of_parts(&self.behind, &self.prefix.partial, end)
    }

    /// The guard of the bytes that end where the last unit starts, at file offset `end`.
    pub(crate) fn before_unit(&self, end: u64) -> Guard {
        match &self.unit_guard {
            Some(guard) => Guard::of(guard, end),
            None => {
                let partial = &self.prefix.partial;
                let before = partial.get(..self.prefix.before_len).unwrap_or_default();
                Guard::of_parts(&self.behind, before, end)
            }
        }
    }
}

fn tail_of(bytes: &[u8]) -> &[u8] {
    bytes
        .get(bytes.len().saturating_sub(GUARD_BYTES)..)
        .unwrap_or(bytes)
}

/// The parts of `older` and `newer` that make the last (up to) [`GUARD_BYTES`] of the two together.
fn tail_of_parts<'a>(older: &'a [u8], newer: &'a [u8]) -> (&'a [u8], &'a [u8]) {
    let newer = tail_of(newer);
    let room = GUARD_BYTES - newer.len();
    let older = older
        .get(older.len().saturating_sub(room)..)
        .unwrap_or(older);
    (older, newer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn guard_hashes_only_the_last_guard_bytes() {
        let long: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let g = Guard::of(&long, 20_000);
        assert_eq!((g.end, g.len as usize), (20_000, GUARD_BYTES));
        assert_eq!(g, Guard::of(&long[long.len() - GUARD_BYTES..], 20_000));
        assert_ne!(g, Guard::of(&long[..long.len() - 1], 20_000));
        assert_eq!(Guard::of(b"abc", 3).len, 3);
    }

    /// The window against a plain copy of everything pushed: units whole or in pieces, small and
    /// larger than a chunk, across chunk boundaries.
    #[test]
    fn window_guards_the_bytes_at_both_ends_of_the_last_unit() {
        let mut window = GuardWindow::default();
        let mut all: Vec<u8> = Vec::new();
        let sizes = [
            0usize,
            7,
            300,
            5000,
            1,
            4096,
            4097,
            2,
            9000,
            3,
            3,
            100,
            8191,
            8193,
            12,
            PREFIX_CHUNK - 30_000,
            40_000,
            3 * PREFIX_CHUNK + 5,
            4090,
            PREFIX_CHUNK,
            1,
        ];
        let rounds = sizes.iter().chain([400; 300].iter());
        for (k, &size) in rounds.enumerate() {
            let unit: Vec<u8> = (0..size).map(|i| (i * 31 + k * 7) as u8).collect();
            let start = all.len();
            all.extend_from_slice(&unit);
            if k % 3 == 1 {
                // In pieces, as a zstd frame arrives.
                window.begin_unit();
                for piece in unit.chunks(1 + k * 997 % 20_000) {
                    window.extend(piece);
                }
            } else {
                window.push(&unit);
            }
            let end = all.len() as u64;
            assert_eq!(window.at_end(end), Guard::of(&all, end), "end of unit {k}");
            assert_eq!(
                window.before_unit(start as u64),
                Guard::of(&all[..start], start as u64),
                "start of unit {k}"
            );
            assert!(window.behind.len() <= GUARD_BYTES);
        }
        let seeded = GuardWindow::seeded(b"xyz", PrefixHasher::default());
        assert_eq!(
            (seeded.at_end(3), seeded.before_unit(3)),
            (Guard::of(b"xyz", 3), Guard::of(b"", 3))
        );
    }

    /// A resumed window guards what one that read everything guards.
    #[test]
    fn a_seeded_window_guards_as_one_that_pushed_everything() {
        for len in [
            10usize,
            3000,
            5000,
            PREFIX_CHUNK + 100,
            2 * PREFIX_CHUNK + 5000,
        ] {
            let all: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let chunks = all.len() / PREFIX_CHUNK;
            let mut hashes = Vec::new();
            for chunk in all.chunks_exact(PREFIX_CHUNK) {
                hashes.push(*blake3::hash(chunk).as_bytes());
            }
            let partial = all[chunks * PREFIX_CHUNK..].to_vec();
            let mut seeded =
                GuardWindow::seeded(tail_of(&all), PrefixHasher::seeded(hashes, partial));
            let mut whole = GuardWindow::default();
            whole.push(&all);
            let end = all.len() as u64;
            assert_eq!(seeded.at_end(end), whole.at_end(end), "{len}");
            let more: Vec<u8> = (0..70_000).map(|i| (i * 3) as u8).collect();
            for window in [&mut seeded, &mut whole] {
                window.push(&more[..100]);
                window.push(&more[100..]);
            }
            let end = end + more.len() as u64;
            assert_eq!(seeded.at_end(end), whole.at_end(end), "{len}");
            assert_eq!(
                seeded.before_unit(end - 69_900),
                whole.before_unit(end - 69_900),
                "{len}"
            );
            assert_eq!(seeded.prefix.at_end(), whole.prefix.at_end(), "{len}");
        }
    }

    /// The digest kept while pushing units equals the one computed from the file's bytes, at the end
    /// of every unit and at its start, whatever the units' sizes against the chunk size.
    #[test]
    fn prefix_digest_while_pushing_equals_the_digest_of_the_file_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bytes");
        let sizes = [
            1usize,
            100,
            PREFIX_CHUNK - 101,
            PREFIX_CHUNK,
            3 * PREFIX_CHUNK + 7,
            0,
            12,
            PREFIX_CHUNK - 1,
            2,
        ];
        let mut all: Vec<u8> = Vec::new();
        let mut hasher = PrefixHasher::default();
        for (k, &size) in sizes.iter().enumerate() {
            let unit: Vec<u8> = (0..size).map(|i| (i * 13 + k) as u8).collect();
            let start = all.len() as u64;
            all.extend_from_slice(&unit);
            hasher.push(&unit);
            std::fs::write(&path, &all).unwrap();
            let file = File::open(&path).unwrap();
            let end = all.len() as u64;
            let from_file = |len| hash_prefix(&file, len).unwrap().unwrap().at_end();
            assert_eq!(hasher.at_end(), from_file(end), "end of unit {k}");
            assert_eq!(hasher.before_unit(), from_file(start), "start of unit {k}");
            assert_eq!(hasher.at_end().len, end);
            // Any other byte content, even of the same length, gives another digest.
            let mut other = all.clone();
            if let Some(b) = other.first_mut() {
                *b ^= 1;
                std::fs::write(&path, &other).unwrap();
                let file = File::open(&path).unwrap();
                assert_ne!(
                    hash_prefix(&file, end).unwrap().unwrap().at_end(),
                    hasher.at_end()
                );
            }
            // Shorter than asked for: no digest.
            assert!(hash_prefix(&file, end + 1).unwrap().is_none());
        }
        // A seeded hasher goes on exactly as one that pushed everything.
        std::fs::write(&path, &all).unwrap();
        let file = File::open(&path).unwrap();
        let mut seeded = hash_prefix(&file, all.len() as u64).unwrap().unwrap();
        seeded.push(b"more");
        hasher.push(b"more");
        assert_eq!(seeded.at_end(), hasher.at_end());
    }

    /// Units that arrive in pieces (a zstd frame's bytes as the decoder takes them) and complete chunks
    /// again and again: the digests at every unit's end and start are those of the bytes. The digest
    /// at a unit's start counted the unit's own earlier pieces when its first completed chunk came in
    /// a later piece: a digest of more bytes than the checkpoint's offset. (The reader feeds a frame
    /// from reads that end 4 bytes past a chunk boundary, so its first piece nearly always completes
    /// the chunk; no reader-level case that hits this was found.)
    #[test]
    fn a_units_start_digest_excludes_its_own_earlier_pieces_when_a_later_piece_completes_a_chunk() {
        let digest_of = |bytes: &[u8]| {
            let chunks: Vec<[u8; 32]> = bytes
                .chunks_exact(PREFIX_CHUNK)
                .map(|c| *blake3::hash(c).as_bytes())
                .collect();
            PrefixDigest::of(&chunks, &bytes[chunks.len() * PREFIX_CHUNK..])
        };
        let mut all: Vec<u8> = Vec::new();
        let mut hasher = PrefixHasher::default();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        };
        for k in 0..80 {
            // Mostly lines of up to a few KiB, now and then a unit of several chunks.
            let size = if k % 17 == 0 {
                next(3 * PREFIX_CHUNK)
            } else {
                next(9_000)
            };
            let unit: Vec<u8> = (0..size).map(|i| (i * 31 + k) as u8).collect();
            let start = all.len();
            all.extend_from_slice(&unit);
            hasher.begin_unit();
            let mut rest = &unit[..];
            while !rest.is_empty() {
                let (piece, after) = rest.split_at(1 + next(rest.len()));
                hasher.extend(piece);
                rest = after;
            }
            assert_eq!(hasher.at_end(), digest_of(&all), "end of unit {k}");
            assert_eq!(
                hasher.before_unit(),
                digest_of(&all[..start]),
                "start of unit {k}"
            );
        }
        assert!(
            all.len() > 6 * PREFIX_CHUNK,
            "the units crossed many chunks"
        );
    }

    #[test]
    fn spans_merge_when_they_touch_or_overlap() {
        assert_eq!(
            merge_spans([(0, 4), (100, 200), (150, 400)]),
            [(0, 4), (100, 400)]
        );
        assert_eq!(merge_spans([(0, 4), (0, 90), (90, 90)]), [(0, 90)]);
        assert_eq!(
            merge_spans([(0, 4), (4, 10), (20, 30)]),
            [(0, 10), (20, 30)]
        );
    }
}
