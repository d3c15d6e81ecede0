//! A walk of the sessions root started ahead of the first listing, for a process that answers one
//! command and exits.
//!
//! Such a process spends about as long loading what the index recorded (10,000 rows and headers on a
//! large root) as `stat`ing every transcript, and the two need nothing of each other until the listing
//! compares them. So the walk (directories read, transcripts `stat`ed: [`SessionsRoot::walk`]) runs on
//! its own thread while the index loads, and the first listing finishes it instead of walking again.
//! It is taken only while it is fresh enough that a listing could have been reused
//! ([`Corpus::reuse_listings_for`](super::Corpus::reuse_listings_for)): a change made after the walk
//! began is then no more missed than a change made after a reused listing.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dsh_codec::log::layout::{SessionsRoot, Walk};
use dsh_codec::log::LogError;

/// A walk running (or done) on its own thread.
pub(super) struct EarlyWalk {
    started: Instant,
    thread: JoinHandle<Result<Walk, LogError>>,
}

impl EarlyWalk {
    /// Starts walking `root`; `None` when no thread could be started (the listing then walks itself).
    pub(super) fn start(root: SessionsRoot) -> Option<Self> {
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("dsh-root-walk".into())
            .spawn(move || root.walk())
            .ok()?;
        Some(Self { started, thread })
    }

    /// The walk, when it finished without error and began less than `fresh` ago; `None` otherwise
    /// (a failed walk is walked again, so the listing reports its error as it always has).
    pub(super) fn finish(self, fresh: Duration) -> Option<Walk> {
        let walk = self.thread.join().ok()?.ok()?;
        (self.started.elapsed() < fresh).then_some(walk)
    }
}
