//! Indexing throughput and query latency over a corpus a third of which is in each source format (DSH
//! logs, Claude Code transcripts, Codex rollouts), next to the DSH-only figures of the same content in
//! the same run (the machines are shared and noisy, so only side-by-side figures mean much).
//!
//! - The DSH corpus is [`tests::corpus_gen`]'s (generated once and reused, as by `search_corpus`).
//! - The mixed corpus is the same sessions: session `i` stays a DSH log when `i % 3 == 0`, and is
//!   rewritten as a Claude Code transcript (one line per streamed content block, `compact_boundary` plus
//!   a summary for a compaction) when `i % 3 == 1`, or as a Codex rollout (response items, the mirrored
//!   `event_msg`s, `compacted` with a replacement history) when `i % 3 == 2`. Written once beside the
//!   corpus, reused while its marker matches.
//! - Both are indexed cold by the plugin's own index (`plugin-core`), in this process, after one read
//!   of every file so both start from the page cache; then the same queries run against each.
//!
//! ```sh
//! cargo bench -p tests --bench sources_corpus -- --size 200MB
//! cargo bench -p tests --bench sources_corpus -- --size 1GB --sessions 10000 --corpus /some/dir
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::Event;
use host_api::abi::wire::search::SessionSearchRequest;
use plugin_core::config::Config;
use plugin_core::corpus::Corpus;
use plugin_core::search::Search;
use plugin_core::sources::SourceRoots;
use serde_json::{json, Value};
use tests::corpus_gen::{ensure_corpus, CorpusInfo, CorpusParams};

#[path = "common/disk_search.rs"]
mod disk_search;

const COMMON: &str = "error";
const LIMIT: usize = 20;
const RARE_ROUNDS: usize = 3;
const COMMON_RUNS: usize = 15;
/// Bumped whenever the conversion changes, so an old mixed corpus is rewritten.
const MIXED_VERSION: u32 = 1;

fn err(e: impl std::fmt::Debug) -> String {
    format!("{e:?}")
}

struct Options {
    params: CorpusParams,
    corpus: PathBuf,
}

fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let at = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let n: u64 = lower[..at]
        .parse()
        .map_err(|_| format!("--size {text:?}: expected a number such as 200MB"))?;
    let unit = match lower[at..].trim() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        other => return Err(format!("--size {text:?}: unknown unit {other:?}")),
    };
    Ok(n * unit)
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut size = 200_000_000;
    let mut sessions = None;
    let mut corpus = std::env::var_os("DSH_BENCH_CORPUS").map(PathBuf::from);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--size" => size = parse_size(&value("--size")?)?,
            "--sessions" => {
                sessions = Some(
                    value("--sessions")?
                        .parse()
                        .map_err(|_| "--sessions: a number")?,
                )
            }
            "--corpus" => corpus = Some(PathBuf::from(value("--corpus")?)),
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let mut params = CorpusParams::sized(size);
    if let Some(n) = sessions {
        params.sessions = n;
    }
    let corpus = corpus.unwrap_or_else(|| {
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("../search-corpus")
            .join(format!("{}-{}", params.target_bytes, params.sessions))
    });
    Ok(Options { params, corpus })
}

// -------------------------------------------------------------------------------------------------
// The mixed corpus

/// `2026-11-30T09:15:02.123Z` for epoch milliseconds.
fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn text_of(blocks: &Value) -> String {
    blocks
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_checkpoint(e: &Event) -> bool {
    e.kind == "user/message"
        && e.data["source"]["kind"] == "plugin"
        && e.data["source"]["plugin"] == "compact"
}

/// A DSH session as a Claude Code transcript.
fn to_claude(id: &str, cwd: &str, events: &[Event], out: &mut impl Write) -> std::io::Result<()> {
    let mut n = 0u64;
    let mut parent: Option<String> = None;
    let line = |v: Value, out: &mut dyn Write| writeln!(out, "{v}");
    for e in events {
        let ts = iso(e.time);
        let mut next = || {
            n += 1;
            format!("{:08x}-0000-4000-8000-{n:012x}", n)
        };
        let envelope = |uuid: &str, parent: &Option<String>, kind: &str| {
            json!({"parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": cwd,
                   "sessionId": id, "version": "2.0.14", "gitBranch": "main", "type": kind,
                   "uuid": uuid, "timestamp": ts})
        };
        match e.kind.as_str() {
            "user/message" if is_checkpoint(e) => {
                let boundary = next();
                let mut b = envelope(&boundary, &None, "system");
                b["subtype"] = json!("compact_boundary");
                b["logicalParentUuid"] = json!(parent);
                b["compactMetadata"] = json!({"trigger": "auto", "preTokens": 100_000});
                line(b, out)?;
                let uuid = next();
                let mut u = envelope(&uuid, &Some(boundary), "user");
                u["isCompactSummary"] = json!(true);
                u["message"] = json!({"role": "user", "content": text_of(&e.data["content"])});
                line(u, out)?;
                parent = Some(uuid);
            }
            "user/message" => {
                let uuid = next();
                let mut u = envelope(&uuid, &parent, "user");
                u["message"] = json!({"role": "user", "content": text_of(&e.data["content"])});
                line(u, out)?;
                parent = Some(uuid);
            }
            "assistant/message" => {
                let mid = format!("msg_{}", e.seq);
                for block in e.data["message"]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let b = match block["type"].as_str() {
                        Some("text") => json!({"type": "text", "text": block["text"]}),
                        Some("reasoning") => {
                            json!({"type": "thinking", "thinking": block["text"], "signature": "s"})
                        }
                        Some("tool-call") => {
                            let args = block["arguments"].as_str().unwrap_or("{}");
                            let input =
                                serde_json::from_str::<Value>(args).unwrap_or(json!({"raw": args}));
                            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": input})
                        }
                        _ => continue,
                    };
                    let uuid = next();
                    let mut a = envelope(&uuid, &parent, "assistant");
                    a["message"] = json!({"id": mid, "type": "message", "role": "assistant",
                        "model": "claude-sonnet-4-5", "content": [b], "usage": {"output_tokens": 1}});
                    line(a, out)?;
                    parent = Some(uuid);
                }
            }
            "tool/result" => {
                let r = &e.data["message"]["content"][0];
                let uuid = next();
                let mut u = envelope(&uuid, &parent, "user");
                u["message"] = json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": r["toolCallId"], "content": text_of(&r["content"]),
                    "is_error": r["isError"] == true}]});
                line(u, out)?;
                parent = Some(uuid);
            }
            _ => {}
        }
    }
    Ok(())
}

/// A DSH session as a Codex rollout.
fn to_codex(id: &str, cwd: &str, events: &[Event], out: &mut impl Write) -> std::io::Result<()> {
    let created = events.first().map_or(0, |e| e.time);
    // One rollout line: a record of `kind` at `time`.
    let mut put = |time: i64, kind: &str, payload: Value| {
        writeln!(
            out,
            "{}",
            json!({"timestamp": iso(time), "type": kind, "payload": payload})
        )
    };
    put(
        created,
        "session_meta",
        json!({"id": id, "timestamp": iso(created), "cwd": cwd,
        "originator": "codex_cli_rs", "cli_version": "0.50.0", "source": "cli", "model_provider": "openai",
        "git": {"branch": "main"}}),
    )?;
    let mut last_user = String::new();
    for e in events {
        let t = e.time;
        match e.kind.as_str() {
            "turn/start" => put(
                t,
                "turn_context",
                json!({"cwd": cwd, "model": "gpt-5-codex"}),
            )?,
            "user/message" if is_checkpoint(e) => {
                let summary = text_of(&e.data["content"]);
                let history = json!([
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": last_user}]},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]},
                ]);
                put(
                    t,
                    "compacted",
                    json!({"message": summary, "replacement_history": history}),
                )?;
                put(t, "event_msg", json!({"type": "context_compacted"}))?;
            }
            "user/message" => {
                let text = text_of(&e.data["content"]);
                put(
                    t,
                    "response_item",
                    json!({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]}),
                )?;
                put(
                    t,
                    "event_msg",
                    json!({"type": "user_message", "message": text, "images": []}),
                )?;
                last_user = text;
            }
            "assistant/message" => {
                for block in e.data["message"]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    match block["type"].as_str() {
                        Some("text") => {
                            put(
                                t,
                                "response_item",
                                json!({"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": block["text"]}]}),
                            )?;
                            put(
                                t,
                                "event_msg",
                                json!({"type": "agent_message", "message": block["text"]}),
                            )?;
                        }
                        Some("reasoning") => {
                            put(
                                t,
                                "response_item",
                                json!({"type": "reasoning",
                                "summary": [{"type": "summary_text", "text": block["text"]}], "encrypted_content": "gAAA"}),
                            )?;
                        }
                        Some("tool-call") => put(
                            t,
                            "response_item",
                            json!({"type": "function_call",
                            "name": block["name"], "arguments": block["arguments"], "call_id": block["id"]}),
                        )?,
                        _ => {}
                    }
                }
            }
            "tool/result" => {
                let r = &e.data["message"]["content"][0];
                put(
                    t,
                    "response_item",
                    json!({"type": "function_call_output",
                    "call_id": r["toolCallId"], "output": text_of(&r["content"])}),
                )?;
            }
            "step/end" => put(t, "event_msg", json!({"type": "token_count", "info": null}))?,
            _ => {}
        }
    }
    Ok(())
}

/// The mixed corpus beside the DSH one: `dsh/` (a sessions root), `claude/projects/`, `codex/`.
struct Mixed {
    dsh: PathBuf,
    claude: PathBuf,
    codex: PathBuf,
    /// DSH id → the id the session has in the mixed corpus.
    ids: std::collections::HashMap<String, String>,
    bytes: [u64; 3],
}

fn mixed_corpus(dir: &Path, info: &CorpusInfo) -> Result<Mixed, String> {
    let root = CorpusInfo::root(dir);
    let mixed = dir.join("mixed");
    let marker = mixed.join("MARKER");
    let stamp = json!({"version": MIXED_VERSION, "params": info.params}).to_string();
    let fresh = fs::read_to_string(&marker).ok().as_deref() != Some(stamp.as_str());
    if fresh {
        let _ = fs::remove_dir_all(&mixed);
    }
    let m = Mixed {
        dsh: mixed.join("dsh"),
        claude: mixed.join("claude/projects"),
        codex: mixed.join("codex"),
        ids: Default::default(),
        bytes: [0; 3],
    };
    let mut m = m;
    for (i, s) in info.sessions.iter().enumerate() {
        let from = root.join(&s.path);
        let (slot, to, id) = match i % 3 {
            0 => (0, m.dsh.join(&s.path), s.id.clone()),
            1 => (
                1,
                m.claude.join("-work-bench").join(format!("{}.jsonl", s.id)),
                format!("claude:{}", s.id),
            ),
            _ => (
                2,
                m.codex
                    .join("sessions/2026/11/01")
                    .join(format!("rollout-2026-11-01T00-00-00-{}.jsonl", s.id)),
                format!("codex:{}", s.id),
            ),
        };
        if fresh {
            fs::create_dir_all(to.parent().unwrap()).map_err(err)?;
            if slot == 0 {
                fs::copy(&from, &to).map_err(err)?;
            } else {
                let log = read_log(&from, &ReadOptions::default()).map_err(err)?;
                let cwd = log.header.cwd.clone().unwrap_or_else(|| "/work".into());
                let mut w = BufWriter::new(fs::File::create(&to).map_err(err)?);
                if slot == 1 {
                    to_claude(&s.id, &cwd, log.stored(), &mut w).map_err(err)?;
                } else {
                    to_codex(&s.id, &cwd, log.stored(), &mut w).map_err(err)?;
                }
                w.flush().map_err(err)?;
            }
        }
        m.bytes[slot] += fs::metadata(&to).map_err(err)?.len();
        m.ids.insert(s.id.clone(), id);
    }
    if fresh {
        fs::write(&marker, stamp).map_err(err)?;
    }
    Ok(m)
}

// -------------------------------------------------------------------------------------------------
// Measuring

struct Index {
    search: Search,
    corpus: Corpus,
}

fn open_index(index: &Path, root: &Path, sources: SourceRoots) -> Result<Index, String> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", index.display()));
    }
    let config = Config {
        claude_projects: sources.claude_projects.clone(),
        codex_home: sources.codex_home.clone(),
        ..Config::default()
    };
    let (search, corpus) = disk_search::open(root, index, config)?;
    let corpus = corpus.with_sources(sources);
    Ok(Index { search, corpus })
}

fn warm(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                warm(&p);
            } else {
                let _ = fs::read(&p);
            }
        }
    }
}

fn search(ix: &Index, query: &str) -> Result<Vec<String>, String> {
    let req = SessionSearchRequest {
        query: json!(query),
        session_filters: None,
        event_filters: None,
        limit: Some(json!(LIMIT)),
        cursor: None,
        match_mode: None,
        order: None,
    };
    let page = ix
        .search
        .search_sessions(&ix.corpus, req, &|| false)
        .map_err(err)?;
    Ok(page
        .items
        .into_iter()
        .map(|h| h.best_match.session_id)
        .collect())
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort_unstable();
    let at = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(at).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

struct Figures {
    build_secs: f64,
    docs: u64,
    skipped: usize,
    rare: (f64, f64),
    common: (f64, f64),
    rare_exact: (usize, usize),
}

fn measure(
    ix: &Index,
    info: &CorpusInfo,
    rename: &dyn Fn(&str) -> String,
) -> Result<Figures, String> {
    let t = Instant::now();
    ix.search
        .refresh(&ix.corpus, &|| false, &|_, _| {})
        .map_err(err)?;
    let build_secs = t.elapsed().as_secs_f64();
    let diag = ix.search.diagnostics(&ix.corpus, &|| false).map_err(err)?;
    if let Some(first) = diag.skipped.first() {
        eprintln!("skipped {}: first {first:?}", diag.skipped.len());
    }
    let mut rare = Vec::new();
    let mut exact = 0;
    for round in 0..=RARE_ROUNDS {
        for term in &info.rare_terms {
            let t = Instant::now();
            let got = search(ix, &term.term)?;
            let elapsed = t.elapsed();
            if round == 0 {
                let want: BTreeSet<String> = term.sessions().into_iter().map(rename).collect();
                let got: BTreeSet<String> = got.into_iter().collect();
                exact += usize::from(got == want || (want.len() > LIMIT && got.is_subset(&want)));
            } else {
                rare.push(elapsed);
            }
        }
    }
    let mut common = Vec::new();
    for run in 0..=COMMON_RUNS {
        let t = Instant::now();
        search(ix, COMMON)?;
        if run > 0 {
            common.push(t.elapsed());
        }
    }
    Ok(Figures {
        build_secs,
        docs: diag.indexed_events,
        skipped: diag.skipped.len(),
        rare: (percentile(&mut rare, 0.5), percentile(&mut rare, 0.99)),
        common: (percentile(&mut common, 0.5), percentile(&mut common, 0.99)),
        rare_exact: (exact, info.rare_terms.len()),
    })
}

fn run(opts: Options) -> Result<(), String> {
    println!(
        "corpus: {} sessions, {} MB target, in {}",
        opts.params.sessions,
        opts.params.target_bytes / 1_000_000,
        opts.corpus.display()
    );
    let info = ensure_corpus(&opts.corpus, opts.params).map_err(err)?;
    let t = Instant::now();
    let mixed = mixed_corpus(&opts.corpus, &info)?;
    println!(
        "mixed corpus ready in {:.1} s: DSH {:.1} MB, Claude Code {:.1} MB, Codex {:.1} MB (a third of the sessions each)",
        t.elapsed().as_secs_f64(),
        mixed.bytes[0] as f64 / 1e6,
        mixed.bytes[1] as f64 / 1e6,
        mixed.bytes[2] as f64 / 1e6
    );
    let work = opts.corpus.join("work");
    fs::create_dir_all(&work).map_err(err)?;
    let root = CorpusInfo::root(&opts.corpus);
    let dsh_bytes = info.file_bytes() as f64;
    let mixed_bytes = mixed.bytes.iter().sum::<u64>() as f64;

    warm(&root);
    let dsh_ix = open_index(&work.join("dsh-only.sqlite"), &root, SourceRoots::default())?;
    let dsh = measure(&dsh_ix, &info, &|id| id.to_string())?;
    drop(dsh_ix);

    warm(&opts.corpus.join("mixed"));
    let sources = SourceRoots {
        claude_projects: Some(mixed.claude.clone()),
        codex_home: Some(mixed.codex.clone()),
    };
    let mixed_ix = open_index(&work.join("mixed.sqlite"), &mixed.dsh, sources)?;
    let ids = &mixed.ids;
    let mix = measure(&mixed_ix, &info, &|id| {
        ids.get(id).cloned().unwrap_or_default()
    })?;

    let row = |name: &str, d: String, m: String, ratio: String| {
        println!("| {name:<34} | {d:>18} | {m:>18} | {ratio:>8} |");
    };
    println!(
        "\n| {:<34} | {:>18} | {:>18} | {:>8} |",
        "figure", "DSH only", "⅓ each source", "ratio"
    );
    println!(
        "|{}|{}|{}|{}|",
        "-".repeat(36),
        "-".repeat(20),
        "-".repeat(20),
        "-".repeat(10)
    );
    row(
        "bytes read",
        format!("{:.1} MB", dsh_bytes / 1e6),
        format!("{:.1} MB", mixed_bytes / 1e6),
        format!("{:.2}×", mixed_bytes / dsh_bytes),
    );
    row(
        "cold index build",
        format!("{:.1} s", dsh.build_secs),
        format!("{:.1} s", mix.build_secs),
        format!("{:.2}×", mix.build_secs / dsh.build_secs),
    );
    row(
        "throughput (bytes read)",
        format!("{:.1} MB/s", dsh_bytes / 1e6 / dsh.build_secs),
        format!("{:.1} MB/s", mixed_bytes / 1e6 / mix.build_secs),
        format!(
            "{:.2}×",
            (mixed_bytes / mix.build_secs) / (dsh_bytes / dsh.build_secs)
        ),
    );
    row(
        "documents indexed",
        dsh.docs.to_string(),
        mix.docs.to_string(),
        format!("{:.2}×", mix.docs as f64 / dsh.docs as f64),
    );
    row(
        "documents / s",
        format!("{:.0}", dsh.docs as f64 / dsh.build_secs),
        format!("{:.0}", mix.docs as f64 / mix.build_secs),
        format!(
            "{:.2}×",
            (mix.docs as f64 / mix.build_secs) / (dsh.docs as f64 / dsh.build_secs)
        ),
    );
    row(
        "rare term p50 / p99",
        format!("{:.2} / {:.2} ms", dsh.rare.0, dsh.rare.1),
        format!("{:.2} / {:.2} ms", mix.rare.0, mix.rare.1),
        format!("{:.2}×", mix.rare.0 / dsh.rare.0),
    );
    row(
        "\"error\" top 20 p50 / p99",
        format!("{:.2} / {:.2} ms", dsh.common.0, dsh.common.1),
        format!("{:.2} / {:.2} ms", mix.common.0, mix.common.1),
        format!("{:.2}×", mix.common.0 / dsh.common.0),
    );
    row(
        "rare terms answered exactly",
        format!("{}/{}", dsh.rare_exact.0, dsh.rare_exact.1),
        format!("{}/{}", mix.rare_exact.0, mix.rare_exact.1),
        String::new(),
    );
    row(
        "sessions skipped",
        dsh.skipped.to_string(),
        mix.skipped.to_string(),
        String::new(),
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = parse_args(&args).and_then(run);
    if let Err(e) = result {
        eprintln!("sources_corpus: {e}");
        std::process::exit(1);
    }
}
