//! The host's log: `tracing` events formatted with timestamps on stderr, through a writer that never
//! fails, so a closed or broken stderr can never panic the host or cut a command's stdout short.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// A writer that reports every write as done: a log line that cannot be written is dropped, because
/// the host has nowhere better to say so.
pub struct LossyWriter<W>(pub W);

impl<W: Write> Write for LossyWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.0.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

/// The `MakeWriter` for stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct LossyStderr;

impl<'a> MakeWriter<'a> for LossyStderr {
    type Writer = LossyWriter<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        LossyWriter(io::stderr())
    }
}

/// The level shown when `RUST_LOG` is not set: debug with `--verbose`, else `quiet` (e.g. `info` for
/// `watch`, whose story is its log, `warn` for one-shot commands). The MCP SDK's own lines (every
/// handshake and notification at INFO) are shown only with `--verbose`.
pub fn default_filter(verbose: bool, quiet: tracing::Level) -> String {
    if verbose {
        "debug".into()
    } else {
        format!("{},rmcp=warn", quiet.as_str().to_ascii_lowercase())
    }
}

/// Installs the process-wide subscriber. `RUST_LOG`, when set and valid, wins over the default filter.
/// A second call (tests) leaves the first subscriber in place.
pub fn init(verbose: bool, quiet: tracing::Level) {
    let fallback = default_filter(verbose, quiet);
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => {
            EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new(&fallback))
        }
        _ => EnvFilter::new(&fallback),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(LossyStderr)
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn write_errors_are_swallowed() {
        let mut w = LossyWriter(Broken);
        assert_eq!(w.write(b"line\n").unwrap(), 5);
        w.flush().unwrap();
        writeln!(w, "formatted {}", 1).unwrap();
    }

    #[test]
    fn writes_reach_a_working_writer() {
        let mut w = LossyWriter(Vec::new());
        writeln!(w, "hello").unwrap();
        assert_eq!(w.0, b"hello\n");
    }

    #[test]
    fn verbose_means_debug_and_otherwise_the_commands_own_level() {
        assert_eq!(default_filter(true, tracing::Level::WARN), "debug");
        assert_eq!(
            default_filter(false, tracing::Level::INFO),
            "info,rmcp=warn"
        );
        assert_eq!(
            default_filter(false, tracing::Level::WARN),
            "warn,rmcp=warn"
        );
    }
}
