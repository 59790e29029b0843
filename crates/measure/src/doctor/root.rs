//! The directory that stands for `/`: the real file system, or a test's tree, so every
//! reader can be pointed at files a test wrote. Reads say why they failed (`absent`,
//! `permission denied`), never guess.

use std::io;
use std::path::{Path, PathBuf};

/// The directory that stands for `/`: `/` itself, or a test's tree.
#[derive(Debug, Clone)]
pub struct Root(pub(super) PathBuf);

impl Root {
    /// The real file system.
    pub fn system() -> Root {
        Root(PathBuf::from("/"))
    }

    /// A tree under `dir` standing in for `/`.
    pub fn at(dir: &Path) -> Root {
        Root(dir.to_path_buf())
    }

    pub(super) fn path(&self, p: &str) -> PathBuf {
        self.0.join(p.trim_start_matches('/'))
    }

    /// The trimmed contents of `p`, or why not (`p: absent`, `p: permission denied`).
    pub fn read(&self, p: &str) -> Result<String, String> {
        std::fs::read_to_string(self.path(p)).map(|s| s.trim().to_string()).map_err(|e| why(p, &e))
    }

    pub(super) fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }

    pub(super) fn list(&self, p: &str) -> Result<Vec<String>, String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(p))
            .map_err(|e| why(p, &e))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }
}

fn why(p: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{p}: absent"),
        io::ErrorKind::PermissionDenied => format!("{p}: permission denied"),
        _ => format!("{p}: {e}"),
    }
}
