//! The index file's health, one test per case: an index of ours that is truncated or has damaged pages
//! is rebuilt (and says so once), a read-only one answers as it stands, sidecars are never followed
//! through symbolic links, and an index path that is a folder or a text file is an error naming it with
//! nothing left beside it. (A database that is not ours is refused untouched: `tests.rs`.)

use std::path::{Path, PathBuf};

use host_api::abi::wire::search::SessionSearchRequest;
use host_api::abi::{ErrorCode, PluginError};
use serde_json::json;

use super::test_support::{never, side, Side};
use crate::corpus::testing::{header, write_log, LogBuilder};

const QUERIES: [&str; 5] = ["needle", "alpha", "beta", "测试", "filler"];

impl Side {
    fn page(&self, q: &str) -> Result<Vec<String>, PluginError> {
        let req: SessionSearchRequest =
            serde_json::from_value(json!({"query": q, "limit": 100})).unwrap();
        let page = self.search.search_sessions(&self.corpus, req, &never)?;
        Ok(page
            .items
            .iter()
            .map(|h| {
                format!(
                    "{q} {} {} {}",
                    h.header.id, h.best_match.seq, h.best_match.snippet
                )
            })
            .collect())
    }

    fn answers(&self) -> Result<Vec<String>, PluginError> {
        let mut all = Vec::new();
        for q in QUERIES {
            all.extend(self.page(q)?);
        }
        Ok(all)
    }

    fn logged(&self, what: &str) -> usize {
        self.state
            .logged
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(what))
            .count()
    }

    fn notes(&self) -> Vec<String> {
        self.search
            .diagnostics(&self.corpus, &never)
            .unwrap()
            .index_notes
    }
}

/// A root of 40 sessions with enough text to fill a few hundred pages, and its index built and closed.
fn built() -> (tempfile::TempDir, PathBuf, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let index = dir.path().join("cache/index.sqlite");
    for i in 0..40 {
        let mut log = LogBuilder::new();
        log.turn_start(1);
        for j in 0..30 {
            log.user(&format!(
                "needle {i} {j} alpha 测试 {} word{}",
                "filler ".repeat(j % 7),
                i * 31 + j
            ));
            log.assistant(1, &format!("beta answer {i} {j} {}", "text ".repeat(j)));
        }
        log.turn_end(1);
        write_log(&root, &header(&format!("s{i:02}"), i as i64), &log);
    }
    let answers = side(&root, &index).answers().unwrap();
    assert!(answers.len() > 100);
    (dir, root, index, answers)
}

fn sidecar(index: &Path, suffix: &str) -> PathBuf {
    let mut name = index.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// An index at the current schema is opened and searched over an unchanged root without a single
/// write: applying the schema anyway was a write transaction (and at close a checkpoint with its
/// `fsync`s) in every one-shot command.
#[test]
fn reopening_a_current_index_over_an_unchanged_root_writes_nothing() {
    let (_dir, root, index, answers) = built();
    let before = std::fs::read(&index).unwrap();
    let again = side(&root, &index);
    assert_eq!(again.answers().unwrap(), answers);
    let wal = std::fs::metadata(sidecar(&index, "-wal")).map_or(0, |m| m.len());
    // An empty WAL holds at most its 32-byte header, no frame.
    assert!(wal <= 32, "the open or the search wrote {wal} bytes of WAL");
    drop(again);
    assert!(
        std::fs::read(&index).unwrap() == before,
        "the index file changed"
    );
}

/// The page size of the index file at `index`, from its header.
fn page_size(index: &Path) -> usize {
    let bytes = std::fs::read(index).unwrap();
    match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65_536,
        n => usize::from(n),
    }
}

/// An index is created with pages of [`crate::index::PAGE_SIZE`]; one an earlier build made with 4 KiB
/// pages is searched as it is, neither rebuilt nor rewritten.
#[test]
fn a_new_index_has_16_kib_pages_and_an_older_4_kib_one_is_kept_as_it_is() {
    let (_dir, _root, index, answers) = built();
    assert_eq!(page_size(&index), crate::index::PAGE_SIZE as usize);
    assert_eq!(crate::index::PAGE_SIZE, 16 * 1024);

    // As an earlier build made it: 4 KiB pages.
    crate::index::NEW_PAGE_SIZE.with(|p| p.set(4096));
    let (_old_dir, old_root, old_index, old_answers) = built();
    crate::index::NEW_PAGE_SIZE.with(|p| p.set(crate::index::PAGE_SIZE));
    assert_eq!(page_size(&old_index), 4096);
    assert_eq!(old_answers, answers, "the same rows whatever the page size");
    let before = std::fs::read(&old_index).unwrap();
    assert_eq!(before[20], 8, "the pages reserve their checksums");
    let s = side(&old_root, &old_index);
    assert_eq!(s.answers().unwrap(), answers);
    assert_eq!(s.logged("was rebuilt"), 0, "{:?}", s.notes());
    drop(s);
    assert!(
        std::fs::read(&old_index).unwrap() == before,
        "the index file changed"
    );
}

#[test]
fn a_truncated_index_is_rebuilt_and_says_so_once() {
    let (_dir, root, index, answers) = built();
    assert!(!sidecar(&index, "-wal").exists(), "closed cleanly");
    let len = std::fs::metadata(&index).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&index)
        .unwrap();
    file.set_len(len / 2).unwrap();
    drop(file);
    let s = side(&root, &index);
    assert_eq!(s.answers().unwrap(), answers);
    assert_eq!(s.answers().unwrap(), answers);
    let notes = s.notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("rebuilt") && n.contains("truncated")),
        "{notes:?}"
    );
    assert_eq!(s.logged("was rebuilt"), 1, "said once");
}

#[test]
fn an_index_of_another_schema_version_is_rebuilt_and_says_so() {
    let (_dir, root, index, answers) = built();
    crate::index::connect_by_hand(&index)
        .unwrap()
        .execute_batch("PRAGMA user_version = 3")
        .unwrap();
    let s = side(&root, &index);
    assert_eq!(s.answers().unwrap(), answers);
    assert!(
        s.notes().iter().any(|n| n.contains("schema version 3")),
        "{:?}",
        s.notes()
    );
    assert_eq!(s.logged("was rebuilt"), 1);
}

/// Schema 9 changed the FTS5 table's tokenizer (`dsh`, which also counts common tokens): an index of
/// schema 8, whose table used `unicode61` itself, is rebuilt once, says so, and then has token lists.
#[test]
fn a_schema_8_index_with_the_plain_tokenizer_is_rebuilt_once_into_token_lists() {
    let (_dir, root, index, answers) = built();
    {
        let conn = crate::index::connect_by_hand(&index).unwrap();
        conn.execute_batch(&format!(
            "DROP TABLE fts;
             CREATE VIRTUAL TABLE fts USING fts5 (
                 text, content = '', contentless_delete = 1, tokenize = \"{}\"
             );
             DELETE FROM hot_hits; DELETE FROM hot_phrases;
             PRAGMA user_version = 8",
            crate::index::cjk::TOKENIZE
        ))
        .unwrap();
    }
    let s = side(&root, &index);
    assert_eq!(s.answers().unwrap(), answers);
    assert!(
        s.notes().iter().any(|n| n.contains("schema version 8")),
        "{:?}",
        s.notes()
    );
    assert_eq!(s.logged("was rebuilt"), 1, "said once");
    drop(s);
    let conn = crate::index::connect_by_hand(&index).unwrap();
    let sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'fts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(sql.contains("tokenize = \"dsh "), "{sql}");
    assert!(!crate::index::common::lists(&conn).unwrap().is_empty());
    drop(conn);
    let again = side(&root, &index);
    assert_eq!(again.answers().unwrap(), answers);
    assert_eq!(
        again.logged("was rebuilt"),
        0,
        "a current index is not rebuilt again"
    );
}

#[test]
fn a_lock_on_a_symlinked_sidecar_is_refused_and_its_target_untouched() {
    for suffix in [".lock", "-wal", "-shm"] {
        let (dir, root, index, _) = built();
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let link = sidecar(&index, suffix);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let s = side(&root, &index);
        let err = s.page("needle").unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed, "{suffix}");
        assert!(
            err.message.contains("symbolic link") && err.message.contains(suffix),
            "{suffix}: {}",
            err.message
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}

#[test]
fn an_index_path_that_is_a_folder_or_a_text_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let folder = dir.path().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    let readme = dir.path().join("README.md");
    std::fs::write(&readme, "# A checkout's readme\n\nNot an index.\n").unwrap();
    for (path, why) in [
        (&folder, "is a folder"),
        (&readme, "not an SQLite database"),
    ] {
        let s = side(&root, path);
        let err = s.page("needle").unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
        assert!(
            err.message.contains(&path.display().to_string()) && err.message.contains(why),
            "{}",
            err.message
        );
        drop(s);
        for suffix in [".lock", "-wal", "-shm", "-journal"] {
            assert!(
                !sidecar(path, suffix).exists(),
                "{suffix} left beside {}",
                path.display()
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(&readme).unwrap(),
        "# A checkout's readme\n\nNot an index.\n"
    );
}

/// When the test binary is re-run as a child process (as another user when this one is root, so that
/// file modes bind), what the child does.
const CHILD_ENV: &str = "DSH_HEALTH_TEST_CHILD";

#[test]
fn health_child_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let args: Vec<&str> = mode.split('\n').collect();
    let [index, root] = args.as_slice() else {
        panic!("unknown child mode {args:?}");
    };
    let s = side(Path::new(root), Path::new(index));
    match s.answers() {
        Ok(answers) => {
            for a in answers {
                println!("ANSWER {a}");
            }
            for n in s.notes() {
                println!("NOTE {n}");
            }
        }
        Err(e) => println!("ERROR {}: {}", e.code, e.message),
    }
}

#[test]
fn a_read_only_index_answers_as_it_stands() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let (dir, root, index, answers) = built();
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    // Readable by anyone, writable by no one but root.
    for entry in walk(dir.path()) {
        mode(&entry, if entry.is_dir() { 0o555 } else { 0o444 });
    }
    mode(dir.path(), 0o555);
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "search::health_tests::health_child_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(
        CHILD_ENV,
        format!("{}\n{}", index.display(), root.display()),
    )
    .current_dir("/")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root writes anything: the child runs as nobody.
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    for entry in walk(dir.path()) {
        mode(&entry, if entry.is_dir() { 0o755 } else { 0o644 });
    }
    mode(dir.path(), 0o755);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let got: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.find("ANSWER ").map(|at| l[at + 7..].to_string()))
        .collect();
    assert_eq!(got, answers, "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("NOTE read-only") && l.contains("not writable")),
        "{stdout}"
    );
    assert!(!sidecar(&index, "-wal").exists());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

#[test]
fn a_page_damaged_index_is_detected_and_rebuilt_never_answered_from() {
    let mut detected = 0;
    for trial in 0..8u64 {
        let (_dir, root, index, answers) = built();
        let bytes = std::fs::read(&index).unwrap();
        assert_eq!(bytes[20], 8, "every page reserves its checksum bytes");
        let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
        let pages = bytes.len() / page;
        assert!(pages > 20, "{pages} pages");
        // 4 bytes in each of 12 pages (never page 1, whose header says whose file it is).
        let mut state = 0x2545_F491_4F6C_DD1Du64 ^ (trial << 17);
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut damaged = bytes.clone();
        for _ in 0..12 {
            let at = (1 + next(pages - 1)) * page + next(page - 4);
            for b in &mut damaged[at..at + 4] {
                *b ^= 0x5A;
            }
        }
        std::fs::write(&index, &damaged).unwrap();
        let s = side(&root, &index);
        match s.answers() {
            Ok(got) => assert_eq!(got, answers, "trial {trial}: answered differently"),
            Err(e) => {
                detected += 1;
                assert_eq!(e.code, ErrorCode::SessionQueryIndexFailed, "{e:?}");
                assert!(
                    e.message.contains("damaged") && e.message.contains("rebuilt"),
                    "{}",
                    e.message
                );
                assert!(!e.message.contains("PLUGIN_UNAVAILABLE"));
                // The next call rebuilds from the logs and answers as before.
                assert_eq!(s.answers().unwrap(), answers, "trial {trial}");
                assert!(
                    s.notes().iter().any(|n| n.contains("rebuilt")),
                    "{:?}",
                    s.notes()
                );
                assert_eq!(s.logged("was rebuilt"), 1);
            }
        }
    }
    assert!(detected > 0, "no trial's damage was read");
}
