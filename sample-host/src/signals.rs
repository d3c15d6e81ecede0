//! Termination signals as messages: SIGINT (Ctrl-C) and SIGTERM/SIGHUP, told apart, delivered on a
//! channel by a thread of their own (never in signal context), so a long-running command can cancel a
//! step on Ctrl-C and still shut down cleanly on SIGTERM, removing what it made on disk.

use std::sync::mpsc::{channel, Receiver};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: Ctrl-C on the terminal.
    Interrupt,
    /// SIGTERM or SIGHUP: the process is asked to end.
    Terminate,
}

/// Starts listening; each signal from now on arrives on the receiver instead of ending the process.
pub fn listen() -> std::io::Result<Receiver<Signal>> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for number in signals.forever() {
                let signal = if number == SIGINT {
                    Signal::Interrupt
                } else {
                    Signal::Terminate
                };
                if tx.send(signal).is_err() {
                    return;
                }
            }
        })?;
    Ok(rx)
}
