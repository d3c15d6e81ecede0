//! The chat REPL over a sessions root with the in-process fake services instead of the plugin: for
//! trying the chat without building the plugin library, and for the pseudo-terminal test.
//!
//! `cargo run -p sample-host --example chat_fake -- --sessions DIR [--session ID]`

use std::path::PathBuf;

use sample_host::chat::fake::FakeServices;
use sample_host::chat::repl::{run, ChatOptions};
use sample_host::chat::ChatEnv;
use sample_host::Shared;

fn main() {
    let mut sessions = None;
    let mut options = ChatOptions::default();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--sessions") => sessions = args.next().map(PathBuf::from),
            Some("--session") => options.session = args.next().and_then(|s| s.into_string().ok()),
            _ => {
                eprintln!("usage: chat_fake --sessions DIR [--session ID]");
                std::process::exit(2);
            }
        }
    }
    let Some(sessions) = sessions else {
        eprintln!("usage: chat_fake --sessions DIR [--session ID]");
        std::process::exit(2);
    };
    let shared = Shared::new(Some(sessions), false);
    let services = FakeServices::new(shared.clone());
    let code = run(
        ChatEnv::new(&shared, &services),
        &options,
        &mut std::io::stdout(),
    );
    std::process::exit(code);
}
