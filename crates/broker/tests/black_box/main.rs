//! The broker's black-box tests, one module per file, linked into one test binary: each
//! test binary links the whole broker (~80 MB in a debug build), so one binary instead of
//! twenty-one saves CI about 1.7 GB of disk and twenty links. Tests whose assertions time the
//! broker against an otherwise idle process (`slow_disk`, `quotas`) or that run this binary
//! again as a child (`crash`) stay binaries of their own, beside this folder.

#[path = "../common/mod.rs"]
mod common;

mod acls;
mod client_quotas;
mod cluster;
mod config_changes;
mod control_plane;
mod corrupt_segments;
mod data_plane;
mod disk_full;
mod elect_leaders;
mod every_version;
mod fetch_limits;
mod frames;
mod groups;
mod leader_hints;
mod limits;
mod listeners;
mod reassignment;
mod replicas;
mod sasl;
mod topic_lifecycle;
mod zero_copy;
