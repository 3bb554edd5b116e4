//! Output: the three formats, aligned `key: value` blocks and tables for people, JSON
//! and YAML for scripts.

use crate::fail::{Failure, Outcome};
use crate::spec_out::Lines;
use clap::ValueEnum;
use serde::Serialize;
use std::io::{self, Write};

/// How results are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned lines and tables for people.
    #[default]
    Text,
    /// JSON, stable field names, for scripts.
    Json,
    /// YAML, the same structure as JSON.
    Yaml,
}

/// Serializes `value` as JSON or YAML (a trailing newline included).
pub fn structured<T: Serialize>(format: Format, value: &T) -> Outcome<String> {
    let text = match format {
        Format::Json => serde_json::to_string_pretty(value).map(|mut s| {
            s.push('\n');
            s
        }),
        Format::Yaml | Format::Text => {
            return serde_yaml::to_string(value).map_err(|e| Failure::new(format!("formatting YAML: {e}")))
        }
    };
    text.map_err(|e| Failure::new(format!("formatting JSON: {e}")))
}

/// Writes `text` to stdout. Unlike `print!`, a closed stdout is an error, not a panic.
pub fn stdout(text: &str) -> Outcome {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| Failure::io("writing to stdout", e))
}

/// Writes one line to stderr; a closed stderr is ignored (there is nowhere else to say it).
pub fn stderr_line(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// A byte count for people: `4MiB` when exact, `3.9GiB` when not, `1000B` below 1 KiB.
pub fn human(bytes: u64) -> String {
    const UNITS: [(&str, u32); 5] = [("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in UNITS {
        let unit = 1u64 << shift;
        if bytes >= unit {
            return if bytes % unit == 0 {
                format!("{}{name}", bytes >> shift)
            } else {
                format!("{:.1}{name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes}B")
}

/// A byte count with both forms: `4MiB (4194304 bytes)`.
pub fn human_exact(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{} ({bytes} bytes)", human(bytes))
    }
}

/// The name a value serializes to (`"file"`, `"host-managed"`): the same words in text
/// as in JSON.
pub fn serde_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// Lines of `key: value`, grouped under unindented headings, with every value starting in
/// the same column ([`Lines`] at two fixed indents).
#[derive(Default)]
pub struct KeyValues(Lines);

impl KeyValues {
    /// A top-level `key: value` line.
    pub fn top(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.0.kv(0, key, value);
        self
    }
    /// A heading that the following `item`s sit under.
    pub fn heading(&mut self, key: &str) -> &mut Self {
        self.0.heading(0, key);
        self
    }
    /// An indented `key: value` line under the last heading.
    pub fn item(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.0.kv(2, key, value);
        self
    }

    /// The block as text, one line per row.
    pub fn render(&self) -> String {
        self.0.render()
    }
}

/// A table with a header row; columns are as wide as their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i + 1 == widths.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(&mut header.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_are_exact_when_they_can_be() {
        assert_eq!(human(4 << 20), "4MiB");
        assert_eq!(human(1000), "1000B");
        assert_eq!(human(1536), "1.5KiB");
        assert_eq!(human(0), "0B");
        assert_eq!(human_exact(4096), "4KiB (4096 bytes)");
    }

    #[test]
    fn key_values_align_every_value_in_one_column() {
        let mut kv = KeyValues::default();
        kv.top("kind", "file").heading("geometry").item("lba size", "512");
        assert_eq!(kv.render(), "kind:       file\ngeometry:\n  lba size: 512\n");
    }

    #[test]
    fn tables_pad_columns_to_the_widest_cell() {
        let t = table(&["A", "BB"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "A     BB\nlong  x\n");
    }
}
