//! Reads, folds and extracts the logs named on the command line through the borrowed read (or the owned
//! one with `--owned`), for instruction counts under `valgrind --tool=callgrind`, which are steady on a
//! busy machine where times are not.

// The allocator the plugin and the host ship with, so the counts are theirs.
dsh_alloc::install!();

use dsh_codec::log::read::{LogReader, ReadOptions};
use dsh_codec::surface::SurfaceFold;
use dsh_codec::text::{event_ref_text, event_text};

fn main() {
    let mut owned = false;
    let (mut events, mut text) = (0u64, 0usize);
    for arg in std::env::args().skip(1) {
        if arg == "--owned" {
            owned = true;
            continue;
        }
        let mut reader = LogReader::open(arg.as_ref(), &ReadOptions::default()).expect("open log");
        let mut fold = SurfaceFold::new();
        if owned {
            for event in reader {
                let event = event.expect("valid log");
                fold.apply(&event).expect("valid surface");
                text += event_text(&event).len();
            }
        } else {
            while let Some(event) = reader.next_ref() {
                let event = event.expect("valid log");
                fold.apply_ref(event).expect("valid surface");
                text += event_ref_text(event).len();
            }
        }
        events += fold.folded();
    }
    println!("{events} events, {text} text bytes");
}
