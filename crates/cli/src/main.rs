//! The `gregor` binary: a thin `main` whose subcommands call into the library crates.
//!
//! Each subcommand lives in its own module; this file only parses and routes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "gregor", version, about = "A Kafka-compatible streaming broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
