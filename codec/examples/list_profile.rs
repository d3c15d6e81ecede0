//! Lists a sessions root once (reading headers), then lists it again `N` times from that listing as
//! the known state, as a one-shot command over an unchanged root does, timing the walk (directories and
//! `stat`s) apart from finishing it into the listing: for `perf`, and the listing's own work against
//! the system calls it makes.

use std::path::Path;
use std::time::Instant;

use dsh_codec::log::layout::{Known, ListedSession, SessionsRoot};

struct Sorted(Vec<ListedSession>);

impl Known for Sorted {
    fn known(&self, path: &Path) -> Option<&ListedSession> {
        self.0
            .binary_search_by(|s| {
                use std::os::unix::ffi::OsStrExt;
                s.path
                    .as_os_str()
                    .as_bytes()
                    .cmp(path.as_os_str().as_bytes())
            })
            .ok()
            .map(|i| &self.0[i])
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let root = SessionsRoot::new(args.next().expect("a sessions root"));
    let rounds: usize = args.next().map_or(10, |n| n.parse().expect("a count"));
    let mut first = root.list().expect("listing").sessions;
    first.sort_by(|a, b| {
        use std::os::unix::ffi::OsStrExt;
        a.path
            .as_os_str()
            .as_bytes()
            .cmp(b.path.as_os_str().as_bytes())
    });
    let known = Sorted(first);
    for _ in 0..rounds {
        let started = Instant::now();
        let walk = root.walk().expect("walk");
        let walked = started.elapsed();
        let listing = root.list_walked(walk, &known).expect("listing");
        println!(
            "{} sessions, {} problems: walk {:.1} ms, then the listing {:.1} ms",
            listing.sessions.len(),
            listing.problems.len(),
            walked.as_secs_f64() * 1e3,
            (started.elapsed() - walked).as_secs_f64() * 1e3
        );
    }
}
