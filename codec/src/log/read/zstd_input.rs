//! The zstd side of the reader's input: frames streamed from the file through the decoder.
//!
//! A frame's compressed bytes pass through a sliding buffer ([`FrameSource`]): a read-ahead of
//! [`ZSTD_READAHEAD`] bytes settles whether a frame of ordinary size is complete or torn before any of it
//! is decoded; a larger frame is decoded as it arrives while a [`zstd_frames::FrameWalker`] finds its end,
//! and until then nothing of it is committed (the reader keeps the checkpoint from before it, and a
//! torn-record issue in it waits to see whether the frame completes). So the reader's memory is the
//! read-ahead, one block, one decoding step and the line cap, whatever the frame's size.

use std::collections::VecDeque;
use std::io::{self, Read};

use super::super::checkpoint::{GuardWindow, ReadCheckpoint};
use super::super::error::{LogError, LogErrorCode};
use super::super::scan::{Accepted, LineScanner};
use super::super::zstd_frames::{self, FrameDecoder, FrameDefect, FrameScan, Step};
use super::{line_too_long, Input, Source};

/// Compressed bytes read ahead at a frame's start: a frame that ends within them (every append batch
/// of an ordinary log) is known complete or torn before it is decoded; a larger one is streamed, so
/// the reader never holds more than this (plus a block) of any frame.
pub(super) const ZSTD_READAHEAD: usize = 1 << 20;

/// Minimum read size while looking for the end of a zstd frame.
pub(super) const ZSTD_CHUNK: usize = 64 * 1024;

/// The zstd side of the physical layer: the compressed bytes of the current frame, read on demand.
pub(super) struct FrameSource {
    pub(super) src: Source,
    pub(super) buf: Vec<u8>,
    /// File offset of `buf[0]`.
    pub(super) offset: u64,
    pub(super) eof: bool,
    pub(super) chunk: usize,
    /// The largest frame accepted, in compressed bytes (the header frame is bounded by the line cap).
    pub(super) max_frame: usize,
}

/// Where the next frame lies in [`FrameSource::buf`]: always at its start.
pub(super) struct FrameAt {
    pub(super) start: u64,
    pub(super) len: usize,
    pub(super) complete: bool,
}

pub(super) enum FrameFailure {
    Io(io::Error),
    Defect(FrameDefect, u64),
    /// The frame at this offset needs more than `max_frame` bytes.
    TooLarge(u64),
}

impl FrameSource {
    /// Finds the next frame; `None` at a clean end of file.
    pub(super) fn next_frame(&mut self) -> Result<Option<FrameAt>, FrameFailure> {
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
    pub(super) fn avail(&self) -> u64 {
        self.offset.saturating_add(self.buf.len() as u64)
    }

    /// Reads up to `want` more bytes (at least one chunk); sets `eof` when the source has no more.
    pub(super) fn fill(&mut self, want: usize) -> Result<(), FrameFailure> {
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
    pub(super) fn discard(&mut self, upto: u64) {
        let n = upto.saturating_sub(self.offset).min(self.buf.len() as u64) as usize;
        self.buf.drain(..n);
        self.offset = self.offset.saturating_add(n as u64);
    }

    /// Walks the structure of the frame `d` over what is buffered.
    pub(super) fn walk(&self, d: &mut Decoding) -> FrameScan {
        let base = self.offset.saturating_sub(d.start) as usize;
        d.walker.advance(&self.buf, base)
    }

    /// Starts the next frame: reads ahead up to [`ZSTD_READAHEAD`] compressed bytes, which settles
    /// whether a frame of ordinary size is complete or torn before any of it is decoded; a larger frame
    /// is streamed with that question open. `None` at a clean end of file.
    pub(super) fn begin_frame(&mut self) -> Result<Option<Decoding>, FrameFailure> {
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
    pub(super) fn settle(&mut self, d: &mut Decoding) -> Result<(), FrameFailure> {
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
    pub(super) fn take(&mut self, at: &FrameAt) -> Vec<u8> {
        let len = at.len.min(self.buf.len());
        let rest = self.buf.split_off(len);
        self.offset = self.offset.saturating_add(len as u64);
        std::mem::replace(&mut self.buf, rest)
    }
}

/// Whether the frame being decoded is known to be whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameStatus {
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
pub(super) struct Decoding {
    /// The frame's file offset.
    pub(super) start: u64,
    pub(super) walker: zstd_frames::FrameWalker,
    pub(super) status: FrameStatus,
    /// File offset up to which the bytes are known to belong to this frame (its end once complete).
    pub(super) known_end: u64,
    /// File offset up to which the decoder was fed.
    pub(super) fed: u64,
}

pub(super) struct ZstdInput {
    pub(super) frames: FrameSource,
    pub(super) decoder: FrameDecoder,
    pub(super) decoding: Option<Decoding>,
    /// Decoded text not yet scanned (`plain[pos..]`); never more than one capped line and one step.
    pub(super) plain: Vec<u8>,
    pub(super) pos: usize,
    /// `plain[pos..searched]` holds no LF: the search for the end of a long line resumes there.
    pub(super) searched: usize,
    pub(super) cap: usize,
    /// Plaintext bytes decoded so far, the header frame's included.
    pub(super) decoded: u64,
    /// End of the last complete frame.
    pub(super) committed: u64,
    /// Start of the torn final frame once it is being salvaged.
    pub(super) torn_start: Option<u64>,
    /// A frame whose completeness the read-ahead could not settle, waiting for the reader to take the
    /// checkpoint before it ([`ZstdInput::snapshot`]) before its decoding begins.
    pub(super) upcoming: Option<Decoding>,
    /// While a frame that is not known complete is decoded: the checkpoint at its start, which is as
    /// far as a checkpoint may go until the frame proves complete (and what a torn one leaves).
    pub(super) snapshot: Option<Box<ReadCheckpoint>>,
    /// A torn-record issue met in a frame not yet known complete: a violation if it completes.
    pub(super) pending_violation: Option<LogError>,
    /// A complete frame held an unacceptable line: fatal at the end unless the scanner fails first.
    pub(super) violation: Option<LogError>,
    /// Where the frame being read starts, with the scanner's line and seq there: a checkpoint taken
    /// before all of its events are yielded resumes at its start.
    pub(super) frame_start: u64,
    pub(super) frame_line: u64,
    pub(super) frame_seq: u64,
}

pub(super) fn frame_error(failure: FrameFailure) -> LogError {
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
pub(super) fn header_frame_bound(cap: usize) -> usize {
    zstd::zstd_safe::compress_bound(cap.saturating_add(1)).saturating_add(1024)
}

pub(super) fn read_zstd_header(
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
pub(super) fn finish_header_frame(
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

pub(super) fn advance_zstd(
    z: &mut ZstdInput,
    scanner: &mut LineScanner,
    pending: &mut VecDeque<Accepted>,
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
pub(super) fn decode_some(
    z: &mut ZstdInput,
    window: &mut GuardWindow,
    room: usize,
) -> Result<(), LogError> {
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

pub(super) fn frame_decode_error(start: u64, why: &str) -> LogError {
    LogError::new(
        LogErrorCode::ZstdChecksum,
        format!("zstd frame at offset {start} failed decompression or checksum: {why}"),
    )
}
