//! A `jsonb` argument as the text Postgres writes for it, compacted, without
//! a round trip through `serde_json::Value`: pgrx's `JsonB` parses numbers
//! into f64, so `3.14159265358979323846` would reach the topic as
//! `3.141592653589793` and a 23-digit integer in exponent form. A record's
//! bytes must be what the caller's jsonb holds.

use std::ffi::CStr;

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::nullable::Nullable;
use pgrx::{direct_function_call, pg_sys, FromDatum};

/// The jsonb's text, with the blanks jsonb's output puts after `:` and `,`
/// left out (`{"a":1,"b":[2,3]}`), as JSON producers write it.
pub struct JsonbText(pub String);

impl FromDatum for JsonbText {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _type_oid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a non-null datum of an argument declared jsonb is a jsonb
        // varlena; jsonb_out returns a palloc'd C string, freed below.
        unsafe {
            let detoasted = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            let text = direct_function_call::<&CStr>(pg_sys::jsonb_out, &[Some(detoasted.into())])?;
            let compact = compact(&text.to_string_lossy());
            pg_sys::pfree(text.as_ptr() as *mut std::ffi::c_void);
            Some(JsonbText(compact))
        }
    }
}

pgrx::impl_sql_translatable!(JsonbText, arg_only = "jsonb");

// SAFETY: as pgrx's own FromDatum types do it: the argument's datum is read
// through FromDatum above, a NULL only where the caller allows one.
unsafe impl<'fcx> ArgAbi<'fcx> for JsonbText {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: the caller's contract (pgrx's generated wrapper).
        unsafe { arg.unbox_arg_using_from_datum().unwrap_or_else(|| panic!("argument {index} must not be null")) }
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        // SAFETY: the caller's contract (pgrx's generated wrapper).
        unsafe { arg.unbox_arg_using_from_datum().into() }
    }
}

/// JSON text without the blanks outside strings (tests/e2e/test_sql_api.py
/// sends strings with quotes, commas and colons in them).
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}
