//! Connecting to the team's server: a bounded retry on what a moment can cure (the server starting,
//! restarting or out of connection slots, a socket not there yet), an immediate answer for what it
//! cannot (a bad URL, a refused password, a database that does not exist, a server that does not
//! answer within the connect timeout).

use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, NoTls};

use crate::redact;

/// Attempts at a first connection; the waits between them double from 100 ms (1.5 s in all).
pub const CONNECT_ATTEMPTS: u32 = 5;
/// How long one attempt waits for the server to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why no connection could be made, naming the server without its password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the index at {server} is unreachable: {cause}")]
pub struct ConnectError {
    pub server: String,
    pub cause: String,
}

/// Connects to `url` as application `application`, trying again what a retry can cure, at most
/// `attempts` times in all ([`CONNECT_ATTEMPTS`] for a first connection).
pub fn connect(url: &str, application: &str, attempts: u32) -> Result<Client, ConnectError> {
    let server = redact(url);
    let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| ConnectError {
        server: server.clone(),
        cause: format!("not a PostgreSQL URL: {}", cause(&e)),
    })?;
    config.connect_timeout(CONNECT_TIMEOUT);
    config.application_name(application);
    let mut last = String::new();
    for attempt in 0..attempts.max(1) {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(50 << attempt));
        }
        match config.connect(NoTls) {
            Ok(client) => return Ok(client),
            Err(e) if passing(&e) => last = cause(&e),
            Err(e) => {
                return Err(ConnectError {
                    server,
                    cause: cause(&e),
                })
            }
        }
    }
    Err(ConnectError {
        server,
        cause: if attempts > 1 {
            format!("{last} (gave up after {attempts} attempts)")
        } else {
            last
        },
    })
}

/// Whether a failed connection attempt may pass a moment later.
fn passing(e: &postgres::Error) -> bool {
    match e.code() {
        Some(c) => {
            *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::TOO_MANY_CONNECTIONS
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || c.code().starts_with("08")
        }
        // A socket that is not there (yet) or refuses passes; one that did not answer in time would
        // only make the caller wait the timeout again.
        None => e.is_closed() || io_kind(e).is_some_and(|k| k != std::io::ErrorKind::TimedOut),
    }
}

fn io_kind(e: &postgres::Error) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

/// A server error's message and SQLSTATE, or a client error with its causes.
pub fn cause(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(inner) = source {
                s.push_str(": ");
                s.push_str(&inner.to_string());
                source = inner.source();
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_folder_nobody_listens_in_is_retried_then_named_without_the_password() {
        let dir = std::env::temp_dir().join(format!("dsh-team-none-{}", std::process::id()));
        let url = format!("postgresql://alice:s3cret@/postgres?host={}", dir.display());
        let t = std::time::Instant::now();
        let err = connect(&url, "test", CONNECT_ATTEMPTS).err().unwrap();
        assert!(err.cause.contains("gave up after 5 attempts"), "{err}");
        assert!(
            err.to_string().contains(&dir.display().to_string()),
            "{err}"
        );
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(
            t.elapsed() >= Duration::from_millis(1400),
            "it waited between attempts"
        );
    }

    #[test]
    fn a_bad_url_is_refused_at_once() {
        let err = connect(
            "postgresql://u@h/db?sslmode=sometimes",
            "test",
            CONNECT_ATTEMPTS,
        )
        .err()
        .unwrap();
        assert!(err.cause.starts_with("not a PostgreSQL URL"), "{err}");
    }
}
