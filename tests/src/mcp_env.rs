//! The corpus the MCP round trips run on: the demo corpus plus one long session whose answers cannot
//! fit a small budget (many hits for one phrase, and one tool output far larger than any budget a test
//! asks for), so paging and cutting are exercised on real plugin answers.

use dsh_codec::build::Script;
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::SessionHeader;

use crate::host::{demo_env, DemoEnv};

/// The long session's id.
pub const LONG_SESSION: &str = "mcp-long-session";
/// The phrase each of its turns mentions once.
pub const LONG_PHRASE: &str = "flaky lexer";
/// How many of its turns mention the phrase.
pub const LONG_TURNS: usize = 40;
/// The size of its one huge tool output.
pub const HUGE_OUTPUT_BYTES: usize = 60_000;

/// A [`DemoEnv`] whose sessions root also holds [`LONG_SESSION`].
pub fn mcp_env() -> DemoEnv {
    let env = demo_env();
    let mut script = Script::new("long", 1_786_000_000_000);
    for turn in 0..LONG_TURNS {
        script.begin_turn();
        script.user(&format!(
            "Round {turn}: the {LONG_PHRASE} test failed again on CI, look at run {turn}."
        ));
        let output = if turn == 0 {
            // One line repeated: an event far larger than any page, still valid JSON text.
            "lexer trace line: token stream rewound\n".repeat(HUGE_OUTPUT_BYTES / 39)
        } else {
            format!("run {turn}: 1 failed, 211 passed")
        };
        script.tool("bash", r#"{"command":"cargo test -p lexer"}"#, &output);
        script.end_turn();
    }
    let header = SessionHeader::new(
        LONG_SESSION,
        1_786_000_000_000,
        Some("/home/demo/projects/lexer".into()),
    );
    let mut writer = LogWriter::create(&env.sessions, header, WriteOptions::default())
        .expect("the long session's log is created");
    writer
        .append(&script.events)
        .expect("the long session is written");
    env
}
