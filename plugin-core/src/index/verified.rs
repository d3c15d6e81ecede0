//! What the index was last brought up to date from, as a walk of the disk saw it (`verified`): the
//! digest of the walks of the sessions root and the other harnesses' folders that a refresh listed
//! everything from, the count of commits (`state.commits`) the index stood at when that refresh ended,
//! and the sessions it left out.
//!
//! A new process whose own walk has the same digest, while the index still stands at that commit and
//! no session is live, knows that a refresh would find nothing to do: every transcript has the path
//! and revision it was indexed at, and a revision changes with any write (BLAKE3 digests, so no change
//! passes as another). It then answers without loading the index's session rows or header records
//! and without comparing them with a listing (a one-shot command over 10,000 sessions spent most of
//! its time on those). Any commit by anyone moves `state.commits`, so a stale record is never taken.
//!
//! Like `failed_logs`, this caches a decision a refresh can always make again: writing it is best
//! effort, and a missing or stale record only means the next process compares as before.

use dsh_codec::log::layout::WalkDigest;
use host_api::abi::wire::search::Skipped;
use rusqlite::{params, Connection, OptionalExtension};

/// The record, when the index has one that parses.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    /// `state.commits` when the refresh that wrote it ended.
    pub commits: u64,
    pub digest: WalkDigest,
    /// What that refresh reported as left out, as a search reports it.
    pub skipped: Vec<Skipped>,
}

/// The index's record, `None` when it has none (or one that does not parse: it is then rewritten).
pub fn load(conn: &Connection) -> rusqlite::Result<Option<Verified>> {
    let row: Option<(i64, Vec<u8>, String)> = conn
        .prepare_cached("SELECT commits, digest, skipped FROM verified WHERE singleton = 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    Ok(row.and_then(|(commits, digest, skipped)| {
        Some(Verified {
            commits: u64::try_from(commits).ok()?,
            digest: digest.try_into().ok()?,
            skipped: serde_json::from_str(&skipped).ok()?,
        })
    }))
}

/// Records that the index, as committed now, is what a refresh made from walks with `digest`, leaving
/// out `skipped`. Call with the writer role held, right after that refresh's last commit.
pub fn store(conn: &Connection, digest: &WalkDigest, skipped: &[Skipped]) -> rusqlite::Result<()> {
    let skipped = serde_json::to_string(skipped)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO verified (singleton, commits, digest, skipped)
         VALUES (1, (SELECT commits FROM state), ?1, ?2)",
    )?
    .execute(params![&digest[..], skipped])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        let verdict = crate::index::schema::guard(&conn).unwrap();
        crate::index::schema::apply(&mut conn, verdict).unwrap();
        conn
    }

    #[test]
    fn a_record_reads_back_with_the_commit_it_was_written_at() {
        let conn = index();
        assert_eq!(load(&conn).unwrap(), None, "a new index has none");
        let skipped = vec![Skipped {
            id: Some("s1".into()),
            path: Some("/r/p/s1/session.jsonl".into()),
            code: "SESSION_QUERY_CORRUPT_SESSION".into(),
            reason: "line 3 is not JSON".into(),
        }];
        conn.execute("UPDATE state SET commits = 41", []).unwrap();
        store(&conn, &[7; 32], &skipped).unwrap();
        assert_eq!(
            load(&conn).unwrap(),
            Some(Verified {
                commits: 41,
                digest: [7; 32],
                skipped: skipped.clone(),
            })
        );
        conn.execute("UPDATE state SET commits = 42", []).unwrap();
        store(&conn, &[8; 32], &[]).unwrap();
        let again = load(&conn).unwrap().unwrap();
        assert_eq!(
            (again.commits, again.digest),
            (42, [8; 32]),
            "one record, replaced"
        );
        assert!(again.skipped.is_empty());
    }

    #[test]
    fn a_record_that_does_not_parse_reads_as_none() {
        let conn = index();
        conn.execute(
            "INSERT INTO verified (singleton, commits, digest, skipped) VALUES (1, 3, x'0102', '[]')",
            [],
        )
        .unwrap();
        assert_eq!(load(&conn).unwrap(), None, "a digest of the wrong length");
        conn.execute(
            "UPDATE verified SET digest = zeroblob(32), skipped = 'not json'",
            [],
        )
        .unwrap();
        assert_eq!(load(&conn).unwrap(), None, "skipped that does not parse");
    }
}
