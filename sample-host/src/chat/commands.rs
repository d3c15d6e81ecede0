//! The one-shot `cite` and `candidates` commands.
//!
//! `cite --into ID --message TEXT` runs one chat turn on an existing session: the message's mentions
//! are prepared by the plugin, the context message and the readable line appended, the stand-in model
//! answers. It prints the appended events and the two prefix figures (`sharedPrefixBytes`,
//! `previousRequestBytes`). On any error nothing is appended and the error's code and message are
//! printed (`{"error":{"code","message"}}` under `--json`), exit status 1.

use std::io::{self, Write};

use dsh_codec::log::Event;
use serde_json::{json, Value};

use super::mention;
use super::repl::{cache_line, engine_line};
use super::session::{ChatEnv, ChatError, ChatSession, Turn};
use super::transcript::human_bytes;

/// Options of `cite`.
#[derive(Debug, Clone)]
pub struct CiteOptions {
    /// The session the citation is appended to (live, or persisted under the sessions root).
    pub into: String,
    /// The user's line; it must mention at least one session.
    pub message: String,
    pub json: bool,
}

fn error_out(
    code: &str,
    message: &str,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let written = if as_json {
        writeln!(
            out,
            "{}",
            json!({"error": {"code": code, "message": message}})
        )
    } else {
        writeln!(err, "error {code}: {message}")
    };
    // Exit status 1 says it either way; a lost error line has nowhere else to go.
    let _ = written;
    1
}

/// `cite --into ID --message TEXT [--json]`. Returns the exit code.
pub fn cite(
    env: ChatEnv<'_>,
    options: &CiteOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let fail = |e: &ChatError, out: &mut dyn Write, err: &mut dyn Write| {
        error_out(&e.code(), &e.message(), options.json, out, err)
    };
    // Checked before the session is opened, so a line that cites nothing changes nothing.
    match mention::parse(&options.message) {
        Ok(parsed) if parsed.references.is_empty() => {
            return error_out(
                "HOST_NO_MENTION",
                "the message mentions no session; cite one as @[label](dsh-session:…) (see `candidates`)",
                options.json,
                out,
                err,
            )
        }
        Ok(_) => {}
        Err(e) => return fail(&ChatError::Plugin(e), out, err),
    }
    let mut session = match ChatSession::open_existing(env, &options.into) {
        Ok(s) => s,
        Err(e) => return fail(&e, out, err),
    };
    let turn = match session.send(&options.message) {
        Ok(turn) => turn,
        Err(e) => return fail(&e, out, err),
    };
    let written = if options.json {
        writeln!(out, "{}", cite_json(session.id(), &turn))
    } else {
        cite_text(session.id(), &turn, out)
    };
    if written.is_err() {
        return 1;
    }
    0
}

fn cite_json(id: &str, turn: &Turn) -> Value {
    let envelopes = |events: &[Event]| events.iter().map(Event::to_value).collect::<Vec<_>>();
    let mut v = json!({
        "sessionId": id,
        "appended": envelopes(&turn.user_batch),
        "reply": envelopes(&turn.reply_batch),
        "citations": turn.citations.iter().map(|c| json!({"label": c.label, "retainedMessages": c.retained_messages, "bytes": c.bytes, "omittedMessages": c.omitted_messages})).collect::<Vec<_>>(),
        "sharedPrefixBytes": turn.cache.shared_prefix_bytes,
        "previousRequestBytes": turn.cache.previous_request_bytes,
        "requestBytes": turn.cache.request_bytes,
        "engine": super::repl::figures_json(turn)["engine"],
    });
    if let Some(c) = &turn.contrast {
        v["contrast"] = json!({
            "beforeHistorySharedPrefixBytes": c.before_history.shared_prefix_bytes,
            "dshOrderSharedPrefixBytes": c.dsh_order.shared_prefix_bytes,
        });
    }
    v
}

fn cite_text(id: &str, turn: &Turn, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "appended to {id}:")?;
    for event in turn.user_batch.iter().chain(&turn.reply_batch) {
        let what = match (event.kind.as_str(), event.data.pointer("/source/kind")) {
            ("user/message", Some(Value::String(k))) if k == "session-reference" => {
                "the context message (the snapshot; the model sees it, the transcript shows the line below)".to_string()
            }
            ("user/message", _) => format!("the readable line: {}", turn.readable),
            ("assistant/message", _) => "the model's reply".to_string(),
            _ => String::new(),
        };
        writeln!(out, "  seq {:>4}  {:<18} {what}", event.seq, event.kind)?;
    }
    for citation in &turn.citations {
        writeln!(out, "{}", citation.line())?;
    }
    writeln!(out, "{}", cache_line(&turn.cache, turn.request.messages))?;
    writeln!(
        out,
        "sharedPrefixBytes {} previousRequestBytes {}",
        turn.cache.shared_prefix_bytes, turn.cache.previous_request_bytes
    )?;
    if let Some(engine) = &turn.engine {
        writeln!(out, "{}", engine_line(engine))?;
    }
    if let Some(c) = &turn.contrast {
        writeln!(
            out,
            "for contrast: the snapshot before the earlier history would share {}; DSH's order (line, then context) {}",
            human_bytes(c.before_history.shared_prefix_bytes as u64),
            human_bytes(c.dsh_order.shared_prefix_bytes as u64)
        )?;
    }
    Ok(())
}

/// One page of candidates: `page` (from 1) of `per_page`.
#[derive(Debug, Clone, Copy)]
pub struct CandidatePage {
    pub page: u64,
    pub per_page: u64,
}

impl Default for CandidatePage {
    fn default() -> Self {
        Self {
            page: 1,
            per_page: 50,
        }
    }
}

/// `candidates [QUERY] [--json]`: the sessions `agent_session_id` could cite (every session when it is
/// empty), with their mentions, labels made unique. Returns the exit code.
pub fn candidates(
    env: ChatEnv<'_>,
    agent_session_id: &str,
    query: &str,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    candidates_page(
        env,
        agent_session_id,
        query,
        CandidatePage::default(),
        as_json,
        out,
        err,
    )
}

/// [`candidates`] for one page, saying how many were shown and how to see the next page.
pub fn candidates_page(
    env: ChatEnv<'_>,
    agent_session_id: &str,
    query: &str,
    page: CandidatePage,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let page = CandidatePage {
        page: page.page.max(1),
        per_page: page.per_page.max(1),
    };
    let skip = (page.page - 1).saturating_mul(page.per_page);
    // One more than the page holds: whether another page follows.
    let want = skip.saturating_add(page.per_page).saturating_add(1);
    let mut list = match env.services.candidates_up_to(agent_session_id, query, want) {
        Ok(list) => list,
        Err(e) => return error_out(&e.code_name(), &e.message, as_json, out, err),
    };
    for c in &mut list {
        let source = dsh_codec::source::SourceKind::of_id(c["sessionId"].as_str().unwrap_or(""));
        c["source"] = Value::from(source.as_str());
    }
    super::labels::make_unique(&mut list);
    let more = list.len() as u64 > skip + page.per_page;
    let list: Vec<Value> = list
        .into_iter()
        .skip(skip as usize)
        .take(page.per_page as usize)
        .collect();
    let next = more.then(|| {
        let mut words = vec!["sample-host".to_string(), "candidates".to_string()];
        if !query.is_empty() {
            words.push(format!("'{}'", query.replace('\'', "'\\''")));
        }
        words.push(format!("--page {}", page.page + 1));
        if page.per_page != CandidatePage::default().per_page {
            words.push(format!("--limit {}", page.per_page));
        }
        words.join(" ")
    });
    let written = if as_json {
        if page.page == 1 && next.is_none() && page.per_page == CandidatePage::default().per_page {
            writeln!(out, "{}", Value::Array(list))
        } else {
            writeln!(
                out,
                "{}",
                json!({"candidates": list, "page": page.page, "more": more, "nextCommand": next})
            )
        }
    } else {
        (|| {
            if list.is_empty() {
                writeln!(err, "no candidates")?;
            }
            for c in &list {
                writeln!(
                    out,
                    "{}  ({}, {}, {})\n    {}",
                    c["label"].as_str().unwrap_or("?"),
                    c["sessionId"].as_str().unwrap_or("?"),
                    c["cwd"].as_str().unwrap_or("no cwd"),
                    c["source"].as_str().unwrap_or("?"),
                    c["mention"].as_str().unwrap_or("")
                )?;
            }
            let shown = list.len() as u64;
            match &next {
                Some(next) => writeln!(
                    out,
                    "showing {} of {}+ candidates; next page: {next}",
                    crate::present::count(shown),
                    crate::present::count(skip + shown + 1)
                )?,
                None if shown > 0 => writeln!(
                    out,
                    "showing {}",
                    crate::present::plural(skip + shown, "candidate", "candidates")
                )?,
                None => {}
            }
            Ok(())
        })()
    };
    if written.is_err() {
        return 1;
    }
    0
}
