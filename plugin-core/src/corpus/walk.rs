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
//!
//! A walk whose digest was asked for ([`Corpus::walk_digest`](super::Corpus::walk_digest): the search
//! index compares it with the digest of the walk it was last brought up to date from) is kept, done,
//! for the listing that follows when the two differ, so the root is walked once either way.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dsh_codec::log::layout::{SessionsRoot, Walk, WalkDigest};
use dsh_codec::log::LogError;

/// A walk done, with when it began and its digest.
pub(super) struct Walked {
    pub(super) started: Instant,
    pub(super) walk: Walk,
    pub(super) digest: Option<WalkDigest>,
}

impl Walked {
    /// Walks `root` now, on this thread.
    pub(super) fn now(root: &SessionsRoot) -> Result<Self, LogError> {
        let started = Instant::now();
        let walk = root.walk()?;
        let digest = walk.digest();
        Ok(Self {
            started,
            walk,
            digest,
        })
    }
}

/// A walk running on its own thread, or done.
pub(super) enum EarlyWalk {
    Running(JoinHandle<Result<Walked, LogError>>),
    Done(Walked),
}

impl EarlyWalk {
    /// Starts walking `root` (and digesting the walk: off the path of the call that waits for it);
    /// `None` when no thread could be started (the listing then walks itself).
    pub(super) fn start(root: SessionsRoot) -> Option<Self> {
        let thread = std::thread::Builder::new()
            .name("dsh-root-walk".into())
            .spawn(move || Walked::now(&root))
            .ok()?;
        Some(Self::Running(thread))
    }

    /// The walk, once done; `None` when it failed (a failed walk is walked again, so the listing
    /// reports its error as it always has).
    pub(super) fn done(self) -> Option<Walked> {
        match self {
            Self::Running(thread) => thread.join().ok()?.ok(),
            Self::Done(walked) => Some(walked),
        }
    }

    /// The walk, when it finished without error and began less than `fresh` ago.
    pub(super) fn finish(self, fresh: Duration) -> Option<Walked> {
        self.done().filter(|w| w.started.elapsed() < fresh)
    }
}
