//! The `sample-host` binary: parse the command line, start the log, run the command, and print its
//! failure (as text on stderr, or under `--json` as one JSON object on stdout) with its exit status.

use std::io::Write;

use sample_host::cli::{self, Parsed};
use sample_host::commands::{self, CommandError};
use sample_host::logging;

// The host's own allocations (decoding and printing answers of 10,000 sessions) with mimalloc, as the
// plugin's (see `dsh-alloc`).
dsh_alloc::install!();

fn main() {
    std::process::exit(run());
}

fn run() -> i32 {
    let cli = match cli::parse(std::env::args_os()) {
        Parsed::Run(cli) => *cli,
        Parsed::Info(text) => {
            let _ = write!(std::io::stdout(), "{text}");
            return 0;
        }
        Parsed::Usage(usage) if usage.json => {
            return fail(&CommandError::Usage(usage.message), true);
        }
        Parsed::Usage(usage) => {
            // clap's own message, as clap would print it.
            let _ = writeln!(std::io::stderr(), "{}", usage.message);
            return cli::USAGE_EXIT;
        }
    };
    let quiet = match cli.command {
        // The watch's log is its output; the MCP server's stdout is the protocol, so its story
        // (reloads included) is told on stderr.
        cli::Command::Watch | cli::Command::Mcp { .. } => tracing::Level::INFO,
        _ => tracing::Level::WARN,
    };
    logging::init(cli.verbose, quiet);
    let json = cli.json;
    if let cli::Command::Mcp { .. } = cli.command {
        // The server writes the protocol to stdout from its own threads: stdout must not be locked
        // here, and nothing else may write to it.
        return match commands::run(cli, &mut std::io::sink()) {
            Ok(code) => code,
            Err(e) => fail(&e, json),
        };
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = commands::run(cli, &mut out);
    // Flushing is where a closed stdout shows up for buffered output.
    let flushed = out.flush().map_err(commands::out_err);
    match result.and_then(|code| flushed.map(|()| code)) {
        Ok(code) => code,
        // `sample-host … | head`: the reader went away; that is not an error of ours.
        Err(e) if e.is_broken_pipe() => 0,
        Err(e) => {
            drop(out);
            let status = fail(&e, json);
            // A call Ctrl-C stopped fails; the command still ends as a signal-ended process does.
            commands::calls::signal_status().unwrap_or(status)
        }
    }
}

/// Prints a failure where it belongs; nothing here may panic, even with stdout or stderr closed.
fn fail(e: &CommandError, json: bool) -> i32 {
    if json {
        let _ = writeln!(std::io::stdout(), "{}", e.to_json());
    } else {
        let _ = writeln!(std::io::stderr(), "error: {}", e.plain());
    }
    e.exit_status()
}
