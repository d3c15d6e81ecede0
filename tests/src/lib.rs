//! (being written) shared test support
