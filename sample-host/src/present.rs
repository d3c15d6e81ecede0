//! How the command line shows things to a person: local times with their offset and age (honouring
//! `TZ`), paths with the home folder as `~`, colour (`--color`, `NO_COLOR`), the terminal's width, and
//! snippets fitted to it with the match lit. `--json` never goes through here.

use std::io::IsTerminal;

use chrono::{Local, TimeZone};

/// `--color auto|always|never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    #[default]
    Auto,
    Always,
    Never,
}

/// What a plain-text printer needs to know about its reader's screen.
#[derive(Debug, Clone)]
pub struct Style {
    pub color: bool,
    /// Columns available for one line.
    pub width: usize,
    /// "Now", for ages.
    pub now_ms: i64,
    home: Option<String>,
}

/// Width when stdout is not a terminal (and `COLUMNS` does not say).
const DEFAULT_WIDTH: usize = 100;

impl Style {
    /// The style for stdout as it is now.
    pub fn detect(choice: ColorChoice) -> Self {
        let terminal = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && !no_color,
        };
        let width = terminal_size::terminal_size_of(std::io::stdout())
            .map(|(w, _)| usize::from(w.0))
            .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
            .filter(|&w| w >= 20)
            .unwrap_or(DEFAULT_WIDTH);
        Self {
            color,
            width,
            now_ms: host_api::abi::call::now_unix_ms(),
            home: std::env::var("HOME").ok().filter(|h| h.len() > 1),
        }
    }

    /// A fixed style (tests).
    pub fn plain(width: usize, now_ms: i64) -> Self {
        Self {
            color: false,
            width,
            now_ms,
            home: None,
        }
    }

    /// `2026-11-28 14:03 +01:00 (3 d ago)`.
    pub fn when(&self, ms: i64) -> String {
        let mut out = String::with_capacity(36);
        self.write_when(&mut out, ms);
        out
    }

    /// [`Style::when`] written at the end of `out`: `sessions` writes 10,000 of them into one buffer
    /// rather than three strings each.
    pub fn write_when(&self, out: &mut String, ms: i64) {
        write_local_time(out, ms);
        out.push_str(" (");
        write_ago(out, ms, self.now_ms);
        out.push(')');
    }

    /// A path with the home folder shortened to `~`.
    pub fn path(&self, path: &str) -> String {
        let mut out = String::with_capacity(path.len());
        self.write_path(&mut out, path);
        out
    }

    /// [`Style::path`] written at the end of `out`.
    pub fn write_path(&self, out: &mut String, path: &str) {
        match &self.home {
            Some(home) if path == home => out.push('~'),
            Some(home) => match path.strip_prefix(home.as_str()) {
                Some(rest) if rest.starts_with('/') => {
                    out.push('~');
                    out.push_str(rest);
                }
                _ => out.push_str(path),
            },
            None => out.push_str(path),
        }
    }

    /// `text` in an SGR colour when colour is on.
    pub fn paint(&self, sgr: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// The snippet fitted to the line (after `indent` columns) around the query's first match, with
    /// the query's words lit when colour is on.
    pub fn snippet(&self, snippet: &str, query: &str, indent: usize) -> String {
        let fitted = fit(snippet, query, self.width.saturating_sub(indent).max(20));
        highlight(&fitted, query, self.color)
    }
}

/// Local time of epoch milliseconds with its UTC offset, `2026-11-28 14:03 +01:00` (the zone is `TZ`'s,
/// else the system's).
pub fn local_time(ms: i64) -> String {
    let mut out = String::with_capacity(23);
    write_local_time(&mut out, ms);
    out
}

/// [`local_time`] written at the end of `out`.
pub fn write_local_time(out: &mut String, ms: i64) {
    use chrono::{Datelike, Offset, Timelike};
    use std::fmt::Write;
    let Some(t) = Local.timestamp_millis_opt(ms).single() else {
        let _ = write!(out, "{ms} ms");
        return;
    };
    if !(0..=9999).contains(&t.year()) {
        // chrono's `%Y` signs and widens such years; written out by hand below only the plain ones.
        let _ = write!(out, "{}", t.format("%Y-%m-%d %H:%M %:z"));
        return;
    }
    // Written out directly: `sessions` formats one time per session, and parsing the strftime
    // pattern for each of 10,000 was a visible share of the command.
    let offset = t.offset().fix().local_minus_utc();
    let (sign, offset) = if offset < 0 {
        ('-', -offset)
    } else {
        ('+', offset)
    };
    // In minutes, rounded as `%:z` rounds (old local mean times have seconds).
    let minutes = (offset + 30) / 60;
    let _ = write!(
        out,
        "{:04}-{:02}-{:02} {:02}:{:02} {sign}{:02}:{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        minutes / 60,
        minutes % 60
    );
}

/// How long ago: `just now`, `5 min ago`, `3 h ago`, `3 d ago`, `5 mo ago`, `2 y ago` (or `in 3 h`).
pub fn ago(ms: i64, now_ms: i64) -> String {
    let mut out = String::with_capacity(12);
    write_ago(&mut out, ms, now_ms);
    out
}

/// [`ago`] written at the end of `out`.
pub fn write_ago(out: &mut String, ms: i64, now_ms: i64) {
    use std::fmt::Write;
    let delta = now_ms.saturating_sub(ms);
    let s = delta.unsigned_abs() / 1000;
    let (amount, unit) = match s {
        0..=59 => {
            out.push_str("just now");
            return;
        }
        60..=3_599 => (s / 60, "min"),
        3_600..=86_399 => (s / 3_600, "h"),
        86_400..=2_591_999 => (s / 86_400, "d"),
        2_592_000..=31_535_999 => (s / 2_592_000, "mo"),
        _ => (s / 31_536_000, "y"),
    };
    let _ = if delta < 0 {
        write!(out, "in {amount} {unit}")
    } else {
        write!(out, "{amount} {unit} ago")
    };
}

/// `n` with thousands separators: `1,234`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 session`, `2 sessions`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

/// At most `width` characters of `snippet`, keeping the query's first match in view: cut around it
/// with `…` where text was left out.
pub fn fit(snippet: &str, query: &str, width: usize) -> String {
    let chars: Vec<char> = snippet.chars().collect();
    if chars.len() <= width || width < 2 {
        return snippet.to_string();
    }
    let at = first_match(snippet, query)
        .map(|byte| snippet[..byte].chars().count())
        .unwrap_or(0);
    // A quarter of the line before the match gives it context; never start past what fills the line.
    let start = at
        .saturating_sub(width / 4)
        .min(chars.len().saturating_sub(width - 1));
    let lead = start > 0;
    let room = width - usize::from(lead);
    let end = (start + room).min(chars.len());
    let tail = end < chars.len();
    let end = if tail { end - 1 } else { end };
    let mut out = String::new();
    if lead {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if tail {
        out.push('…');
    }
    out
}

/// Byte offset of the first case-insensitive occurrence of any of the query's words.
fn first_match(text: &str, query: &str) -> Option<usize> {
    let lower = text.to_lowercase();
    if lower.len() != text.len() {
        return query.split_whitespace().filter_map(|w| text.find(w)).min();
    }
    query
        .split_whitespace()
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
}

/// Lights up each case-insensitive occurrence of the query's words. For display only: which events
/// match is the index's decision, not this.
pub fn highlight(snippet: &str, query: &str, color: bool) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_reads_as_the_strftime_pattern_it_replaced() {
        // In the zone the test runs in (`TZ`), every season of every plain year.
        let mut ms: i64 = -62_167_219_200_000; // 0000-01-01
        while ms < 253_402_300_800_000 {
            // 9999-12-31
            let expected = Local
                .timestamp_millis_opt(ms)
                .single()
                .map(|t| t.format("%Y-%m-%d %H:%M %:z").to_string());
            if let Some(expected) = expected {
                assert_eq!(local_time(ms), expected, "at {ms} ms");
            }
            ms += 7_777_777_777;
        }
    }

    #[test]
    fn ages_read_like_a_person_says_them() {
        let now = 1_764_460_800_000;
        assert_eq!(ago(now - 10_000, now), "just now");
        assert_eq!(ago(now - 5 * 60_000, now), "5 min ago");
        assert_eq!(ago(now - 3 * 3_600_000, now), "3 h ago");
        assert_eq!(ago(now - 3 * 86_400_000, now), "3 d ago");
        assert_eq!(ago(now + 3 * 3_600_000, now), "in 3 h");
        assert_eq!(ago(now - 40 * 86_400_000, now), "1 mo ago");
        assert_eq!(ago(now - 800 * 86_400_000, now), "2 y ago");
    }

    #[test]
    fn times_and_paths_written_into_a_buffer_are_what_the_plain_calls_give() {
        let style = Style {
            home: Some("/home/ann".into()),
            ..Style::plain(80, 1_764_460_800_000)
        };
        let mut out = String::from("before|");
        let mut expected = out.clone();
        for ms in [
            style.now_ms,
            style.now_ms - 90_000,
            style.now_ms + 86_400_000,
            0,
            -62_167_219_200_000,
            i64::MAX,
        ] {
            style.write_when(&mut out, ms);
            expected.push_str(&format!("{} ({})", local_time(ms), ago(ms, style.now_ms)));
            assert_eq!(out, expected, "at {ms} ms");
        }
        for path in ["/home/ann", "/home/ann/src", "/home/anna", "/srv"] {
            style.write_path(&mut out, path);
            expected.push_str(&style.path(path));
        }
        assert_eq!(out, expected);
        assert!(out.ends_with("~~/src/home/anna/srv"), "{out}");
    }

    #[test]
    fn counts_and_plurals() {
        assert_eq!(count(1_234), "1,234");
        assert_eq!(count(20), "20");
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(plural(1, "message", "messages"), "1 message");
        assert_eq!(plural(3, "message", "messages"), "3 messages");
    }

    #[test]
    fn a_long_snippet_is_cut_around_its_match() {
        let text = format!("{} the needle is here {}", "a".repeat(200), "b".repeat(200));
        let fitted = fit(&text, "needle", 60);
        assert_eq!(fitted.chars().count(), 60, "{fitted}");
        assert!(fitted.contains("needle") && fitted.starts_with('…') && fitted.ends_with('…'));
        assert_eq!(fit("short", "x", 60), "short");
    }

    #[test]
    fn highlighting_marks_each_query_word_only_in_colour() {
        assert_eq!(highlight("an Error here", "error", false), "an Error here");
        assert_eq!(
            highlight("an Error here", "error", true),
            "an \x1b[1;31mError\x1b[0m here"
        );
    }

    #[test]
    fn home_is_shortened() {
        let mut s = Style::plain(80, 0);
        s.home = Some("/home/ann".into());
        assert_eq!(s.path("/home/ann/work"), "~/work");
        assert_eq!(s.path("/home/anna"), "/home/anna");
        assert_eq!(s.path("/home/ann"), "~");
    }
}
