//! (being written) Stable-ABI contracts.
