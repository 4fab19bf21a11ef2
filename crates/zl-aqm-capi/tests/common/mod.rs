//! Shared by the tests that build C programs against this crate's static library.
//!
//! `cargo test` builds the library only as an rlib for the integration tests, so the tests
//! build `libzl_aqm_capi.a` themselves, once per test binary, with the cargo that runs them,
//! into their own target directory (`<target>/c-abi`): the workspace's target directory is
//! locked by the running `cargo test`, and a library left there by an earlier build could be
//! stale.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory holding a freshly built `libzl_aqm_capi.a`.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's path");
        // <target>/<profile>/deps/<test>
        let target = exe
            .ancestors()
            .nth(3)
            .expect("the test runs from <target>/<profile>/deps/")
            .join("c-abi");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "--lib",
                "-p",
                "zl-aqm-capi",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("running cargo to build the static library");
        assert!(
            out.status.success(),
            "cargo build -p zl-aqm-capi: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = target.join("debug");
        assert!(
            dir.join("libzl_aqm_capi.a").exists(),
            "no libzl_aqm_capi.a in {}",
            dir.display()
        );
        dir
    })
}
