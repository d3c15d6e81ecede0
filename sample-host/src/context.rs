//! The `HostContext` this host lends each plugin generation: live sessions, the sessions root, a log
//! that records which generation said what, and cancellation tokens.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use abi_stable::std_types::{ROption, RStr, RString, RVec};
use host_api::abi::{CancelToken, HostContext, LiveSession, LogLevel};

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
    /// Print log lines to stderr as they arrive (`--verbose`).
    echo: bool,
    cancelled: Mutex<HashSet<CancelToken>>,
    next_token: AtomicU64,
}

impl Shared {
    pub fn new(sessions_root: Option<PathBuf>, echo: bool) -> Arc<Self> {
        Arc::new(Self {
            live: LiveSessions::new(),
            sessions_root,
            started: Instant::now(),
            log: Mutex::new(VecDeque::new()),
            echo,
            cancelled: Mutex::new(HashSet::new()),
            next_token: AtomicU64::new(1),
        })
    }

    /// Records a log line.
    pub fn log(&self, generation: u64, level: LogLevel, message: impl Into<String>) {
        let level = match level {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        };
        let line = LogLine {
            at_micros: self.started.elapsed().as_micros(),
            generation,
            level,
            message: message.into(),
        };
        if self.echo {
            eprintln!("[{level}] gen {generation}: {}", line.message);
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

    /// A fresh cancellation token for one call.
    pub fn new_token(&self) -> CancelToken {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// Trips a token: the call holding it should stop with `ABORTED`.
    pub fn cancel(&self, token: CancelToken) {
        self.cancelled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token);
    }
}

/// The context object of one plugin generation.
pub struct GenerationContext {
    pub shared: Arc<Shared>,
    pub generation: u64,
}

impl HostContext for GenerationContext {
    fn live_sessions(&self) -> RVec<LiveSession> {
        self.shared
            .live
            .list()
            .iter()
            .map(|(h, n)| LiveSession {
                header: h.into(),
                event_count: *n,
            })
            .collect()
    }

    fn live_session(&self, id: RStr<'_>) -> ROption<LiveSession> {
        self.shared
            .live
            .get(id.as_str())
            .map(|(h, n)| LiveSession {
                header: (&h).into(),
                event_count: n,
            })
            .into()
    }

    fn live_events(&self, id: RStr<'_>, from_seq: u64) -> ROption<RVec<RString>> {
        self.shared
            .live
            .events_json(id.as_str(), from_seq)
            .map(|events| events.into_iter().map(RString::from).collect())
            .into()
    }

    fn sessions_root(&self) -> ROption<RString> {
        self.shared
            .sessions_root
            .as_ref()
            .map(|p| RString::from(p.to_string_lossy().into_owned()))
            .into()
    }

    fn log(&self, level: LogLevel, message: RStr<'_>) {
        self.shared.log(self.generation, level, message.as_str());
    }

    fn is_cancelled(&self, token: CancelToken) -> bool {
        token != 0
            && self
                .shared
                .cancelled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&token)
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
}
