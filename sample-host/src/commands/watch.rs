//! `sample-host watch`: serve the plugin folder and hot-reload changed libraries until Ctrl-C or
//! SIGTERM. Its log is the story: each reload (with where the time went), each refused build, how many
//! libraries are mapped, and the shutdown, which drops the serving generation and removes the shadow
//! folder.

use std::time::Duration;

use super::{shown, start_reloading_host, CommandError, Options};
use crate::signals;

/// How long a changed library must be quiet before it is loaded. Short, because the watcher also
/// checks that the file's size and mtime hold still before loading it.
pub const DEBOUNCE: Duration = Duration::from_millis(60);

/// Runs until a termination signal; exit status 0 after a clean shutdown.
pub fn run(options: &Options) -> Result<i32, CommandError> {
    let signals =
        signals::listen().map_err(CommandError::io("installing the Ctrl-C/SIGTERM handler"))?;
    let host = start_reloading_host(options, options.sessions_dir())?;
    let watcher = crate::watch::watch(&host, DEBOUNCE).map_err(|e| CommandError::Io {
        what: format!("watching the plugin folder {}", shown(host.plugins_dir())),
        source: std::io::Error::other(e.to_string()),
    })?;
    let shadow = host
        .shadow_dir()
        .map(|d| shown(&d))
        .unwrap_or_else(|| "memory".into());
    tracing::info!(
        "watching {} (debounce {} ms; shadow copies in {}) — rebuild the plugin to hot-reload it; Ctrl-C to stop",
        shown(host.plugins_dir()),
        DEBOUNCE.as_millis(),
        shadow
    );
    if host.serving().is_none() {
        tracing::info!("serving nothing yet: waiting for a good build to appear in the folder");
    }

    // Blocks until a signal; a closed channel (the listener thread gone) also ends the wait.
    let _ = signals.recv();
    // A second signal means the user will not wait for a shutdown that seems stuck: leave at once, but
    // still without leaving the shadow folder behind.
    {
        let host = host.clone();
        std::thread::spawn(move || {
            if signals.recv().is_ok() {
                host.remove_shadow_dir();
                std::process::exit(130);
            }
        });
    }
    tracing::info!("shutting down: stopping the watch");
    drop(watcher);
    host.shutdown();
    let removed = host.remove_shadow_dir();
    drop(host);
    match removed {
        Some(dir) if dir.exists() => {
            return Err(CommandError::Io {
                what: format!("removing the shadow folder {}", shown(&dir)),
                source: std::io::Error::other("it is still there"),
            })
        }
        Some(dir) => tracing::info!("shut down; shadow folder {} removed", shown(&dir)),
        None => tracing::info!("shut down"),
    }
    Ok(0)
}
