//! The `HostContext` this host lends each plugin generation: live sessions, the sessions root, a log
//! that records which generation said what, and progress reports.
//!
//! Every callback body is panic-contained: a panic here would unwind into the plugin's `extern "C"`
//! vtable shim and abort the process, so it becomes a logged error and an empty answer instead.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use abi_stable::std_types::{ROption, RStr, RString, RVec};
use host_api::abi::{HostContext, LiveSession, LogLevel};

use crate::live::LiveSessions;

/// How many log lines the host keeps (older ones are dropped first).
pub const LOG_CAPACITY: usize = 10_000;

/// One line a plugin (or the host about a plugin) logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Microseconds since the host started; orders lines from different threads.
    pub at_micros: u128,
    /// The plugin generation the line is about (0 = the host itself).
    pub generation: u64,
    pub level: &'static str,
    pub message: String,
}

/// State shared by the host and every generation's context.
pub struct Shared {
    pub live: LiveSessions,
    pub sessions_root: Option<PathBuf>,
    started: Instant,
    /// The most recent [`LOG_CAPACITY`] lines: a long-running host must not grow without bound.
    log: Mutex<VecDeque<LogLine>>,
    /// Also emit each line through `tracing` (the binary's log); tests keep only the ring.
    forward: bool,
    /// Where plugins' progress reports go (the command line draws a bar); none by default.
    progress: Mutex<Option<ProgressSink>>,
}

/// Receives `(task, done, total)` progress reports from plugins.
pub type ProgressSink = Box<dyn Fn(&str, u64, u64) + Send + Sync>;

impl Shared {
    /// `forward`: also emit every line through `tracing` (which decides what reaches stderr).
    pub fn new(sessions_root: Option<PathBuf>, forward: bool) -> Arc<Self> {
        Arc::new(Self {
            live: LiveSessions::new(),
            sessions_root,
            started: Instant::now(),
            log: Mutex::new(VecDeque::new()),
            forward,
            progress: Mutex::new(None),
        })
    }

    /// Records a log line (generation 0: the host itself), forwarding it to `tracing` when asked to.
    pub fn log(&self, generation: u64, level: LogLevel, message: impl Into<String>) {
        let line = LogLine {
            at_micros: self.started.elapsed().as_micros(),
            generation,
            level: level_name(level),
            message: message.into(),
        };
        if self.forward {
            emit(generation, level, &line.message);
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() == LOG_CAPACITY {
            log.pop_front();
        }
        log.push_back(line);
    }

    /// The lines logged so far (the most recent [`LOG_CAPACITY`]), oldest first.
    pub fn log_lines(&self) -> Vec<LogLine> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Sends plugins' progress reports to `sink` from now on (`None` to drop them).
    pub fn set_progress_sink(&self, sink: Option<ProgressSink>) {
        *self.progress.lock().unwrap_or_else(|p| p.into_inner()) = sink;
    }

    fn progress(&self, task: &str, done: u64, total: u64) {
        if let Some(sink) = self
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            sink(task, done, total);
        }
    }
}

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Debug => "debug",
        // A level this build does not know (a later contract minor) is logged as info.
        _ => "info",
    }
}

/// One line to `tracing`. A plugin's lines carry their generation as a field; the host's own do not.
fn emit(generation: u64, level: LogLevel, message: &str) {
    // tracing's macros want the level as a constant, hence one arm per level.
    macro_rules! at {
        ($mac:ident) => {
            if generation == 0 {
                tracing::$mac!("{message}")
            } else {
                tracing::$mac!(plugin_generation = generation, "{message}")
            }
        };
    }
    match level {
        LogLevel::Error => at!(error),
        LogLevel::Warn => at!(warn),
        LogLevel::Debug => at!(debug),
        _ => at!(info),
    }
}

/// The context object of one plugin generation.
pub struct GenerationContext {
    pub shared: Arc<Shared>,
    pub generation: u64,
}

impl GenerationContext {
    /// Runs a callback body; a panic in it is logged and answered with `fallback`.
    fn contained<T>(&self, what: &str, fallback: T, body: impl FnOnce() -> T) -> T {
        match catch_unwind(AssertUnwindSafe(body)) {
            Ok(value) => value,
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-text panic payload".into());
                // Logging itself must not panic again here; `Shared::log` never does.
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    self.shared.log(
                        self.generation,
                        LogLevel::Error,
                        format!("host callback {what} panicked and answered empty: {why}"),
                    )
                }));
                fallback
            }
        }
    }
}

fn live_record(
    (header, event_count, epoch): (dsh_codec::log::SessionHeader, u64, u64),
) -> LiveSession {
    LiveSession {
        header: (&header).into(),
        event_count,
        epoch,
    }
}

impl HostContext for GenerationContext {
    fn live_sessions(&self) -> RString {
        self.contained("live_sessions", RString::from("[]"), || {
            let list: Vec<LiveSession> = self
                .shared
                .live
                .list()
                .into_iter()
                .map(live_record)
                .collect();
            serde_json::to_string(&list)
                .unwrap_or_else(|_| "[]".into())
                .into()
        })
    }

    fn live_session(&self, id: RStr<'_>) -> ROption<RString> {
        self.contained("live_session", ROption::RNone, || {
            self.shared
                .live
                .get(id.as_str())
                .and_then(|s| serde_json::to_string(&live_record(s)).ok())
                .map(RString::from)
                .into()
        })
    }

    fn live_events(&self, id: RStr<'_>, epoch: u64, from_seq: u64) -> ROption<RVec<RString>> {
        self.contained("live_events", ROption::RNone, || {
            self.shared
                .live
                .events_json(id.as_str(), epoch, from_seq)
                .map(|events| events.into_iter().map(RString::from).collect())
                .into()
        })
    }

    fn sessions_root(&self) -> ROption<RString> {
        self.contained("sessions_root", ROption::RNone, || {
            self.shared
                .sessions_root
                .as_ref()
                .map(|p| RString::from(p.to_string_lossy().into_owned()))
                .into()
        })
    }

    fn log(&self, level: LogLevel, message: RStr<'_>) {
        self.contained("log", (), || {
            self.shared.log(self.generation, level, message.as_str())
        })
    }

    fn report_progress(&self, task: RStr<'_>, done: u64, total: u64) {
        self.contained("report_progress", (), || {
            self.shared.progress(task.as_str(), done, total)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_only_the_most_recent_lines() {
        let shared = Shared::new(None, false);
        for i in 0..LOG_CAPACITY + 5 {
            shared.log(0, LogLevel::Info, format!("line {i}"));
        }
        let lines = shared.log_lines();
        assert_eq!(lines.len(), LOG_CAPACITY);
        assert_eq!(lines[0].message, "line 5");
        assert_eq!(
            lines[LOG_CAPACITY - 1].message,
            format!("line {}", LOG_CAPACITY + 4)
        );
    }

    /// Collects what a `tracing` subscriber writes.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn traced(forward: bool, log: impl FnOnce(&Shared)) -> (String, Vec<LogLine>) {
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .finish();
        let shared = Shared::new(None, forward);
        tracing::subscriber::with_default(subscriber, || log(&shared));
        let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        (text, shared.log_lines())
    }

    #[test]
    fn lines_go_to_tracing_and_stay_in_the_ring() {
        let (text, lines) = traced(true, |shared| {
            shared.log(3, LogLevel::Warn, "index opened");
            shared.log(0, LogLevel::Info, "host line");
            shared.log(3, LogLevel::Debug, "below the level");
        });
        assert!(
            text.contains("WARN") && text.contains("index opened"),
            "{text}"
        );
        assert!(text.contains("plugin_generation=3"), "{text}");
        assert!(
            text.contains("host line") && !text.contains("below the level"),
            "{text}"
        );
        assert_eq!(lines.len(), 3, "the ring keeps every level");
        assert_eq!((lines[0].generation, lines[0].level), (3, "warn"));
    }

    #[test]
    fn an_unforwarded_log_writes_nothing_to_tracing() {
        let (text, lines) = traced(false, |shared| shared.log(1, LogLevel::Error, "quiet"));
        assert!(text.is_empty(), "{text}");
        assert_eq!(lines.len(), 1);
    }
}
