//! The SQL behind authorization: the bindings of `kafgres.acls`, and what a
//! role is to the authorizer (its superuser flag and the roles it inherits
//! from). Rare operations (an ACL change, a login), so plain statements,
//! not kept plans. Call inside `run_in_transaction`.

use kafgres_broker::acl::{AclBinding, Identity, Operation, PatternType, Permission, ResourceType};
use pgrx::spi::Spi;

const LOAD: &str = "SELECT resource_type, pattern_type, resource_name, principal, host, operation, permission \
     FROM kafgres.acls ORDER BY 1, 2, 3";
const INSERT: &str = "INSERT INTO kafgres.acls \
     (resource_type, pattern_type, resource_name, principal, host, operation, permission) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) \
     ON CONFLICT DO NOTHING";
const DELETE: &str = "DELETE FROM kafgres.acls a \
     USING unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) \
     AS u(rt, pt, rn, pr, h, op, pe) \
     WHERE a.resource_type = u.rt AND a.pattern_type = u.pt AND a.resource_name = u.rn AND a.principal = u.pr \
     AND a.host = u.h AND a.operation = u.op AND a.permission = u.pe";
// The roles whose privileges `role` uses, as GRANT counts them (INHERIT:
// pg_has_role's USAGE), and whether it is a superuser.
const IDENTITY: &str = "SELECT r.rolsuper, ARRAY(SELECT g.rolname::text FROM pg_catalog.pg_roles g \
     WHERE g.oid <> r.oid AND pg_catalog.pg_has_role(r.oid, g.oid, 'USAGE') ORDER BY 1) \
     FROM pg_catalog.pg_roles r WHERE r.rolname = $1";

/// Every stored binding. A row the broker cannot read (written by hand past
/// the table's checks) is skipped with a warning rather than failing them all.
pub fn load_acls() -> Result<Vec<AclBinding>, String> {
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(LOAD, None, &[])? {
            let text = |i: usize| row.get::<String>(i).map(Option::unwrap_or_default);
            let (rt, pt, name, principal, host, op, pe) =
                (text(1)?, text(2)?, text(3)?, text(4)?, text(5)?, text(6)?, text(7)?);
            let binding = (|| {
                Some(AclBinding {
                    resource_type: ResourceType::from_name(&rt)?,
                    resource_name: name.clone(),
                    pattern_type: PatternType::from_name(&pt)?,
                    principal: principal.clone(),
                    host: host.clone(),
                    operation: Operation::from_name(&op)?,
                    permission: Permission::from_name(&pe)?,
                })
            })();
            match binding {
                Some(b) => out.push(b),
                None => pgrx::warning!(
                    "kafgres: kafgres.acls row ({rt}, {pt}, {name}, {principal}, {host}, {op}, {pe}) is not a \
                     binding Kafgres understands; it is not enforced"
                ),
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .map_err(|e| format!("loading kafgres.acls: {e}"))
}

fn columns(bindings: &[AclBinding]) -> [Vec<String>; 7] {
    let column = |f: &dyn Fn(&AclBinding) -> String| bindings.iter().map(f).collect::<Vec<String>>();
    [
        column(&|b| b.resource_type.name().to_owned()),
        column(&|b| b.pattern_type.name().to_owned()),
        column(&|b| b.resource_name.clone()),
        column(&|b| b.principal.clone()),
        column(&|b| b.host.clone()),
        column(&|b| b.operation.name().to_owned()),
        column(&|b| b.permission.name().to_owned()),
    ]
}

fn change(statement: &str, bindings: &[AclBinding]) -> Result<(), pgrx::spi::Error> {
    let [rt, pt, rn, pr, h, op, pe] = columns(bindings);
    Spi::connect_mut(|client| {
        client.update(
            statement,
            None,
            &[rt.into(), pt.into(), rn.into(), pr.into(), h.into(), op.into(), pe.into()],
        )?;
        Ok(())
    })
}

pub fn insert_acls(bindings: &[AclBinding]) -> Result<(), String> {
    change(INSERT, bindings).map_err(|e| format!("storing {} ACL bindings: {e}", bindings.len()))
}

pub fn delete_acls(bindings: &[AclBinding]) -> Result<(), String> {
    change(DELETE, bindings).map_err(|e| format!("deleting {} ACL bindings: {e}", bindings.len()))
}

const CAN_LOG_IN: &str = "SELECT r.rolcanlogin FROM pg_catalog.pg_roles r WHERE r.rolname = $1";

/// A role proven outside the catalog (a TLS client certificate, a bearer
/// token), if it exists and has LOGIN (Postgres's `cert` authentication:
/// VALID UNTIL is a password's, not a certificate's or a token's).
pub fn external_login(role: &str) -> Result<Option<Identity>, String> {
    let can_log_in = Spi::connect(|client| {
        let mut can = false;
        for row in client.select(CAN_LOG_IN, Some(1), &[role.to_owned().into()])? {
            can = row.get::<bool>(1)?.unwrap_or(false);
        }
        Ok::<_, pgrx::spi::Error>(can)
    })
    .map_err(|e| format!("reading whether role {role:?} may log in: {e}"))?;
    if !can_log_in {
        return Ok(None);
    }
    identity(role).map(Some)
}

/// What `role` is to the authorizer; a role that is gone (dropped since it
/// authenticated) is a member of nothing.
pub fn identity(role: &str) -> Result<Identity, String> {
    Spi::connect(|client| {
        let mut identity = Identity { role: role.to_owned(), ..Identity::default() };
        for row in client.select(IDENTITY, Some(1), &[role.to_owned().into()])? {
            identity.superuser = row.get::<bool>(1)?.unwrap_or(false);
            identity.member_of = row.get::<Vec<String>>(2)?.unwrap_or_default();
        }
        Ok::<_, pgrx::spi::Error>(identity)
    })
    .map_err(|e| format!("reading the memberships of role {role:?}: {e}"))
}
