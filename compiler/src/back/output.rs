//! Writing generated modules safely: the target is checked before anything is written, the
//! bytes go to a fresh temporary file in the target's directory, are flushed to disk, and only
//! then renamed over the target. A crash or an error leaves either the old file or the new one,
//! never a torn one, and the temporary file is removed on every error path (`NamedTempFile`
//! deletes itself when dropped). Its name is unique and created with `O_EXCL`, so a symlink
//! planted at a predictable temporary path can never redirect the write.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::CompileError;

/// Refuse `target` as an output when it is a directory or an existing non-regular file (device
/// node, FIFO, socket, or a symlink to one of those), or when it is the same file as one of
/// `inputs` (same canonical path, or on Unix the same device and inode, which also catches hard
/// links). A target that does not exist yet is fine.
pub fn check_output_target(target: &Path, inputs: &[&Path]) -> Result<(), CompileError> {
    let meta = match std::fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(CompileError::Io {
                path: target.to_path_buf(),
                error,
            });
        }
    };
    if meta.is_dir() {
        return Err(CompileError::BadOutput {
            path: target.to_path_buf(),
            kind: "a directory",
        });
    }
    if !meta.is_file() {
        return Err(CompileError::BadOutput {
            path: target.to_path_buf(),
            kind: "not a regular file",
        });
    }
    let canonical = std::fs::canonicalize(target).ok();
    for input in inputs {
        let same_path = canonical.is_some() && std::fs::canonicalize(input).ok() == canonical;
        if same_path || same_inode(&meta, input) {
            return Err(CompileError::OutputIsInput {
                output: target.to_path_buf(),
                input: input.to_path_buf(),
            });
        }
    }
    Ok(())
}

#[cfg(unix)]
fn same_inode(target: &std::fs::Metadata, input: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(input).is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
}

#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &Path) -> bool {
    false
}

/// Write `bytes` to `path` atomically: a unique temporary file next to it, `fsync`, rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CompileError> {
    let io = |error| CompileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = temp_builder().tempfile_in(&dir).map_err(io)?;
    if let Ok(old) = std::fs::metadata(path) {
        // Keep the mode of the file being replaced.
        tmp.as_file()
            .set_permissions(old.permissions())
            .map_err(io)?;
    }
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Temporary files are created like any new file (mode 0o666 less the umask), not with the
/// private 0o600 of `tempfile`'s default: they become the output.
fn temp_builder() -> tempfile::Builder<'static, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(".dcc-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b
}

/// Write `text` to `path` unless the file already holds exactly it (keeps mtimes, so Cargo does
/// not rebuild dependents for nothing). `path` must not be a directory or a non-regular file
/// (checked before it is opened, so a FIFO cannot block the comparison); the write is atomic
/// ([`write_atomic`]). Returns whether the file was written.
pub fn write_if_changed(path: &Path, text: &str) -> Result<bool, CompileError> {
    check_output_target(path, &[])?;
    if same_content(path, text.as_bytes()) {
        return Ok(false);
    }
    write_atomic(path, text.as_bytes())?;
    Ok(true)
}

/// Whether `path` is a regular file holding exactly `bytes` (reads at most `bytes.len() + 1`).
fn same_content(path: &Path, bytes: &[u8]) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut old = Vec::with_capacity(bytes.len());
    file.take(bytes.len() as u64 + 1)
        .read_to_end(&mut old)
        .is_ok_and(|_| old == bytes)
}
