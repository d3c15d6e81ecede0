//! `dsh_spans(fts)`: an FTS5 auxiliary function returning the number of highlight spans a row has, the
//! `match_count` of spec §4.4, without the text.
//!
//! The reference counts the U+FDD0 markers `highlight()` inserts. `highlight()` needs the document text
//! and walks every token of it, which over every matching row of a common term is far too slow; its spans
//! are the phrase instances FTS5 reports (`xInst`), each covering the phrase's tokens, merged when one
//! starts at or before the previous one's last token (FTS5's `fts5CInstIter` merge rule: overlapping
//! instances merge, merely adjacent ones do not). So this function asks `xInstCount`/`xInst` and
//! `xPhraseSize` and merges, touching no text. Tests check it against `highlight()` itself.
//!
//! Registered per connection through the `fts5_api` pointer (`SELECT fts5(?1)` with
//! `sqlite3_bind_pointer`, as SQLite documents), with rusqlite's raw FFI. The unsafe code is the FFI
//! itself; each block says why it is sound.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use rusqlite::ffi;
use rusqlite::Connection;

/// The SQL name of the function.
pub const NAME: &str = "dsh_spans";

/// Registers [`NAME`] on `conn`, and the index's tokenizer (`super::tally`) when it is not yet.
pub fn register(conn: &Connection) -> Result<(), rusqlite::Error> {
    super::tally::register(conn)?;
    let api = fts5_api(conn)?;
    if api.is_null() {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ERROR),
            Some("this SQLite has no FTS5 (fts5_api pointer is null)".into()),
        ));
    }
    // SAFETY: `api` is the live fts5_api of this connection's SQLite (non-null, checked above); it stays
    // valid for the connection's lifetime. The name is a NUL-terminated static; no user data or destructor
    // is passed, and `spans` matches `fts5_extension_function`.
    let rc = unsafe {
        match (*api).xCreateFunction {
            Some(create) => create(
                api,
                c"dsh_spans".as_ptr(),
                ptr::null_mut(),
                Some(spans),
                None,
            ),
            None => ffi::SQLITE_ERROR,
        }
    };
    if rc != ffi::SQLITE_OK {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some(format!("cannot register {NAME}")),
        ));
    }
    Ok(())
}

/// The connection's `fts5_api` pointer (null when FTS5 is missing).
pub(crate) fn fts5_api(conn: &Connection) -> Result<*mut ffi::fts5_api, rusqlite::Error> {
    const PTR_TYPE: &CStr = c"fts5_api_ptr";
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: `conn.handle()` is the open connection's handle, used only within this call while `conn` is
    // borrowed. The statement is prepared, bound, stepped and finalised here and never escapes. The bound
    // pointer is `&mut api`, which outlives the statement; SQLite's fts5() writes the api pointer through
    // it during the step, typed by the documented "fts5_api_ptr" tag.
    unsafe {
        let db = conn.handle();
        let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(rc),
                Some("SELECT fts5(?1)".into()),
            ));
        }
        let rc = ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
            PTR_TYPE.as_ptr(),
            None,
        );
        let step = if rc == ffi::SQLITE_OK {
            ffi::sqlite3_step(stmt)
        } else {
            rc
        };
        ffi::sqlite3_finalize(stmt);
        if step != ffi::SQLITE_ROW && step != ffi::SQLITE_DONE {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(step),
                Some("SELECT fts5(?1)".into()),
            ));
        }
    }
    Ok(api)
}

/// The function body: merged phrase-instance spans of the current row.
///
/// # Safety
/// Called by FTS5 only, with the extension API, the context of the row being visited and a valid result
/// context, as `fts5_extension_function` promises.
unsafe extern "C" fn spans(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _argc: c_int,
    _argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 passes a valid api table and context for this call (see the function's contract).
    let outcome = unsafe { count_spans(&*api, fts) };
    // SAFETY: `ctx` is the valid result context of this call.
    unsafe {
        match outcome {
            Ok(n) => ffi::sqlite3_result_int64(ctx, n),
            Err(rc) => ffi::sqlite3_result_error_code(ctx, rc),
        }
    }
}

/// # Safety
/// `api` and `fts` must be the pair FTS5 passed to an auxiliary function call in progress.
unsafe fn count_spans(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
) -> Result<i64, c_int> {
    let (Some(inst_count), Some(inst), Some(phrase_size)) =
        (api.xInstCount, api.xInst, api.xPhraseSize)
    else {
        return Err(ffi::SQLITE_MISUSE);
    };
    let mut n: c_int = 0;
    // SAFETY: per the caller's contract; `n` is a valid out-pointer.
    let rc = unsafe { inst_count(fts, &mut n) };
    if rc != ffi::SQLITE_OK {
        return Err(rc);
    }
    let mut instances: Vec<(c_int, c_int, c_int)> = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n {
        let (mut phrase, mut col, mut off) = (0, 0, 0);
        // SAFETY: `i < n`, as xInst requires; the out-pointers are valid locals.
        let rc = unsafe { inst(fts, i, &mut phrase, &mut col, &mut off) };
        if rc != ffi::SQLITE_OK {
            return Err(rc);
        }
        // SAFETY: `phrase` is a phrase index FTS5 itself just returned.
        let size = unsafe { phrase_size(fts, phrase) };
        instances.push((col, off, off + size.max(1) - 1));
    }
    Ok(merged_spans(&mut instances))
}

/// Counts spans after merging instances `(column, first token, last token)` that overlap.
fn merged_spans(instances: &mut [(c_int, c_int, c_int)]) -> i64 {
    instances.sort_unstable();
    let mut count = 0i64;
    let mut open: Option<(c_int, c_int)> = None; // (column, last token of the open span)
    for &(col, start, end) in instances.iter() {
        match open {
            Some((c, last)) if c == col && start <= last => open = Some((c, last.max(end))),
            _ => {
                count += 1;
                open = Some((col, end));
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_rule_matches_the_reference_cases() {
        // "alpha alpha" in "alpha alpha alpha": instances at 0 and 1 overlap → one span.
        assert_eq!(merged_spans(&mut [(0, 0, 1), (0, 1, 2)]), 1);
        // Adjacent instances do not merge.
        assert_eq!(merged_spans(&mut [(0, 2, 3), (0, 0, 1)]), 2);
        assert_eq!(merged_spans(&mut []), 0);
    }

    #[test]
    fn spans_equal_highlight_markers() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61')")
            .unwrap();
        let texts = [
            "alpha alpha alpha",
            "alpha beta alpha beta alpha",
            "Café cafe CAFE",
            "nothing here",
            "alpha, alpha; alpha alpha",
        ];
        for t in texts {
            conn.execute("INSERT INTO t (text) VALUES (?1)", [t])
                .unwrap();
        }
        for query in ["\"alpha alpha\"", "\"alpha\"", "\"cafe\"", "\"alpha beta\""] {
            let mut stmt = conn
                .prepare("SELECT dsh_spans(t), highlight(t, 0, char(64976), char(64977)) FROM t WHERE t MATCH ?1")
                .unwrap();
            let rows: Vec<(i64, String)> = stmt
                .query_map([query], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(!rows.is_empty(), "{query}");
            for (spans, marked) in rows {
                let markers = marked.chars().filter(|&c| c == '\u{FDD0}').count() as i64;
                assert_eq!(spans, markers, "{query} in {marked:?}");
            }
        }
    }
}
