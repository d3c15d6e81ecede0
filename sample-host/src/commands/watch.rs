//! `sample-host watch`: serve the plugin folder and hot-reload changed libraries until Ctrl-C or
//! SIGTERM. Its log is the story: each reload (with where the time went), each refused build, how many
//! libraries are mapped, and the shutdown, which drops the serving generation and removes the shadow
//! folder.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::{shown, start_long_lived_host, CommandError, Options};

/// How long a changed library must be quiet before it is loaded. Short, because the watcher also
/// checks that the file's size and mtime hold still before loading it.
pub const DEBOUNCE: Duration = Duration::from_millis(60);

/// Runs until a termination signal; exit status 0 after a clean shutdown.
pub fn run(options: &Options) -> Result<i32, CommandError> {
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let signals = AtomicUsize::new(0);
    // With the `termination` feature this also catches SIGTERM and SIGHUP, not just Ctrl-C. The handler
    // runs on its own thread, not in signal context, so exiting from it is safe: a second signal means
    // the user will not wait for a shutdown that seems stuck.
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::SeqCst) > 0 {
            std::process::exit(130);
        }
        let _ = stop_tx.send(());
    })
    .map_err(|e| CommandError::Io {
        what: "installing the Ctrl-C/SIGTERM handler".into(),
        source: std::io::Error::other(e.to_string()),
    })?;

    let host = start_long_lived_host(options, options.sessions_dir())?;
    let watcher = crate::watch::watch(&host, DEBOUNCE).map_err(|e| CommandError::Io {
        what: format!("watching the plugin folder {}", shown(host.plugins_dir())),
        source: std::io::Error::other(e.to_string()),
    })?;
    let shadow = host.shadow_dir().to_path_buf();
    tracing::info!(
        "watching {} (debounce {} ms; shadow copies in {}) — rebuild the plugin to hot-reload it; Ctrl-C to stop",
        shown(host.plugins_dir()),
        DEBOUNCE.as_millis(),
        shown(&shadow)
    );
    if host.serving().is_none() {
        tracing::info!("serving nothing yet: waiting for a good build to appear in the folder");
    }

    // Blocks until a signal; a dropped sender (impossible while the handler lives) also ends the wait.
    let _ = stop_rx.recv();
    tracing::info!("shutting down: stopping the watch");
    drop(watcher);
    host.shutdown();
    drop(host);
    // The private shadow folder goes with the host; say so only once it is really gone.
    if shadow.exists() {
        std::fs::remove_dir_all(&shadow).map_err(CommandError::io(format!(
            "removing the shadow folder {}",
            shown(&shadow)
        )))?;
    }
    tracing::info!("shut down; shadow folder {} removed", shown(&shadow));
    Ok(0)
}
