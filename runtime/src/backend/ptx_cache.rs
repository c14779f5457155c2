//! The on-disk PTX cache: NVRTC's output kept across processes, so that only the first process
//! after a change of a kernel source, of the compile options, of the device architecture or of
//! the NVRTC library compiles (the invariant linear's modules take NVRTC tens of seconds).
//!
//! * **Key**: the SHA-256 of the module's source, the NVRTC options (the architecture among
//!   them), the architecture and the NVRTC version, each field length-prefixed ([`key`]). Any
//!   change of one is another file; nothing is ever invalidated in place.
//! * **Directory** ([`dir`]): `$DCC_CACHE_DIR`; else `$XDG_CACHE_HOME/dcc/ptx`; else
//!   `$HOME/.cache/dcc/ptx` (relative or empty values are skipped, as the XDG rules say). No
//!   directory (`DCC_CACHE_DIR=off`, or none of the three set): no disk cache, every process
//!   compiles.
//! * **Files**: `<key>.ptx`, a first line `// dcc-ptx <SHA-256 of the rest>` (a PTX comment)
//!   and then the PTX. A file is written to a temporary name in the same directory and renamed
//!   into place, so a reader sees a whole file or none, whatever processes run at once.
//! * **Failures are never errors**: a file that is missing, unreadable, not UTF-8, or whose
//!   digest line does not match its body reads as absent ([`DiskCache::read`]); the backend
//!   then compiles and replaces it. So does a file the driver refuses to load. A failed write
//!   (read-only home, full disk) is reported on stderr once per directory and otherwise ignored:
//!   the process still has its PTX in memory.
//!
//! The CUDA backend (`cuda.rs`) calls NVRTC; everything here is plain file logic and runs (and is
//! tested) without a GPU.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// The variable that names the cache directory, or `off`.
pub(crate) const DIR_VAR: &str = "DCC_CACHE_DIR";

/// First-line tag of a cache file.
const TAG: &str = "// dcc-ptx ";

/// The cache directory from the values of `DCC_CACHE_DIR`, `XDG_CACHE_HOME` and `HOME` (module
/// docs); `None` disables the cache.
pub(crate) fn dir_from(
    dcc: Option<OsString>,
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = set(dcc) {
        return (d.as_os_str() != "off").then_some(d);
    }
    if let Some(x) = set(xdg).filter(|p| p.is_absolute()) {
        return Some(x.join("dcc").join("ptx"));
    }
    set(home)
        .filter(|p| p.is_absolute())
        .map(|h| h.join(".cache").join("dcc").join("ptx"))
}

/// The cache directory of this process's environment ([`dir_from`]).
pub(crate) fn dir() -> Option<PathBuf> {
    dir_from(
        std::env::var_os(DIR_VAR),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// The key of a module's PTX: the hex SHA-256 of the source, the options, the architecture and
/// the NVRTC version `(major, minor)`, each field prefixed with its length (so no two field
/// lists hash alike by moving bytes between fields).
pub(crate) fn key(source: &str, options: &[String], arch: &str, nvrtc: (i32, i32)) -> String {
    let mut h = Sha256::new();
    let mut field = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    field(b"dcc-ptx-key 1");
    field(source.as_bytes());
    field(&(options.len() as u64).to_le_bytes());
    for o in options {
        field(o.as_bytes());
    }
    field(arch.as_bytes());
    field(&nvrtc.0.to_le_bytes());
    field(&nvrtc.1.to_le_bytes());
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// One cache directory.
#[derive(Clone, Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
}

/// Temporary files of this process get distinct names.
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    pub(crate) fn new(dir: PathBuf) -> DiskCache {
        DiskCache { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `key`.
    pub(crate) fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.ptx"))
    }

    /// The PTX stored under `key`, or `None` when there is none or the file is not intact
    /// (unreadable, not UTF-8, no digest line, or a body whose digest is not the line's).
    pub(crate) fn read(&self, key: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        let (head, body) = text.split_once('\n')?;
        let digest = head.strip_prefix(TAG)?;
        (hex(&Sha256::digest(body.as_bytes())) == digest).then(|| body.to_owned())
    }

    /// Stores `ptx` under `key` (creating the directory): written to a temporary file of this
    /// directory, then renamed over the key's file, so no reader ever sees part of it.
    pub(crate) fn write(&self, key: &str, ptx: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            NEXT_TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(TAG.as_bytes())?;
            f.write_all(hex(&Sha256::digest(ptx.as_bytes())).as_bytes())?;
            f.write_all(b"\n")?;
            f.write_all(ptx.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.path(key))
        })();
        if written.is_err() {
            // Best effort: the temporary file is ours and useless now.
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            static N: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "dcc-ptx-cache-test-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&p);
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn os(s: &str) -> Option<OsString> {
        Some(s.into())
    }

    #[test]
    fn directory_follows_the_environment_order() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(dir_from(os("/c"), os("/x"), os("/h")), p("/c"));
        assert_eq!(dir_from(os("off"), os("/x"), os("/h")), None);
        assert_eq!(dir_from(None, os("/x"), os("/h")), p("/x/dcc/ptx"));
        assert_eq!(dir_from(os(""), os("/x"), os("/h")), p("/x/dcc/ptx"));
        // A relative XDG_CACHE_HOME is ignored (XDG base directory rules).
        assert_eq!(dir_from(None, os("rel"), os("/h")), p("/h/.cache/dcc/ptx"));
        assert_eq!(dir_from(None, os(""), os("/h")), p("/h/.cache/dcc/ptx"));
        assert_eq!(dir_from(None, None, None), None);
        assert_eq!(dir_from(None, None, os("")), None);
    }

    #[test]
    fn key_covers_every_field() {
        let opts = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let base = key("src", &opts(&["-a", "-b"]), "sm_90", (12, 8));
        assert_eq!(base.len(), 64);
        assert!(base.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(base, key("src", &opts(&["-a", "-b"]), "sm_90", (12, 8)));
        let others = [
            key("src ", &opts(&["-a", "-b"]), "sm_90", (12, 8)),
            key("src", &opts(&["-a"]), "sm_90", (12, 8)),
            key("src", &opts(&["-b", "-a"]), "sm_90", (12, 8)),
            key("src", &opts(&["-a-b"]), "sm_90", (12, 8)),
            key("src", &opts(&["-a", "-b"]), "sm_80", (12, 8)),
            key("src", &opts(&["-a", "-b"]), "sm_90", (12, 9)),
            key("src", &opts(&["-a", "-b"]), "sm_90", (13, 8)),
            // Bytes moved from one field to the next.
            key("sr", &opts(&["c-a", "-b"]), "sm_90", (12, 8)),
        ];
        for (i, o) in others.iter().enumerate() {
            assert_ne!(&base, o, "variant {i}");
        }
    }

    #[test]
    fn round_trip_and_replace() {
        let s = Scratch::new("rt");
        let c = DiskCache::new(s.0.join("nested").join("ptx"));
        let k = key("x", &[], "sm_90", (12, 8));
        assert_eq!(c.read(&k), None, "nothing stored yet");
        c.write(&k, ".version 8.0\n// first\n").unwrap();
        assert_eq!(c.read(&k).as_deref(), Some(".version 8.0\n// first\n"));
        c.write(&k, "second").unwrap();
        assert_eq!(c.read(&k).as_deref(), Some("second"));
        // Only the key's file is left: no temporary file survives a write.
        let names: Vec<_> = std::fs::read_dir(c.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [OsString::from(format!("{k}.ptx"))]);
    }

    #[test]
    fn damaged_files_read_as_absent_and_are_replaced() {
        let s = Scratch::new("bad");
        let c = DiskCache::new(s.0.clone());
        let k = key("y", &[], "sm_90", (12, 8));
        c.write(&k, "the ptx\n").unwrap();
        let whole = std::fs::read(c.path(&k)).unwrap();
        let damaged: Vec<Vec<u8>> = vec![
            // Truncated (a crash mid-copy elsewhere, a full disk).
            whole[..whole.len() - 3].to_vec(),
            // One byte of the body changed.
            {
                let mut w = whole.clone();
                let n = w.len();
                w[n - 2] ^= 1;
                w
            },
            // No digest line, empty, not UTF-8.
            b"the ptx\n".to_vec(),
            Vec::new(),
            vec![0xff, 0xfe, b'\n', 0x80],
        ];
        for (i, bytes) in damaged.iter().enumerate() {
            std::fs::write(c.path(&k), bytes).unwrap();
            assert_eq!(c.read(&k), None, "damage {i}");
            c.write(&k, "the ptx\n").unwrap();
            assert_eq!(c.read(&k).as_deref(), Some("the ptx\n"), "damage {i}");
        }
        // A directory where the file should be: unreadable, and the write fails (an error the
        // backend reports and ignores), leaving no temporary file behind.
        std::fs::remove_file(c.path(&k)).unwrap();
        std::fs::create_dir(c.path(&k)).unwrap();
        assert_eq!(c.read(&k), None);
        assert!(c.write(&k, "the ptx\n").is_err());
        let left = std::fs::read_dir(c.dir()).unwrap().count();
        assert_eq!(left, 1, "only the directory in the file's place");
    }

    #[test]
    fn a_cache_directory_that_cannot_be_made_fails_the_write_only() {
        let s = Scratch::new("nodir");
        std::fs::create_dir_all(&s.0).unwrap();
        let file = s.0.join("plain");
        std::fs::write(&file, b"x").unwrap();
        let c = DiskCache::new(file.join("ptx"));
        let k = key("z", &[], "sm_90", (12, 8));
        assert_eq!(c.read(&k), None);
        assert!(c.write(&k, "p").is_err());
    }
}
