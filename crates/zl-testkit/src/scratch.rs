//! Scratch directories: where a test writes its configs, captures and outputs.

use std::path::PathBuf;

/// A fresh, empty directory for one test's files: `<temp dir>/zl-tests-<pid>/<name>`
/// (`std::env::temp_dir`, so `TMPDIR` moves it), emptied if an earlier test of this process
/// left it. `name` must be unique within the test binary; the process id keeps two runs of
/// the same binary (two checkouts, two engineers) apart. Left behind for inspection.
///
/// Panics when the directory cannot be made: a test cannot run without it.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir()
        .join(format!("zl-tests-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create scratch directory {}: {e}", dir.display()));
    dir
}
