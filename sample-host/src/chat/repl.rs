//! The `chat` command: a line-editing REPL over one chat session, with slash commands.
//!
//! On a terminal, lines are read with rustyline (editing, and history kept in the user's data dir);
//! otherwise lines are read from standard input as they come, so a chat can be scripted. Everything the
//! user sees goes to one writer: the human view of each turn (a citation as one line, never its
//! JSON), the stand-in model's reply and the cache figure. `/request` shows the model's view.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::mpsc::Receiver;

use serde_json::{json, Value};

use super::mention;
use super::session::{ChatEnv, ChatError, ChatSession, Turn, TurnSink};
use super::transcript::{human_bytes, Citation};
use crate::openai::EngineFigures;
use crate::present::{count, plural, ColorChoice, Style};
use crate::request::CacheFigure;

/// Options of the `chat` command.
#[derive(Debug, Clone, Default)]
pub struct ChatOptions {
    /// The session to continue (live or on disk) or to start under this id; a fresh id when absent.
    pub session: Option<String>,
    /// Each turn (or its error) as one JSON object on a line instead of the human view.
    pub json: bool,
}

/// Where lines come from.
pub trait LineSource {
    /// The next line without its line ending, `None` at the end of input. `prefill` is text already on
    /// the line (a mention `/cite` picked).
    fn read_line(&mut self, prompt: &str, prefill: &str) -> io::Result<Option<String>>;
    /// Whether the user sees their own line as they type it (a terminal); otherwise the chat echoes it.
    fn shows_typing(&self) -> bool;
    /// Starts printing `announcements` above the prompt as they come, when this source can (a
    /// terminal); otherwise hands them back for the REPL to print between lines.
    fn announce_while_reading(
        &mut self,
        announcements: Receiver<String>,
    ) -> Result<(), Receiver<String>> {
        Err(announcements)
    }
}

/// Lines from any reader (a pipe, a file, a test's script).
pub struct ScriptedLines<R> {
    reader: R,
}

impl<R: BufRead> ScriptedLines<R> {
    pub fn new(reader: R) -> Self {
        Self { reader }
    }
}

impl<R: BufRead> LineSource for ScriptedLines<R> {
    fn read_line(&mut self, _prompt: &str, prefill: &str) -> io::Result<Option<String>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end_matches(['\n', '\r']);
        Ok(Some(format!("{prefill}{line}")))
    }

    fn shows_typing(&self) -> bool {
        false
    }
}

/// Lines from a terminal through rustyline, with a history file.
pub struct TerminalLines {
    editor: rustyline::DefaultEditor,
    history: Option<PathBuf>,
}

impl TerminalLines {
    /// An editor with the history at `history` (loaded if it exists; created when saved).
    pub fn new(history: Option<PathBuf>) -> Result<Self, rustyline::error::ReadlineError> {
        let mut editor = rustyline::DefaultEditor::new()?;
        // Ctrl-C on an empty line leaves (as Ctrl-D does); on a line with text it clears the line.
        editor.bind_sequence(
            rustyline::KeyEvent::ctrl('C'),
            rustyline::EventHandler::Conditional(Box::new(CtrlC)),
        );
        if let Some(path) = &history {
            // A missing or unreadable history only means starting without one.
            let _ = editor.load_history(path);
        }
        Ok(Self { editor, history })
    }

    /// Saves the history (best effort: a read-only data dir must not end the chat with an error).
    pub fn save(&mut self) {
        if let Some(path) = &self.history {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = self.editor.save_history(path);
        }
    }
}

/// Ctrl-C at the prompt: leave on an empty line, clear a line with text.
struct CtrlC;

impl rustyline::ConditionalEventHandler for CtrlC {
    fn handle(
        &self,
        _evt: &rustyline::Event,
        _n: rustyline::RepeatCount,
        _positive: bool,
        ctx: &rustyline::EventContext,
    ) -> Option<rustyline::Cmd> {
        Some(if ctx.line().is_empty() {
            rustyline::Cmd::Interrupt
        } else {
            rustyline::Cmd::Kill(rustyline::Movement::WholeLine)
        })
    }
}

impl LineSource for TerminalLines {
    fn read_line(&mut self, prompt: &str, prefill: &str) -> io::Result<Option<String>> {
        use rustyline::error::ReadlineError;
        match self.editor.readline_with_initial(prompt, (prefill, "")) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = self.editor.add_history_entry(line.as_str());
                }
                Ok(Some(line))
            }
            // Ctrl-C on an empty line (a line with text is cleared by `CtrlC`) and Ctrl-D end the
            // chat.
            Err(ReadlineError::Interrupted) | Err(ReadlineError::Eof) => Ok(None),
            Err(ReadlineError::Io(e)) => Err(e),
            Err(other) => Err(io::Error::other(other.to_string())),
        }
    }

    fn shows_typing(&self) -> bool {
        true
    }

    fn announce_while_reading(
        &mut self,
        announcements: Receiver<String>,
    ) -> Result<(), Receiver<String>> {
        use rustyline::ExternalPrinter as _;
        let Ok(mut printer) = self.editor.create_external_printer() else {
            return Err(announcements);
        };
        std::thread::Builder::new()
            .name("chat-announce".into())
            .spawn(move || {
                for line in announcements {
                    if printer.print(format!("{line}\n")).is_err() {
                        return;
                    }
                }
            })
            .map(|_| ())
            // The thread (and with it the receiver) could not start; nothing is lost but the printing.
            .map_err(|_| std::sync::mpsc::channel().1)
    }
}

/// Where the chat keeps its line history: beside the default sessions root, in the user's data dir.
pub fn history_path() -> PathBuf {
    let sessions = crate::paths::default_sessions_dir();
    sessions
        .parent()
        .map_or(sessions.clone(), PathBuf::from)
        .join("chat_history")
}

/// The `chat` command: a terminal REPL when standard input is a terminal, else lines from it.
/// Returns the exit code.
pub fn run(env: ChatEnv<'_>, options: &ChatOptions, out: &mut dyn Write) -> i32 {
    run_announcing(env, options, None, out)
}

/// [`run`], announcing each line of `announcements` (reloads, refused builds) as it arrives.
pub fn run_announcing(
    env: ChatEnv<'_>,
    options: &ChatOptions,
    announcements: Option<Receiver<String>>,
    out: &mut dyn Write,
) -> i32 {
    if io::stdin().is_terminal() {
        match TerminalLines::new(Some(history_path())) {
            Ok(mut lines) => {
                let code = run_with_announcements(env, options, &mut lines, announcements, out);
                lines.save();
                code
            }
            Err(e) => {
                let _ = writeln!(out, "error: cannot start the line editor: {e}");
                1
            }
        }
    } else {
        let stdin = io::stdin();
        let mut lines = ScriptedLines::new(stdin.lock());
        run_with_announcements(env, options, &mut lines, announcements, out)
    }
}

const HELP: &str = "\
Type a line to talk to the model (the stand-in unless --model names a server). Cite another session inline with @[label](dsh-session:…).
  /search QUERY        search every session (live and on disk); hits show current/shadowed/log-only
  /find ID QUERY       search inside one session, every hit with its label
  /cite QUERY          search, pick a hit by number, and start the next line with its mention
  /candidates [QUERY]  sessions you can cite, with their mentions
  /compact             replace all but the newest two messages with a summary checkpoint
  /request             the last model request, byte for byte (the model's view)
  /sessions [--all]    sessions, live and on disk (the newest 20, or all)
  /plugins             which plugin library serves, and refused ones
  /help                this help
  /quit                leave (Ctrl-D, or Ctrl-C on an empty line; Ctrl-C during a step cancels it)";

/// The REPL over any line source. Returns the exit code: 0 when the input ends or on `/quit`, 1 when
/// the session cannot be opened or the output fails.
pub fn run_with(
    env: ChatEnv<'_>,
    options: &ChatOptions,
    input: &mut dyn LineSource,
    out: &mut dyn Write,
) -> i32 {
    run_with_announcements(env, options, input, None, out)
}

/// [`run_with`], announcing reloads and refused builds as they happen: above the prompt on a terminal,
/// else before the next line is handled.
pub fn run_with_announcements(
    env: ChatEnv<'_>,
    options: &ChatOptions,
    input: &mut dyn LineSource,
    announcements: Option<Receiver<String>>,
    out: &mut dyn Write,
) -> i32 {
    let announcements = announcements.and_then(|rx| input.announce_while_reading(rx).err());
    let mut session = match ChatSession::open(env, options.session.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(out, "error {}: {}", e.code(), e.message());
            return 1;
        }
    };
    match repl(
        &mut session,
        options.json,
        input,
        announcements.as_ref(),
        out,
    ) {
        Ok(()) => 0,
        Err(e) => {
            // The output went away (a closed pipe); there is no one left to tell.
            let _ = writeln!(io::stderr(), "chat ended: {e}");
            1
        }
    }
}

fn repl(
    session: &mut ChatSession<'_>,
    json: bool,
    input: &mut dyn LineSource,
    announcements: Option<&Receiver<String>>,
    out: &mut dyn Write,
) -> io::Result<()> {
    if !json {
        let messages = session.last_request().messages as u64;
        writeln!(
            out,
            "chat session {} ({} on its surface) — /help for commands",
            session.id(),
            plural(messages, "message", "messages")
        )?;
        writeln!(out, "{}", where_it_lives(session))?;
    }
    let mut pending = String::new();
    let drain = |out: &mut dyn Write| -> io::Result<()> {
        for line in announcements.into_iter().flat_map(|rx| rx.try_iter()) {
            writeln!(out, "{line}")?;
        }
        Ok(())
    };
    loop {
        drain(out)?;
        let Some(line) = input.read_line("you> ", &pending)? else {
            drain(out)?;
            if !json {
                writeln!(out, "left the chat. {}", where_it_lives(session))?;
            }
            return Ok(());
        };
        drain(out)?;
        pending.clear();
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !input.shows_typing() && !json {
            writeln!(out, "you> {line}")?;
        }
        let (command, rest) = match line.strip_prefix('/') {
            Some(cmd) => {
                let (c, r) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
                (Some(c), r.trim())
            }
            None => (None, ""),
        };
        match command {
            None => {
                let mut view = TurnView {
                    out: &mut *out,
                    terminal: input.shows_typing(),
                    json,
                    streaming: false,
                    failed: None,
                };
                let result = session.send_streaming(line, &mut view);
                view.finish()?;
                match result {
                    Ok(turn) if json => writeln!(out, "{}", turn_json(session.id(), &turn))?,
                    Ok(turn) => show_figures(&turn, out)?,
                    Err(e) if json => writeln!(
                        out,
                        "{}",
                        json!({"error": {"code": e.code(), "message": e.message()}})
                    )?,
                    Err(e) => show_error(&e, out)?,
                }
            }
            Some("quit" | "exit" | "q") => {
                if !json {
                    writeln!(out, "left the chat. {}", where_it_lives(session))?;
                }
                return Ok(());
            }
            Some("help" | "h" | "?") => writeln!(out, "{HELP}")?,
            Some("search") => {
                search(session, rest, out)?;
            }
            Some("find") => find(session, rest, out)?,
            Some("cite") => {
                if let Some(mention) = cite(session, rest, input, out)? {
                    if !input.shows_typing() {
                        writeln!(out, "the next line starts with {mention}")?;
                    }
                    pending = format!("{mention} ");
                }
            }
            Some("candidates") => candidates(session, rest, out)?,
            Some("compact") => match session.compact() {
                Ok(c) => writeln!(
                    out,
                    "compacted: {} messages on the surface became {} (checkpoint at seq {}); the replaced \
events are now shadowed, still in the log and searchable",
                    c.before,
                    c.after,
                    c.batch.get(2).map_or(0, |e| e.seq)
                )?,
                Err(e) => show_error(&e, out)?,
            },
            Some("request") => {
                let request = session.last_request();
                writeln!(
                    out,
                    "last model request: {} messages, {} bytes, fingerprint {}",
                    request.messages,
                    request.bytes.len(),
                    request.fingerprint()
                )?;
                // Whole, unclipped: this is the one place that shows exactly what the model got.
                out.write_all(&request.bytes)?;
            }
            Some("sessions") => match session.env().services.list_sessions() {
                Ok(records) => {
                    let style = Style::detect(ColorChoice::Never);
                    let all = rest == "--all";
                    let shown = if all { records.len() } else { SESSIONS_SHOWN };
                    for r in records.iter().take(shown) {
                        let h = &r["header"];
                        let source = match (r["live"].as_bool(), r["persisted"].as_bool()) {
                            (Some(true), Some(true)) => "live+disk",
                            (Some(true), _) => "live",
                            _ => "disk",
                        };
                        writeln!(
                            out,
                            "  {}  {}  {}  {}",
                            h["id"].as_str().unwrap_or("?"),
                            style.when(h["createdAt"].as_i64().unwrap_or(0)),
                            source,
                            h["cwd"].as_str().map_or("-".into(), |c| style.path(c))
                        )?;
                    }
                    if records.len() > shown {
                        writeln!(
                            out,
                            "  … {} more: /sessions --all lists every one",
                            count((records.len() - shown) as u64)
                        )?;
                    }
                }
                Err(e) => show_error(&ChatError::Plugin(e), out)?,
            },
            Some("plugins") => writeln!(out, "{}", session.env().services.plugins_status())?,
            Some(other) => writeln!(out, "unknown command /{other} — /help lists them")?,
        }
    }
}

/// How many sessions `/sessions` lists before saying how many more there are.
const SESSIONS_SHOWN: usize = 20;

fn show_error(e: &ChatError, out: &mut dyn Write) -> io::Result<()> {
    // Each service answers a cancellation with its own code (search, citation, exact read).
    if matches!(
        e.code().as_str(),
        "SESSION_QUERY_ABORTED" | "SESSION_REFERENCE_CANCELLED" | "PLUGIN_CANCELLED"
    ) {
        return writeln!(out, "cancelled (Ctrl-C); back at the prompt");
    }
    writeln!(out, "error {}: {}", e.code(), e.message())
}

/// Where the chat's log is and how to come back to it.
fn where_it_lives(session: &ChatSession<'_>) -> String {
    let id = session.id();
    let log = session.env().sessions_root.map(|root| {
        dsh_codec::log::layout::SessionsRoot::new(root)
            .find(id)
            .ok()
            .flatten()
            .map(|listed| listed.path.display().to_string())
            .unwrap_or_else(|| format!("under {} (written with the first message)", root.display()))
    });
    let resume = format!("resume with: sample-host chat --session {id}");
    match log {
        Some(log) => format!("log: {log}; {resume}"),
        None => format!(
            "this session is not persisted (no sessions folder); {resume} while this host runs"
        ),
    }
}

/// The human view of a turn as it runs: citations as one line each, then the reply as it streams in.
/// A write that fails is kept and reported once the turn is over (the turn itself cannot be stopped
/// half-way from here).
struct TurnView<'o> {
    out: &'o mut dyn Write,
    terminal: bool,
    json: bool,
    streaming: bool,
    failed: Option<io::Error>,
}

impl TurnView<'_> {
    fn write(&mut self, text: &str) {
        if self.failed.is_none() {
            if let Err(e) = self
                .out
                .write_all(text.as_bytes())
                .and_then(|()| self.out.flush())
            {
                self.failed = Some(e);
            }
        }
    }

    /// Ends the reply's line (when one was started) and reports a failed write.
    fn finish(mut self) -> io::Result<()> {
        if self.streaming {
            self.write("\n");
        }
        self.failed.map_or(Ok(()), Err)
    }
}

impl TurnSink for TurnView<'_> {
    fn cited(&mut self, readable: &str, citations: &[Citation]) {
        if self.json {
            return;
        }
        if !self.terminal && readable.contains('@') && !citations.is_empty() {
            self.write(&format!("    (as the transcript shows it: {readable})\n"));
        }
        for citation in citations {
            self.write(&format!("{}\n", citation.line()));
        }
    }

    fn delta(&mut self, text: &str) {
        if self.json {
            return;
        }
        if !self.streaming {
            self.streaming = true;
            self.write("assistant> ");
        }
        self.write(text);
    }
}

/// After the reply: the cache figure, the engine's figures, and for a citation the other orders.
fn show_figures(turn: &Turn, out: &mut dyn Write) -> io::Result<()> {
    show_cache_figures(turn, out)?;
    if let Some(c) = &turn.contrast {
        writeln!(
            out,
            "    had the snapshot gone before the earlier history: {} shared; DSH's order (line, then \
context): {} shared",
            human_bytes(c.before_history.shared_prefix_bytes as u64),
            human_bytes(c.dsh_order.shared_prefix_bytes as u64),
        )?;
    }
    Ok(())
}

/// The cache figure of a turn's request and, when the engine reported them, its own figures.
pub fn show_cache_figures(turn: &Turn, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "    {}",
        cache_line(&turn.cache, turn.request.messages)
    )?;
    if let Some(engine) = &turn.engine {
        writeln!(out, "    {}", engine_line(engine))?;
    }
    Ok(())
}

/// `engine: 1514 of 1540 prompt tokens from its cache, 26 evaluated (prompt eval 3.5 ms)`: what the
/// engine itself reported; `?` for a figure it did not report.
pub fn engine_line(engine: &EngineFigures) -> String {
    let n = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let eval = engine
        .prompt_ms
        .map(|ms| format!(" (prompt eval {ms:.1} ms)"))
        .unwrap_or_default();
    format!(
        "engine: {} of {} prompt tokens from its cache, {} evaluated{eval}",
        n(engine.cached_tokens),
        n(engine.prompt_tokens),
        n(engine.evaluated_tokens),
    )
}

/// A turn's figures as JSON: the byte figures, and `engine` (null from the stand-in).
pub fn figures_json(turn: &Turn) -> Value {
    let mut v = turn.cache.to_json();
    v["engine"] = turn
        .engine
        .as_ref()
        .map_or(Value::Null, EngineFigures::to_json);
    v
}

/// One turn under `chat --json`.
fn turn_json(id: &str, turn: &Turn) -> Value {
    let mut v = json!({
        "sessionId": id,
        "readable": turn.readable,
        "reply": turn.reply,
        "messages": turn.request.messages,
        "citations": turn.citations.iter().map(|c| c.label.clone()).collect::<Vec<_>>(),
    });
    if let (Value::Object(v), Value::Object(f)) = (&mut v, figures_json(turn)) {
        v.extend(f);
    }
    if let Some(c) = &turn.contrast {
        v["contrast"] = json!({
            "beforeHistorySharedPrefixBytes": c.before_history.shared_prefix_bytes,
            "dshOrderSharedPrefixBytes": c.dsh_order.shared_prefix_bytes,
        });
    }
    v
}

/// `request: 6 messages, 5.2 KiB; sharedPrefixBytes 1400 of previousRequestBytes 1400 (cache kept)`;
/// for a session's first request, which has no previous one, no prefix figure.
pub fn cache_line(cache: &CacheFigure, messages: usize) -> String {
    let messages = plural(messages as u64, "message", "messages");
    if cache.previous_request_bytes == 0 {
        return format!(
            "request: {messages}, {}; the session's first request: no previous request to share a prefix with",
            human_bytes(cache.request_bytes as u64)
        );
    }
    format!(
        "request: {messages}, {}; sharedPrefixBytes {} of previousRequestBytes {} ({})",
        human_bytes(cache.request_bytes as u64),
        cache.shared_prefix_bytes,
        cache.previous_request_bytes,
        if cache.kept() {
            "cache kept"
        } else {
            "cache rebuilt"
        }
    )
}

/// `/search QUERY`: numbered session hits. Returns them for `/cite`.
fn search(session: &ChatSession<'_>, query: &str, out: &mut dyn Write) -> io::Result<Vec<Value>> {
    if query.is_empty() {
        writeln!(out, "usage: /search QUERY")?;
        return Ok(Vec::new());
    }
    let page = match session
        .env()
        .services
        .search_sessions(json!({"query": query, "limit": 10}))
    {
        Ok(page) => page,
        Err(e) => {
            show_error(&ChatError::Plugin(e), out)?;
            return Ok(Vec::new());
        }
    };
    let items: Vec<Value> = page["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        writeln!(out, "no session matches {query:?}")?;
    }
    let style = Style::detect(ColorChoice::Auto);
    for (i, item) in items.iter().enumerate() {
        let hit = &item["bestMatch"];
        writeln!(
            out,
            "  {}. {}  {}  #{} {} [{}] {}\n       {}",
            i + 1,
            hit["sessionId"].as_str().unwrap_or("?"),
            item["header"]["cwd"]
                .as_str()
                .map_or("-".into(), |c| style.path(c)),
            hit["seq"],
            style.when(hit["time"].as_i64().unwrap_or(0)),
            hit["surface"].as_str().unwrap_or("?"),
            hit["type"].as_str().unwrap_or("?"),
            style.snippet(hit["snippet"].as_str().unwrap_or(""), query, 7)
        )?;
    }
    if let Some(skipped) = page["skipped"].as_array().filter(|s| !s.is_empty()) {
        writeln!(
            out,
            "  ({} sessions could not be read and were left out)",
            skipped.len()
        )?;
    }
    Ok(items)
}

/// `/find ID QUERY`: every hit inside one session, with its label.
fn find(session: &ChatSession<'_>, rest: &str, out: &mut dyn Write) -> io::Result<()> {
    let Some((id, query)) = rest.split_once(char::is_whitespace) else {
        return writeln!(out, "usage: /find ID QUERY");
    };
    match session
        .env()
        .services
        .search_events(json!({"sessionId": id, "query": query.trim(), "limit": 50}))
    {
        Ok(page) => {
            let items = page["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                writeln!(out, "no event of {id} matches {:?}", query.trim())?;
            }
            let style = Style::detect(ColorChoice::Auto);
            for hit in items {
                writeln!(
                    out,
                    "  seq {:>3}  {:<9} {:<18} {}\n      {}",
                    hit["seq"].to_string(),
                    hit["surface"].as_str().unwrap_or("?"),
                    hit["type"].as_str().unwrap_or("?"),
                    style.when(hit["time"].as_i64().unwrap_or(0)),
                    style.snippet(hit["snippet"].as_str().unwrap_or(""), query.trim(), 6)
                )?;
            }
            Ok(())
        }
        Err(e) => show_error(&ChatError::Plugin(e), out),
    }
}

/// `/cite QUERY`: search, ask for a hit's number, return the mention of its session.
fn cite(
    session: &ChatSession<'_>,
    query: &str,
    input: &mut dyn LineSource,
    out: &mut dyn Write,
) -> io::Result<Option<String>> {
    let hits = search(session, query, out)?;
    if hits.is_empty() {
        return Ok(None);
    }
    let Some(answer) = input.read_line("cite which hit? (number, empty to cancel) ", "")? else {
        return Ok(None);
    };
    let answer = answer.trim();
    if !input.shows_typing() {
        writeln!(out, "cite which hit? {answer}")?;
    }
    if answer.is_empty() {
        return Ok(None);
    }
    let Some(hit) = answer
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| hits.get(i))
    else {
        writeln!(out, "no hit numbered {answer:?}; nothing cited")?;
        return Ok(None);
    };
    let id = hit["bestMatch"]["sessionId"]
        .as_str()
        .or_else(|| hit["header"]["id"].as_str())
        .unwrap_or_default();
    Ok(Some(mention_for(session, id)))
}

/// The mention of `id` with its candidate label (its title), or the bare id when it is no candidate.
fn mention_for(session: &ChatSession<'_>, id: &str) -> String {
    session
        .env()
        .services
        .candidates(session.id(), id)
        .ok()
        .and_then(|list| {
            list.into_iter()
                .find(|c| c["sessionId"] == id)
                .and_then(|c| c["mention"].as_str().map(str::to_string))
        })
        .unwrap_or_else(|| mention::format(id, None))
}

fn candidates(session: &ChatSession<'_>, query: &str, out: &mut dyn Write) -> io::Result<()> {
    match session.env().services.candidates(session.id(), query) {
        Ok(list) => {
            if list.is_empty() {
                writeln!(out, "no candidates")?;
            }
            for c in list {
                writeln!(
                    out,
                    "  {}  ({}, {})\n      {}",
                    c["label"].as_str().unwrap_or("?"),
                    c["sessionId"].as_str().unwrap_or("?"),
                    c["cwd"].as_str().unwrap_or("no cwd"),
                    c["mention"].as_str().unwrap_or("")
                )?;
            }
            Ok(())
        }
        Err(e) => show_error(&ChatError::Plugin(e), out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_lines_strip_endings_and_carry_the_prefill() {
        let mut lines = ScriptedLines::new(&b"first\r\nsecond\nlast"[..]);
        assert_eq!(lines.read_line("> ", "").unwrap().as_deref(), Some("first"));
        assert_eq!(
            lines
                .read_line("> ", "@[x](dsh-session:Ingi) ")
                .unwrap()
                .as_deref(),
            Some("@[x](dsh-session:Ingi) second")
        );
        assert_eq!(lines.read_line("> ", "").unwrap().as_deref(), Some("last"));
        assert_eq!(lines.read_line("> ", "").unwrap(), None);
        assert!(!lines.shows_typing());
    }

    #[test]
    fn the_cache_line_names_both_figures() {
        let line = cache_line(
            &CacheFigure {
                request_bytes: 2048,
                previous_request_bytes: 1000,
                shared_prefix_bytes: 1000,
            },
            3,
        );
        assert_eq!(
            line,
            "request: 3 messages, 2.0 KiB; sharedPrefixBytes 1000 of previousRequestBytes 1000 (cache kept)"
        );
        let first = cache_line(
            &CacheFigure {
                request_bytes: 200,
                previous_request_bytes: 0,
                shared_prefix_bytes: 0,
            },
            1,
        );
        assert!(
            first.starts_with("request: 1 message, ") && first.contains("no previous request"),
            "{first}"
        );
    }

    #[test]
    fn the_history_lives_in_the_data_dir() {
        assert!(history_path().ends_with("dsh-session-search/chat_history"));
    }
}
