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

/// A walk running on its own thread, or done.
pub(super) enum EarlyWalk {
    Running {
        started: Instant,
        thread: JoinHandle<Result<(Walk, Option<WalkDigest>), LogError>>,
    },
    Done {
        started: Instant,
        walk: Walk,
        digest: Option<WalkDigest>,
    },
}

impl EarlyWalk {
    /// Starts walking `root`; `None` when no thread could be started (the listing then walks itself).
    pub(super) fn start(root: SessionsRoot) -> Option<Self> {
        let started = Instant::now();
        // The digest too, on the walk's thread: off the path of the call that waits for the walk.
        let thread = std::thread::Builder::new()
            .name("dsh-root-walk".into())
            .spawn(move || {
                root.walk().map(|walk| {
                    let digest = walk.digest();
                    (walk, digest)
                })
            })
            .ok()?;
        Some(Self::Running { started, thread })
    }

    /// A walk made now, on this thread, kept as done.
    pub(super) fn now(root: &SessionsRoot) -> Result<Self, LogError> {
        let started = Instant::now();
        let walk = root.walk()?;
        let digest = walk.digest();
        Ok(Self::Done {
            started,
            walk,
            digest,
        })
    }

    /// When the walk began.
    pub(super) fn started(&self) -> Instant {
        match self {
            Self::Running { started, .. } | Self::Done { started, .. } => *started,
        }
    }

    /// Waits for a running walk to end; `None` when it failed (a failed walk is walked again, so the
    /// listing reports its error as it always has).
    pub(super) fn done(self) -> Option<Self> {
        match self {
            Self::Running { started, thread } => {
                let (walk, digest) = thread.join().ok()?.ok()?;
                Some(Self::Done {
                    started,
                    walk,
                    digest,
                })
            }
            done => Some(done),
        }
    }

    /// The walk and its digest, when it finished without error and began less than `fresh` ago.
    pub(super) fn finish(self, fresh: Duration) -> Option<(Walk, Option<WalkDigest>)> {
        match self.done()? {
            Self::Done {
                started,
                walk,
                digest,
            } => (started.elapsed() < fresh).then_some((walk, digest)),
            Self::Running { .. } => None,
        }
    }
}
