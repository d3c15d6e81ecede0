//! The one surface fold (spec §2): what the model sees, and how every event is labelled.
//!
//! The append-only log is the only fact. Folding it event by event yields the current surface (the
//! ordered seqs whose messages the model sees), the history of replacements (compactions, tool-result
//! prunes), and a three-state label for every event: `current`, `shadowed` or `log-only`. The labeller
//! and the folder are the same state machine ([`SurfaceFold`]), so search labels and model history can
//! never disagree; the host and the plugin both call this code and nothing else labels events.
//!
//! - [`fold`]: the incremental state machine and its validation (spec §2.1, §2.3), with the spec's error
//!   wording;
//! - [`label`]: the three labels (spec §2.2);
//! - [`view`]: what is derived from a fold plus the events it folded: the current surface, the model's
//!   messages, the human transcript (spec §2.4).

pub mod fold;
pub mod label;
pub mod view;

pub use fold::{Applied, FoldError, Replacement, SurfaceFold};
pub use label::{Label, ParseLabelError};
pub use view::{current_surface, derive_event_message, human_transcript, model_messages};
