//! The `lockstep` command line, as a library so that its subcommands can be tested in-process.

pub mod demo;
pub mod distributed;
pub mod doctor;
pub mod sample;
pub mod sweep;
pub mod train;
pub mod verify;
