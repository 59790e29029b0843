//! The descriptor limit a server with thousands of connections needs, and a process's
//! open descriptors (`/proc`), which the echo probe's teardown must bring back.
//!
//! `RLIMIT_NOFILE`'s soft limit is often 1,024, below 2,000 connections; the hard limit
//! is usually far higher, and raising the soft limit up to it needs no privilege. The soft
//! limit is raised for the rest of the process and not lowered after: Go's runtime does
//! the same at start (os/rlimit.go since Go 1.19), and lowering it while descriptors above
//! the new limit are open would only make the next `open` fail.

use schedlab_measure::ProbeError;

/// Descriptors kept free beyond the connections (standard streams, the listener, pipes to
/// the client, files the run loop opens).
pub(super) const SPARE_FDS: u64 = 64;

/// Makes sure this process may open `need` descriptors: raises the soft limit (and, with
/// the privilege, the hard one). A skip saying what to do when it cannot.
pub(super) fn raise_nofile(need: u64) -> Result<(), ProbeError> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid out-pointer for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(ProbeError::last_os("getrlimit(RLIMIT_NOFILE)"));
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    let want = libc::rlimit { rlim_cur: need, rlim_max: hard.max(need) };
    // SAFETY: `want` is a valid rlimit; setrlimit only reads it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    Err(ProbeError::Skip(format!(
        "needs {need} open descriptors, but RLIMIT_NOFILE is {soft} (hard limit {hard}) and \
         cannot be raised ({err}): raise the hard limit (`ulimit -Hn {need}` as root, or \
         LimitNOFILE= for a service) or run fewer connections"
    )))
}

/// Open descriptors of a process (`/proc/<pid>/fd`).
pub(super) fn open_fds(pid: &str) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_already_high_enough_is_left_alone_and_descriptors_are_counted() {
        assert!(raise_nofile(8).is_ok());
        assert!(open_fds("self").is_some_and(|n| n >= 1));
    }

    #[test]
    fn a_limit_beyond_what_the_kernel_allows_is_a_skip_that_says_what_to_do() {
        // Above fs.nr_open (1,048,576 by default) even root cannot go.
        let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20);
        let Err(ProbeError::Skip(why)) = raise_nofile(nr_open + 1) else {
            panic!("raising RLIMIT_NOFILE past fs.nr_open succeeded")
        };
        assert!(why.contains("cannot be raised") && why.contains("ulimit -Hn"), "{why}");
    }
}
