//! The call context of a one-shot command's plugin calls: one cancellation flag for the whole command,
//! set by Ctrl-C or SIGTERM/SIGHUP, and the deadline `--timeout` gives the command (every call of it
//! shares the same absolute deadline, so the command as a whole ends in time).
//!
//! A cancelled or timed-out call ends with the plugin's own code (`SESSION_QUERY_ABORTED` for a
//! search, `PLUGIN_CANCELLED` for an exact read, `PLUGIN_DEADLINE_EXCEEDED` past the deadline); the
//! index keeps what was committed, so the next command carries on from there.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use host_api::abi::{call::now_unix_ms, Call};

struct Defaults {
    cancel: Arc<AtomicBool>,
    deadline_unix_ms: Option<i64>,
}

static DEFAULTS: OnceLock<Defaults> = OnceLock::new();

/// The exit status the signal that cancelled this command asks for (0: none arrived).
static SIGNAL_STATUS: AtomicI32 = AtomicI32::new(0);

/// The shell's convention, 128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM (and SIGHUP,
/// which the listener does not tell apart from it).
fn status_of(signal: crate::signals::Signal) -> i32 {
    match signal {
        crate::signals::Signal::Interrupt => 130,
        crate::signals::Signal::Terminate => 143,
    }
}

/// The exit status of a command a signal cancelled, once one has: a call it stopped ends the command
/// with this status rather than the failure's own, as if the signal had ended the process.
pub fn signal_status() -> Option<i32> {
    match SIGNAL_STATUS.load(Ordering::SeqCst) {
        0 => None,
        status => Some(status),
    }
}

/// How long after a signal a command that has not ended (it was between calls) is ended anyway.
const SIGNAL_GRACE: Duration = Duration::from_secs(2);

/// Sets this process's call defaults: the deadline `timeout` from now, and, with `on_signals`, a
/// cancellation on Ctrl-C/SIGTERM (a second signal, or one the command does not answer within
/// [`SIGNAL_GRACE`], ends the process with 128 + the signal's number). Only the first call has effect.
pub fn install(timeout: Option<Duration>, on_signals: bool) {
    let cancel = Arc::new(AtomicBool::new(false));
    let deadline_unix_ms = timeout
        .map(|t| now_unix_ms().saturating_add(i64::try_from(t.as_millis()).unwrap_or(i64::MAX)));
    let flag = cancel.clone();
    if DEFAULTS
        .set(Defaults {
            cancel,
            deadline_unix_ms,
        })
        .is_err()
        || !on_signals
    {
        return;
    }
    let Ok(signals) = crate::signals::listen() else {
        return; // without a handler, a signal ends the process as it always did
    };
    std::thread::spawn(move || {
        let Ok(signal) = signals.recv() else {
            return;
        };
        let status = status_of(signal);
        SIGNAL_STATUS.store(status, Ordering::SeqCst);
        flag.store(true, Ordering::SeqCst);
        let _ = signals.recv_timeout(SIGNAL_GRACE);
        std::process::exit(status);
    });
}

/// A call carrying the command's cancellation flag and deadline (none when [`install`] was not run).
pub fn call() -> Call {
    match DEFAULTS.get() {
        Some(d) => Call::new()
            .with_cancel_flag(d.cancel.clone())
            .with_deadline_unix_ms(d.deadline_unix_ms),
        None => Call::new(),
    }
}

/// `--timeout`'s value: a positive number of seconds.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(format!("{text:?} must be a positive number of seconds"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_positive_seconds() {
        assert_eq!(parse_timeout("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["0", "-1", "soon", "inf", "NaN"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }
}
