//! (being written) The one surface fold, spec §2.
