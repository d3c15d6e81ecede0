//! The reader's bounds on untrusted input: only regular files are opened, and no line is buffered past a
//! cap, so a hostile or broken file costs time proportional to the bytes actually read and memory
//! proportional to the cap, never a hang or an abort.
//!
//! A FIFO named `session.jsonl` would block a plain `open` until a writer appears, and a symlink to
//! `/dev/zero` is an endless line; both are refused as [`LogErrorCode::NotRegularFile`]. A line longer than
//! the cap is [`LogErrorCode::LineTooLong`] as soon as the cap is passed.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::error::{LogError, LogErrorCode};

/// The longest line a reader accepts, in bytes without its LF: the header, an event line, a packed row, or
/// (zstd) a line of the decompressed text. DSH writes one event per line and a real event is kilobytes; 64
/// MiB leaves room for huge tool results while bounding what one line can make a reader buffer.
/// [`super::read::ReadOptions::max_line_bytes`] lowers (or raises) it per read.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Opens `path` for reading only if it is a regular file (a symlink to one is fine). The open itself is
/// non-blocking so that a FIFO returns at once instead of waiting for a writer; the type is then checked
/// on the opened descriptor, so nothing can be swapped in between a check and the open. `O_NONBLOCK` has
/// no effect on reads of a regular file, so the descriptor is left as opened.
pub fn open_regular(path: &Path) -> Result<File, LogError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| LogError::io(path, &e))?;
    let kind = file
        .metadata()
        .map_err(|e| LogError::io(path, &e))?
        .file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(LogError::new(
        LogErrorCode::NotRegularFile,
        format!("a session log must be a regular file; this is {what}"),
    )
    .at_path(path))
}

/// The error for a line past the cap. `line` is 1-based (header = 1).
pub(crate) fn line_too_long(line: u64, cap: usize) -> LogError {
    LogError::new(
        LogErrorCode::LineTooLong,
        format!(
            "line {line} is longer than the line cap of {cap} bytes; reading stopped after {} bytes of it",
            cap.saturating_add(1)
        ),
    )
    .at_line(line)
}

/// How [`read_line_capped`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawLine {
    /// Nothing left to read.
    Eof,
    /// A whole line, LF included.
    Line,
    /// The input ended inside a line: these bytes have no LF.
    Fragment,
    /// The line passed the cap: `cap + 1` bytes of it are buffered and the rest is unread.
    TooLong,
}

/// Reads one line into `line` (cleared first) through its LF, buffering at most `cap + 1` bytes: a line
/// of up to `cap` bytes plus its LF.
pub(crate) fn read_line_capped<R: BufRead + ?Sized>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
) -> io::Result<RawLine> {
    line.clear();
    let limit = cap.saturating_add(1);
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                RawLine::Eof
            } else {
                RawLine::Fragment
            });
        }
        let room = limit.saturating_sub(line.len()).min(buf.len());
        let window = buf.get(..room).unwrap_or_default();
        if let Some(lf) = memchr::memchr(b'\n', window) {
            line.extend_from_slice(window.get(..=lf).unwrap_or_default());
            reader.consume(lf + 1);
            return Ok(RawLine::Line);
        }
        line.extend_from_slice(window);
        reader.consume(room);
        if line.len() >= limit {
            return Ok(RawLine::TooLong);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    fn lines(input: &[u8], cap: usize, buffer: usize) -> Vec<(RawLine, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(buffer, Cursor::new(input.to_vec()));
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            let end = read_line_capped(&mut reader, &mut line, cap).unwrap();
            out.push((end, line.clone()));
            if end != RawLine::Line {
                return out;
            }
        }
    }

    #[test]
    fn lines_up_to_the_cap_are_read_whole_across_buffer_refills() {
        let got = lines(b"abcd\n\nxy", 4, 3);
        assert_eq!(
            got,
            [
                (RawLine::Line, b"abcd\n".to_vec()),
                (RawLine::Line, b"\n".to_vec()),
                (RawLine::Fragment, b"xy".to_vec()),
            ]
        );
        assert_eq!(lines(b"", 4, 3), [(RawLine::Eof, Vec::new())]);
    }

    #[test]
    fn a_line_past_the_cap_stops_after_cap_plus_one_bytes() {
        let got = lines(b"abcde\nrest\n", 4, 2);
        assert_eq!(got, [(RawLine::TooLong, b"abcde".to_vec())]);
        // An endless line (no LF at all) ends the same way, having buffered cap + 1 bytes.
        let endless = vec![b'z'; 10_000];
        let got = lines(&endless, 100, 64);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1.len()), (RawLine::TooLong, 101));
    }

    #[test]
    fn line_too_long_names_the_line_and_the_cap() {
        let err = line_too_long(7, 10);
        assert_eq!((err.code, err.line), (LogErrorCode::LineTooLong, Some(7)));
        assert!(err.message.contains("cap of 10 bytes"), "{}", err.message);
    }

    #[test]
    fn only_regular_files_open_and_symlinks_to_them_are_fine() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("session.jsonl");
        std::fs::write(&file, b"x\n").unwrap();
        assert!(open_regular(&file).is_ok());
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_regular(&link).is_ok());

        let err = open_regular(dir.path()).unwrap_err();
        assert_eq!(err.code, LogErrorCode::NotRegularFile);
        assert!(err.message.contains("directory"), "{}", err.message);
        let to_device = dir.path().join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &to_device).unwrap();
        let err = open_regular(&to_device).unwrap_err();
        assert_eq!(
            (err.code, err.path.as_deref()),
            (LogErrorCode::NotRegularFile, Some(to_device.as_path()))
        );
        let err = open_regular(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.code, LogErrorCode::Io);
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("session.jsonl");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        // With no writer, a blocking open would never return; this one must.
        let err = open_regular(&fifo).unwrap_err();
        assert_eq!(err.code, LogErrorCode::NotRegularFile);
        assert!(err.message.contains("FIFO"), "{}", err.message);
    }
}
