//! Who may read and publish each collection: an administrator grants and revokes membership in a
//! collection's roles. Nothing here decides a right; the server's row-level security does, from these
//! memberships, so a grant is an ordinary `GRANT` and takes effect on the next query of any client.

use postgres::error::SqlState;
use postgres::Client;

use crate::connect::{cause, connect, CONNECT_ATTEMPTS};
use crate::{quote_ident, redact, Right};

/// What `application_name` the administration's connections carry.
const APPLICATION: &str = "dsh-session-search team";

/// A collection and the roles that hold its rights (directly, not through other roles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collection {
    pub name: String,
    pub reader_role: String,
    pub publisher_role: String,
    /// Members of the reader role, the publisher role left out (a publisher reads too).
    pub readers: Vec<String>,
    pub publishers: Vec<String>,
}

/// Why an administration step failed; each names the server (without its password).
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("the index at {server} is unreachable: {cause}")]
    Unreachable { server: String, cause: String },
    #[error("the database at {server} is not a team index (it has no dsh_collections table)")]
    NotATeamIndex { server: String },
    #[error("no collection {collection:?} at {server} (a host creates its collection when it first publishes as an administrator)")]
    NoSuchCollection { server: String, collection: String },
    #[error("no role {role:?} at {server}")]
    NoSuchRole { server: String, role: String },
    #[error("not allowed to change who may use collection {collection:?} at {server}: {cause}")]
    NotAllowed {
        server: String,
        collection: String,
        cause: String,
    },
    #[error("the index at {server} failed: {cause}")]
    Failed { server: String, cause: String },
}

/// A connection as an administrator (or whoever the URL names: the server says what it may do).
pub struct Admin {
    server: String,
    client: Client,
}

const COLLECTIONS: &str = "
SELECT c.name, c.reader, c.publisher,
    ARRAY(SELECT m.rolname::text FROM pg_auth_members a
          JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
          WHERE r.rolname = c.reader AND m.rolname <> c.publisher ORDER BY 1),
    ARRAY(SELECT m.rolname::text FROM pg_auth_members a
          JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
          WHERE r.rolname = c.publisher ORDER BY 1)
FROM dsh_collections c";

impl Admin {
    /// Connects to the server `url` names.
    pub fn connect(url: &str) -> Result<Self, AdminError> {
        let client =
            connect(url, APPLICATION, CONNECT_ATTEMPTS).map_err(|e| AdminError::Unreachable {
                server: e.server,
                cause: e.cause,
            })?;
        Ok(Self {
            server: redact(url),
            client,
        })
    }

    /// The server, as messages name it.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Every collection, by name.
    pub fn collections(&mut self) -> Result<Vec<Collection>, AdminError> {
        let sql = format!("{COLLECTIONS} ORDER BY c.name");
        let rows = self
            .client
            .query(&sql, &[])
            .map_err(|e| self.failed(e, None))?;
        Ok(rows.iter().map(collection_of).collect())
    }

    /// Collection `name`, or [`AdminError::NoSuchCollection`].
    pub fn collection(&mut self, name: &str) -> Result<Collection, AdminError> {
        let sql = format!("{COLLECTIONS} WHERE c.name = $1");
        let row = self
            .client
            .query_opt(&sql, &[&name])
            .map_err(|e| self.failed(e, Some(name)))?;
        row.as_ref()
            .map(collection_of)
            .ok_or_else(|| AdminError::NoSuchCollection {
                server: self.server.clone(),
                collection: name.to_string(),
            })
    }

    /// Makes `role` a member of the role holding `right` on `collection`; the collection as it is then.
    pub fn grant(
        &mut self,
        collection: &str,
        right: Right,
        role: &str,
    ) -> Result<Collection, AdminError> {
        self.membership(collection, right, role, |held_by, role| {
            format!("GRANT {held_by} TO {role}")
        })
    }

    /// Ends `role`'s direct membership in the role holding `right` on `collection` (a role that reads
    /// through another role it belongs to still reads); the collection as it is then.
    pub fn revoke(
        &mut self,
        collection: &str,
        right: Right,
        role: &str,
    ) -> Result<Collection, AdminError> {
        self.membership(collection, right, role, |held_by, role| {
            format!("REVOKE {held_by} FROM {role}")
        })
    }

    /// Runs the membership change `sql` makes of the quoted holder and role names, once both exist.
    fn membership(
        &mut self,
        collection: &str,
        right: Right,
        role: &str,
        sql: impl FnOnce(&str, &str) -> String,
    ) -> Result<Collection, AdminError> {
        let held_by = self.holder(collection, right)?;
        self.check_role(role)?;
        let sql = sql(&quote_ident(&held_by), &quote_ident(role));
        self.client
            .batch_execute(&sql)
            .map_err(|e| self.failed(e, Some(collection)))?;
        self.collection(collection)
    }

    /// The role the server checks for `right` on `collection`, as the collection records it.
    fn holder(&mut self, collection: &str, right: Right) -> Result<String, AdminError> {
        let c = self.collection(collection)?;
        Ok(match right {
            Right::Read => c.reader_role,
            Right::Publish => c.publisher_role,
        })
    }

    fn check_role(&mut self, role: &str) -> Result<(), AdminError> {
        let exists: bool = self
            .client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
                &[&role],
            )
            .map_err(|e| self.failed(e, None))?
            .get(0);
        if exists {
            Ok(())
        } else {
            Err(AdminError::NoSuchRole {
                server: self.server.clone(),
                role: role.to_string(),
            })
        }
    }

    fn failed(&self, e: postgres::Error, collection: Option<&str>) -> AdminError {
        let server = self.server.clone();
        match e.code() {
            Some(c) if *c == SqlState::UNDEFINED_TABLE => AdminError::NotATeamIndex { server },
            Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => AdminError::NotAllowed {
                server,
                collection: collection.unwrap_or_default().to_string(),
                cause: cause(&e),
            },
            _ if e.is_closed() => AdminError::Unreachable {
                server,
                cause: cause(&e),
            },
            _ => AdminError::Failed {
                server,
                cause: cause(&e),
            },
        }
    }
}

fn collection_of(r: &postgres::Row) -> Collection {
    Collection {
        name: r.get(0),
        reader_role: r.get(1),
        publisher_role: r.get(2),
        readers: r.get(3),
        publishers: r.get(4),
    }
}
