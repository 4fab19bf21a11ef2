//! The control token: the credential a state-changing request to the control endpoint
//! (`POST /reload`; on an endpoint bound beyond loopback, every request but `GET /metrics`)
//! presents as `Authorization: Bearer <token>`.
//!
//! decided: a secret in a file only the router's user can read (mode 0600), as BIRD's and
//! FRR's control sockets are guarded by file permissions. Whoever can read the file (that
//! user, root, or a group the operator grants read on) may reload; any other local user, and
//! any web page (a browser cannot add the header to a cross-site form POST), is refused. A
//! TCP port cannot check its peer's uid, so the file carries the permission instead.
//!
//! The router reads the file if it exists (an operator may provision it; several routers on
//! one host share it), else creates it with 32 random bytes from the OS, hex-encoded. The file
//! is written aside and then linked into place, which fails rather than replacing a file:
//! two routers starting at once end up with the one token. It is never deleted: it lives in a
//! runtime directory (tmpfs, gone at reboot) and a later start reuses it; to rotate it,
//! delete it and restart. An existing file is used only when it is a regular file (not a
//! link), owned by the router's user or root, and gives nothing to others and no write to the
//! group: else anyone able to plant or rewrite it could choose the token.
//!
//! Where: `[metrics] token_file` when the config names it (relative to the config's
//! directory; failing to read or create it stops the start), else the first of
//! [`default_paths`] that works: `/run/zlrouter/control.token` (root, or a service whose
//! `RuntimeDirectory=zlrouter` makes the directory its own), `$XDG_RUNTIME_DIR/zlrouter/
//! control.token` (a user's login session), `$TMPDIR/zlrouter-<uid>/control.token` (in a
//! directory of mode 0700 checked to be the user's own, as tmux does). `zlrouter reload`
//! looks in the same places, in the same order, for the first it can read.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The token file's name in each default directory.
pub const TOKEN_FILE_NAME: &str = "control.token";

/// The system-wide default directory.
pub const SYSTEM_DIR: &str = "/run/zlrouter";

/// Random bytes in a token the router creates (hex-encoded in the file: 64 characters).
const TOKEN_BYTES: usize = 32;

/// Shortest token accepted from a provisioned file: 128 bits as hex.
pub const MIN_TOKEN_LEN: usize = 32;

/// Longest token accepted (it travels in a request head of at most 4 KiB).
const MAX_TOKEN_LEN: usize = 1024;

/// The control token the endpoint checks requests against.
pub struct ControlToken {
    secret: Box<[u8]>,
    path: PathBuf,
}

impl std::fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself: this may end up in a log.
        f.debug_struct("ControlToken")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why a token file could not be read or created.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("control token `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control token `{path}`: {why}")]
    Unsafe { path: PathBuf, why: String },
    #[error("no control token: {tried}")]
    NoDefault { tried: String },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TokenError + '_ {
    move |source| TokenError::Io {
        path: path.to_owned(),
        source,
    }
}

impl ControlToken {
    /// A token held in memory only (`path` says where it came from, for messages). `None`
    /// when `secret` is not a usable token: [`MIN_TOKEN_LEN`] ..= 1024 characters of
    /// RFC 6750's `b64token` set.
    pub fn from_secret(secret: &str, path: &Path) -> Option<Self> {
        valid_token(secret).then(|| ControlToken {
            secret: secret.as_bytes().into(),
            path: path.to_owned(),
        })
    }

    /// The token in `path`, checked (a regular file owned by this user or root, nothing for
    /// others and no group write); or, when there is no such file, a new random one written
    /// there (mode 0600; the directory created, mode 0700, when missing).
    pub fn open_or_create(path: &Path) -> Result<Self, TokenError> {
        // Two tries: a file that appears between "not found" and the link (another router
        // starting) is read on the second.
        for _ in 0..2 {
            match read_checked(path) {
                Ok(t) => return Ok(t),
                Err(TokenError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            if let Some(t) = create(path)? {
                return Ok(t);
            }
        }
        read_checked(path)
    }

    /// The file it was read from or written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `presented` is the token, in time that does not depend on where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(&self.secret, presented)
    }
}

/// `a == b`, comparing every byte whatever the first difference (no early exit a remote
/// client could time). The length is compared first and may leak: a token's length is not
/// secret (the router's own are always 64 characters).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    // black_box: keeps the optimiser from turning the fold back into an early exit.
    std::hint::black_box(diff) == 0
}

/// RFC 6750 `b64token`: ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/", then "="s.
fn valid_token(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    (MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&t.len())
        && !body.is_empty()
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-._~+/".contains(&c))
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Reads and checks an existing token file.
fn read_checked(path: &Path) -> Result<ControlToken, TokenError> {
    let unsafe_file = |why: String| TokenError::Unsafe {
        path: path.to_owned(),
        why,
    };
    // Not followed: a link could point the router at a file someone else chose.
    let meta = std::fs::symlink_metadata(path).map_err(io_error(path))?;
    if !meta.file_type().is_file() {
        return Err(unsafe_file(
            "not a regular file (a link is not followed)".into(),
        ));
    }
    let mut file = File::open(path).map_err(io_error(path))?;
    // The opened file's own metadata: the checks hold for what is read.
    let meta = file.metadata().map_err(io_error(path))?;
    let me = euid();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(unsafe_file(format!(
            "owned by uid {}, neither this user (uid {me}) nor root: whoever owns it could \
             choose the token",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o027 != 0 {
        return Err(unsafe_file(format!(
            "mode {mode:03o} lets others read it or the group write it; `chmod 600` it \
             (or 640 to let a group reload)"
        )));
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io_error(path))?;
    ControlToken::from_secret(text.trim(), path).ok_or_else(|| {
        unsafe_file(format!(
            "not a usable token: {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} characters of A-Z a-z \
             0-9 - . _ ~ + / (e.g. `openssl rand -hex 32`)"
        ))
    })
}

/// Writes a new random token at `path` (never replacing a file); `None` when a file
/// appeared there meanwhile.
fn create(path: &Path) -> Result<Option<ControlToken>, TokenError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    ensure_dir(dir)?;
    let mut bytes = [0u8; TOKEN_BYTES];
    {
        use rand::TryRngCore;
        rand::rngs::OsRng
            .try_fill_bytes(&mut bytes)
            .map_err(|e| TokenError::Io {
                path: path.to_owned(),
                source: std::io::Error::other(format!("the OS's random numbers: {e}")),
            })?;
    }
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| TOKEN_FILE_NAME.to_owned());
    let aside = dir.join(format!(".{name}.{}.new", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&aside)?;
        f.write_all(format!("{secret}\n").as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&aside);
        return Err(io_error(path)(e));
    }
    // A link fails when `path` exists, where a rename would replace it.
    let linked = std::fs::hard_link(&aside, path);
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => Ok(ControlToken::from_secret(&secret, path)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(io_error(path)(e)),
    }
}

/// Creates `dir` (mode 0700, with its missing parents) when missing, and checks it belongs to this user or root and
/// nobody else may write in it (else someone could swap the token file).
fn ensure_dir(dir: &Path) -> Result<(), TokenError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_error(dir))?;
    let meta = std::fs::metadata(dir).map_err(io_error(dir))?;
    let me = euid();
    let mode = meta.permissions().mode();
    // A sticky directory (/tmp) protects each user's files from the others.
    let sticky = mode & 0o1000 != 0;
    if !meta.is_dir() || (meta.uid() != me && meta.uid() != 0) || (mode & 0o022 != 0 && !sticky) {
        return Err(TokenError::Unsafe {
            path: dir.to_owned(),
            why: format!(
                "the token's directory must be this user's (uid {me}) or root's and writable by \
                 no one else (it is uid {}, mode {:03o})",
                meta.uid(),
                mode & 0o7777
            ),
        });
    }
    Ok(())
}

/// Where the token is looked for when the config names no file, in order: the system
/// directory, the user's runtime directory, a directory of this user's own under the
/// temporary directory.
pub fn default_paths() -> Vec<PathBuf> {
    let mut paths = vec![Path::new(SYSTEM_DIR).join(TOKEN_FILE_NAME)];
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        if xdg.is_absolute() {
            paths.push(xdg.join("zlrouter").join(TOKEN_FILE_NAME));
        }
    }
    paths.push(
        std::env::temp_dir()
            .join(format!("zlrouter-{}", euid()))
            .join(TOKEN_FILE_NAME),
    );
    paths
}

/// The router's token: from `configured` (an error there is the caller's to report: the
/// operator asked for that file), else from the first of [`default_paths`] that can be read
/// or created ([`TokenError::NoDefault`] lists why each failed).
pub fn provision(configured: Option<&Path>) -> Result<ControlToken, TokenError> {
    if let Some(p) = configured {
        return ControlToken::open_or_create(p);
    }
    let mut tried = Vec::new();
    for p in default_paths() {
        match ControlToken::open_or_create(&p) {
            Ok(t) => return Ok(t),
            Err(e) => tried.push(e.to_string()),
        }
    }
    Err(TokenError::NoDefault {
        tried: tried.join("; "),
    })
}

/// For a client (`zlrouter reload`): the token in `explicit`, else in the first of
/// [`default_paths`] this user can read. `Err` says why none could be used, naming the files
/// (a file that exists but cannot be read first: that is the router's, guarded from this
/// user).
pub fn read_for_client(explicit: Option<&Path>) -> Result<(PathBuf, String), String> {
    let read = |p: &Path| -> Result<String, std::io::Error> {
        let text = std::fs::read_to_string(p)?;
        let t = text.trim();
        if valid_token(t) {
            Ok(t.to_owned())
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a control token",
            ))
        }
    };
    if let Some(p) = explicit {
        return read(p)
            .map(|t| (p.to_owned(), t))
            .map_err(|e| format!("cannot read the control token `{}`: {e}", p.display()));
    }
    let mut unreadable = Vec::new();
    let candidates = default_paths();
    for p in &candidates {
        match read(p) {
            Ok(t) => return Ok((p.clone(), t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => unreadable.push(format!("`{}`: {e}", p.display())),
        }
    }
    if unreadable.is_empty() {
        let list: Vec<String> = candidates
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect();
        Err(format!("no control token at {}", list.join(", ")))
    } else {
        Err(format!(
            "cannot read the control token {}",
            unreadable.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zl_testkit::scratch;

    #[test]
    fn a_new_token_is_random_private_and_read_back() {
        let dir = scratch("new");
        let path = dir.join("sub").join("t");
        let a = ControlToken::open_or_create(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(dir.join("sub"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim().len(), 2 * TOKEN_BYTES);
        assert!(a.matches(text.trim().as_bytes()));
        // Read back, not replaced; nothing left beside it.
        let b = ControlToken::open_or_create(&path).unwrap();
        assert!(b.matches(text.trim().as_bytes()));
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 1);
        // Another file gets another token.
        let c = ControlToken::open_or_create(&dir.join("sub").join("u")).unwrap();
        assert!(!c.matches(text.trim().as_bytes()));
        assert_eq!(
            read_for_client(Some(&path)).unwrap().1,
            text.trim().to_owned()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unsafe_or_malformed_file_is_refused() {
        let dir = scratch("unsafe");
        let good = "0123456789abcdef0123456789abcdef";
        let path = dir.join("t");
        std::fs::write(&path, format!("{good}\n")).unwrap();
        for (mode, ok) in [(0o600, true), (0o640, true), (0o644, false), (0o660, false)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let r = ControlToken::open_or_create(&path);
            assert_eq!(r.is_ok(), ok, "mode {mode:o}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("chmod 600"), "{e}");
            }
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "short").unwrap();
        let e = ControlToken::open_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("not a usable token"), "{e}");
        std::fs::write(&path, format!("{good} x")).unwrap();
        assert!(ControlToken::open_or_create(&path).is_err());
        let link = dir.join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = ControlToken::open_or_create(&link).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn comparison_and_token_syntax() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        let t = ControlToken::from_secret(&"a".repeat(32), Path::new("x")).unwrap();
        assert!(t.matches("a".repeat(32).as_bytes()));
        assert!(!t.matches("a".repeat(31).as_bytes()));
        assert!(!format!("{t:?}").contains("aaaa"));
        assert!(ControlToken::from_secret(&"a".repeat(31), Path::new("x")).is_none());
        assert!(
            ControlToken::from_secret(&format!("{}==", "A/+".repeat(11)), Path::new("x")).is_some()
        );
        assert!(ControlToken::from_secret(&"=".repeat(40), Path::new("x")).is_none());
        assert!(
            ControlToken::from_secret(&format!("{} ", "a".repeat(40)), Path::new("x")).is_none()
        );
    }
}
