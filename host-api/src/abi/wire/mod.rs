pub mod reference;
pub mod search;
