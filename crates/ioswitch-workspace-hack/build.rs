//! Empty: it exists so that cargo resolves this crate's build dependency (syn with the
//! workspace's features; see Cargo.toml).
fn main() {}
