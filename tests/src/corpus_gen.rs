//! A realistic, deterministic DSH corpus for the search benchmark: thousands of sessions in a sessions
//! root (spec §1.1), written with `host_api`'s own [`LogWriter`] so every log is strict v0.
//!
//! The event mix follows the real fixtures in `../shared/fixtures/dsh-real`: turns with user messages,
//! assistant chunk streams (packed by the writer into chunk rows, spec §1.6), assistant messages with
//! reasoning, text and tool calls, tool calls and long tool results (Rust panics, Python tracebacks, JS
//! errors, compiler errors, CI logs), todo lists, turn ends that failed, compactions (a checkpoint
//! `user/message` replacing a prefix of the surface) and tool-result prunes, so shadowed events exist.
//! About one message in ten is Chinese, every fourth session is zstd, a few sessions end inside an open
//! turn the way a live or crashed session does.
//!
//! Search-relevant vocabulary: common words are drawn with a steep skew, so "error" is in a large share
//! of documents; rare tokens (`rq`, a two-digit number and six base-36 characters: a shape nothing else
//! produces) are planted in 1–5 documents each and recorded, so a benchmark knows the exact answer to a rare-term query.
//!
//! [`ensure_corpus`] reuses a folder whose marker file (`corpus.json`) records the same parameters and
//! generator version, and otherwise regenerates it. It only ever deletes a folder it stamped as its own.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use dsh_codec::build::{
    assistant_content_data, checkpoint_text, compaction_marker_data, compaction_summary_data,
    prune_data, pruned_result_data, request_header_data, step_data, title_data, tool_call_data,
    tool_result_data, turn_end_with, turn_start_data, user_data, Script,
};
use dsh_codec::log::packed::pack;
use dsh_codec::log::write::{LogFile, LogWriter, WriteOptions};
use dsh_codec::log::{Compression, LogError, SessionHeader};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The provider and model every generated session names.
const PROVIDER: &str = "deepseek-official";
const MODEL: &str = "deepseek-v4-flash";

/// Bumped whenever the output for given parameters changes, so an old corpus on disk is regenerated.
pub const GENERATOR_VERSION: u32 = 4;

/// The marker file that records what a corpus folder holds; written last, so its presence means done.
pub const MARKER: &str = "corpus.json";
/// Written first: the folder is this generator's, so regenerating may delete its `sessions/`.
const STAMP: &str = ".corpus-gen";
/// How many distinct rare terms are planted (the benchmark asks for at least 50).
pub const RARE_TERMS: usize = 100;
/// What a turn is assumed to weigh before a session has written one (about the measured mean).
const FIRST_TURN_GUESS: u64 = 30_000;
/// The smallest average session the generator can honour (one short turn).
const MIN_SESSION_BYTES: u64 = 4_000;

/// What to generate. Equal parameters (and generator version) give byte-identical logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusParams {
    pub seed: u64,
    pub sessions: u64,
    /// Total uncompressed JSONL bytes to aim for (what a reader parses), spread unevenly over sessions.
    pub target_bytes: u64,
}

impl CorpusParams {
    /// The benchmark's full size: 10,000 sessions, about 1 GB of JSONL.
    pub fn full() -> Self {
        Self {
            seed: 0x05E5_510B,
            sessions: 10_000,
            target_bytes: 1_000_000_000,
        }
    }

    /// `target_bytes` of JSONL at the full corpus's average session size (100 kB).
    pub fn sized(target_bytes: u64) -> Self {
        Self {
            sessions: (target_bytes / 100_000).max(1),
            target_bytes,
            ..Self::full()
        }
    }
}

/// Why a corpus could not be generated or reused.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("invalid corpus parameters: {0}")]
    Params(String),
    #[error("corpus folder {}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
    #[error(
        "corpus folder {} already holds a sessions/ folder this generator did not stamp as its own; \
         refusing to delete it (use an empty or generator-made folder)",
        path.display()
    )]
    Foreign { path: PathBuf },
    #[error("writing session {session}: {source}")]
    Log { session: String, source: LogError },
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> CorpusError + 'a {
    move |source| CorpusError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// One generated session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    /// The transcript, relative to the sessions root.
    pub path: PathBuf,
    pub zstd: bool,
    /// Uncompressed JSONL bytes (header included).
    pub plain_bytes: u64,
    /// Bytes on disk.
    pub file_bytes: u64,
    /// Stored events (crash closers a reader adds to an open turn are not counted).
    pub events: u64,
    /// Ends inside an open turn.
    pub live: bool,
}

/// A planted rare token and where it is: the exact answer to a query for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RareTerm {
    pub term: String,
    /// `(session id, seq)` of every document whose text contains the term, sorted.
    pub documents: Vec<(String, u64)>,
}

impl RareTerm {
    /// The distinct sessions holding the term, sorted.
    pub fn sessions(&self) -> BTreeSet<&str> {
        self.documents.iter().map(|(s, _)| s.as_str()).collect()
    }
}

/// What a corpus folder holds (the content of its marker file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusInfo {
    pub generator: u32,
    pub params: CorpusParams,
    pub sessions: Vec<SessionInfo>,
    pub rare_terms: Vec<RareTerm>,
}

impl CorpusInfo {
    pub fn plain_bytes(&self) -> u64 {
        self.sessions.iter().map(|s| s.plain_bytes).sum()
    }

    pub fn file_bytes(&self) -> u64 {
        self.sessions.iter().map(|s| s.file_bytes).sum()
    }

    pub fn events(&self) -> u64 {
        self.sessions.iter().map(|s| s.events).sum()
    }

    /// The sessions root inside a corpus folder.
    pub fn root(dir: &Path) -> PathBuf {
        dir.join("sessions")
    }
}

/// Returns the corpus in `dir`, generating it unless the marker there records the same parameters and
/// generator version.
pub fn ensure_corpus(dir: &Path, params: CorpusParams) -> Result<CorpusInfo, CorpusError> {
    if let Some(info) = read_marker(dir) {
        if info.params == params && info.generator == GENERATOR_VERSION {
            return Ok(info);
        }
    }
    generate(dir, params)
}

/// The marker's content, or `None` when it is absent or unreadable (then the corpus is regenerated).
fn read_marker(dir: &Path) -> Option<CorpusInfo> {
    let text = fs::read_to_string(dir.join(MARKER)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Generates the corpus afresh into `dir/sessions` and writes the marker.
pub fn generate(dir: &Path, params: CorpusParams) -> Result<CorpusInfo, CorpusError> {
    if params.sessions == 0 {
        return Err(CorpusError::Params("sessions must be at least 1".into()));
    }
    if params.target_bytes / params.sessions < MIN_SESSION_BYTES {
        return Err(CorpusError::Params(format!(
            "{} bytes over {} sessions is under {MIN_SESSION_BYTES} bytes a session",
            params.target_bytes, params.sessions
        )));
    }
    fs::create_dir_all(dir).map_err(io_err(dir, "creating the folder"))?;
    let root = CorpusInfo::root(dir);
    let stamp = dir.join(STAMP);
    if root.exists() {
        if !stamp.is_file() {
            return Err(CorpusError::Foreign {
                path: dir.to_path_buf(),
            });
        }
        // Remove the marker first: a crash during the cleanup must not leave a marker over half a corpus.
        match fs::remove_file(dir.join(MARKER)) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                return Err(io_err(dir, "removing the old marker")(err))
            }
            _ => {}
        }
        fs::remove_dir_all(&root).map_err(io_err(&root, "removing the old sessions"))?;
    }
    fs::write(&stamp, b"generated by tests::corpus_gen\n").map_err(io_err(&stamp, "stamping"))?;

    let plan = RarePlan::new(params);
    let mut sessions = Vec::with_capacity(params.sessions as usize);
    let mut planted: BTreeMap<String, BTreeSet<(String, u64)>> = BTreeMap::new();
    let average = params.target_bytes / params.sessions;
    for index in 0..params.sessions {
        let terms = plan.for_session(index);
        let (info, docs) =
            SessionGen::new(params.seed, index, average, terms).write(&root, None)?;
        for (term, seq) in docs {
            planted
                .entry(term)
                .or_default()
                .insert((info.id.clone(), seq));
        }
        sessions.push(info);
    }
    let rare_terms = plan
        .terms
        .iter()
        .map(|term| RareTerm {
            term: term.clone(),
            documents: planted
                .get(term)
                .map(|d| d.iter().cloned().collect())
                .unwrap_or_default(),
        })
        .collect();
    let info = CorpusInfo {
        generator: GENERATOR_VERSION,
        params,
        sessions,
        rare_terms,
    };
    write_marker(dir, &info)?;
    Ok(info)
}

/// The cwd of scratch sessions, so a benchmark can find and remove them: they live in the project
/// directory [`SCRATCH_PROJECT_DIR`] of the sessions root, which no generated session uses.
pub const SCRATCH_CWD: &str = "/bench-scratch";
/// The project directory (spec §1.1) of [`SCRATCH_CWD`].
pub const SCRATCH_PROJECT_DIR: &str = "--bench-scratch--";

/// One session of the generator written on its own (a scratch session, the one large log a reading
/// benchmark measures), with what a corpus would decide for it set by the caller instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOptions {
    pub seed: u64,
    /// Which of the generator's random streams: same seed and index, same events.
    pub index: u64,
    /// Uncompressed JSONL bytes to aim for (the session ends on the turn that reaches it).
    pub plain_bytes: u64,
    pub compression: Compression,
    /// `None`: the generator picks a project folder, or none, as for a corpus session.
    pub cwd: Option<String>,
}

/// Writes one closed session (no open turn) into `root` as `options` say. The same options with another
/// compression give the same events, so a benchmark can compare encodings on one log.
pub fn write_session(root: &Path, options: &SessionOptions) -> Result<SessionInfo, CorpusError> {
    let mut session = SessionGen::new(options.seed, options.index, options.plain_bytes, Vec::new());
    session.budget = options.plain_bytes;
    session.zstd = options.compression == Compression::Zstd;
    session.live = false;
    let (info, _) = session.write(root, options.cwd.as_deref())?;
    Ok(info)
}

/// Writes one more realistic session of about `plain_bytes` into `root`, raw and closed (no open turn),
/// under [`SCRATCH_CWD`]: a log a benchmark may append to and delete without touching the corpus the
/// marker describes. `salt` (taken mod 1000) picks which session: same salt, same log.
pub fn write_scratch_session(
    root: &Path,
    seed: u64,
    salt: u64,
    plain_bytes: u64,
) -> Result<SessionInfo, CorpusError> {
    // Stream numbers from the top of the range never meet a corpus session's index, and these ones
    // (3 mod 4, 15 mod 100) are neither zstd nor live in `SessionGen::new`.
    let options = SessionOptions {
        seed,
        index: u64::MAX - 400 - (salt % 1000) * 400,
        plain_bytes,
        compression: Compression::None,
        cwd: Some(SCRATCH_CWD.to_string()),
    };
    write_session(root, &options)
}

/// Writes the marker through a temporary file and a rename, so it is either whole or absent.
fn write_marker(dir: &Path, info: &CorpusInfo) -> Result<(), CorpusError> {
    let tmp = dir.join(format!("{MARKER}.tmp"));
    let text = serde_json::to_string(info).map_err(|err| CorpusError::Io {
        path: tmp.clone(),
        what: "serialising the marker",
        source: io::Error::other(err),
    })?;
    fs::write(&tmp, text).map_err(io_err(&tmp, "writing the marker"))?;
    let marker = dir.join(MARKER);
    fs::rename(&tmp, &marker).map_err(io_err(&marker, "publishing the marker"))
}

// -------------------------------------------------------------------------------------------------
// Randomness and vocabulary

/// SplitMix64: tiny, fast and deterministic across platforms.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Self(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    /// A word, skewed so the first words of [`WORDS`] are far more frequent than the last.
    fn word(&mut self) -> &'static str {
        let u = self.unit();
        WORDS[((u * u * u) * WORDS.len() as f64) as usize]
    }

    fn hex(&mut self, digits: usize) -> String {
        let mut s = String::with_capacity(digits);
        while s.len() < digits {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(digits);
        s
    }
}

/// Developer English, most frequent first (the skew in [`Rng::word`] favours the front).
const WORDS: &[&str] = &[
    "the",
    "to",
    "error",
    "test",
    "file",
    "and",
    "in",
    "is",
    "a",
    "of",
    "fix",
    "build",
    "function",
    "failed",
    "run",
    "check",
    "code",
    "this",
    "module",
    "value",
    "type",
    "with",
    "for",
    "it",
    "config",
    "return",
    "that",
    "crate",
    "path",
    "the",
    "warning",
    "cargo",
    "index",
    "session",
    "query",
    "search",
    "result",
    "string",
    "method",
    "trait",
    "struct",
    "async",
    "await",
    "thread",
    "lock",
    "panic",
    "update",
    "compile",
    "import",
    "package",
    "version",
    "dependency",
    "release",
    "debug",
    "log",
    "output",
    "input",
    "stream",
    "buffer",
    "parse",
    "json",
    "schema",
    "table",
    "column",
    "row",
    "database",
    "sqlite",
    "migration",
    "server",
    "client",
    "request",
    "response",
    "timeout",
    "retry",
    "connection",
    "socket",
    "port",
    "handler",
    "route",
    "token",
    "user",
    "cache",
    "memory",
    "leak",
    "allocation",
    "pointer",
    "reference",
    "lifetime",
    "borrow",
    "mutable",
    "closure",
    "iterator",
    "vector",
    "slice",
    "option",
    "unwrap",
    "expect",
    "assert",
    "mock",
    "fixture",
    "snapshot",
    "coverage",
    "lint",
    "clippy",
    "format",
    "refactor",
    "rename",
    "extract",
    "inline",
    "split",
    "merge",
    "branch",
    "commit",
    "rebase",
    "conflict",
    "diff",
    "patch",
    "review",
    "pipeline",
    "deploy",
    "container",
    "docker",
    "image",
    "volume",
    "network",
    "cluster",
    "node",
    "worker",
    "queue",
    "job",
    "schedule",
    "cron",
    "event",
    "listener",
    "callback",
    "promise",
    "future",
    "task",
    "runtime",
    "executor",
    "spawn",
    "channel",
    "sender",
    "receiver",
    "deadlock",
    "race",
    "atomic",
    "mutex",
    "signal",
    "process",
    "exit",
    "status",
    "code",
    "stderr",
    "stdout",
    "shell",
    "script",
    "command",
    "argument",
    "flag",
    "option",
    "environment",
    "variable",
    "secret",
    "key",
    "certificate",
    "tls",
    "header",
    "body",
    "payload",
    "encode",
    "decode",
    "utf8",
    "unicode",
    "bytes",
    "offset",
    "length",
    "capacity",
    "overflow",
    "underflow",
    "bounds",
    "range",
    "limit",
    "page",
    "cursor",
    "generation",
    "compaction",
    "surface",
    "shadowed",
    "current",
    "replace",
    "append",
    "chunk",
    "frame",
    "zstd",
    "compress",
    "checksum",
    "corrupt",
    "torn",
    "tail",
    "repair",
    "recover",
    "backup",
    "restore",
    "benchmark",
    "latency",
    "throughput",
    "profile",
    "flamegraph",
    "optimize",
    "regression",
    "flaky",
    "intermittent",
    "reproduce",
    "minimal",
    "example",
    "documentation",
    "readme",
    "changelog",
];

/// Chinese developer phrases: the CJK share of the corpus.
const CHINESE: &[&str] = &[
    "编译错误",
    "测试失败",
    "请修复这个问题",
    "我们需要重构这个模块",
    "运行时出现异常",
    "内存泄漏",
    "数据库连接超时",
    "索引重建完成",
    "会话日志",
    "搜索结果不正确",
    "请检查配置文件",
    "依赖版本冲突",
    "这个函数返回了空值",
    "线程死锁",
    "性能回退",
    "构建流水线",
    "部署到生产环境",
    "回滚上一次提交",
    "代码审查意见",
    "单元测试覆盖率",
    "集成测试",
    "错误信息如下",
    "堆栈跟踪",
    "请重新运行命令",
    "文件不存在",
    "权限被拒绝",
    "网络请求失败",
    "缓存失效",
    "序列化失败",
    "解析JSON时出错",
    "已经修复",
    "我先看一下日志",
    "然后更新文档",
    "这是一个偶发问题",
    "压缩会话历史",
    "检查点",
];

const PROJECTS: &[&str] = &[
    "/home/dev/work/deepseek-harness",
    "/home/dev/work/session-search",
    "/home/dev/work/billing-api",
    "/home/dev/work/web-frontend",
    "/home/dev/work/infra/terraform",
    "/home/dev/work/ml-pipeline",
    "/home/dev/src/rust-analyzer",
    "/home/dev/src/tokio",
    "/srv/builds/ci-runner",
    "/Users/qyj/work/agent",
    "/home/dev/开发/搜索服务",
    "/home/dev/work/mobile app",
];

const CRATES: &[&str] = &[
    "host_api",
    "plugin_core",
    "sample_host",
    "billing",
    "storage",
    "indexer",
    "gateway",
    "scheduler",
];

fn words(rng: &mut Rng, n: u64) -> String {
    let mut s = String::with_capacity(n as usize * 7);
    for i in 0..n {
        if i > 0 {
            s.push_str(if rng.below(14) == 0 { ". " } else { " " });
        }
        s.push_str(rng.word());
    }
    s
}

fn words_between(rng: &mut Rng, lo: u64, hi: u64) -> String {
    let n = rng.range(lo, hi);
    words(rng, n)
}

fn chinese(rng: &mut Rng, n: u64) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(if rng.below(3) == 0 { '。' } else { '，' });
        }
        s.push_str(rng.pick(CHINESE));
    }
    s.push('。');
    s
}

/// Prose of about `n` words: Chinese one time in ten.
fn prose(rng: &mut Rng, n: u64) -> String {
    if rng.chance(10) {
        chinese(rng, n / 4 + 1)
    } else {
        words(rng, n)
    }
}

fn ident(rng: &mut Rng) -> String {
    format!("{}_{}", rng.word(), rng.word())
}

fn src_path(rng: &mut Rng, ext: &str) -> String {
    format!("src/{}/{}.{ext}", rng.word(), ident(rng))
}

// -------------------------------------------------------------------------------------------------
// Tool output

fn rust_panic(rng: &mut Rng) -> String {
    let krate = rng.pick(CRATES);
    let mut s = format!(
        "running {} tests\nthread '{}::tests::{}' panicked at {}:{}:{}:\ncalled `Result::unwrap()` on an `Err` value: {} {{ kind: {}, message: \"{}\" }}\nstack backtrace:\n",
        rng.range(3, 200),
        krate,
        ident(rng),
        src_path(rng, "rs"),
        rng.range(1, 900),
        rng.range(1, 80),
        rng.pick(&["Error", "ParseError", "IoError", "QueryError"]),
        rng.pick(&["NotFound", "InvalidData", "TimedOut", "PermissionDenied"]),
        words(rng, 6)
    );
    for frame in 0..rng.range(6, 30) {
        s.push_str(&format!(
            "  {frame:>3}: {}::{}::{}\n             at ./{}:{}:{}\n",
            krate,
            rng.word(),
            ident(rng),
            src_path(rng, "rs"),
            rng.range(1, 900),
            rng.range(1, 80)
        ));
    }
    s.push_str(
        "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n",
    );
    s.push_str(&format!(
        "test result: FAILED. {} passed; 1 failed; 0 ignored\nerror: test failed, to rerun pass `-p {} --lib`\n",
        rng.range(2, 300),
        krate.replace('_', "-")
    ));
    s
}

fn python_traceback(rng: &mut Rng) -> String {
    let mut s = String::from("Traceback (most recent call last):\n");
    for _ in 0..rng.range(3, 18) {
        let name = ident(rng);
        s.push_str(&format!(
            "  File \"/app/{}\", line {}, in {name}\n    {} = {}({})\n",
            src_path(rng, "py"),
            rng.range(1, 2000),
            rng.word(),
            ident(rng),
            rng.word()
        ));
    }
    let kind = rng.pick(&[
        "KeyError",
        "ValueError",
        "TypeError",
        "AttributeError",
        "sqlite3.OperationalError",
    ]);
    s.push_str(&format!("{kind}: {}\n", words(rng, 8)));
    s
}

fn js_error(rng: &mut Rng) -> String {
    let mut s = format!(
        "{}: Cannot read properties of undefined (reading '{}')\n",
        rng.pick(&["TypeError", "ReferenceError", "RangeError"]),
        rng.word()
    );
    for _ in 0..rng.range(4, 16) {
        s.push_str(&format!(
            "    at {} (/app/{}:{}:{})\n",
            ident(rng),
            src_path(rng, "ts"),
            rng.range(1, 700),
            rng.range(1, 90)
        ));
    }
    s.push_str(&format!(
        "Node.js v{}.{}.0\n",
        rng.range(18, 24),
        rng.range(0, 12)
    ));
    s
}

fn compiler_error(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..rng.range(1, 6) {
        let line = rng.range(1, 900);
        s.push_str(&format!(
            "error[E0{}]: {}\n  --> {}:{line}:{}\n   |\n{line:>4} |     let {}: {} = {}({});\n   |            ^^^^ expected `{}`, found `{}`\n   |\n",
            rng.range(100, 800),
            words(rng, 4),
            src_path(rng, "rs"),
            rng.range(1, 80),
            rng.word(),
            rng.pick(&["u32", "String", "&str", "Vec<u8>", "Option<usize>"]),
            ident(rng),
            rng.word(),
            rng.pick(&["u32", "String", "usize"]),
            rng.pick(&["&str", "i64", "()"])
        ));
    }
    s.push_str(&format!(
        "error: could not compile `{}` (lib) due to {} previous errors\n",
        rng.pick(CRATES),
        rng.range(1, 9)
    ));
    s
}

fn ci_log(rng: &mut Rng) -> String {
    let mut s = String::new();
    let (h, m) = (rng.range(0, 23), rng.range(0, 59));
    s.push_str(&format!(
        "2026-11-{:02}T{h:02}:{m:02}:00.0000000Z ##[group]Run cargo test --workspace --locked\n",
        rng.range(1, 30)
    ));
    for krate in 0..rng.range(3, 12) {
        s.push_str(&format!(
            "2026-11-30T{h:02}:{m:02}:{krate:02}.{}Z    Compiling {} v0.{}.{} (/home/runner/work/{})\n",
            rng.range(1_000_000, 9_999_999),
            rng.pick(CRATES).replace('_', "-"),
            rng.range(0, 9),
            rng.range(0, 30),
            rng.word()
        ));
    }
    let failed = rng.chance(50);
    for i in 0..rng.range(10, 120) {
        let bad = failed && i % 37 == 5;
        s.push_str(&format!(
            "test {}::{}::{} ... {}\n",
            rng.word(),
            rng.word(),
            ident(rng),
            if bad { "FAILED" } else { "ok" }
        ));
    }
    if failed {
        s.push_str(&rust_panic(rng));
        s.push_str("##[error]Process completed with exit code 101.\n");
    } else {
        s.push_str("test result: ok. all passed; 0 failed; finished\n##[endgroup]\n");
    }
    s
}

fn listing(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..rng.range(5, 60) {
        s.push_str(&format!(
            "{}:{}:    {}\n",
            {
                let ext = rng.pick(&["rs", "ts", "py", "toml"]);
                src_path(rng, ext)
            },
            rng.range(1, 900),
            words_between(rng, 3, 12)
        ));
    }
    s
}

fn git_diff(rng: &mut Rng) -> String {
    let file = src_path(rng, "rs");
    let mut s = format!(
        "diff --git a/{file} b/{file}\nindex {}..{} 100644\n--- a/{file}\n+++ b/{file}\n@@ -{},7 +{},9 @@\n",
        rng.hex(7),
        rng.hex(7),
        rng.range(1, 500),
        rng.range(1, 500)
    );
    for _ in 0..rng.range(5, 40) {
        let sign = rng.pick(&[" ", " ", "+", "-"]);
        s.push_str(&format!("{sign}    {}\n", words_between(rng, 2, 10)));
    }
    s
}

/// A tool's output and whether it failed. Long outputs dominate a real log's text.
fn tool_output(rng: &mut Rng) -> (String, bool) {
    match rng.below(100) {
        0..=11 => (rust_panic(rng), true),
        12..=19 => (python_traceback(rng), true),
        20..=26 => (js_error(rng), true),
        27..=36 => (compiler_error(rng), true),
        37..=51 => {
            let log = ci_log(rng);
            let failed = log.contains("exit code 101");
            (log, failed)
        }
        52..=67 => (listing(rng), false),
        68..=79 => (git_diff(rng), false),
        80..=89 => {
            let n = rng.range(20, 300);
            (prose(rng, n), false)
        }
        _ => (
            format!(
                "    Finished `release` profile [optimized] target(s) in {}.{}s\n",
                rng.range(0, 90),
                rng.range(0, 9)
            ),
            false,
        ),
    }
}

fn tool_call_args(rng: &mut Rng) -> (&'static str, String) {
    let name = rng.pick(&["bash", "bash", "bash", "read_file", "edit_file", "grep"]);
    let args = match name {
        "bash" => json!({
            "command": rng.pick(&["cargo test --workspace", "cargo build --release", "pytest -x tests/",
                "npm run test", "git diff HEAD~1", "rg -n TODO src/", "cargo clippy --all-targets"]),
            "description": words_between(rng, 3, 8),
        }),
        "grep" => json!({"pattern": rng.word(), "path": "src/"}),
        "edit_file" => {
            json!({"path": src_path(rng, "rs"), "old": words(rng, 6), "new": words(rng, 6)})
        }
        _ => json!({"path": src_path(rng, "rs")}),
    };
    (name, args.to_string())
}

/// Splits `text` into streaming deltas of one to three words, the way providers stream.
fn deltas(rng: &mut Rng, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut words_in = 0;
    let mut take = rng.range(1, 3);
    for (i, piece) in text.split_inclusive([' ', '，', '。']).enumerate() {
        current.push_str(piece);
        words_in += 1;
        if words_in >= take || i % 29 == 28 {
            out.push(std::mem::take(&mut current));
            words_in = 0;
            take = rng.range(1, 3);
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

// -------------------------------------------------------------------------------------------------
// Rare terms

/// Which sessions each rare term goes to, decided from the seed before any session is written.
struct RarePlan {
    terms: Vec<String>,
    /// `by_session[i]`: the terms to plant in session `i` (a term listed twice is planted twice).
    by_session: BTreeMap<u64, Vec<String>>,
}

impl RarePlan {
    fn new(params: CorpusParams) -> Self {
        let mut rng = Rng::new(params.seed, u64::MAX);
        let mut terms = Vec::with_capacity(RARE_TERMS);
        let mut by_session: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for i in 0..RARE_TERMS {
            // `rq` + base 36 never comes out of the vocabulary, the hex ids or the Chinese phrases.
            let mut term = format!("rq{i:02}");
            let mut n = rng.next();
            while term.len() < 10 {
                term.push(char::from_digit((n % 36) as u32, 36).unwrap_or('z'));
                n /= 36;
            }
            for _ in 0..rng.range(1, 5) {
                let session = rng.below(params.sessions);
                by_session.entry(session).or_default().push(term.clone());
            }
            terms.push(term);
        }
        Self { terms, by_session }
    }

    fn for_session(&self, index: u64) -> Vec<String> {
        self.by_session.get(&index).cloned().unwrap_or_default()
    }
}

// -------------------------------------------------------------------------------------------------
// One session

/// A [`LogFile`] without fsync. The corpus is a disposable benchmark fixture: durability would only make
/// generating ten thousand logs take far longer without changing a byte of them.
struct NoSyncFile(File);

impl LogFile for NoSyncFile {
    fn create_new(path: &Path) -> io::Result<Self> {
        <File as LogFile>::create_new(path).map(Self)
    }

    fn open_append(path: &Path) -> io::Result<Self> {
        <File as LogFile>::open_append(path).map(Self)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        LogFile::write_all(&mut self.0, buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        self.0.size()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.0.truncate(len)
    }
}

/// A node of the model-visible surface as the generator tracks it: its seq and, for a tool result, its
/// data (a prune must repeat it exactly except for the output).
struct Node {
    seq: u64,
    tool_data: Option<Value>,
}

struct SessionGen {
    rng: Rng,
    index: u64,
    id: String,
    zstd: bool,
    live: bool,
    /// Uncompressed bytes to aim for.
    budget: u64,
    /// Numbers and times the events; taken as one append batch at each flush.
    script: Script,
    surface: Vec<Node>,
    /// Rare terms still to plant; each message or tool output takes one.
    pending: Vec<String>,
    /// `(term, seq)` of every planted document.
    planted: Vec<(String, u64)>,
    plain_bytes: u64,
    writer: Option<LogWriter<NoSyncFile>>,
}

impl SessionGen {
    fn new(seed: u64, index: u64, average: u64, pending: Vec<String>) -> Self {
        let mut rng = Rng::new(seed, index);
        // Most sessions are small (0.1× to 2.1× the average, skewed low); one in fifty is a long-running
        // one of 8× to 20× with several compactions, as real users keep one session open for days.
        // The mean factor is about 1.
        let u = rng.unit();
        let factor = if rng.chance(2) {
            8.0 + 12.0 * u
        } else {
            0.1 + 2.0 * u * u
        };
        let budget = (average as f64 * factor) as u64;
        let id = format!(
            "{}-{}-4{}-{}-{}",
            rng.hex(8),
            rng.hex(4),
            rng.hex(3),
            rng.hex(4),
            rng.hex(12)
        );
        Self {
            index,
            id,
            zstd: index % 4 == 1,
            live: index % 100 == 3,
            budget,
            // The clock moves by a jittered step the generator draws after each event.
            script: Script::new("", 1_780_000_000_000 + index as i64 * 600_000)
                .time_step(0)
                .model(PROVIDER, MODEL),
            surface: Vec::new(),
            pending,
            planted: Vec::new(),
            plain_bytes: 0,
            writer: None,
            rng,
        }
    }

    fn write(
        mut self,
        root: &Path,
        cwd: Option<&str>,
    ) -> Result<(SessionInfo, Vec<(String, u64)>), CorpusError> {
        let picked = (!self.rng.chance(5)).then(|| self.rng.pick(PROJECTS));
        let cwd = cwd.or(picked).map(str::to_string);
        let header = SessionHeader::new(self.id.clone(), self.script.now(), cwd);
        let opts = WriteOptions {
            compression: if self.zstd {
                Compression::Zstd
            } else {
                Compression::None
            },
            pack_chunks: true,
        };
        self.plain_bytes = header.to_json_line().len() as u64 + 1;
        let writer = LogWriter::<NoSyncFile>::create_with(root, header, opts)
            .map_err(|source| self.log_err(source))?;
        self.writer = Some(writer);

        let compact_every = self.rng.range(2, 5);
        let start = self.plain_bytes;
        let mut turn = 1;
        loop {
            // This turn is the last when, after it, half an average turn more would reach the budget:
            // sessions then land on their budget on average instead of overshooting it by a turn.
            let per_turn = match turn - 1 {
                0 => FIRST_TURN_GUESS,
                done => (self.plain_bytes - start) / done,
            };
            let last = self.plain_bytes + per_turn * 3 / 2 >= self.budget;
            if last && self.live {
                self.open_turn(turn)?;
                break;
            }
            self.turn(turn, last)?;
            if last {
                break;
            }
            if turn % compact_every == 0 {
                self.compact(turn)?;
            }
            turn += 1;
        }
        let path = self
            .writer
            .as_ref()
            .map(|w| w.path().to_path_buf())
            .unwrap_or_default();
        let file_bytes = fs::metadata(&path)
            .map_err(io_err(&path, "reading the written log's size"))?
            .len();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        let info = SessionInfo {
            id: self.id,
            path: rel,
            zstd: self.zstd,
            plain_bytes: self.plain_bytes,
            file_bytes,
            events: self.script.next_seq(),
            live: self.live,
        };
        Ok((info, self.planted))
    }

    fn log_err(&self, source: LogError) -> CorpusError {
        CorpusError::Log {
            session: format!("{} (#{})", self.id, self.index),
            source,
        }
    }

    /// The seq the next event gets.
    fn seq(&self) -> u64 {
        self.script.next_seq()
    }

    /// Moves the clock on after an event by 0 to 30 ms.
    fn tick(&mut self, seq: u64) -> u64 {
        let jitter = self.rng.range(0, 30) as i64;
        self.script.advance(jitter);
        seq
    }

    /// An event off the surface.
    fn event(&mut self, kind: &str, data: Value) -> u64 {
        let seq = self.script.plain(kind, data);
        self.tick(seq)
    }

    /// An event appended to the surface, citing `sources` when there are any.
    fn appended(&mut self, kind: &str, data: Value, sources: &[u64]) -> u64 {
        let seq = if sources.is_empty() {
            self.script.appended(kind, data)
        } else {
            self.script.appended_citing(kind, data, sources)
        };
        self.tick(seq)
    }

    /// Appends the pending batch as one durable append (one zstd frame), counting its plaintext.
    fn flush(&mut self) -> Result<(), CorpusError> {
        let batch = self.script.take_events();
        if batch.is_empty() {
            return Ok(());
        }
        self.plain_bytes += pack(&batch)
            .iter()
            .map(|line| line.to_string().len() as u64 + 1)
            .sum::<u64>();
        let result = match self.writer.as_mut() {
            Some(writer) => writer.append(&batch),
            None => return Ok(()),
        };
        result.map_err(|source| self.log_err(source))
    }

    /// Text for a new document, with the next pending rare term planted in it (every pending one when
    /// `all`, for the session's last message).
    fn with_plant(&mut self, mut text: String, seq: u64, all: bool) -> String {
        let n = if all {
            self.pending.len()
        } else {
            self.pending.len().min(1)
        };
        for term in self.pending.drain(..n).collect::<Vec<_>>() {
            text.push_str(&format!("\nreference {term} noted\n"));
            self.planted.push((term, seq));
        }
        text
    }

    fn user_message(&mut self, turn: u64, last: bool) {
        let n = self.rng.range(8, 120);
        let mut text = prose(&mut self.rng, n);
        if self.rng.chance(25) {
            let (out, _) = tool_output(&mut self.rng);
            text.push_str("\n\nI got this:\n");
            text.push_str(&out);
        }
        let text = self.with_plant(text, self.seq(), last);
        let id = format!("u-{}-{turn}", self.rng.hex(12));
        let seq = self.appended("user/message", user_data(&id, &text), &[]);
        self.surface.push(Node {
            seq,
            tool_data: None,
        });
        if turn == 1 {
            let title: String = text.chars().take(24).collect();
            let data = title_data(&title, &[seq], json!({"kind": "fallback"}));
            self.event("session/title", data);
        }
    }

    fn chunk(&mut self, turn: u64, step: u64, chunk: Value) -> u64 {
        self.event(
            "assistant/chunk",
            json!({"turn": turn, "step": step, "chunk": chunk}),
        )
    }

    /// One step as one append batch: streamed reasoning and text (and maybe a tool call), the assistant
    /// message, and for a tool call its `tool/call` and, unless `open` (a live session mid-tool), its
    /// result and the step's end.
    fn step(&mut self, turn: u64, step: u64, tool: bool, open: bool) -> Result<(), CorpusError> {
        self.event("step/start", step_data(turn, step));
        if turn == 1 && step == 1 {
            let system = words(&mut self.rng, 80);
            let header = request_header_data(PROVIDER, MODEL, Some(&system));
            self.event("request/header", header);
        }
        let first = self.seq();
        let n = self.rng.range(10, 80);
        let reasoning = words(&mut self.rng, n);
        let n = self.rng.range(5, 90);
        let text = prose(&mut self.rng, n);
        let mut content = vec![
            json!({"type": "reasoning", "text": reasoning}),
            json!({"type": "text", "text": text}),
        ];
        for (index, (block, body)) in [("reasoning", &reasoning), ("text", &text)]
            .into_iter()
            .enumerate()
        {
            self.chunk(
                turn,
                step,
                json!({"type": "block-start", "index": index, "blockType": block}),
            );
            let delta = if block == "text" {
                "text-delta"
            } else {
                "reasoning-delta"
            };
            for piece in deltas(&mut self.rng, body) {
                self.chunk(
                    turn,
                    step,
                    json!({"type": delta, "index": index, "text": piece}),
                );
            }
            self.chunk(
                turn,
                step,
                json!({"type": "block-end", "index": index, "block": {"type": block, "text": body}}),
            );
        }
        let call = format!("call_{:02}_{}", step, self.rng.hex(20));
        let mut call_args = None;
        if tool {
            let (name, args) = tool_call_args(&mut self.rng);
            self.chunk(
                turn,
                step,
                json!({"type": "block-start", "index": 2, "blockType": "tool-call"}),
            );
            for piece in deltas(&mut self.rng, &args) {
                self.chunk(
                    turn,
                    step,
                    json!({"type": "tool-call-delta", "index": 2, "id": call, "name": name, "argumentsDelta": piece}),
                );
            }
            let block = json!({"type": "tool-call", "id": call, "name": name, "arguments": args});
            self.chunk(
                turn,
                step,
                json!({"type": "block-end", "index": 2, "block": block}),
            );
            content.push(block);
            call_args = Some((name, args));
        }
        let usage = json!({"inputTokens": self.rng.range(100, 60_000), "outputTokens": self.rng.range(10, 2000)});
        self.chunk(turn, step, json!({"type": "usage", "usage": usage}));
        let reason = if tool { "tool-calls" } else { "stop" };
        self.chunk(
            turn,
            step,
            json!({"type": "finish", "reason": {"kind": reason}}),
        );
        let sources: Vec<u64> = (first..self.seq()).collect();
        let id = format!("a-{}", self.rng.hex(16));
        let mut data = assistant_content_data(turn, step, &id, content, PROVIDER, MODEL);
        data["usage"] = usage;
        let seq = self.appended("assistant/message", data, &sources);
        self.surface.push(Node {
            seq,
            tool_data: None,
        });
        if let Some((name, args)) = call_args {
            let call_seq = self.event("tool/call", tool_call_data(turn, step, &call, name, &args));
            if open {
                // A live session mid-tool: the result is not there yet.
                return self.flush();
            }
            let (output, failed) = tool_output(&mut self.rng);
            let output = self.with_plant(output, self.seq(), false);
            let id = format!("t-{}", self.rng.hex(16));
            let mut data = tool_result_data(turn, step, &id, &call, &output);
            data["message"]["content"][0]["isError"] = json!(failed);
            if failed && self.rng.chance(30) {
                data["error"] = json!({"name": "ToolExecutionError", "code": "TOOL_FAILED"});
            }
            let seq = self.appended("tool/result", data.clone(), &[call_seq]);
            self.surface.push(Node {
                seq,
                tool_data: Some(data),
            });
        }
        self.event("step/end", step_data(turn, step));
        self.flush()
    }

    fn todo(&mut self) {
        let todos: Vec<Value> = (0..self.rng.range(2, 6))
            .map(|_| {
                let n = self.rng.range(3, 10);
                let content = prose(&mut self.rng, n);
                let status = self.rng.pick(&["pending", "in_progress", "completed"]);
                json!({"content": content, "status": status})
            })
            .collect();
        self.event("todo/write", json!({"todos": todos}));
    }

    fn turn(&mut self, turn: u64, last: bool) -> Result<(), CorpusError> {
        self.event("turn/start", turn_start_data(turn));
        self.user_message(turn, last);
        if self.rng.chance(20) {
            self.todo();
        }
        self.flush()?;
        let steps = self.rng.range(1, 4);
        for step in 1..=steps {
            let tool = step < steps || self.rng.chance(15);
            self.step(turn, step, tool, false)?;
        }
        if self.rng.chance(30) {
            self.prune()?;
        }
        let reason = match self.rng.below(100) {
            0..=7 => {
                let message = self.rng.pick(&[
                    "upstream provider returned HTTP 529: overloaded, retry budget exhausted",
                    "stream error: connection reset by peer while reading the response body",
                    "request failed validation: context length exceeded the model limit",
                    "tool dispatch error: the sandbox process exited unexpectedly",
                ]);
                json!({"kind": "error", "error": {"message": message, "code": "PROVIDER_ERROR"}})
            }
            8..=10 => json!({"kind": "aborted", "reason": {"kind": "user"}}),
            11..=12 => json!({"kind": "max-tokens"}),
            _ => json!({"kind": "completed"}),
        };
        self.event("turn/end", turn_end_with(turn, reason));
        self.flush()
    }

    /// The last turn of a live-looking session: a tool call in flight, no result, no turn end.
    fn open_turn(&mut self, turn: u64) -> Result<(), CorpusError> {
        self.event("turn/start", turn_start_data(turn));
        self.user_message(turn, true);
        self.flush()?;
        self.step(turn, 1, true, true)
    }

    /// Replaces the oldest half of the surface with a checkpoint, as compaction does (spec §2.3).
    fn compact(&mut self, turn: u64) -> Result<(), CorpusError> {
        if self.surface.len() < 4 {
            return Ok(());
        }
        let end_idx = self.surface.len() / 2;
        let shadowed: Vec<u64> = self.surface[..=end_idx].iter().map(|n| n.seq).collect();
        let (first, last) = (shadowed[0], shadowed[shadowed.len() - 1]);
        let compaction_id = format!("cmp-{}", self.rng.hex(12));
        let start = self.event(
            "compaction/start",
            compaction_marker_data(&compaction_id, Some(turn)),
        );
        let n = self.rng.range(40, 160);
        let summary = prose(&mut self.rng, n);
        let tokens = self.rng.range(2000, 90_000);
        let data = compaction_summary_data(
            &compaction_id,
            &summary,
            (first, last),
            &shadowed,
            tokens,
            PROVIDER,
            MODEL,
        );
        let summary_seq = self.event("compaction/summary", data);
        let mut sources = vec![start, summary_seq];
        sources.extend(&shadowed);
        let id = format!("c-{}", self.rng.hex(16));
        let text = checkpoint_text(&summary);
        let seq = self
            .script
            .checkpoint(&id, &compaction_id, &text, first, last, &sources);
        self.tick(seq);
        self.event(
            "compaction/end",
            compaction_marker_data(&compaction_id, Some(turn)),
        );
        self.surface.drain(..=end_idx);
        self.surface.insert(
            0,
            Node {
                seq,
                tool_data: None,
            },
        );
        self.flush()
    }

    /// Rewrites one older tool result's output, as the tool-result pruner does (content-only replace).
    fn prune(&mut self) -> Result<(), CorpusError> {
        let keep_recent = 4;
        let candidates: Vec<usize> = (0..self.surface.len().saturating_sub(keep_recent))
            .filter(|&i| self.surface[i].tool_data.is_some())
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let at = candidates[self.rng.below(candidates.len() as u64) as usize];
        let target = self.surface[at].seq;
        let Some(mut data) = self.surface[at].tool_data.take() else {
            return Ok(());
        };
        let tokens = self.rng.range(200, 9000);
        let marker = self.event("compaction/prune", prune_data(target, tokens));
        data = pruned_result_data(data, "[tool output pruned to save context]");
        let sources = [marker, target];
        let seq = self
            .script
            .replacing("tool/result", data.clone(), target, target, &sources);
        self.tick(seq);
        self.surface[at] = Node {
            seq,
            tool_data: Some(data),
        };
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_codec::log::read::{read_log, ReadOptions};
    use dsh_codec::surface::{Label, SurfaceFold};
    use dsh_codec::text::event_text;

    fn tiny() -> CorpusParams {
        CorpusParams {
            seed: 7,
            sessions: 20,
            target_bytes: 2_000_000,
        }
    }

    fn is_cjk(c: char) -> bool {
        ('\u{4E00}'..='\u{9FFF}').contains(&c)
    }

    #[test]
    fn tiny_corpus_reads_back_with_every_feature_the_benchmark_needs() {
        let dir = tempfile::tempdir().unwrap();
        let info = generate(dir.path(), tiny()).unwrap();
        let root = CorpusInfo::root(dir.path());
        assert_eq!(info.sessions.len(), 20);

        let (mut shadowed, mut chinese, mut zstd, mut raw, mut packed, mut live) =
            (0, 0, 0, 0, 0, 0);
        let mut found: BTreeMap<String, BTreeSet<(String, u64)>> = BTreeMap::new();
        for session in &info.sessions {
            let path = root.join(&session.path);
            let log = read_log(
                &path,
                &ReadOptions {
                    strict_header: true,
                    ..ReadOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("{} does not read: {e}", path.display()));
            assert!(log.torn_tail.is_none() && log.diagnostics.is_empty());
            assert_eq!(log.header.id, session.id);
            let closers = log.events.len() as u64 - session.events;
            assert_eq!(
                closers > 0,
                session.live,
                "closers only on open turns: {}",
                session.id
            );
            live += u64::from(session.live);
            let fold = SurfaceFold::fold(&log.events).expect("the generated surface folds");
            shadowed += fold
                .labels()
                .iter()
                .filter(|l| **l == Label::Shadowed)
                .count();
            for event in &log.events {
                let text = event_text(event);
                chinese += usize::from(text.chars().any(is_cjk));
                for term in info.rare_terms.iter().filter(|t| text.contains(&t.term)) {
                    found
                        .entry(term.term.clone())
                        .or_default()
                        .insert((session.id.clone(), event.seq));
                }
            }
            match log.compression {
                Compression::Zstd => zstd += 1,
                Compression::None => {
                    raw += 1;
                    let bytes = fs::read_to_string(&path).unwrap();
                    assert_eq!(
                        bytes.len() as u64,
                        session.plain_bytes,
                        "plaintext count of {}",
                        session.id
                    );
                    packed += bytes
                        .lines()
                        .filter(|l| l.contains("-chunks\",\"seq0\""))
                        .count();
                }
            }
            assert_eq!(session.zstd, log.compression == Compression::Zstd);
        }
        assert!(shadowed > 0, "no shadowed events");
        assert!(chinese > 0, "no Chinese text");
        assert!(zstd > 0 && raw > 0, "zstd {zstd}, raw {raw}");
        assert!(packed > 0, "no packed chunk rows");
        assert!(live > 0, "no live-looking session");
        // The recorded rare-term answers are exactly what the text says.
        assert_eq!(info.rare_terms.len(), RARE_TERMS);
        for term in &info.rare_terms {
            let actual: Vec<_> = found
                .remove(&term.term)
                .unwrap_or_default()
                .into_iter()
                .collect();
            assert_eq!(actual, term.documents, "documents of {}", term.term);
            assert!(
                (1..=5).contains(&term.documents.len()),
                "{} in {} documents",
                term.term,
                term.documents.len()
            );
        }
        let total = info.plain_bytes();
        assert!(
            total > 1_000_000 && total < 6_000_000,
            "{total} bytes for a 2 MB target"
        );
    }

    #[test]
    fn a_matching_marker_is_reused_and_a_changed_one_regenerates() {
        let dir = tempfile::tempdir().unwrap();
        let params = CorpusParams {
            sessions: 3,
            target_bytes: 60_000,
            seed: 1,
        };
        let first = ensure_corpus(dir.path(), params).unwrap();
        let log = CorpusInfo::root(dir.path()).join(&first.sessions[0].path);
        let mtime = fs::metadata(&log).unwrap().modified().unwrap();
        let again = ensure_corpus(dir.path(), params).unwrap();
        assert_eq!(first, again);
        assert_eq!(
            fs::metadata(&log).unwrap().modified().unwrap(),
            mtime,
            "reused, not rewritten"
        );

        let other = ensure_corpus(dir.path(), CorpusParams { seed: 2, ..params }).unwrap();
        assert_ne!(other.sessions[0].id, first.sessions[0].id);
        assert!(!log.exists(), "the old corpus is gone");
    }

    #[test]
    fn a_scratch_session_is_raw_closed_and_in_its_own_project_dir() {
        let dir = tempfile::tempdir().unwrap();
        let info = write_scratch_session(dir.path(), 3, 0, 30_000).unwrap();
        assert!(!info.zstd && !info.live);
        assert!(
            info.path.starts_with(SCRATCH_PROJECT_DIR),
            "{}",
            info.path.display()
        );
        assert!(info.plain_bytes >= 30_000);
        let log = read_log(&dir.path().join(&info.path), &ReadOptions::default()).unwrap();
        assert_eq!(log.events.len() as u64, info.events);
        assert_eq!(log.header.cwd.as_deref(), Some(SCRATCH_CWD));
    }

    #[test]
    fn one_session_in_both_encodings_holds_the_same_events() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, compression| {
            let options = SessionOptions {
                seed: 5,
                index: 0,
                plain_bytes: 300_000,
                compression,
                cwd: Some("/work/bench".into()),
            };
            let root = dir.path().join(name);
            let info = write_session(&root, &options).unwrap();
            read_log(&root.join(&info.path), &ReadOptions::default()).unwrap()
        };
        let raw = write("raw", Compression::None);
        let zstd = write("zstd", Compression::Zstd);
        assert!(raw.events.len() > 50);
        assert_eq!(raw.events, zstd.events);
        assert_eq!(raw.header.cwd.as_deref(), Some("/work/bench"));
        SurfaceFold::fold(raw.events.iter()).unwrap();
    }

    #[test]
    fn generation_is_deterministic() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let params = CorpusParams {
            sessions: 2,
            target_bytes: 40_000,
            seed: 9,
        };
        let (x, y) = (
            generate(a.path(), params).unwrap(),
            generate(b.path(), params).unwrap(),
        );
        assert_eq!(x, y);
        for s in &x.sessions {
            let bytes_a = fs::read(CorpusInfo::root(a.path()).join(&s.path)).unwrap();
            let bytes_b = fs::read(CorpusInfo::root(b.path()).join(&s.path)).unwrap();
            assert_eq!(bytes_a, bytes_b);
        }
    }

    #[test]
    fn bad_parameters_and_foreign_folders_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = generate(
            dir.path(),
            CorpusParams {
                sessions: 0,
                target_bytes: 1,
                seed: 0,
            },
        )
        .unwrap_err();
        assert!(matches!(err, CorpusError::Params(_)), "{err}");
        let err = generate(
            dir.path(),
            CorpusParams {
                sessions: 10,
                target_bytes: 10,
                seed: 0,
            },
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("10 bytes over 10 sessions"),
            "{err}"
        );

        let foreign = dir.path().join("foreign");
        fs::create_dir_all(foreign.join("sessions/keep")).unwrap();
        let err = ensure_corpus(
            &foreign,
            CorpusParams {
                sessions: 1,
                target_bytes: 10_000,
                seed: 0,
            },
        )
        .unwrap_err();
        assert!(matches!(err, CorpusError::Foreign { .. }), "{err}");
        assert!(
            foreign.join("sessions/keep").is_dir(),
            "nothing of someone else's is deleted"
        );
    }
}
