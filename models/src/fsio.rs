//! Files the tools write: whole or not at all.

use std::io::Write;
use std::path::Path;

/// The directory `path` lives in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader (or a run killed midway) never sees a half-written file, and an existing `path` is
/// replaced whole or not at all. The file gets mode 0644 on Unix, as a plain `fs::write` would
/// under the usual umask.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".dcc-bench-")
        .suffix(".tmp")
        .tempfile_in(parent_dir(path))?;
    tmp.write_all(bytes)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
