//! A team's PostgreSQL index as both its clients see it: the plugin, which publishes and searches, and
//! the host's `team` command, with which an administrator says who may read and publish each
//! collection. Both name the server the same way (its URL without the password), connect the same way
//! (a bounded retry, [`connect`]) and agree on the collections' roles ([`Right::role`]): PostgreSQL's
//! row-level security admits a role to a collection's rows only through membership in these.

mod admin;
mod connect;

pub use admin::{Admin, AdminError, Collection};
pub use connect::{cause, connect, ConnectError, CONNECT_ATTEMPTS};

/// Whether an index location names a PostgreSQL server rather than an SQLite path.
pub fn is_url(index: &str) -> bool {
    index.starts_with("postgresql://") || index.starts_with("postgres://")
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, tail) = match rest.find('@') {
        Some(at) if !rest[..at].contains('/') => (&rest[..at], &rest[at..]),
        _ => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{tail}"),
        None => format!("{scheme}://{auth}{tail}"),
    }
}

/// What a role may do with a collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// See its rows (`dsh_read:<collection>`).
    Read,
    /// Write its rows, and read them (`dsh_publish:<collection>`, itself a member of the reader role).
    Publish,
}

impl Right {
    /// The role that carries this right on `collection`.
    pub fn role(self, collection: &str) -> String {
        match self {
            Self::Read => format!("dsh_read:{collection}"),
            Self::Publish => format!("dsh_publish:{collection}"),
        }
    }

    /// How messages name the right.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Publish => "publish",
        }
    }

    /// `GRANT` of this right on `collection` to `role`.
    pub fn grant_sql(self, collection: &str, role: &str) -> String {
        format!(
            "GRANT {} TO {}",
            quote_ident(&self.role(collection)),
            quote_ident(role)
        )
    }
}

/// An SQL identifier, quoted.
pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths_and_passwords_never_shown() {
        assert!(is_url("postgresql://u@h/db"));
        assert!(is_url("postgres://u@h/db"));
        assert!(!is_url("/var/index.sqlite"));
        assert_eq!(
            redact("postgresql://alice:s3cret@db.example/team"),
            "postgresql://alice:***@db.example/team"
        );
        assert_eq!(
            redact("postgresql:///team?host=/tmp"),
            "postgresql:///team?host=/tmp"
        );
    }

    #[test]
    fn roles_are_named_after_the_collection_and_quoted() {
        assert_eq!(Right::Read.role("alice@laptop"), "dsh_read:alice@laptop");
        assert_eq!(
            Right::Publish.grant_sql("a\"b", "carol"),
            "GRANT \"dsh_publish:a\"\"b\" TO \"carol\""
        );
    }
}
