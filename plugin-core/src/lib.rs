//! (being written) plugin core
