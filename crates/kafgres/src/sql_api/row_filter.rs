//! The check a capture's row filter passes before Kafgres builds SQL around
//! it (docs/cdc.md). `kafgres.capture` runs as the extension's owner and
//! puts the filter's text into a statement, so the text must be one
//! expression and nothing more: PL/pgSQL's EXECUTE runs every statement of a
//! string, and a filter like `true) FROM t; DROP TABLE x; SELECT (1` would
//! otherwise run its own statements with the owner's rights. Postgres's own
//! parser decides, on `SELECT (<filter>)`: exactly one statement, a plain
//! SELECT of one target with no other clause, and no subquery inside (as
//! Postgres refuses them in publication row filters and trigger conditions).
//! Types, columns and functions are checked afterwards by parse analysis
//! (`PREPARE`), which evaluates nothing.

use std::ffi::{c_void, CString};

use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

use super::send::fail;

/// Raises `syntax_error` (or the parser's own error) unless `filter` is a
/// single expression without subqueries.
#[pg_extern(immutable, parallel_safe)]
fn _capture_check_row_filter(filter: &str) {
    if let Err(reason) = single_expression(filter) {
        fail(
            PgSqlErrorCode::ERRCODE_SYNTAX_ERROR,
            format!("kafgres.capture: the row filter must be one expression: {reason}"),
            "write a boolean expression over the table's columns, e.g. status = 'paid' AND amount > 100",
        );
    }
}

fn single_expression(filter: &str) -> Result<(), &'static str> {
    if filter.trim().is_empty() {
        return Err("it is empty");
    }
    let statement = CString::new(format!("SELECT ({filter})")).map_err(|_| "it contains a NUL byte")?;
    // SAFETY: raw_parser reads a NUL-terminated string and returns a List of
    // RawStmt palloc'd in the current memory context; a syntax error is a
    // Postgres ERROR, which pgrx's FFI guard turns into this function's error.
    unsafe {
        let statements = pg_sys::raw_parser(statement.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        if statements.is_null() || (*statements).length != 1 {
            return Err("it ends one statement and starts another");
        }
        let raw = (*(*statements).elements).ptr_value as *mut pg_sys::RawStmt;
        if raw.is_null() || (*raw).stmt.is_null() || (*(*raw).stmt).type_ != pg_sys::NodeTag::T_SelectStmt {
            return Err("it is not an expression");
        }
        let select = (*raw).stmt as *mut pg_sys::SelectStmt;
        let select = &*select;
        let targets = select.targetList;
        if targets.is_null() || (*targets).length != 1 {
            return Err("it has a comma outside parentheses");
        }
        let has_other_clause = select.op != pg_sys::SetOperation::SETOP_NONE
            || !select.distinctClause.is_null()
            || !select.intoClause.is_null()
            || !select.fromClause.is_null()
            || !select.whereClause.is_null()
            || !select.groupClause.is_null()
            || !select.havingClause.is_null()
            || !select.windowClause.is_null()
            || !select.valuesLists.is_null()
            || !select.sortClause.is_null()
            || !select.limitOffset.is_null()
            || !select.limitCount.is_null()
            || !select.lockingClause.is_null()
            || !select.withClause.is_null();
        if has_other_clause {
            return Err("it closes its parenthesis and goes on with a clause of its own");
        }
        let target = (*(*targets).elements).ptr_value as *mut pg_sys::ResTarget;
        if contains_subquery((*target).val) {
            return Err("subqueries are not allowed in a row filter");
        }
    }
    Ok(())
}

/// Whether a raw expression tree holds a subquery (a SubLink).
///
/// # Safety
/// `node` is null or a raw parse tree node from `raw_parser`.
unsafe fn contains_subquery(node: *mut pg_sys::Node) -> bool {
    unsafe extern "C-unwind" fn walker(node: *mut pg_sys::Node, _context: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        // SAFETY: the walker is only handed nodes of the tree being walked.
        unsafe {
            if (*node).type_ == pg_sys::NodeTag::T_SubLink {
                return true;
            }
            pg_sys::raw_expression_tree_walker(node, Some(walker), std::ptr::null_mut())
        }
    }
    // SAFETY: as the function's contract says.
    unsafe { walker(node, std::ptr::null_mut()) }
}
