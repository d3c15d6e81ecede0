//! The sessions-root layout and the append-only writer, against real files: path encoding, discovery with
//! its problems, lookup by id, the durability protocol (publish, modes, rollback), and write/read round trips.

use std::cell::Cell;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use dsh_codec::build::{assistant_data, turn_end_data, user_data};
use dsh_codec::log::layout::{
    encode_segment, project_dir_name, project_key, session_log_path, Revision, SessionsRoot,
};
use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::write::{LogFile, LogWriter, WriteOptions};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Compression, Event, HeaderDiagnostic, LogError, LogErrorCode, SessionHeader};
use serde_json::json;

const RAW: WriteOptions = WriteOptions {
    compression: Compression::None,
    pack_chunks: false,
};
const ZSTD: WriteOptions = WriteOptions {
    compression: Compression::Zstd,
    pack_chunks: true,
};

fn header(id: &str, cwd: Option<&str>) -> SessionHeader {
    SessionHeader::new(id, 1000, cwd.map(str::to_string))
}

/// A small but complete turn that passes every reader check, with a run of text deltas that packs.
fn turn_events() -> Vec<Event> {
    let mut events = vec![
        Event::new("turn/start", 0, 10, json!({"turn": 1})),
        Event::appended("user/message", 1, 11, user_data("u1", "hello")),
        Event::new("step/start", 2, 12, json!({"turn": 1, "step": 1})),
        Event::new(
            "request/header",
            3,
            13,
            json!({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}),
        ),
    ];
    for (k, text) in ["Hi", " there", ",", " friend"].iter().enumerate() {
        let seq = 4 + k as u64;
        events.push(Event::new(
            "assistant/chunk",
            seq,
            20 + 3 * k as i64,
            json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}}),
        ));
    }
    events.push(Event::appended(
        "assistant/message",
        8,
        40,
        assistant_data(1, 1, "a1", "Hi there, friend", "p", "m"),
    ));
    events.push(Event::new("step/end", 9, 41, json!({"turn": 1, "step": 1})));
    events.push(Event::new("turn/end", 10, 42, turn_end_data(1)));
    // As a reader sees them: an event read back remembers the key order of its line, so a constructed
    // event is compared in that same form.
    events
        .into_iter()
        .map(|e| Event::from_value(e.to_value()).unwrap())
        .collect()
}

fn stored_options() -> ReadOptions {
    ReadOptions {
        crash_closers: false,
        ..ReadOptions::default()
    }
}

fn read_events(path: &Path) -> Vec<Event> {
    let log = read_log(path, &stored_options()).unwrap();
    assert!(log.torn_tail.is_none(), "{:?}", log.torn_tail);
    log.events
}

fn write_session(
    root: &Path,
    h: SessionHeader,
    opts: WriteOptions,
    batches: &[&[Event]],
) -> PathBuf {
    let mut writer = LogWriter::create(root, h, opts).unwrap();
    for batch in batches {
        writer.append(batch).unwrap();
    }
    writer.path().to_path_buf()
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn problem_for<'a>(problems: &'a [LogError], path: &Path) -> &'a LogError {
    problems
        .iter()
        .find(|p| p.path.as_deref() == Some(path))
        .unwrap_or_else(|| panic!("no problem names {}: {problems:#?}", path.display()))
}

// ---------------------------------------------------------------------------------------------------------
// Path encoding

#[test]
fn path_encoding_matches_the_spec_examples() {
    assert_eq!(
        project_key("/Users/qyj/work/deepseek-harness").unwrap(),
        "--Users-qyj-work-deepseek-harness--"
    );
    assert_eq!(project_key("C:\\work\\agent").unwrap(), "--C-work-agent--");
    assert_eq!(
        project_key("/开发/~agent").unwrap(),
        "--~5F00~53D1-~007Eagent--"
    );
    assert_eq!(project_key("/").unwrap(), "--root--");
    assert_eq!(project_key("/a/😀b").unwrap(), "--a-~D83D~DE00b--");
    assert!(project_key("").is_err());
    assert_eq!(project_dir_name(None).unwrap(), "_no-cwd");
    assert_eq!(encode_segment(".").unwrap(), "~002E");
    assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
    assert_eq!(encode_segment("id:1~x").unwrap(), "id~003A1~007Ex");
    assert!(encode_segment("").is_err());
    let path = session_log_path(
        Path::new("/root"),
        &header("s/1", Some("/w")),
        Compression::Zstd,
    )
    .unwrap();
    assert_eq!(path, Path::new("/root/--w--/s~002F1/session.jsonl.zstd"));
}

// ---------------------------------------------------------------------------------------------------------
// Discovery

#[test]
fn a_missing_root_lists_nothing_and_finds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = SessionsRoot::new(dir.path().join("absent"));
    let listing = root.list().unwrap();
    assert!(listing.sessions.is_empty() && listing.problems.is_empty());
    assert_eq!(root.find("x").unwrap(), None);
}

#[test]
fn a_root_that_is_not_a_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, b"x").unwrap();
    let err = SessionsRoot::new(&file).list().unwrap_err();
    assert_eq!(err.path.as_deref(), Some(file.as_path()));
    assert!(SessionsRoot::new(&file).find("x").is_err());
}

/// A root with three good sessions (raw, zstd, and a lenient template header) next to every kind of problem.
struct Messy {
    _dir: tempfile::TempDir,
    root: PathBuf,
    raw: PathBuf,
    zstd: PathBuf,
    lenient: PathBuf,
    flat: PathBuf,
    mixed_dir: PathBuf,
    bad: PathBuf,
    moved: PathBuf,
    dups: [PathBuf; 2],
}

fn messy_root() -> Messy {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let events = turn_events();
    let raw = write_session(&root, header("s1", Some("/w")), RAW, &[&events]);
    let zstd = write_session(
        &root,
        header("b", None),
        ZSTD,
        &[&events[..4], &events[4..]],
    );

    // A template header (no version, no delegationDepth, placeholder cwd) is read leniently; its project
    // key is computed from the cwd string as it is.
    let lenient = root.join("--~007B~007Bcwd~007D~007D-workspace--/p/session.jsonl");
    fs::create_dir_all(lenient.parent().unwrap()).unwrap();
    fs::write(
        &lenient,
        b"{\"type\":\"session\",\"id\":\"p\",\"createdAt\":1,\"cwd\":\"{{cwd}}/workspace\"}\n",
    )
    .unwrap();

    let project = root.join("--w--");
    let flat = project.join("legacy.jsonl");
    fs::write(&flat, fs::read(&raw).unwrap()).unwrap();
    fs::write(project.join("notes.txt"), b"ignored").unwrap();
    fs::write(root.join("stray.jsonl"), b"ignored: not in a project dir").unwrap();
    fs::create_dir_all(project.join("no-transcript")).unwrap();
    fs::write(
        project.join("s1/session.jsonl.0123456789ab.tmp"),
        b"ignored",
    )
    .unwrap();

    let mixed_dir = project.join("mixed");
    fs::create_dir_all(&mixed_dir).unwrap();
    fs::write(mixed_dir.join("session.jsonl"), b"x\n").unwrap();
    fs::write(mixed_dir.join("session.jsonl.zstd"), b"x").unwrap();

    let bad = project.join("bad/session.jsonl");
    fs::create_dir_all(bad.parent().unwrap()).unwrap();
    fs::write(&bad, b"not json\n").unwrap();

    let moved = project.join("moved/session.jsonl");
    fs::create_dir_all(moved.parent().unwrap()).unwrap();
    fs::copy(&raw, &moved).unwrap();

    let dups = [
        write_session(&root, header("dup", Some("/p1")), RAW, &[&events]),
        write_session(&root, header("dup", Some("/p2")), ZSTD, &[&events]),
    ];
    Messy {
        _dir: dir,
        root,
        raw,
        zstd,
        lenient,
        flat,
        mixed_dir,
        bad,
        moved,
        dups,
    }
}

#[test]
fn every_problem_is_reported_by_path_while_good_sessions_still_list() {
    let m = messy_root();
    let listing = SessionsRoot::new(&m.root).list().unwrap();

    let listed: Vec<(&Path, &str, Compression)> = listing
        .sessions
        .iter()
        .map(|s| (s.path.as_path(), s.header.id.as_str(), s.compression))
        .collect();
    let mut expected = vec![
        (m.raw.as_path(), "s1", Compression::None),
        (m.zstd.as_path(), "b", Compression::Zstd),
        (m.lenient.as_path(), "p", Compression::None),
    ];
    expected.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(listed, expected, "problems: {:#?}", listing.problems);

    assert_eq!(listing.problems.len(), 6, "{:#?}", listing.problems);
    assert_eq!(
        problem_for(&listing.problems, &m.flat).code,
        LogErrorCode::Layout
    );
    assert_eq!(
        problem_for(&listing.problems, &m.mixed_dir).code,
        LogErrorCode::Layout
    );
    assert_eq!(
        problem_for(&listing.problems, &m.bad).code,
        LogErrorCode::HeaderNotJson
    );
    let identity = problem_for(&listing.problems, &m.moved);
    assert_eq!(identity.code, LogErrorCode::Layout);
    assert!(identity.message.contains("identify"), "{identity}");
    for (i, dup) in m.dups.iter().enumerate() {
        let problem = problem_for(&listing.problems, dup);
        assert_eq!(problem.code, LogErrorCode::Layout);
        assert!(
            problem
                .message
                .contains(&m.dups[1 - i].display().to_string()),
            "{problem}"
        );
    }

    let lenient = listing
        .sessions
        .iter()
        .find(|s| s.header.id == "p")
        .unwrap();
    assert_eq!(
        lenient.diagnostics,
        vec![
            HeaderDiagnostic::MissingVersion,
            HeaderDiagnostic::MissingDelegationDepth,
            HeaderDiagnostic::NonAbsoluteCwd("{{cwd}}/workspace".into())
        ]
    );
    for session in &listing.sessions {
        assert_eq!(session.revision, Revision::of(&session.path).unwrap());
    }
}

#[test]
fn find_looks_up_by_id_in_either_encoding_and_reports_layout_errors() {
    let m = messy_root();
    let root = SessionsRoot::new(&m.root);

    let raw = root.find("s1").unwrap().unwrap();
    assert_eq!(
        (raw.path.as_path(), raw.compression),
        (m.raw.as_path(), Compression::None)
    );
    assert_eq!(raw.header, header("s1", Some("/w")));
    assert_eq!(
        raw.revision.to_string(),
        Revision::of(&m.raw).unwrap().to_string()
    );
    let zstd = root.find("b").unwrap().unwrap();
    assert_eq!(
        (zstd.path.as_path(), zstd.compression),
        (m.zstd.as_path(), Compression::Zstd)
    );
    assert_eq!(root.find("p").unwrap().unwrap().diagnostics.len(), 3);
    assert_eq!(root.find("nope").unwrap(), None);

    assert_eq!(root.find("dup").unwrap_err().code, LogErrorCode::Layout);
    assert_eq!(root.find("mixed").unwrap_err().code, LogErrorCode::Layout);
    let flat = root.find("legacy").unwrap_err();
    assert_eq!(
        (flat.code, flat.path.as_deref()),
        (LogErrorCode::Layout, Some(m.flat.as_path()))
    );
    assert_eq!(
        root.find("moved").unwrap_err().code,
        LogErrorCode::IdMismatch
    );
    assert_eq!(
        root.find("bad").unwrap_err().code,
        LogErrorCode::HeaderNotJson
    );
    assert_eq!(root.find("").unwrap(), None);
}

#[test]
fn find_by_an_id_too_long_or_unencodable_for_a_file_name_is_not_found() {
    let m = messy_root();
    let root = SessionsRoot::new(&m.root);
    // 300 bytes; 60 slashes that encode to 300 bytes; 250 bytes whose directory name fits but whose flat
    // artifact name would not: all "not found", never "File name too long".
    for id in ["x".repeat(300), "/".repeat(60), "a".repeat(250)] {
        assert_eq!(root.find(&id).unwrap(), None, "{} bytes", id.len());
    }
}

#[test]
fn id_mismatch_messages_quote_at_most_a_clip_of_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let path = write_session(
        dir.path(),
        header("s1", Some("/w")),
        WriteOptions::default(),
        &[&events],
    );
    let opts = ReadOptions {
        expected_id: Some("é".repeat(5000)),
        ..ReadOptions::default()
    };
    let err = read_log(&path, &opts).unwrap_err();
    assert_eq!(err.code, LogErrorCode::IdMismatch);
    assert!(err.message.len() < 400, "{}", err.message);
    assert!(
        err.message.contains("10000 bytes in all"),
        "{}",
        err.message
    );
}

#[test]
fn find_checks_that_the_header_cwd_identifies_the_project_dir() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_session(dir.path(), header("s2", Some("/w")), RAW, &[&turn_events()]);
    let elsewhere = dir.path().join("--other--/s2/session.jsonl");
    fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    fs::rename(&written, &elsewhere).unwrap();
    let err = SessionsRoot::new(dir.path()).find("s2").unwrap_err();
    assert_eq!(
        (err.code, err.path.as_deref()),
        (LogErrorCode::Layout, Some(elsewhere.as_path()))
    );
}

#[test]
fn the_revision_changes_when_a_log_grows() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let mut writer = LogWriter::create(dir.path(), header("r", None), ZSTD).unwrap();
    writer.append(&events[..3]).unwrap();
    let before = SessionsRoot::new(dir.path())
        .find("r")
        .unwrap()
        .unwrap()
        .revision;
    writer.append(&events[3..]).unwrap();
    let after = Revision::of(writer.path()).unwrap();
    assert_ne!(before, after);
    assert_eq!((before.dev, before.ino), (after.dev, after.ino));
    assert!(after.size > before.size);
}

// ---------------------------------------------------------------------------------------------------------
// Writer: the durability protocol

#[test]
fn nothing_is_on_disk_before_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let writer =
        LogWriter::create(&root, header("s", Some("/w")), WriteOptions::default()).unwrap();
    assert!(!root.exists());
    assert!(!writer.is_published());
    assert_eq!(writer.next_seq(), 0);
    assert_eq!(writer.path(), root.join("--w--/s/session.jsonl.zstd"));
    drop(writer);
    assert!(!root.exists());
    assert_eq!(SessionsRoot::new(&root).list().unwrap().sessions.len(), 0);
}

#[test]
fn raw_output_is_exactly_the_header_and_lf_terminated_batches() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let path = write_session(
        dir.path(),
        header("s1", Some("/w")),
        RAW,
        &[&events[..2], &events[2..4]],
    );
    let expected = concat!(
        r#"{"type":"session","version":0,"id":"s1","createdAt":1000,"cwd":"/w","delegationDepth":0}"#,
        "\n",
        r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#,
        "\n",
        r#"{"type":"user/message","seq":1,"time":11,"data":{"id":"u1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"step/start","seq":2,"time":12,"data":{"turn":1,"step":1}}"#,
        "\n",
        r#"{"type":"request/header","seq":3,"time":13,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}"#,
        "\n",
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
}

#[test]
fn packed_raw_output_stores_a_delta_run_as_one_row() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let opts = WriteOptions {
        compression: Compression::None,
        pack_chunks: true,
    };
    let path = write_session(dir.path(), header("s1", Some("/w")), opts, &[&events]);
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 4 + 1 + 3);
    assert_eq!(
        lines[5],
        r#"{"type":"text-chunks","seq0":4,"time0":20,"data":{"turn":1,"step":1,"index":0,"dt":[3,3,3],"texts":["Hi"," there",","," friend"]}}"#
    );
    assert_eq!(read_events(&path), events);
}

#[test]
fn zstd_output_is_a_header_frame_then_one_frame_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let opts = WriteOptions {
        compression: Compression::Zstd,
        pack_chunks: false,
    };
    let h = header("z", Some("/w"));
    let path = write_session(dir.path(), h.clone(), opts, &[&events[..1], &events[1..3]]);
    let line = |e: &Event| e.to_json_line() + "\n";
    let expected = [
        compress_frame(format!("{}\n", h.to_json_line()).as_bytes()),
        compress_frame(line(&events[0]).as_bytes()),
        compress_frame((line(&events[1]) + &line(&events[2])).as_bytes()),
    ]
    .concat();
    assert_eq!(fs::read(&path).unwrap(), expected);
}

#[test]
fn new_directories_are_0700_and_the_transcript_0600() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let path = write_session(&root, header("s", Some("/w")), ZSTD, &[&turn_events()[..1]]);
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&root.join("--w--")), 0o700);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn publish_never_overwrites_an_existing_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let mut first = LogWriter::create(dir.path(), header("s", Some("/w")), RAW).unwrap();
    let mut second = LogWriter::create(dir.path(), header("s", Some("/w")), RAW).unwrap();
    first.append(&events[..2]).unwrap();
    let written = fs::read(first.path()).unwrap();

    let err = second.append(&events[..1]).unwrap_err();
    assert_eq!(err.code, LogErrorCode::InvalidWrite);
    assert_eq!(err.path.as_deref(), Some(first.path()));
    assert!(!second.is_published());
    assert_eq!(fs::read(first.path()).unwrap(), written);
    assert_eq!(dir_names(first.path().parent().unwrap()), ["session.jsonl"]);

    // Refused up front once the transcript exists, in either encoding.
    for opts in [RAW, ZSTD] {
        let err = LogWriter::create(dir.path(), header("s", Some("/w")), opts).unwrap_err();
        assert_eq!(err.code, LogErrorCode::InvalidWrite);
    }
    assert_eq!(
        LogWriter::create_at(first.path(), header("s", Some("/w")), RAW)
            .unwrap_err()
            .code,
        LogErrorCode::InvalidWrite
    );
}

#[test]
fn temp_files_are_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    for (id, opts) in [("raw", RAW), ("zstd", ZSTD)] {
        let path = write_session(
            dir.path(),
            header(id, Some("/w")),
            opts,
            &[&events[..3], &events[3..]],
        );
        assert_eq!(
            dir_names(path.parent().unwrap()),
            [opts.compression.transcript_name()]
        );
    }
}

#[test]
fn invalid_batches_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let mut writer = LogWriter::create(dir.path(), header("s", Some("/w")), RAW).unwrap();
    let gap = [events[0].clone(), events[2].clone()];
    for bad in [&[][..], &events[1..2], &gap] {
        let err = writer.append(bad).unwrap_err();
        assert_eq!(err.code, LogErrorCode::InvalidWrite, "{err}");
        assert!(!dir.path().join("--w--").exists());
        assert_eq!(writer.next_seq(), 0);
    }
    writer.append(&events[..2]).unwrap();
    let written = fs::read(writer.path()).unwrap();
    for bad in [
        &[][..],
        &events[..1],
        &events[3..4],
        &[events[2].clone(), events[2].clone()],
    ] {
        assert_eq!(
            writer.append(bad).unwrap_err().code,
            LogErrorCode::InvalidWrite
        );
        assert_eq!(fs::read(writer.path()).unwrap(), written);
        assert_eq!(writer.next_seq(), 2);
    }
    let mut unsafe_time = events[2].clone();
    unsafe_time.time = i64::MAX;
    assert_eq!(
        writer.append(&[unsafe_time]).unwrap_err().code,
        LogErrorCode::InvalidWrite
    );
    writer.append(&events[2..]).unwrap();
    assert_eq!(read_events(writer.path()), events);
}

#[test]
fn appends_a_reader_would_refuse_are_refused_before_a_byte_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let mut no_id = events[1].clone();
    no_id.data.as_object_mut().unwrap().remove("id");
    let mut no_role = events[1].clone();
    no_role.data.as_object_mut().unwrap().remove("role");
    let mut unknown = events[2].clone();
    unknown.kind = "step/sideways".into();
    let mut replaces_nothing = events[1].clone();
    replaces_nothing.surface_op = Some(json!({"replace": {"start": 7, "end": 9}}));
    let cases = [
        (no_id, LogErrorCode::InvalidMessage),
        (no_role, LogErrorCode::InvalidMessage),
        (unknown, LogErrorCode::UnknownEventType),
        (replaces_nothing, LogErrorCode::InvalidSurface),
    ];
    for opts in [RAW, ZSTD] {
        let id = format!("s{:?}", opts.compression);
        let mut writer = LogWriter::create(dir.path(), header(&id, Some("/w")), opts).unwrap();
        // Unpublished: a refused first append publishes nothing.
        let mut unknown_second = cases[2].0.clone();
        unknown_second.seq = 1;
        let err = writer
            .append(&[events[0].clone(), unknown_second])
            .unwrap_err();
        assert_eq!(err.code, LogErrorCode::UnknownEventType);
        assert!(!writer.is_published() && !writer.path().exists());
        writer.append(&events[..1]).unwrap();
        let written = fs::read(writer.path()).unwrap();
        for (bad, code) in &cases {
            // The bad event is the second of the batch: the good one before it is refused with it.
            let err = writer
                .append(&[events[1].clone(), {
                    let mut b = bad.clone();
                    b.seq = 2;
                    b
                }])
                .unwrap_err();
            assert_eq!((err.code, err.seq), (*code, Some(2)), "{err}");
            assert_eq!(err.path.as_deref(), Some(writer.path()));
            assert_eq!(fs::read(writer.path()).unwrap(), written, "{err}");
            assert_eq!(writer.next_seq(), 1);
        }
        writer.append(&events[1..]).unwrap();
        assert_eq!(read_events(writer.path()), events);
        assert_eq!(writer.validator().fold().folded(), events.len() as u64);
    }
}

#[test]
fn open_append_continues_validation_from_the_stored_fold() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let path = write_session(dir.path(), header("s", Some("/w")), RAW, &[&events[..9]]);
    let mut writer = LogWriter::open_append(&path, RAW).unwrap();
    assert_eq!(writer.validator().fold().folded(), 9);
    // Replacing a range the stored surface does not hold is the fold's refusal, seen across the reopen.
    let mut bad = events[9].clone();
    bad.kind = "assistant/message".into();
    bad.data = events[8].data.clone();
    bad.surface_op = Some(json!({"replace": {"start": 100, "end": 101}}));
    let before = fs::read(&path).unwrap();
    assert_eq!(
        writer.append(&[bad]).unwrap_err().code,
        LogErrorCode::InvalidSurface
    );
    assert_eq!(fs::read(&path).unwrap(), before);
    writer.append(&events[9..]).unwrap();
    assert_eq!(read_events(&path), events);
}

#[test]
fn headers_that_are_not_strict_v0_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut relative = header("s", Some("work"));
    assert_eq!(
        LogWriter::create(dir.path(), relative.clone(), RAW)
            .unwrap_err()
            .code,
        LogErrorCode::InvalidWrite
    );
    relative.cwd = None;
    relative.id = String::new();
    assert_eq!(
        LogWriter::create(dir.path(), relative, RAW)
            .unwrap_err()
            .code,
        LogErrorCode::InvalidWrite
    );
    assert_eq!(dir_names(dir.path()).len(), 0);
}

// ---------------------------------------------------------------------------------------------------------
// Writer: rollback through an injected failing disk

#[derive(Clone, Copy, Default)]
struct Faults {
    /// Write half the buffer, then fail.
    write: bool,
    sync: bool,
    truncate: bool,
}

thread_local! {
    static FAULTS: Cell<Faults> = Cell::new(Faults::default());
}

fn inject(faults: Faults) {
    FAULTS.with(|f| f.set(faults));
}

/// A real file whose operations fail on demand.
struct FlakyFile(File);

impl LogFile for FlakyFile {
    fn create_new(path: &Path) -> io::Result<Self> {
        <File as LogFile>::create_new(path).map(FlakyFile)
    }
    fn open_append(path: &Path) -> io::Result<Self> {
        <File as LogFile>::open_append(path).map(FlakyFile)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if FAULTS.with(Cell::get).write {
            LogFile::write_all(&mut self.0, &buf[..buf.len() / 2])?;
            return Err(io::Error::other("injected write failure"));
        }
        LogFile::write_all(&mut self.0, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        if FAULTS.with(Cell::get).sync {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.0.sync()
    }
    fn size(&self) -> io::Result<u64> {
        self.0.size()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        if FAULTS.with(Cell::get).truncate {
            return Err(io::Error::other("injected truncate failure"));
        }
        LogFile::truncate(&mut self.0, len)
    }
}

#[test]
fn a_failed_append_is_truncated_back_and_the_writer_stays_usable() {
    for opts in [RAW, ZSTD] {
        let dir = tempfile::tempdir().unwrap();
        let events = turn_events();
        let mut writer =
            LogWriter::<FlakyFile>::create_with(dir.path(), header("s", Some("/w")), opts).unwrap();
        writer.append(&events[..2]).unwrap();
        let committed = fs::read(writer.path()).unwrap();

        for faults in [
            Faults {
                write: true,
                ..Faults::default()
            },
            Faults {
                sync: true,
                ..Faults::default()
            },
        ] {
            inject(faults);
            let err = writer.append(&events[2..5]).unwrap_err();
            assert_eq!(err.code, LogErrorCode::Io);
            assert_eq!(err.path.as_deref(), Some(writer.path()));
            inject(Faults::default());
            assert_eq!(
                fs::read(writer.path()).unwrap(),
                committed,
                "rolled back to the last committed batch"
            );
            assert_eq!(writer.next_seq(), 2);
        }

        writer.append(&events[2..5]).unwrap();
        writer.append(&events[5..]).unwrap();
        assert_eq!(read_events(writer.path()), events);
    }
}

#[test]
fn a_failed_first_append_publishes_nothing_and_can_be_retried() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let mut writer =
        LogWriter::<FlakyFile>::create_with(dir.path(), header("s", Some("/w")), ZSTD).unwrap();
    inject(Faults {
        write: true,
        ..Faults::default()
    });
    assert_eq!(
        writer.append(&events[..2]).unwrap_err().code,
        LogErrorCode::Io
    );
    inject(Faults::default());
    assert!(!writer.is_published());
    let session_dir = writer.path().parent().unwrap().to_path_buf();
    assert_eq!(
        dir_names(&session_dir).len(),
        0,
        "no transcript, no temp file"
    );
    writer.append(&events[..2]).unwrap();
    writer.append(&events[2..]).unwrap();
    assert_eq!(read_events(writer.path()), events);
}

#[test]
fn a_rollback_that_fails_leaves_the_writer_refusing_appends() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let mut writer =
        LogWriter::<FlakyFile>::create_with(dir.path(), header("s", Some("/w")), RAW).unwrap();
    writer.append(&events[..2]).unwrap();
    inject(Faults {
        write: true,
        truncate: true,
        ..Faults::default()
    });
    assert_eq!(
        writer.append(&events[2..4]).unwrap_err().code,
        LogErrorCode::Io
    );
    inject(Faults::default());
    assert!(
        writer.append(&events[2..4]).is_err(),
        "a writer that could not roll back must not append again"
    );
}

// ---------------------------------------------------------------------------------------------------------
// Writer: continuing a log, and round trips

#[test]
fn open_append_continues_after_the_last_stored_event() {
    for opts in [RAW, ZSTD] {
        let dir = tempfile::tempdir().unwrap();
        let events = turn_events();
        let path = write_session(dir.path(), header("s", Some("/w")), opts, &[&events[..5]]);
        // The caller's compression is overridden by the log's own.
        let other = WriteOptions {
            compression: if opts.compression == Compression::None {
                Compression::Zstd
            } else {
                Compression::None
            },
            ..opts
        };
        let mut writer = LogWriter::open_append(&path, other).unwrap();
        assert!(writer.is_published());
        assert_eq!(writer.next_seq(), 5);
        assert_eq!(writer.header(), &header("s", Some("/w")));
        assert_eq!(
            writer.append(&events[4..6]).unwrap_err().code,
            LogErrorCode::InvalidWrite
        );
        writer.append(&events[5..]).unwrap();
        assert_eq!(read_events(&path), events);
    }
}

#[test]
fn open_append_refuses_a_torn_or_unreadable_log() {
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let path = write_session(dir.path(), header("s", Some("/w")), RAW, &[&events[..3]]);
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"step/end","se"#);
    fs::write(&path, &bytes).unwrap();
    assert!(LogWriter::open_append(&path, RAW).is_err());
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "a refused log is left as it is"
    );

    fs::write(&path, b"not json\n").unwrap();
    assert!(LogWriter::open_append(&path, RAW).is_err());
    assert!(LogWriter::open_append(&dir.path().join("absent"), RAW).is_err());
}

#[test]
fn write_then_read_gives_identical_events_in_every_encoding() {
    let events = turn_events();
    for compression in [Compression::None, Compression::Zstd] {
        for pack_chunks in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let opts = WriteOptions {
                compression,
                pack_chunks,
            };
            // Batch boundaries fall inside the delta run, so packing has to stop at them.
            let path = write_session(
                dir.path(),
                header("rt", Some("/w")),
                opts,
                &[&events[..5], &events[5..7], &events[7..]],
            );
            let log = read_log(&path, &stored_options()).unwrap();
            assert_eq!(log.compression, compression);
            assert_eq!(log.header, header("rt", Some("/w")));
            assert!(log.diagnostics.is_empty());
            assert_eq!(
                log.events, events,
                "{compression:?} pack_chunks={pack_chunks}"
            );

            // read → write → read: writing what was read reproduces it.
            let copy = dir.path().join("copy").join(compression.transcript_name());
            let mut writer = LogWriter::create_at(&copy, log.header.clone(), opts).unwrap();
            writer.append(&log.events).unwrap();
            assert_eq!(read_events(&copy), events);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Writer: two writers of one log

#[test]
fn two_writers_of_one_log_never_take_the_same_seq() {
    for opts in [RAW, ZSTD] {
        let dir = tempfile::tempdir().unwrap();
        let events = turn_events();
        let path = write_session(dir.path(), header("s", Some("/w")), opts, &[&events[..3]]);
        let mut first = LogWriter::open_append(&path, opts).unwrap();
        let mut second = LogWriter::open_append(&path, opts).unwrap();
        first.append(&events[3..5]).unwrap();
        let before = fs::read(&path).unwrap();
        // The second writer still believes the log ends at seq 3: its batch would reuse seqs 3 and 4.
        let err = second.append(&events[3..5]).unwrap_err();
        assert_eq!(err.code, LogErrorCode::ConcurrentWrite, "{err}");
        assert_eq!(err.code.as_str(), "LOG_CONCURRENT_WRITE");
        assert!(err.message.contains("another writer appended"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), before, "nothing was written");
        assert_eq!(read_events(&path), events[..5]);
        // The first writer goes on; a writer opened now continues from the real end.
        first.append(&events[5..8]).unwrap();
        let mut third = LogWriter::open_append(&path, opts).unwrap();
        assert_eq!(third.next_seq(), 8);
        third.append(&events[8..]).unwrap();
        assert_eq!(read_events(&path), events);
    }
}

#[test]
fn an_append_waits_for_a_writer_holding_the_log_then_refuses_cleanly() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let events = turn_events();
    let path = write_session(dir.path(), header("s", Some("/w")), RAW, &[&events[..3]]);
    let mut writer = LogWriter::open_append(&path, RAW).unwrap();
    let holder = File::open(&path).unwrap();
    // SAFETY: the descriptor is open for the call.
    assert_eq!(
        unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let before = fs::read(&path).unwrap();
    let started = std::time::Instant::now();
    let err = writer.append(&events[3..5]).unwrap_err();
    assert!(started.elapsed() >= dsh_codec::log::write::LOCK_WAIT);
    assert_eq!(err.code, LogErrorCode::ConcurrentWrite, "{err}");
    assert!(err.message.contains("held this log"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before);
    assert!(
        LogWriter::open_append(&path, RAW).is_err(),
        "a log held by another writer is not read for continuing"
    );
    drop(holder);
    // Released: the same writer appends (nothing else changed the log).
    writer.append(&events[3..5]).unwrap();
    assert_eq!(read_events(&path), events[..5]);
}
