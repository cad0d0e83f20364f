//! One folder per op: `mod.rs` (the contract), `reference.rs`, `cpu.rs`, `cuda.rs`, `<op>.cu`,
//! `tests.rs`.
