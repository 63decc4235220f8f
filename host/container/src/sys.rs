//! The one system call this crate makes without a safe wrapper.
#![allow(
    unsafe_code,
    reason = "rustix marks unshare unsafe for CLONE_FILES alone; this module unshares only the network namespace"
)]

use std::io;

use rustix::thread::{UnshareFlags, unshare_unsafe};

/// Moves the calling thread into a new network namespace of its own.
pub(crate) fn unshare_network() -> io::Result<()> {
    // SAFETY: the hazard unshare_unsafe documents is CLONE_FILES (a thread
    // no longer seeing descriptors other threads create). CLONE_NEWNET
    // changes only which network namespace this thread's new sockets are
    // created in; descriptors stay shared with every other thread.
    unsafe { unshare_unsafe(UnshareFlags::NEWNET) }.map_err(io::Error::from)
}
