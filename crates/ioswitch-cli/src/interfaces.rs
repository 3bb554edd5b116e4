//! `ioswitch interfaces`: the library's interface table, as the README shows it (text is a
//! Markdown table, one row per interface) or as JSON/YAML for scripts.

use crate::fail::Outcome;
use crate::output::{self, Format};
use ioswitch::{Descriptor, DevKind, Role};
use serde::Serialize;
use std::collections::BTreeMap;

/// The kinds of device the table has a column for, with their headings. A controller takes
/// admin commands only and is described in prose.
pub const COLUMNS: &[(DevKind, &str)] = &[
    (DevKind::File, "regular file"),
    (DevKind::Block, "block device"),
    (DevKind::NvmeBlock, "NVMe block `/dev/nvmeXnY`"),
    (DevKind::NvmeChar, "NVMe char `/dev/ngXnY`"),
    (DevKind::Ramdisk, "ramdisk (`1GiB`)"),
    (DevKind::DevDax, "devdax `/dev/daxX.Y`"),
    (DevKind::NvmePci, "NVMe PCI `0000:00:05.0`"),
];

/// Whether `d` is what a kind gets by default: the first row of its role in the table
/// that claims the kind (kernel support aside: io_uring before libaio).
fn is_default(d: &Descriptor, kind: DevKind) -> bool {
    ioswitch::interfaces()
        .iter()
        .find(|t| t.role == d.role && t.default_for.contains(&kind))
        .is_some_and(|t| std::ptr::eq(*t, d))
}

/// The interface table as a Markdown table: ✓ serves, — refused at open (with the reason
/// in the error), **d** the default for that kind.
pub fn markdown() -> String {
    let mut s = String::from("| interface | role | ");
    s += &COLUMNS.iter().map(|(_, h)| *h).collect::<Vec<_>>().join(" | ");
    s += " | tunables |\n|---|---|";
    s += &"---|".repeat(COLUMNS.len() + 1);
    s.push('\n');
    for d in ioswitch::interfaces().iter().filter(|d| d.role != Role::Mem) {
        let cells: Vec<&str> = COLUMNS
            .iter()
            .map(|&(k, _)| match ((d.refusal)(k), is_default(d, k)) {
                (Some(_), _) => "—",
                (None, true) => "✓ **d**",
                (None, false) => "✓",
            })
            .collect();
        let tunables: Vec<String> = d.tunables.iter().map(|(k, _)| format!("`{k}`")).collect();
        s += &format!(
            "| `{}` | {} | {} | {} |\n",
            d.name,
            d.role.key(),
            cells.join(" | "),
            if tunables.is_empty() { "".into() } else { tunables.join(", ") }
        );
    }
    s
}

/// One row as JSON and YAML show it.
#[derive(Serialize)]
struct Row {
    name: &'static str,
    role: Role,
    option: String,
    summary: &'static str,
    /// Per kind of device: `null` when served, else why not.
    refusals: BTreeMap<&'static str, Option<&'static str>>,
    default_for: Vec<&'static str>,
    tunables: Vec<&'static str>,
    fio_engines: &'static [&'static str],
}

/// Prints the table.
pub fn interfaces(format: Format) -> Outcome {
    let kinds = DevKind::ALL;
    let text = match format {
        Format::Text => markdown(),
        _ => {
            let rows: Vec<Row> = ioswitch::interfaces()
                .iter()
                .map(|d| Row {
                    name: d.name,
                    role: d.role,
                    option: d.option(),
                    summary: d.summary,
                    refusals: kinds.iter().map(|&k| (k.as_str(), (d.refusal)(k))).collect(),
                    default_for: kinds.iter().filter(|&&k| is_default(d, k)).map(|k| k.as_str()).collect(),
                    tunables: d.tunables.iter().map(|(k, _)| *k).collect(),
                    fio_engines: d.fio_engines,
                })
                .collect();
            output::structured(format, &rows)?
        }
    };
    output::stdout(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's interface matrix is this table, so adding an interface (one row in
    /// the library's table) shows up there or fails here.
    #[test]
    fn the_readme_shows_the_interface_table() {
        let readme = include_str!("../../../README.md");
        let table = markdown();
        assert!(
            readme.contains(&table),
            "README.md's interface table differs from the library's; paste the output of `ioswitch interfaces`:\n{table}"
        );
    }
}
