//! No code. This crate only asks for dependency features, so that every cargo command in
//! the workspace builds the same variant of each dependency (see its Cargo.toml).
#![no_std]
