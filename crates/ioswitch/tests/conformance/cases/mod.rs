//! The cases, one file per theme, and which of them a cell runs.

pub(crate) mod data;
pub(crate) mod errno;
pub(crate) mod open;
pub(crate) mod queue;
pub(crate) mod refusals;
pub(crate) mod trim;
pub(crate) mod tunables;
pub(crate) mod zones;

use self::data::{case_rw, case_vectored};
use self::errno::case_errno;
use self::queue::{case_drain, case_drop, case_multi, case_queue_full, case_stats};
use self::refusals::{case_alignment, case_bad_request, case_out_of_range};
use self::trim::{case_flush, case_trim};
use self::tunables::case_tunables;
use self::zones::{case_zone_append, case_zone_finish, case_zone_invalid_write, case_zone_reset, case_zone_write};
use crate::ctx::Ctx;
use crate::rows::{Col, RowKind};
use crate::Res;

pub(crate) type CaseFn = fn(&Ctx) -> Res;

pub(crate) fn cases_for(row: RowKind, col: Col) -> Vec<(&'static str, CaseFn)> {
    let mut v: Vec<(&'static str, CaseFn)> = Vec::new();
    if row.zoned() {
        v.push(("zone-write", case_zone_write));
        v.push(("zone-invalid-write", case_zone_invalid_write));
        v.push(("zone-append", case_zone_append));
        v.push(("zone-finish", case_zone_finish));
        v.push(("zone-reset", case_zone_reset));
        if col.sqpoll() || col.iopoll() {
            v.push(("tunables", case_tunables));
        }
        return v;
    }
    if col == Col::Nil {
        v.push(("out-of-range", case_out_of_range));
        v.push(("bad-request", case_bad_request));
    } else {
        v.push(("rw-pattern", case_rw));
        v.push(("vectored", case_vectored));
        v.push(("out-of-range", case_out_of_range));
        v.push(("alignment", case_alignment));
        v.push(("trim", case_trim));
        v.push(("flush", case_flush));
        v.push(("bad-request", case_bad_request));
        v.push(("errno-map", case_errno));
    }
    v.push(("multi-queue", case_multi));
    if col.sync().is_none() {
        v.push(("queue-full", case_queue_full));
        v.push(("drain", case_drain));
        v.push(("drop-inflight", case_drop));
        v.push(("stats", case_stats));
    }
    if col.sqpoll() || col.iopoll() {
        v.push(("tunables", case_tunables));
    }
    v
}
