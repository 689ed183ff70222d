//! The fuzz targets' entry functions (`entries.rs`, shared with the stable corpus replay).

#[allow(dead_code, clippy::all)]
#[path = "../../crates/lockstep-cli/src/main.rs"]
mod cli_main;

#[path = "../entries.rs"]
pub mod entries;
