//! Text for NVMe structures: any serializable structure as aligned `key: value` lines
//! (nested structures indented, byte arrays as hex), and hex dumps of raw pages.
//!
//! The text shows the same field names as JSON and YAML, so what a person reads is what a
//! script finds.

use serde::Serialize;
use serde_yaml::{Mapping, Value};

/// Lines of `key: value` with every value starting in the same column.
#[derive(Default)]
pub struct Lines {
    rows: Vec<(usize, String, Option<String>)>,
}

impl Lines {
    /// A `key: value` line at `indent`.
    pub fn kv(&mut self, indent: usize, key: &str, value: impl Into<String>) {
        self.rows.push((indent, key.into(), Some(value.into())));
    }
    /// A heading line (`key:`) at `indent`.
    pub fn heading(&mut self, indent: usize, key: &str) {
        self.rows.push((indent, key.into(), None));
    }
    /// Every field of `value` (a serializable structure) at `indent`.
    pub fn value<T: Serialize>(&mut self, indent: usize, value: &T) {
        // YAML's mapping keeps the fields in declaration order (spec order).
        match serde_yaml::to_value(value) {
            Ok(Value::Mapping(map)) => self.mapping(indent, &map),
            // An enum variant with fields: the fields.
            Ok(Value::Tagged(t)) => match &t.value {
                Value::Mapping(map) => self.mapping(indent, map),
                other => self.kv(indent, t.tag.to_string().trim_start_matches('!'), scalar(other)),
            },
            Ok(other) => self.kv(indent, "value", scalar(&other)),
            Err(e) => self.kv(indent, "error", format!("cannot show the structure: {e}")),
        }
    }

    fn mapping(&mut self, indent: usize, map: &Mapping) {
        for (k, v) in map {
            self.field(indent, &scalar(k), v);
        }
    }

    fn field(&mut self, indent: usize, key: &str, v: &Value) {
        match v {
            Value::Mapping(map) if map.values().all(is_scalar) && map.len() <= 4 => self.kv(indent, key, inline(map)),
            Value::Mapping(map) => {
                self.heading(indent, key);
                for (k, v) in map {
                    self.field(indent + 2, &scalar(k), v);
                }
            }
            // An enum variant with data: `variant: …` under the field.
            Value::Tagged(t) => {
                let tag = t.tag.to_string();
                let name = tag.trim_start_matches('!');
                if is_scalar(&t.value) {
                    self.kv(indent, key, format!("{name}({})", scalar(&t.value)));
                } else {
                    self.heading(indent, key);
                    self.field(indent + 2, name, &t.value);
                }
            }
            Value::Sequence(items) if is_byte_array(items) => {
                let hex: String = items.iter().filter_map(Value::as_u64).map(|b| format!("{b:02x}")).collect();
                self.kv(indent, key, hex);
            }
            Value::Sequence(items) if items.iter().all(is_scalar) => {
                let s: Vec<String> = items.iter().map(scalar).collect();
                self.kv(indent, key, if s.is_empty() { "-".to_string() } else { s.join(", ") });
            }
            Value::Sequence(items) => {
                if items.is_empty() {
                    self.kv(indent, key, "-");
                }
                for (i, item) in items.iter().enumerate() {
                    self.field(indent, &format!("{key}[{i}]"), item);
                }
            }
            other => self.kv(indent, key, scalar(other)),
        }
    }

    /// The lines as text.
    pub fn render(&self) -> String {
        let width = self.rows.iter().filter(|r| r.2.is_some()).map(|(i, k, _)| i + k.len() + 1).max().unwrap_or(0);
        let mut s = String::new();
        for (indent, key, value) in &self.rows {
            let label = format!("{:indent$}{key}:", "");
            match value {
                Some(v) => s.push_str(&format!("{label:<width$} {v}\n")),
                None => s.push_str(&format!("{label}\n")),
            }
        }
        s
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Mapping(_) | Value::Sequence(_) | Value::Tagged(_))
}

/// Identifiers (EUI-64, NGUID, FGUID) serialize as arrays of bytes: shown as hex.
fn is_byte_array(items: &[Value]) -> bool {
    items.len() >= 8 && items.iter().all(|v| v.as_u64().is_some_and(|b| b <= 255))
}

fn inline(map: &Mapping) -> String {
    map.iter().map(|(k, v)| format!("{}={}", scalar(k), scalar(v))).collect::<Vec<_>>().join(" ")
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.is_empty() => "\"\"".into(),
        Value::String(s) => s.clone(),
        Value::Tagged(t) => format!("{}({})", t.tag.to_string().trim_start_matches('!'), scalar(&t.value)),
        Value::Mapping(_) | Value::Sequence(_) => "…".into(),
    }
}

/// A hex dump, 16 bytes a line: offset, bytes, printable ASCII.
pub fn hexdump(data: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in data.chunks(16).enumerate() {
        s.push_str(&format!("{:08x}: ", i * 16));
        for j in 0..16 {
            match chunk.get(j) {
                Some(b) => s.push_str(&format!("{b:02x}")),
                None => s.push_str("  "),
            }
            if j % 2 == 1 {
                s.push(' ');
            }
        }
        s.push(' ');
        s.extend(chunk.iter().map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { '.' }));
        s.push('\n');
    }
    s
}

/// Bytes as one lowercase hex string (how JSON and YAML carry raw data).
pub fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Inner {
        ms: u16,
        ds: u8,
    }

    #[derive(Serialize)]
    struct Outer {
        name: String,
        eui64: [u8; 8],
        lbafs: Vec<Inner>,
        list: Vec<u32>,
        maybe: Option<u8>,
    }

    #[test]
    fn structures_become_aligned_lines_with_hex_identifiers() {
        let mut l = Lines::default();
        l.value(
            0,
            &Outer {
                name: "x".into(),
                eui64: [0, 1, 2, 3, 4, 5, 6, 0xff],
                lbafs: vec![Inner { ms: 0, ds: 9 }],
                list: vec![1, 2],
                maybe: None,
            },
        );
        assert_eq!(
            l.render(),
            "name:     x\neui64:    00010203040506ff\nlbafs[0]: ms=0 ds=9\nlist:     1, 2\nmaybe:    -\n"
        );
    }

    #[test]
    fn hexdumps_show_offsets_bytes_and_text() {
        assert_eq!(hexdump(b"ABC\x00"), "00000000: 4142 4300                                ABC.\n");
        assert_eq!(hex(&[0xde, 0xad]), "dead");
    }
}
