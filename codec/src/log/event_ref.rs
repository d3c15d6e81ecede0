//! An event borrowed from the reader that produced it ([`super::read::LogReader::next_ref`]).
//!
//! Chunk deltas are most events of a real log, and the consumers that read a whole log once (the
//! indexer's read → fold → extract loop, the benchmark) look at nothing of them but their seq: building
//! an owned [`Event`] for each (its type string, its payload box) and dropping it again was a large part
//! of what a read cost. An [`EventRef`] of a packed row's member borrows the member as the row's parse
//! left it; every other event is borrowed as the [`Event`] the one read pipeline built. Either way it is
//! the very event the owned iterator yields: [`EventRef::to_event`] makes it, and the fold
//! ([`crate::surface::SurfaceFold::apply_ref`]) and extraction ([`crate::text::event_ref_text`]) answer
//! for it as they answer for that event.

use serde_json::Value;

use super::event::{Event, TailOrder};
use super::payload::Payload;
use super::row::Member;

/// One event, borrowed (see the module doc).
#[derive(Debug, Clone, Copy)]
pub enum EventRef<'a> {
    /// An event the read pipeline built whole.
    Event(&'a Event),
    /// A member of a packed chunk row: an `assistant/chunk` with no surface keys.
    Chunk(ChunkRef<'a>),
}

/// A member of a packed chunk row, as the row's parse left it.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRef<'a>(pub(crate) &'a Member);

impl<'a> EventRef<'a> {
    /// The `type`.
    pub fn kind(&self) -> &'a str {
        match self {
            Self::Event(e) => &e.kind,
            Self::Chunk(_) => Member::KIND,
        }
    }

    pub fn seq(&self) -> u64 {
        match self {
            Self::Event(e) => e.seq,
            Self::Chunk(c) => c.0.seq,
        }
    }

    pub fn time(&self) -> i64 {
        match self {
            Self::Event(e) => e.time,
            Self::Chunk(c) => c.0.time,
        }
    }

    /// The `data` (for a chunk, built on this first look, as an owned event's would be).
    pub fn data(&self) -> &'a Payload {
        match self {
            Self::Event(e) => &e.data,
            Self::Chunk(c) => c.0.data(),
        }
    }

    pub fn surface_op(&self) -> Option<&'a Value> {
        match self {
            Self::Event(e) => e.surface_op.as_ref(),
            Self::Chunk(_) => None,
        }
    }

    pub fn source_event_seqs(&self) -> Option<&'a Value> {
        match self {
            Self::Event(e) => e.source_event_seqs.as_ref(),
            Self::Chunk(_) => None,
        }
    }

    pub fn ignorable(&self) -> Option<bool> {
        match self {
            Self::Event(e) => e.ignorable,
            Self::Chunk(_) => None,
        }
    }

    pub fn tail_order(&self) -> TailOrder {
        match self {
            Self::Event(e) => e.tail_order,
            Self::Chunk(_) => TailOrder::default(),
        }
    }

    /// Whether the event is a chunk delta whose `data` nothing has built yet: the fold and extraction
    /// never need it.
    pub fn is_chunk(&self) -> bool {
        matches!(self, Self::Chunk(_))
    }

    /// The owned event, equal to what [`super::read::LogReader`]'s iterator yields for it.
    pub fn to_event(&self) -> Event {
        match self {
            Self::Event(e) => (*e).clone(),
            Self::Chunk(c) => c.0.to_event(),
        }
    }
}

impl<'a> From<&'a Event> for EventRef<'a> {
    fn from(event: &'a Event) -> Self {
        Self::Event(event)
    }
}
