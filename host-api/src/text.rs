//! (being written) Text extraction, spec §3.
