//! Replay: rebuilding a model request from a session's log on disk.
//!
//! The log is read with `host-api`, folded up to the seq the request was built through, and serialised
//! with the same canonical bytes ([`crate::request`]). Because a citation is a snapshot appended to the
//! citing session's own log, the rebuilt request equals what was sent whatever happened to the cited
//! session since — appended to, compacted or deleted.

use std::path::{Path, PathBuf};

use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::read::{read_log, ReadOptions, SessionLog};
use dsh_codec::log::LogError;
use dsh_codec::surface::{model_messages, FoldError, SurfaceFold};

use crate::request::ModelRequest;

/// Why a request could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("session {id:?} has no log under {root}")]
    NotFound { id: String, root: PathBuf },
    #[error("{0}")]
    Log(#[from] LogError),
    #[error("{path}: the surface fold rejects the log: {source}")]
    Fold { path: PathBuf, source: FoldError },
    #[error(
        "{path}: the log ends at seq {last:?}, before seq {wanted} the request was built through"
    )]
    TooShort {
        path: PathBuf,
        last: Option<u64>,
        wanted: u64,
    },
}

/// Rebuilds the request of the log at `path` folded through `through_seq`: pass the sent request's own
/// [`ModelRequest::through_seq`] (`None` is the request of an empty log: no event folded).
pub fn rebuild_request(
    path: &Path,
    system: &str,
    through_seq: Option<u64>,
) -> Result<ModelRequest, ReplayError> {
    build(path, &read_stored(path)?, system, through_seq)
}

/// The request the whole log at `path` builds now (folded through its last event).
pub fn rebuild_latest(path: &Path, system: &str) -> Result<ModelRequest, ReplayError> {
    let log = read_stored(path)?;
    let last = log.events.last().map(|e| e.seq);
    build(path, &log, system, last)
}

/// The log as stored, without crash closers: a request is built from what was stored, not from a
/// repaired view.
fn read_stored(path: &Path) -> Result<SessionLog, ReplayError> {
    Ok(read_log(
        path,
        &ReadOptions {
            crash_closers: false,
            ..ReadOptions::default()
        },
    )?)
}

fn build(
    path: &Path,
    log: &SessionLog,
    system: &str,
    through_seq: Option<u64>,
) -> Result<ModelRequest, ReplayError> {
    let last = log.events.last().map(|e| e.seq);
    let upto = match through_seq {
        Some(wanted) if last.is_none_or(|l| l < wanted) => {
            return Err(ReplayError::TooShort {
                path: path.to_path_buf(),
                last,
                wanted,
            })
        }
        Some(wanted) => usize::try_from(wanted).map_or(log.events.len(), |w| w + 1),
        None => 0,
    };
    let events = &log.events[..upto.min(log.events.len())];
    let fold = SurfaceFold::fold(events).map_err(|source| ReplayError::Fold {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(ModelRequest::build(
        system,
        &model_messages(&fold, events),
        through_seq,
    ))
}

/// [`rebuild_request`] for the session `id` found under the sessions root `root`.
pub fn rebuild_session_request(
    root: &Path,
    id: &str,
    system: &str,
    through_seq: Option<u64>,
) -> Result<ModelRequest, ReplayError> {
    let listed = SessionsRoot::new(root)
        .find(id)?
        .ok_or_else(|| ReplayError::NotFound {
            id: id.to_string(),
            root: root.to_path_buf(),
        })?;
    rebuild_request(&listed.path, system, through_seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_codec::log::write::{LogWriter, WriteOptions};
    use dsh_codec::log::{Compression, Event, SessionHeader};

    fn user(seq: u64, text: &str) -> Event {
        let data = dsh_codec::build::user_data(&format!("u{seq}"), text);
        Event::appended("user/message", seq, 0, data)
    }

    fn write(dir: &Path, events: &[Event]) -> PathBuf {
        let mut writer = LogWriter::create(
            dir,
            SessionHeader::new("s", 1, Some("/w".into())),
            WriteOptions {
                compression: Compression::None,
                ..WriteOptions::default()
            },
        )
        .unwrap();
        writer.append(events).unwrap();
        writer.path().to_path_buf()
    }

    #[test]
    fn the_rebuilt_request_stops_at_the_seq_it_was_built_through() {
        let dir = tempfile::tempdir().unwrap();
        let events = [user(0, "a"), user(1, "b"), user(2, "c")];
        let path = write(dir.path(), &events);
        let sent = ModelRequest::build(
            "sys",
            &[
                events[0].data.as_value().clone(),
                events[1].data.as_value().clone(),
            ],
            Some(1),
        );
        assert_eq!(rebuild_request(&path, "sys", Some(1)).unwrap(), sent);
        assert_eq!(
            rebuild_session_request(dir.path(), "s", "sys", Some(1)).unwrap(),
            sent
        );
        assert_eq!(rebuild_request(&path, "sys", Some(2)).unwrap().messages, 3);
    }

    #[test]
    fn a_seq_past_the_log_and_an_unknown_session_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), &[user(0, "a")]);
        assert!(matches!(
            rebuild_request(&path, "sys", Some(5)),
            Err(ReplayError::TooShort { wanted: 5, .. })
        ));
        assert!(matches!(
            rebuild_session_request(dir.path(), "nope", "sys", None),
            Err(ReplayError::NotFound { .. })
        ));
        assert!(matches!(
            rebuild_request(&dir.path().join("missing.jsonl"), "sys", None),
            Err(ReplayError::Log(_))
        ));
    }
}
