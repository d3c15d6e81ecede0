//! `search` and `diagnostics`: building the spec-shaped search request from the command line, and
//! printing a page the way ripgrep prints matches (session, time, label, snippet with the match lit on
//! a terminal), or as one JSON object.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use host_api::abi::client::QueryMethod;
use host_api::abi::{Call, EmptyRequest};
use host_api::source::SourceKind;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Map, Value};

use super::{about_id, print, session_id, CommandError, Options};
use crate::cli::SearchArgs;
use crate::PluginHost;

/// Runs `search`.
pub fn run(
    host: &Arc<PluginHost>,
    args: &SearchArgs,
    options: &Options,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let (method, request) = request(args)?;
    let _bar = progress(host, !options.json || args.progress);
    let call = Call::new();
    let page: Value = host
        .query(|q| q.raw(method, &call, &request))
        .map_err(|e| match &request["sessionId"] {
            Value::String(id) => about_id(e, id),
            _ => CommandError::Plugin(e),
        })?;
    let page = flatten(&page, method);
    if options.json {
        print(out, page.to_string())?;
    } else {
        let query = request["query"].as_str().unwrap_or_default();
        print_page(&page, query, std::io::stdout().is_terminal(), out)?;
    }
    Ok(0)
}

/// Runs `diagnostics`.
pub fn diagnostics(
    host: &Arc<PluginHost>,
    options: &Options,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let _bar = progress(host, !options.json);
    let call = Call::new();
    let report: Value = host
        .query(|q| q.raw(QueryMethod::Diagnostics, &call, &EmptyRequest {}))
        .map_err(CommandError::Plugin)?;
    if options.json {
        print(out, report.to_string())?;
        return Ok(0);
    }
    for (key, value) in report.as_object().into_iter().flatten() {
        if key != "skipped" && key != "sources" {
            print(out, format!("{key}: {value}"))?;
        }
    }
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
    let skipped = report["skipped"].as_array().cloned().unwrap_or_default();
    print(
        out,
        format!("{} session(s) left out of search", skipped.len()),
    )?;
    for s in &skipped {
        print(out, format!("  {}", skipped_line(s)))?;
    }
    Ok(0)
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
    let method = match &args.session {
        Some(id) => {
            if !args.cwd.is_empty() {
                return Err(CommandError::Usage(
                    "--cwd narrows sessions; it cannot be used with --session".into(),
                ));
            }
            request.insert("sessionId".into(), session_id(id)?.into());
            request.insert("filters".into(), event_filters.into());
            QueryMethod::SearchEvents
        }
        None => {
            if !args.cwd.is_empty() {
                request.insert(
                    "sessionFilters".into(),
                    json!([{"kind": "cwd", "values": args.cwd}]),
                );
            }
            request.insert("eventFilters".into(), event_filters.into());
            QueryMethod::SearchSessions
        }
    };
    Ok((method, Value::Object(request)))
}

/// One flat page: `items` are hits with `sessionId, seq, type, time, surface, snippet` and, across
/// sessions, the session's `header` and `live`/`persisted`; then `nextCursor` and `skipped`.
fn flatten(page: &Value, method: QueryMethod) -> Value {
    let items: Vec<Value> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| match method {
            QueryMethod::SearchSessions => {
                let mut hit = item["bestMatch"].as_object().cloned().unwrap_or_default();
                hit.insert("header".into(), item["header"].clone());
                hit.insert("live".into(), item["live"].clone());
                hit.insert("persisted".into(), item["persisted"].clone());
                Value::Object(hit)
            }
            _ => item.clone(),
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

fn print_page(
    page: &Value,
    query: &str,
    color: bool,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let items = page["items"].as_array().cloned().unwrap_or_default();
    for hit in &items {
        let where_ = match (hit["live"].as_bool(), hit["persisted"].as_bool()) {
            (Some(true), Some(true)) => " live+disk",
            (Some(true), _) => " live",
            (Some(false), _) => " disk",
            _ => "",
        };
        let id = hit["sessionId"].as_str().unwrap_or("?");
        let head = format!(
            "{id}:{} {} [{}] {} ({}){}",
            hit["seq"],
            format_time(hit["time"].as_i64().unwrap_or(0)),
            hit["surface"].as_str().unwrap_or("?"),
            hit["type"].as_str().unwrap_or("?"),
            SourceKind::of_id(id),
            where_,
        );
        let snippet = hit["snippet"].as_str().unwrap_or_default();
        let head = if color {
            format!("\x1b[35m{head}\x1b[0m")
        } else {
            head
        };
        print(
            out,
            format!("{head}\n    {}", highlight(snippet, query, color)),
        )?;
    }
    if items.is_empty() {
        print(out, "no matches")?;
    }
    if let Some(cursor) = page["nextCursor"].as_str() {
        print(out, format!("more: --cursor {cursor}"))?;
    }
    let skipped = page["skipped"].as_array().cloned().unwrap_or_default();
    if !skipped.is_empty() {
        print(
            out,
            format!(
                "{} session(s) could not be searched; see `diagnostics`",
                skipped.len()
            ),
        )?;
    }
    Ok(())
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
    format!("{what}: {} {reason}", s["code"].as_str().unwrap_or("?"))
}

/// Lights up each case-insensitive occurrence of the query's words in the snippet. For display only:
/// which events match is the index's decision, not this.
fn highlight(snippet: &str, query: &str, color: bool) -> String {
    if !color {
        return snippet.to_string();
    }
    let lower = snippet.to_lowercase();
    // Byte offsets in `lower` equal those in `snippet` only when lowercasing kept every length.
    if lower.len() != snippet.len() {
        return snippet.to_string();
    }
    let mut marks = vec![false; snippet.len()];
    for word in query.split_whitespace().map(str::to_lowercase) {
        let mut from = 0;
        while let Some(at) = lower[from..].find(&word) {
            let start = from + at;
            marks[start..start + word.len()]
                .iter_mut()
                .for_each(|m| *m = true);
            from = start + word.len().max(1);
        }
    }
    let mut out = String::with_capacity(snippet.len() + 16);
    let mut lit = false;
    for (i, c) in snippet.char_indices() {
        if marks[i] != lit {
            out.push_str(if marks[i] { "\x1b[1;31m" } else { "\x1b[0m" });
            lit = marks[i];
        }
        out.push(c);
    }
    if lit {
        out.push_str("\x1b[0m");
    }
    out
}

fn now_ms() -> i64 {
    host_api::abi::call::now_unix_ms()
}

/// `--since`: epoch milliseconds, `YYYY-MM-DD[THH:MM[:SS]][Z]` (UTC), or an age `N[smhdw]`.
fn parse_time(text: &str, now: i64) -> Result<i64, String> {
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

/// `YYYY-MM-DD HH:MM` (UTC) of epoch milliseconds.
fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3_600,
        rem % 3_600 / 60
    )
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
        assert_eq!(format_time(now + 5_400_000), "2025-11-30 01:30");
        assert_eq!(format_time(0), "1970-01-01 00:00");
    }

    #[test]
    fn cross_session_hits_are_flattened_with_their_provenance() {
        let page = json!({"items": [{"header": {"id": "s", "createdAt": 1}, "live": false, "persisted": true,
            "bestMatch": {"sessionId": "s", "seq": 4, "type": "user/message", "time": 9, "surface": "shadowed", "snippet": "a b"}}],
            "nextCursor": "c", "skipped": [{"path": "/x", "code": "LOG_SEQ_GAP", "reason": "gap"}]});
        let flat = flatten(&page, QueryMethod::SearchSessions);
        assert_eq!(
            flat["items"][0],
            json!({"sessionId": "s", "seq": 4, "type": "user/message", "time": 9, "surface": "shadowed",
                   "snippet": "a b", "header": {"id": "s", "createdAt": 1}, "live": false, "persisted": true,
                   "source": "dsh"})
        );
        assert_eq!(flat["nextCursor"], "c");
        assert_eq!(flat["skipped"][0]["code"], "LOG_SEQ_GAP");
    }

    #[test]
    fn highlighting_marks_each_query_word_on_a_terminal_only() {
        assert_eq!(highlight("an Error here", "error", false), "an Error here");
        assert_eq!(
            highlight("an Error here", "error", true),
            "an \x1b[1;31mError\x1b[0m here"
        );
    }
}
