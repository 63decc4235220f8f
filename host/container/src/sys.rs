//! The two calls this crate makes without a safe wrapper.
#![allow(
    unsafe_code,
    reason = "rustix marks unshare unsafe for CLONE_FILES alone, and descriptors hane did not open can only be borrowed by number"
)]

use std::io;
use std::os::fd::{BorrowedFd, RawFd};

use rustix::io::{FdFlags, fcntl_getfd, fcntl_setfd};
use rustix::thread::{UnshareFlags, unshare_unsafe};

/// Moves the calling thread into a new network namespace of its own.
pub(crate) fn unshare_network() -> io::Result<()> {
    // SAFETY: the hazard unshare_unsafe documents is CLONE_FILES (a thread
    // no longer seeing descriptors other threads create). CLONE_NEWNET
    // changes only which network namespace this thread's new sockets are
    // created in; descriptors stay shared with every other thread.
    unsafe { unshare_unsafe(UnshareFlags::NEWNET) }.map_err(io::Error::from)
}

/// Marks every descriptor of this process above stderr close-on-exec, so
/// a runtime that passes its descriptors on (bubblewrap
/// does) passes on none of hane's: descriptors hane inherited from its own
/// parent are often left inheritable.
pub(crate) fn close_on_exec_above_stderr() -> io::Result<()> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        if let Some(fd) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        {
            fds.push(fd);
        }
    }
    for fd in fds.into_iter().filter(|fd| *fd > 2) {
        // SAFETY: `fd` was listed open a moment ago and is only borrowed for
        // two fcntl calls. If another thread closed it meanwhile they fail
        // with EBADF (ignored); if its number was reused, the new
        // descriptor is marked close-on-exec, which every descriptor the
        // standard library opens already is. No flag is ever cleared.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Ok(flags) = fcntl_getfd(borrowed)
            && !flags.contains(FdFlags::CLOEXEC)
        {
            let _ = fcntl_setfd(borrowed, flags | FdFlags::CLOEXEC);
        }
    }
    Ok(())
}
