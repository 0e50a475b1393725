//! The runtime tests' databases come from backlog-testdb.
#![allow(unused_imports)]

pub use backlog_testdb::*;
