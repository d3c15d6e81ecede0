//! `team grant|revoke|collections`: an administrator says which roles may read and publish each
//! collection of a team's PostgreSQL index. The command only issues `GRANT`/`REVOKE` of the
//! collection's roles (`dsh_team`); the server's row-level security enforces them, for this host, the
//! plugin and hand-written SQL alike.

use std::io::Write;

use dsh_team::{Admin, AdminError, Collection, Right};
use serde_json::{json, Value};

use super::{out_err, CommandError, Options};
use crate::cli::{TeamCommand, TeamRoles};

/// The `--json` code of each failure: the server's failures are the index's, as for a search.
pub fn code(e: &AdminError) -> &'static str {
    match e {
        AdminError::NoSuchCollection { .. } => "TEAM_COLLECTION_NOT_FOUND",
        AdminError::NoSuchRole { .. } => "TEAM_ROLE_NOT_FOUND",
        AdminError::NotAllowed { .. } => "TEAM_NOT_ALLOWED",
        AdminError::Unreachable { .. }
        | AdminError::NotATeamIndex { .. }
        | AdminError::Failed { .. } => "SESSION_QUERY_INDEX_FAILED",
    }
}

/// What to do about each failure.
pub fn fix(e: &AdminError) -> &'static str {
    match e {
        AdminError::NoSuchCollection { .. } => {
            "`sample-host --index URL team collections` lists them; a host creates its collection on its first search as the server's owner"
        }
        AdminError::NoSuchRole { .. } => {
            "create the role on the server first (CREATE ROLE name LOGIN): this command grants rights, it makes no roles"
        }
        AdminError::NotAllowed { .. } => {
            "connect as the collections' owner or a role with CREATEROLE (the role in --index's URL)"
        }
        AdminError::NotATeamIndex { .. } => {
            "point --index at the database the team's hosts search (a host's first search creates the schema)"
        }
        AdminError::Unreachable { .. } | AdminError::Failed { .. } => {
            "check that the PostgreSQL server is running and that the URL's host, database and role are right"
        }
    }
}

pub fn run(cmd: &TeamCommand, options: &Options, out: &mut dyn Write) -> Result<i32, CommandError> {
    let url = server_url(options)?;
    let mut admin = Admin::connect(&url)?;
    match cmd {
        TeamCommand::Collections => {
            let collections = admin.collections()?;
            if options.json {
                let listing = json!({
                    "server": admin.server(),
                    "collections": collections.iter().map(collection_json).collect::<Vec<_>>(),
                });
                writeln!(out, "{listing}").map_err(out_err)?;
            } else if collections.is_empty() {
                writeln!(out, "no collections at {}", admin.server()).map_err(out_err)?;
            } else {
                for c in &collections {
                    write_plain(out, c)?;
                }
            }
        }
        TeamCommand::Grant(roles) | TeamCommand::Revoke(roles) => {
            let grant = matches!(cmd, TeamCommand::Grant(_));
            let collection = options.collection.as_deref().ok_or_else(|| {
                CommandError::Usage(format!(
                    "team {} needs --collection NAME (`team collections` lists them)",
                    if grant { "grant" } else { "revoke" }
                ))
            })?;
            let mut after = admin.collection(collection)?;
            for (right, role) in each_role(roles) {
                after = if grant {
                    admin.grant(collection, right, role)?
                } else {
                    admin.revoke(collection, right, role)?
                };
            }
            if options.json {
                let done = json!({"server": admin.server(), "collection": collection_json(&after)});
                writeln!(out, "{done}").map_err(out_err)?;
            } else {
                for (right, role) in each_role(roles) {
                    let line = if grant {
                        format!("{role} may now {} {collection}", verb(right))
                    } else {
                        format!("{role} no longer may {} {collection} directly", verb(right))
                    };
                    writeln!(out, "{line}").map_err(out_err)?;
                }
                write_plain(out, &after)?;
            }
        }
    }
    Ok(0)
}

/// `--index`, which must name the server.
fn server_url(options: &Options) -> Result<String, CommandError> {
    let index = options
        .index
        .as_deref()
        .and_then(|p| p.to_str())
        .filter(|i| dsh_team::is_url(i));
    index.map(str::to_string).ok_or_else(|| {
        CommandError::Usage(
            "team commands need --index postgresql://… naming the team's server".into(),
        )
    })
}

fn each_role(roles: &TeamRoles) -> impl Iterator<Item = (Right, &str)> {
    let readers = roles.reader.iter().map(|r| (Right::Read, r.as_str()));
    let publishers = roles.publisher.iter().map(|r| (Right::Publish, r.as_str()));
    readers.chain(publishers)
}

fn verb(right: Right) -> &'static str {
    match right {
        Right::Read => "read",
        Right::Publish => "publish into",
    }
}

fn collection_json(c: &Collection) -> Value {
    json!({
        "name": c.name,
        "readerRole": c.reader_role,
        "publisherRole": c.publisher_role,
        "readers": c.readers,
        "publishers": c.publishers,
    })
}

fn write_plain(out: &mut dyn Write, c: &Collection) -> Result<(), CommandError> {
    let list = |roles: &[String]| {
        if roles.is_empty() {
            "(none)".to_string()
        } else {
            roles.join(", ")
        }
    };
    writeln!(
        out,
        "{}\n  read:    {}\n  publish: {}",
        c.name,
        list(&c.readers),
        list(&c.publishers)
    )
    .map_err(out_err)
}
