//! `/proc/self/mountinfo` parsed: where each file system is mounted, its type and its
//! per-superblock options. Used by `doctor` (cgroups, tracefs) and `tracefs` (finding a mount
//! to use or one to remove).

/// One line of `/proc/self/mountinfo`: where, which file system type, its super options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Mount point.
    pub point: String,
    /// File system type (`cgroup2`, `tracefs`...).
    pub fstype: String,
    /// Per-superblock options (for cgroup v1, the controllers).
    pub options: String,
}

/// Parses `/proc/self/mountinfo` (fields: id parent dev root point opts [optional...] - type
/// source super-opts).
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut r = right.split_whitespace();
            let fstype = r.next()?;
            let _source = r.next();
            Some(Mount {
                point: unescape_octal(point),
                fstype: fstype.to_string(),
                options: r.next().unwrap_or("").to_string(),
            })
        })
        .collect()
}

fn unescape_octal(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}
