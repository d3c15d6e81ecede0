//! Zstandard framing of `session.jsonl.zstd` (spec §1.2): where frames begin and end, and what they hold.
//!
//! Sits first in the zstd read path: [`scan_frame`] finds a frame's extent from its structure alone (no
//! decompression), so the reader can tell a complete frame from the torn final frame a crash leaves;
//! [`FrameDecoder::step`] decodes a frame a bounded step at a time (checksum verified at its end; a torn
//! final frame yields what it can), so a reader can stop a frame that expands without bound. The plaintext then goes to the
//! line scanner ([`super::scan`]). The writer goes the other way with [`compress_frame`], one frame per
//! append batch.

use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

/// The zstd frame magic number as it appears on disk (0xFD2FB528, little-endian).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Whether `prefix` starts with the zstd frame magic: how a reader tells a zstd log from a raw one.
pub fn has_zstd_magic(prefix: &[u8]) -> bool {
    prefix.get(..4) == Some(&ZSTD_MAGIC[..])
}

/// Why a frame is structurally unacceptable. Either way the log is corrupt, not torn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDefect {
    /// The frame does not start with the zstd magic (skippable frames included).
    BadMagic,
    /// The frame header sets reserved bits.
    ReservedBits,
    /// A block header names the reserved block type 3.
    ReservedBlockType,
    /// The frame header declares a decoding window larger than [`WINDOW_LOG_MAX`] allows.
    WindowTooLarge,
}

impl FrameDefect {
    /// The spec's wording of the defect.
    pub fn describe(self) -> &'static str {
        match self {
            Self::BadMagic => "invalid frame magic",
            Self::ReservedBits => "frame header sets reserved bits",
            Self::ReservedBlockType => "frame holds a block of the reserved type",
            Self::WindowTooLarge => {
                "frame declares a decoding window larger than the reader's 8 MiB bound"
            }
        }
    }
}

/// The structural state of the bytes at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameScan {
    /// A whole frame of this many bytes is present.
    Complete(usize),
    /// The frame is cut short: at least this many bytes (in total, from the frame start) are needed
    /// before the scan can get further. At end of file this is the torn final frame.
    Incomplete { needed: usize },
    /// The bytes cannot be a frame this reader accepts.
    Corrupt(FrameDefect),
}

/// Scans the frame that starts at `buf[0]` following the pseudo-code of spec §1.2, without decompressing.
///
/// Rescanning after more bytes arrive is cheap (the walk only visits block headers), so a caller that
/// holds the whole frame simply calls this again with the longer buffer; a streaming reader that must
/// not hold the frame uses a [`FrameWalker`] instead.
pub fn scan_frame(buf: &[u8]) -> FrameScan {
    FrameWalker::default().advance(buf, 0)
}

/// A resumable [`scan_frame`]: walks a frame's structure as its bytes arrive through a sliding buffer,
/// so a reader knows where a frame ends (or that it is torn) without ever holding the whole frame.
/// Between calls only the bytes from [`FrameWalker::position`] on need to be kept.
#[derive(Debug, Clone, Default)]
pub struct FrameWalker {
    /// Frame-relative offset of the next structure to read: 0 (the frame header), a block header, or
    /// the checksum.
    at: usize,
    phase: WalkPhase,
    checksum: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum WalkPhase {
    #[default]
    Header,
    Blocks,
    Checksum,
    Done,
}

impl FrameWalker {
    /// The frame-relative offset before which the walk needs no byte again.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Walks on through `buf`, which holds the frame's bytes from frame-relative offset `base` (at most
    /// [`FrameWalker::position`]) on. `Incomplete { needed }` is frame-relative, as for [`scan_frame`];
    /// every byte before `needed` belongs to this frame.
    pub fn advance(&mut self, buf: &[u8], base: usize) -> FrameScan {
        let avail = base.saturating_add(buf.len());
        let get = |from: usize, len: usize| -> Option<&[u8]> {
            buf.get(from.checked_sub(base)?..)?.get(..len)
        };
        let incomplete = |needed: usize| FrameScan::Incomplete { needed };
        loop {
            match self.phase {
                WalkPhase::Header => {
                    let Some(magic) = get(0, 4) else {
                        return incomplete(4);
                    };
                    if magic != ZSTD_MAGIC {
                        return FrameScan::Corrupt(FrameDefect::BadMagic);
                    }
                    let Some(&[fhd]) = get(4, 1) else {
                        return incomplete(5);
                    };
                    if fhd & 0x18 != 0 {
                        return FrameScan::Corrupt(FrameDefect::ReservedBits);
                    }
                    let fcs_flag = fhd >> 6;
                    let single_segment = fhd & 0x20 != 0;
                    let dict_bytes = match fhd & 0x03 {
                        3 => 4,
                        n => usize::from(n),
                    };
                    let fcs_bytes = match fcs_flag {
                        0 => usize::from(single_segment),
                        n => 1usize << n,
                    };
                    let window_bytes = usize::from(!single_segment);
                    let end = 5 + window_bytes + dict_bytes + fcs_bytes;
                    if avail < end {
                        return incomplete(end);
                    }
                    // The window descriptor (RFC 8878 §3.1.1.1.2): refused here, by its header, so a
                    // frame the decoder would need a large buffer for is a structural defect with a
                    // clear message. A single-segment frame's window is its content size, which the
                    // line cap bounds instead.
                    if let Some(&[descriptor]) = get(5, usize::from(!single_segment)) {
                        let log = 10 + u32::from(descriptor >> 3);
                        let mantissa = u64::from(descriptor & 7);
                        let base = 1u64 << log;
                        if base + (base / 8) * mantissa > 1u64 << WINDOW_LOG_MAX {
                            return FrameScan::Corrupt(FrameDefect::WindowTooLarge);
                        }
                    }
                    self.checksum = fhd & 0x04 != 0;
                    self.at = end;
                    self.phase = WalkPhase::Blocks;
                }
                WalkPhase::Blocks => {
                    let Some(header) = get(self.at, 3) else {
                        return incomplete(self.at.saturating_add(3));
                    };
                    let h = u32::from(header[0])
                        | (u32::from(header[1]) << 8)
                        | (u32::from(header[2]) << 16);
                    let last = h & 1 != 0;
                    let block_type = (h >> 1) & 3;
                    let size = (h >> 3) as usize;
                    if block_type == 3 {
                        return FrameScan::Corrupt(FrameDefect::ReservedBlockType);
                    }
                    let payload = if block_type == 1 { 1 } else { size };
                    let Some(end) = (self.at + 3).checked_add(payload) else {
                        // Only reachable where usize is tiny: no buffer can ever hold this frame.
                        return incomplete(usize::MAX);
                    };
                    if avail < end {
                        return incomplete(end);
                    }
                    self.at = end;
                    if last {
                        self.phase = if self.checksum {
                            WalkPhase::Checksum
                        } else {
                            WalkPhase::Done
                        };
                    }
                }
                WalkPhase::Checksum => {
                    let end = self.at.saturating_add(4);
                    if avail < end {
                        return incomplete(end);
                    }
                    self.at = end;
                    self.phase = WalkPhase::Done;
                }
                WalkPhase::Done => return FrameScan::Complete(self.at),
            }
        }
    }
}

/// Why a complete frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeFailure(pub String);

/// Plaintext bytes one [`FrameDecoder::step`] produces at most: the granularity at which a reader can
/// stop a frame that expands to far more than any line may hold (a "zip bomb" declares gigabytes in a few
/// KiB), so memory never follows a frame's declared or actual content size.
pub const DECODE_STEP: usize = 64 * 1024;

/// The largest decoding window accepted, as a power of two (8 MiB): the decoder's own memory for a frame
/// is its window, so this bounds it whatever the frame's size. DSH's writer (zstd's default level) uses
/// at most 2 MiB windows, and every level up to 19 at most 8 MiB; a frame that declares a larger window
/// is refused with a decode error rather than allocated for.
pub const WINDOW_LOG_MAX: u32 = 23;

/// What one [`FrameDecoder::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Consumed input or produced output; the frame is not finished.
    Progress,
    /// The frame is fully decoded (its checksum, when it has one, verified).
    Finished,
    /// Neither consumed nor produced with room to spare: the decoder waits for input the frame lacks.
    Stalled,
}

/// A zstd decoding context reused across frames: creating one costs more than decoding a small batch,
/// and a log holds one frame per append. Decodes a frame in steps of at most [`DECODE_STEP`] bytes.
pub struct FrameDecoder {
    decoder: Option<Decoder<'static>>,
    scratch: Vec<u8>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder; the context itself and its step buffer are created on first use.
    pub fn new() -> Self {
        Self {
            decoder: None,
            scratch: Vec::new(),
        }
    }

    /// Resets the context for a new frame (also after a failure, which leaves it mid-frame).
    pub fn begin(&mut self) -> Result<(), DecodeFailure> {
        let mut reused = self.decoder.take();
        if reused.as_mut().is_some_and(|d| d.reinit().is_err()) {
            reused = None;
        }
        let decoder = match reused {
            Some(d) => d,
            None => {
                let mut d = Decoder::new().map_err(|e| DecodeFailure(e.to_string()))?;
                d.set_parameter(DParameter::WindowLogMax(WINDOW_LOG_MAX))
                    .map_err(|e| DecodeFailure(e.to_string()))?;
                d
            }
        };
        self.decoder = Some(decoder);
        Ok(())
    }

    /// Decodes from `frame[*in_pos..]` and appends at most `limit` (at least 1, at most [`DECODE_STEP`])
    /// plaintext bytes to `out`, advancing `in_pos`. Call [`FrameDecoder::begin`] before the first step
    /// of each frame. A reader passes what is left of its line cap, so it never holds more of one line.
    pub fn step(
        &mut self,
        frame: &[u8],
        in_pos: &mut usize,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<Step, DecodeFailure> {
        if self.decoder.is_none() {
            self.begin()?;
        }
        let Some(decoder) = self.decoder.as_mut() else {
            return Err(DecodeFailure("no zstd decoding context".into()));
        };
        if self.scratch.len() != DECODE_STEP {
            self.scratch = vec![0; DECODE_STEP];
        }
        let rest = frame.get(*in_pos..).unwrap_or_default();
        let mut input = InBuffer::around(rest);
        let room = limit.clamp(1, DECODE_STEP);
        let mut output = OutBuffer::around(self.scratch.get_mut(..room).unwrap_or_default());
        let hint = decoder
            .run(&mut input, &mut output)
            .map_err(|e| DecodeFailure(e.to_string()))?;
        let (consumed, produced) = (input.pos(), output.pos());
        *in_pos = in_pos.saturating_add(consumed);
        out.extend_from_slice(self.scratch.get(..produced).unwrap_or_default());
        Ok(if hint == 0 {
            Step::Finished
        } else if consumed == 0 && produced == 0 {
            Step::Stalled
        } else {
            Step::Progress
        })
    }

    /// Decompresses one complete frame (as delimited by [`scan_frame`]) into `out`, which is cleared
    /// first. The content checksum, when the frame carries one, is verified by the decoder; a mismatch,
    /// any decode error, or a frame the decoder does not see end exactly at the structural end is a
    /// failure. The whole plaintext is held in memory: for frames the caller trusts (its own, tests); the
    /// reader steps through untrusted frames with [`FrameDecoder::step`] instead.
    pub fn decompress(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeFailure> {
        out.clear();
        self.begin()?;
        let mut pos = 0;
        loop {
            match self.step(frame, &mut pos, out, DECODE_STEP)? {
                Step::Progress => {}
                Step::Finished if pos == frame.len() => return Ok(()),
                Step::Finished => {
                    return Err(DecodeFailure(
                        "frame ended before its structural end".into(),
                    ))
                }
                Step::Stalled => return Err(DecodeFailure("frame is truncated".into())),
            }
        }
    }

    /// Decodes as much of a torn final frame as the decoder will produce without finishing it (the
    /// "flush" decode of spec §1.2) into `out` (cleared first). A decode error just ends the salvage:
    /// what was produced before it is kept, and producing nothing is fine. Whole plaintext in memory, as
    /// for [`FrameDecoder::decompress`].
    pub fn salvage(&mut self, torn: &[u8], out: &mut Vec<u8>) {
        out.clear();
        if self.begin().is_err() {
            return;
        }
        let mut pos = 0;
        while let Ok(Step::Progress) = self.step(torn, &mut pos, out, DECODE_STEP) {}
    }
}

/// [`FrameDecoder::decompress`] with a one-off context.
pub fn decompress_frame(frame: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeFailure> {
    FrameDecoder::new().decompress(frame, out)
}

/// [`FrameDecoder::salvage`] with a one-off context.
pub fn salvage_torn_frame(torn: &[u8], out: &mut Vec<u8>) {
    FrameDecoder::new().salvage(torn, out)
}

/// Compresses one append batch (or the header line) into a single standard zstd frame with the content
/// checksum flag set, at zstd's default level: what DSH's writer produces with Node's `zstdCompress`.
pub fn compress_frame(plaintext: &[u8]) -> Vec<u8> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let mut cctx = CCtx::create();
    // Setting a documented parameter to a valid value on a fresh context cannot fail; if it ever did, the
    // frame would merely lack a checksum, which readers accept.
    let _ = cctx.set_parameter(CParameter::ChecksumFlag(true));
    let _ = cctx.set_parameter(CParameter::CompressionLevel(
        zstd::DEFAULT_COMPRESSION_LEVEL,
    ));
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(plaintext.len()));
    match cctx.compress2(&mut out, plaintext) {
        Ok(_) => out,
        // With a buffer of compress_bound bytes zstd cannot fail short of memory exhaustion; fall back to
        // the one-shot API so the caller still gets a valid frame.
        Err(_) => zstd::bulk::compress(plaintext, 0).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&[u8]]) -> Vec<u8> {
        parts.iter().flat_map(|p| compress_frame(p)).collect()
    }

    #[test]
    fn compressed_frames_carry_a_checksum_and_round_trip() {
        let frame = compress_frame(b"{\"a\":1}\n");
        assert!(has_zstd_magic(&frame));
        assert_ne!(frame[4] & 0x04, 0, "checksum flag set");
        assert_eq!(scan_frame(&frame), FrameScan::Complete(frame.len()));
        let mut out = Vec::new();
        decompress_frame(&frame, &mut out).unwrap();
        assert_eq!(out, b"{\"a\":1}\n");
        let empty = compress_frame(b"");
        decompress_frame(&empty, &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn scan_finds_each_frame_of_a_concatenation() {
        let big: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("{{\"n\":{i}}}\n").into_bytes())
            .collect();
        let file = frames(&[b"x\n", &big, b"y\n"]);
        let mut at = 0;
        let mut n = 0;
        while at < file.len() {
            match scan_frame(&file[at..]) {
                FrameScan::Complete(len) => at += len,
                other => panic!("{other:?}"),
            }
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn every_prefix_of_a_frame_is_incomplete_with_a_growing_need() {
        let frame = compress_frame(&b"line\n".repeat(5000));
        for cut in 0..frame.len() {
            match scan_frame(&frame[..cut]) {
                FrameScan::Incomplete { needed } => assert!(needed > cut && needed <= frame.len()),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn defects_are_reported() {
        let mut frame = compress_frame(b"a\n");
        assert_eq!(
            scan_frame(b"\x50\x2A\x4D\x18rest"),
            FrameScan::Corrupt(FrameDefect::BadMagic)
        );
        frame[4] |= 0x08;
        assert_eq!(
            scan_frame(&frame),
            FrameScan::Corrupt(FrameDefect::ReservedBits)
        );
        // Magic, FHD single-segment with 1-byte content size, then a block header of type 3.
        let reserved_block = [0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x01, 0x07, 0x00, 0x00];
        assert_eq!(
            scan_frame(&reserved_block),
            FrameScan::Corrupt(FrameDefect::ReservedBlockType)
        );
    }

    #[test]
    fn checksum_mismatch_is_a_decode_failure() {
        let mut frame = compress_frame(b"hello hello hello\n");
        let last = frame.len() - 1;
        frame[last] ^= 0xFF;
        assert_eq!(scan_frame(&frame), FrameScan::Complete(frame.len()));
        assert!(decompress_frame(&frame, &mut Vec::new()).is_err());
    }

    #[test]
    fn salvage_keeps_what_a_torn_frame_yields() {
        // Incompressible text of several blocks, so whole blocks precede the cut.
        let mut state = 0x1234_5678u32;
        let text: Vec<u8> = (0..400_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                b"abcdefghijklmnopqrstuvwxyz\n"[(state % 27) as usize]
            })
            .collect();
        let frame = compress_frame(&text);
        let mut out = Vec::new();
        salvage_torn_frame(&frame[..frame.len() - 10], &mut out);
        assert!(!out.is_empty());
        assert!(text.starts_with(&out));
        salvage_torn_frame(&frame[..3], &mut out);
        assert!(out.is_empty());
        salvage_torn_frame(b"garbage", &mut out);
        assert!(out.is_empty());
    }
}
