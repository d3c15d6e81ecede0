//! `search` and `diagnostics`: building the spec-shaped search request from the command line, and
//! printing a page the way ripgrep prints matches (session, time, label, snippet with the match lit on
//! a terminal), or as one JSON object.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::HashMap;

use dsh_codec::source::SourceKind;
use host_api::abi::client::QueryMethod;
use host_api::abi::EmptyRequest;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Map, Value};

use super::{about_id, print, session_id, CommandError, Options};
use crate::cli::{SearchArgs, SortOrder};
use crate::present::{count, local_time, plural, Style};
use crate::render::clip;
use crate::PluginHost;

/// Runs `search`. Exit status 0 when something matched, 1 when nothing did (as grep and ripgrep).
pub fn run(
    host: &Arc<PluginHost>,
    args: &SearchArgs,
    options: &Options,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let mut args = args.clone();
    if let Some(typed) = args.session.clone() {
        // A unique prefix stands for the whole id (`search x --session 335e97f7`).
        // The probe is the index's own answer for one hit (milliseconds): a whole id costs no listing.
        let typed = session_id(&typed)?;
        let query = args.query.to_string_lossy().into_owned();
        let (id, ()) = super::ids::with_session(host, &typed, |id| {
            let probe = json!({"sessionId": id, "query": query, "limit": 1});
            host.query(|q| {
                q.raw::<_, Value>(QueryMethod::SearchEvents, &super::calls::call(), &probe)
            })
            .map(|_| ())
        })?;
        args.session = Some(id.into());
    }
    if !args.under.is_empty() {
        args.cwd.extend(cwds_under(host, &args.under)?);
        if args.cwd.is_empty() {
            // Nothing lives there: a filter that matches nothing, not no filter.
            args.cwd.push(String::new());
        }
    }
    let (method, mut request) = request(&args)?;
    let _bar = progress(host, !options.json || args.progress);
    let call = super::calls::call();
    let mut notice = None;
    let (page, contract) = host
        .query(|q| {
            let asked = asks_for_modes(&request);
            if asked && !q.has_search_modes() {
                // An older plugin ignores the fields: say what it answered instead of pretending.
                notice = Some(older_plugin_notice(&args, q.contract()));
                strip_modes(&mut request);
            }
            let page: Value = q.raw(method, &call, &request)?;
            Ok((page, q.contract()))
        })
        .map_err(|e| match &request["sessionId"] {
            Value::String(id) => about_id(e, id),
            _ => CommandError::Plugin(e),
        })?;
    let titles = titles(host, &page, method);
    let style = options.style();
    let mut page = flatten(&page, method, &titles, &style);
    let matched = !page["items"].as_array().is_none_or(Vec::is_empty);
    let next = page["nextCursor"]
        .as_str()
        .map(|c| next_page_command(&std::env::args_os().collect::<Vec<_>>(), c));
    // When the literal phrase found nothing, would its words in any order have?
    let hint = if matched || args.words || notice.is_some() {
        None
    } else {
        words_hint(host, &request, method)
    };
    if options.json {
        if let Some(n) = &next {
            page["nextCommand"] = n.clone().into();
        }
        page["match"] = if args.words && notice.is_none() {
            "all-words"
        } else {
            "phrase"
        }
        .into();
        page["order"] = match (args.sort, &notice) {
            (SortOrder::Newest, None) => "newest",
            _ => "rank",
        }
        .into();
        page["contract"] = contract.to_string().into();
        if let Some(n) = &notice {
            page["notice"] = n.clone().into();
        }
        if let Some(h) = &hint {
            page["hint"] = h.clone().into();
        }
        print(out, page.to_string())?;
    } else {
        if let Some(n) = &notice {
            tracing::warn!("{n}");
        }
        let query = request["query"].as_str().unwrap_or_default();
        print_page(&page, query, &style, next.as_deref(), out)?;
        if let Some(h) = &hint {
            eprintln_lossy(h);
        }
    }
    Ok(if matched { 0 } else { 1 })
}

/// Writes a line to stderr; a closed stderr is not an error of the command.
fn eprintln_lossy(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn asks_for_modes(request: &Value) -> bool {
    request.get("match").is_some() || request.get("order").is_some()
}

fn strip_modes(request: &mut Value) {
    if let Some(m) = request.as_object_mut() {
        m.remove("match");
        m.remove("order");
    }
}

/// What an older plugin answers instead of `--words` / `--sort newest`.
fn older_plugin_notice(args: &SearchArgs, contract: host_api::abi::ContractVersion) -> String {
    let mut asked = Vec::new();
    if args.words {
        asked.push("--words (all words in any order)");
    }
    if args.sort == SortOrder::Newest {
        asked.push("--sort newest");
    }
    format!(
        "the serving plugin was built against contract {contract}, which predates {}; it answered with the \
         literal phrase in the spec's ranking order instead (rebuild the plugin against contract {} to use it)",
        asked.join(" and "),
        host_api::abi::CONTRACT
    )
}

/// One more search, for a phrase that found nothing: do its words, in any order, find something?
fn words_hint(host: &PluginHost, request: &Value, method: QueryMethod) -> Option<String> {
    let query = request["query"].as_str()?;
    if query.split_whitespace().count() < 2 {
        return None;
    }
    let mut words = request.clone();
    words["match"] = "all-words".into();
    words["limit"] = 1.into();
    words.as_object_mut()?.remove("cursor");
    let page: Value = host
        .query(|q| {
            if !q.has_search_modes() {
                return Err(host_api::abi::PluginError::new(
                    host_api::abi::ErrorCode::PluginNotImplemented,
                    "no all-words matching",
                ));
            }
            q.raw(method, &super::calls::call(), &words)
        })
        .ok()?;
    let found = page["items"].as_array().is_some_and(|i| !i.is_empty());
    found.then(|| {
        format!(
            "no event contains the phrase {query:?}, but some contain all of its words: add --words to match them in any order"
        )
    })
}

/// The cwds of listed sessions at or below each folder of `--under`.
fn cwds_under(host: &PluginHost, under: &[String]) -> Result<Vec<String>, CommandError> {
    let roots: Vec<String> = under.iter().map(|d| absolute(d)).collect();
    let list = host
        .query(|q| q.list_sessions(&super::calls::call(), &EmptyRequest {}))
        .map_err(CommandError::Plugin)?;
    let mut cwds: Vec<String> = list
        .iter()
        .filter_map(|r| r.header.cwd.clone())
        .filter(|cwd| {
            let cwd = cwd.trim_end_matches('/');
            roots.iter().any(|root| {
                let root = root.trim_end_matches('/');
                root.is_empty() || cwd == root || cwd.starts_with(&format!("{root}/"))
            })
        })
        .collect();
    cwds.sort();
    cwds.dedup();
    Ok(cwds)
}

/// A folder as sessions record it: absolute (`.` and relative paths against the current folder),
/// without `.`/`..` parts or a trailing slash.
pub fn absolute(dir: &str) -> String {
    let path = std::path::Path::new(dir);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut parts: Vec<String> = Vec::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    format!("/{}", parts.join("/"))
}

/// Titles of the page's sessions (one call), by session id; empty when the plugin cannot say.
pub(crate) fn titles(
    host: &PluginHost,
    page: &Value,
    method: QueryMethod,
) -> HashMap<String, String> {
    let ids: Vec<String> = match method {
        QueryMethod::SearchSessions => page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["header"]["id"].as_str().map(str::to_string))
            .collect(),
        _ => page["session"]["id"]
            .as_str()
            .map(|id| vec![id.to_string()])
            .unwrap_or_default(),
    };
    if ids.is_empty() {
        return HashMap::new();
    }
    // A plugin of contract 2.2 puts the indexed title in the page itself: no read of any log.
    if host.query(|q| Ok(q.has_search_modes())).unwrap_or(false) {
        let titled =
            |id: &str, title: &Value| title.as_str().map(|t| (id.to_string(), t.to_string()));
        return match method {
            QueryMethod::SearchSessions => page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| titled(i["header"]["id"].as_str()?, &i["title"]))
                .collect(),
            _ => page["session"]["id"]
                .as_str()
                .and_then(|id| titled(id, &page["title"]))
                .into_iter()
                .collect(),
        };
    }
    let request = host_api::abi::TitleSnapshotsRequest { session_ids: ids };
    host.query(|q| q.read_title_snapshots(&super::calls::call(), &request))
        .map(|snaps| {
            snaps
                .into_iter()
                .filter_map(|s| {
                    let title = s.title?.title;
                    Some((s.session_id.to_string(), title))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The command line that shows the next page: this one with `--cursor` set to `cursor`, quoted for a
/// POSIX shell so it can be pasted as it is.
pub fn next_page_command(argv: &[std::ffi::OsString], cursor: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut skip = false;
    for (i, arg) in argv.iter().enumerate() {
        let arg = arg.to_string_lossy();
        if skip {
            skip = false;
            continue;
        }
        if arg == "--cursor" {
            skip = true;
            continue;
        }
        if arg.starts_with("--cursor=") {
            continue;
        }
        if i == 0 && arg.is_empty() {
            words.push("sample-host".into());
            continue;
        }
        words.push(arg.into_owned());
    }
    if words.is_empty() {
        words.push("sample-host".into());
    }
    words.push("--cursor".into());
    words.push(cursor.into());
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Runs `diagnostics`: the host's side (sessions root, index file and size, plugin generation, the watch
/// mode this command actually has) and the plugin's report (what is indexed, what was left out and why).
pub fn diagnostics(
    host: &Arc<PluginHost>,
    options: &Options,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let _bar = progress(host, !options.json);
    let call = super::calls::call();
    let mut report: Value = host
        .query(|q| q.raw(QueryMethod::Diagnostics, &call, &EmptyRequest {}))
        .map_err(CommandError::Plugin)?;
    let sessions = options.sessions_dir();
    let index = report["indexPath"]
        .as_str()
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            options
                .index
                .clone()
                .unwrap_or_else(crate::paths::default_index_path)
        });
    let index_bytes = index_size(&index);
    let generation = host
        .serving()
        .map(|(g, name, version)| (g, format!("{name} {version}")));
    // This command ends once it has answered: whatever watch the plugin started dies with it, so the
    // next run checks the sessions folder again.
    let watch_mode = "none: a one-shot command; each run re-checks the sessions folder (`watch` and `chat` keep a watch)";
    if let Some(m) = report.as_object_mut() {
        m.insert("sessionsRoot".into(), sessions.display().to_string().into());
        m.insert("indexPath".into(), index.display().to_string().into());
        m.insert("indexBytes".into(), index_bytes.into());
        m.insert("watching".into(), false.into());
        m.insert("watchMode".into(), watch_mode.into());
        m.insert(
            "pluginGeneration".into(),
            generation.as_ref().map(|(g, _)| *g).into(),
        );
        m.insert(
            "plugin".into(),
            generation.as_ref().map(|(_, p)| p.clone()).into(),
        );
    }
    if options.json {
        print(out, report.to_string())?;
        return Ok(0);
    }
    let style = options.style();
    print(
        out,
        format!(
            "sessions root:   {}",
            style.path(&sessions.display().to_string())
        ),
    )?;
    print(
        out,
        format!(
            "index:           {} ({})",
            style.path(&index.display().to_string()),
            human_size(index_bytes)
        ),
    )?;
    if let Some((g, plugin)) = &generation {
        print(out, format!("plugin:          {plugin}, generation {g}"))?;
    }
    print(out, format!("watch:           {watch_mode}"))?;
    print(
        out,
        format!(
            "indexed:         {} and {}",
            plural(
                report["indexedSessions"].as_u64().unwrap_or(0),
                "session",
                "sessions"
            ),
            plural(
                report["indexedEvents"].as_u64().unwrap_or(0),
                "event",
                "events"
            )
        ),
    )?;
    for s in report["sources"].as_array().into_iter().flatten() {
        print(
            out,
            format!(
                "source {}: {} ({}, {} session(s) indexed)",
                s["source"].as_str().unwrap_or("?"),
                s["path"].as_str().unwrap_or("?"),
                if s["exists"] == true {
                    "exists"
                } else {
                    "missing"
                },
                s["indexedSessions"],
            ),
        )?;
    }
    // A team's index: each collection this role may read.
    for c in report["collections"].as_array().into_iter().flatten() {
        print(
            out,
            format!(
                "collection {}: {} and {}, {} left out",
                c["name"].as_str().unwrap_or("?"),
                plural(c["sessions"].as_u64().unwrap_or(0), "session", "sessions"),
                plural(c["events"].as_u64().unwrap_or(0), "event", "events"),
                c["skipped"].as_array().map_or(0, Vec::len),
            ),
        )?;
    }
    let skipped = report["skipped"].as_array().cloned().unwrap_or_default();
    print(
        out,
        format!(
            "left out:        {}",
            plural(skipped.len() as u64, "session", "sessions")
        ),
    )?;
    for s in &skipped {
        print(out, format!("  {}", skipped_line(s)))?;
    }
    Ok(0)
}

/// Bytes of the index with its WAL and shared-memory files.
fn index_size(index: &std::path::Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut p = index.as_os_str().to_owned();
            p.push(suffix);
            std::fs::metadata(p).ok().map(|m| m.len())
        })
        .sum()
}

fn human_size(bytes: u64) -> String {
    match bytes {
        0..=1023 => format!("{bytes} B"),
        1024..=1_048_575 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// The spec's request (§4.1) for these arguments, and which method answers it.
fn request(args: &SearchArgs) -> Result<(QueryMethod, Value), CommandError> {
    let query = args
        .query
        .to_str()
        .ok_or_else(|| CommandError::Usage("QUERY must be UTF-8 text".into()))?;
    let mut event_filters = Vec::new();
    if !args.surface.is_empty() {
        for label in &args.surface {
            if !matches!(label.as_str(), "current" | "shadowed" | "log-only") {
                return Err(CommandError::Usage(format!(
                    "--surface takes current, shadowed and log-only, not {label:?}"
                )));
            }
        }
        event_filters.push(json!({"kind": "surface", "values": args.surface}));
    }
    if !args.types.is_empty() {
        for kind in &args.types {
            if !dsh_codec::log::event::is_known_type(kind) {
                return Err(CommandError::Usage(unknown_type(kind)));
            }
        }
        event_filters.push(json!({"kind": "type", "values": args.types}));
    }
    if let Some(since) = &args.since {
        let from = parse_time(since, now_ms()).map_err(CommandError::Usage)?;
        event_filters.push(json!({"kind": "time", "from": from}));
    }
    let mut request = Map::new();
    request.insert("query".into(), query.into());
    if let Some(limit) = args.limit {
        request.insert("limit".into(), limit.into());
    }
    if let Some(cursor) = &args.cursor {
        request.insert("cursor".into(), cursor.clone().into());
    }
    // Contract 2.2's fields, only when asked for: the default request stays spec §4's.
    if args.words {
        request.insert("match".into(), "all-words".into());
    }
    if args.sort == SortOrder::Newest {
        request.insert("order".into(), "newest".into());
    }
    let method = match &args.session {
        Some(id) => {
            if !args.cwd.is_empty() || !args.under.is_empty() {
                return Err(CommandError::Usage(
                    "--cwd and --under narrow sessions; they cannot be used with --session".into(),
                ));
            }
            request.insert("sessionId".into(), session_id(id)?.into());
            request.insert("filters".into(), event_filters.into());
            QueryMethod::SearchEvents
        }
        None => {
            if !args.cwd.is_empty() {
                // `--under`'s folders were resolved to exact cwds already; `--cwd .` is made absolute.
                let cwds: Vec<String> = args
                    .cwd
                    .iter()
                    .map(|c| if c.is_empty() { c.clone() } else { absolute(c) })
                    .collect();
                request.insert(
                    "sessionFilters".into(),
                    json!([{"kind": "cwd", "values": cwds}]),
                );
            }
            request.insert("eventFilters".into(), event_filters.into());
            QueryMethod::SearchSessions
        }
    };
    Ok((method, Value::Object(request)))
}

/// One flat page: `items` are hits with `sessionId, seq, type, time, surface, snippet` and, across
/// sessions, the session's `header` and `live`/`persisted`; each also has what a person places it by:
/// `title` (or null), `cwd` (or null), `localTime` and `age`. Then `nextCursor` and `skipped`.
pub(crate) fn flatten(
    page: &Value,
    method: QueryMethod,
    titles: &HashMap<String, String>,
    style: &Style,
) -> Value {
    let session_cwd = page["session"]["cwd"].clone();
    let items: Vec<Value> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| {
            let mut hit = match method {
                QueryMethod::SearchSessions => {
                    let mut hit = item["bestMatch"].as_object().cloned().unwrap_or_default();
                    hit.insert("header".into(), item["header"].clone());
                    hit.insert("live".into(), item["live"].clone());
                    hit.insert("persisted".into(), item["persisted"].clone());
                    hit.insert("cwd".into(), item["header"]["cwd"].clone());
                    hit
                }
                _ => {
                    let mut hit = item.as_object().cloned().unwrap_or_default();
                    hit.insert("cwd".into(), session_cwd.clone());
                    hit
                }
            };
            let id = hit
                .get("sessionId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            hit.insert(
                "title".into(),
                titles.get(&id).cloned().map_or(Value::Null, Value::from),
            );
            let time = hit.get("time").and_then(Value::as_i64).unwrap_or(0);
            hit.insert("localTime".into(), local_time(time).into());
            hit.insert("age".into(), crate::present::ago(time, style.now_ms).into());
            Value::Object(hit)
        })
        .map(|mut hit| {
            let source = SourceKind::of_id(hit["sessionId"].as_str().unwrap_or_default());
            hit["source"] = json!(source.as_str());
            hit
        })
        .collect();
    let mut flat = json!({
        "items": items,
        "nextCursor": page.get("nextCursor").cloned().unwrap_or(Value::Null),
        "skipped": page.get("skipped").cloned().unwrap_or_else(|| json!([])),
    });
    if let Some(session) = page.get("session") {
        flat["session"] = session.clone();
    }
    flat
}

/// The page for a person: per hit, the session (id, title, cwd) and the event (seq, local time and
/// age, label, type), then the snippet fitted to the terminal with the match lit; then how many were
/// shown and the next page as a command. Notices (nothing matched, sessions left out) go to stderr.
fn print_page(
    page: &Value,
    query: &str,
    style: &Style,
    next: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let items = page["items"].as_array().cloned().unwrap_or_default();
    let across = page.get("session").is_none();
    if !across && !items.is_empty() {
        let first = &items[0];
        print(out, session_line(first, style))?;
    }
    for hit in &items {
        let where_ = match (hit["live"].as_bool(), hit["persisted"].as_bool()) {
            (Some(true), Some(true)) => " · live+disk",
            (Some(true), _) => " · live",
            (Some(false), _) => " · disk",
            _ => "",
        };
        if across {
            print(out, session_line(hit, style))?;
        }
        let event = format!(
            "  #{} {} [{}] {}{}",
            hit["seq"],
            style.when(hit["time"].as_i64().unwrap_or(0)),
            hit["surface"].as_str().unwrap_or("?"),
            hit["type"].as_str().unwrap_or("?"),
            where_,
        );
        let snippet = hit["snippet"].as_str().unwrap_or_default();
        print(
            out,
            format!(
                "{}\n    {}",
                style.paint("2", &event),
                style.snippet(snippet, query, 4)
            ),
        )?;
    }
    let what = if across {
        ("session", "sessions")
    } else {
        ("event", "events")
    };
    if items.is_empty() {
        eprintln_lossy("no matches");
    } else {
        let n = items.len() as u64;
        match next {
            Some(command) => {
                print(
                    out,
                    format!(
                        "showing {} of {}+ {}; next page:",
                        count(n),
                        count(n + 1),
                        what.1
                    ),
                )?;
                print(out, format!("  {command}"))?;
            }
            None => print(out, format!("showing {}", plural(n, what.0, what.1)))?,
        }
    }
    let skipped = page["skipped"].as_array().cloned().unwrap_or_default();
    if !skipped.is_empty() {
        eprintln_lossy(&format!(
            "{} could not be searched; `diagnostics` says which and why",
            plural(skipped.len() as u64, "session", "sessions")
        ));
    }
    Ok(())
}

/// A plugin page as `search` prints it (no titles looked up, no next-page command): for other views
/// of the same hits, such as the demo's.
pub fn render_hits(page: &Value, method: QueryMethod, query: &str, style: &Style) -> String {
    let mut flat = flatten(page, method, &HashMap::new(), style);
    // No titles were looked up: say nothing rather than "(untitled)".
    for hit in flat["items"].as_array_mut().into_iter().flatten() {
        if let Some(h) = hit.as_object_mut() {
            h.remove("title");
        }
    }
    let mut out = Vec::new();
    let _ = print_page(&flat, query, style, None, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The one line that explains the order hits come in.
pub const RANK_ORDER: &str =
    "order: most matches in the event first, then the shorter event, then the newer \
(spec §4.4); `--sort newest` puts the last time first";

/// `id  "title"  ~/cwd`, the line that places a session.
fn session_line(hit: &Value, style: &Style) -> String {
    let id = hit["sessionId"].as_str().unwrap_or("?");
    let mut line = style.paint("35", id);
    line.push_str(&format!(" ({})", SourceKind::of_id(id)));
    match hit.get("title").map(Value::as_str) {
        Some(Some(title)) => line.push_str(&format!("  {}", style.paint("1", &clip(title, 80)))),
        Some(None) => line.push_str("  (untitled)"),
        None => {}
    }
    if let Some(cwd) = hit["cwd"].as_str() {
        line.push_str(&format!("  {}", style.path(cwd)));
    }
    line
}

/// A usage error for an unknown event type: the nearest known one, and every known one.
fn unknown_type(kind: &str) -> String {
    let known = dsh_codec::log::event::KNOWN_EVENT_TYPES;
    let near = known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(kind, k), *k))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| format!(" (did you mean {k}?)"))
        .unwrap_or_default();
    let family: Vec<&str> = known
        .iter()
        .copied()
        .filter(|k| k.starts_with(&format!("{kind}/")))
        .collect();
    let family = if family.is_empty() {
        String::new()
    } else {
        format!(" (types of that family: {})", family.join(", "))
    };
    format!(
        "--type {kind:?} is not an event type{near}{family}; the known types are: {}",
        known.join(", ")
    )
}

fn skipped_line(s: &Value) -> String {
    let what = s["path"]
        .as_str()
        .or_else(|| s["id"].as_str())
        .or_else(|| s["sessionId"].as_str())
        .unwrap_or("?");
    let reason = s["reason"]
        .as_str()
        .or_else(|| s["message"].as_str())
        .unwrap_or("");
    let code = s["code"].as_str().unwrap_or("?");
    format!("{what}: {code}: {}", crate::render::reason(code, reason))
}

fn now_ms() -> i64 {
    host_api::abi::call::now_unix_ms()
}

/// `--since`: epoch milliseconds, `YYYY-MM-DD[THH:MM[:SS]][Z]` (UTC), or an age `N[smhdw]`.
pub(crate) fn parse_time(text: &str, now: i64) -> Result<i64, String> {
    let bad = || {
        format!("--since {text:?}: give epoch milliseconds, a date like 2026-11-01 or 2026-11-01T09:30Z, or an age like 36h or 7d")
    };
    let t = text.trim();
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    if let Some(unit) = t.chars().last().filter(|c| "smhdw".contains(*c)) {
        if let Ok(n) = t[..t.len() - 1].parse::<i64>() {
            let ms = match unit {
                's' => 1_000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                _ => 604_800_000,
            };
            return n
                .checked_mul(ms)
                .and_then(|d| now.checked_sub(d))
                .ok_or_else(bad);
        }
    }
    let t = t.trim_end_matches('Z');
    let (date, clock) = t.split_once('T').unwrap_or((t, "00:00:00"));
    let nums = |s: &str, sep: char| -> Option<Vec<i64>> {
        s.split(sep).map(|p| p.parse::<i64>().ok()).collect()
    };
    let d = nums(date, '-').filter(|d| d.len() == 3).ok_or_else(bad)?;
    let c = nums(clock, ':')
        .filter(|c| (2..=3).contains(&c.len()))
        .ok_or_else(bad)?;
    let (y, m, day) = (d[0], d[1], d[2]);
    let (hh, mm, ss) = (c[0], c[1], c.get(2).copied().unwrap_or(0));
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    Ok((days_from_civil(y, m, day) * 86_400 + hh * 3_600 + mm * 60 + ss) * 1_000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's well-known algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A progress bar on stderr for the plugin's indexing reports, drawn only once the work has taken
/// more than a second (quick searches stay quiet). Removed when the guard drops.
fn progress(host: &Arc<PluginHost>, enabled: bool) -> Option<ProgressGuard> {
    if !enabled {
        return None;
    }
    let state: Arc<Mutex<BarState>> = Arc::new(Mutex::new(BarState::default()));
    let sink_state = state.clone();
    host.shared()
        .set_progress_sink(Some(Box::new(move |task: &str, done: u64, total: u64| {
            let mut s = sink_state.lock().unwrap_or_else(|p| p.into_inner());
            s.report(task, done, total);
        })));
    Some(ProgressGuard {
        host: host.clone(),
        state,
    })
}

#[derive(Default)]
struct BarState {
    started: Option<Instant>,
    bar: Option<ProgressBar>,
}

impl BarState {
    fn report(&mut self, task: &str, done: u64, total: u64) {
        let started = *self.started.get_or_insert_with(Instant::now);
        if total > 0 && done >= total {
            if let Some(bar) = self.bar.take() {
                bar.finish_and_clear();
            }
            self.started = None;
            return;
        }
        if self.bar.is_none() && started.elapsed() >= Duration::from_secs(1) {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_message(task.to_string());
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    }
}

struct ProgressGuard {
    host: Arc<PluginHost>,
    state: Arc<Mutex<BarState>>,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.host.shared().set_progress_sink(None);
        if let Some(bar) = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .bar
            .take()
        {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(query: &str) -> SearchArgs {
        SearchArgs {
            query: query.into(),
            session: None,
            surface: Vec::new(),
            types: Vec::new(),
            cwd: Vec::new(),
            under: Vec::new(),
            words: false,
            sort: SortOrder::Rank,
            since: None,
            limit: None,
            cursor: None,
            progress: false,
        }
    }

    #[test]
    fn the_request_is_the_spec_shape_for_both_methods() {
        let mut a = args("panic at");
        a.surface = vec!["current".into(), "shadowed".into()];
        a.types = vec!["tool/result".into()];
        a.cwd = vec!["/w".into()];
        a.limit = Some(5);
        let (method, req) = request(&a).unwrap();
        assert_eq!(method, QueryMethod::SearchSessions);
        assert_eq!(
            req,
            json!({"query": "panic at", "limit": 5,
                   "sessionFilters": [{"kind": "cwd", "values": ["/w"]}],
                   "eventFilters": [{"kind": "surface", "values": ["current", "shadowed"]},
                                    {"kind": "type", "values": ["tool/result"]}]})
        );
        let mut a = args("x");
        a.session = Some("s1".into());
        let (method, req) = request(&a).unwrap();
        assert_eq!(method, QueryMethod::SearchEvents);
        assert_eq!(req, json!({"query": "x", "sessionId": "s1", "filters": []}));
    }

    #[test]
    fn words_and_newest_are_contract_fields_only_when_asked_for() {
        let mut a = args("a b");
        a.words = true;
        a.sort = SortOrder::Newest;
        let (_, req) = request(&a).unwrap();
        assert_eq!(req["match"], "all-words");
        assert_eq!(req["order"], "newest");
        let (_, plain) = request(&args("a b")).unwrap();
        assert!(!asks_for_modes(&plain));
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let mut a = args("x");
        a.surface = vec!["visible".into()];
        assert_eq!(request(&a).unwrap_err().code(), "USAGE");
        let mut a = args("x");
        a.since = Some("yesterday-ish".into());
        assert_eq!(request(&a).unwrap_err().code(), "USAGE");
        let mut a = args("x");
        a.session = Some("s".into());
        a.cwd = vec!["/w".into()];
        assert_eq!(request(&a).unwrap_err().code(), "USAGE");
        let mut a = args("x");
        a.types = vec!["user".into()];
        let e = request(&a).unwrap_err();
        assert_eq!(e.code(), "USAGE");
        assert!(
            e.to_string().contains("user/message") && e.to_string().contains("tool/result"),
            "{e}"
        );
    }

    #[test]
    fn cwd_is_made_absolute() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(absolute("."), here.to_string_lossy());
        assert_eq!(absolute("/a/b/"), "/a/b");
        assert_eq!(absolute("/a/b/../c"), "/a/c");
        assert_eq!(
            absolute("sub"),
            here.join("sub").to_string_lossy().into_owned()
        );
    }

    #[test]
    fn the_next_page_is_a_command_one_can_paste() {
        let argv: Vec<std::ffi::OsString> =
            ["./sample-host", "search", "it's red", "--cursor", "old"]
                .iter()
                .map(Into::into)
                .collect();
        assert_eq!(
            next_page_command(&argv, "NEW_c"),
            "./sample-host search 'it'\\''s red' --cursor NEW_c"
        );
    }

    #[test]
    fn since_reads_epoch_ms_dates_and_ages() {
        let now = 1_764_460_800_000; // 2025-11-30T00:00Z
        assert_eq!(parse_time("1700000000000", now), Ok(1_700_000_000_000));
        assert_eq!(parse_time("2025-11-30", now), Ok(now));
        assert_eq!(parse_time("2025-11-30T01:30Z", now), Ok(now + 5_400_000));
        assert_eq!(parse_time("36h", now), Ok(now - 36 * 3_600_000));
        assert_eq!(parse_time("7d", now), Ok(now - 7 * 86_400_000));
        assert!(parse_time("2025-13-01", now).is_err());
    }

    #[test]
    fn cross_session_hits_are_flattened_with_their_provenance() {
        let page = json!({"items": [{"header": {"id": "s", "createdAt": 1, "cwd": "/w"}, "live": false, "persisted": true,
            "bestMatch": {"sessionId": "s", "seq": 4, "type": "user/message", "time": 9, "surface": "shadowed", "snippet": "a b"}}],
            "nextCursor": "c", "skipped": [{"path": "/x", "code": "LOG_SEQ_GAP", "reason": "gap"}]});
        let titles = HashMap::from([("s".to_string(), "Fix it".to_string())]);
        let flat = flatten(
            &page,
            QueryMethod::SearchSessions,
            &titles,
            &Style::plain(80, 9),
        );
        let hit = &flat["items"][0];
        for (key, value) in [
            ("sessionId", json!("s")),
            ("seq", json!(4)),
            ("surface", json!("shadowed")),
            ("header", json!({"id": "s", "createdAt": 1, "cwd": "/w"})),
            ("persisted", json!(true)),
            ("title", json!("Fix it")),
            ("cwd", json!("/w")),
            ("source", json!("dsh")),
            ("age", json!("just now")),
        ] {
            assert_eq!(hit[key], value, "{key}: {hit}");
        }
        assert!(hit["localTime"].is_string());
        assert_eq!(flat["nextCursor"], "c");
        assert_eq!(flat["skipped"][0]["code"], "LOG_SEQ_GAP");
    }
}
