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
//! The CUDA backend (`cuda.rs`) calls NVRTC and the driver through [`fetch`] and [`load`], which
//! hold the policy above; everything here (files, keys, that policy) runs, and is tested, without
//! a GPU.

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

/// Where a module's PTX came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// This process (NVRTC, or the process's own memory cache): it loads, or the module is
    /// wrong, and a failed load is an error.
    Process,
    /// A disk cache file: a failed load compiles again and replaces the file ([`load`]).
    Disk,
}

/// The PTX of one module: unless `fresh`, the file of `key` in `cache` when intact; otherwise
/// `compile()`'s, which is then stored under `key` (a failed write goes to `write_failed` and
/// is otherwise ignored: the caller still gets its PTX).
pub(crate) fn fetch<E>(
    cache: Option<(&DiskCache, &str)>,
    fresh: bool,
    compile: impl FnOnce() -> Result<String, E>,
    write_failed: impl FnOnce(&DiskCache, std::io::Error),
) -> Result<(String, Origin), E> {
    if !fresh && let Some(text) = cache.and_then(|(c, key)| c.read(key)) {
        return Ok((text, Origin::Disk));
    }
    let ptx = compile()?;
    if let Some((c, key)) = cache
        && let Err(e) = c.write(key, &ptx)
    {
        write_failed(c, e);
    }
    Ok((ptx, Origin::Process))
}

/// Loads a module from `first` (the result of a [`fetch`]) with `load`. PTX from the disk that
/// `load` refuses (a file from another driver, or damaged in a way its digest cannot see) goes
/// to `refused`, and the module is loaded from `again()` (a fresh compile, which replaces the
/// file); a refusal of PTX this process compiled is `load`'s error.
pub(crate) fn load<M, E>(
    first: (String, Origin),
    load: impl Fn(String) -> Result<M, E>,
    again: impl FnOnce() -> Result<String, E>,
    refused: impl FnOnce(&E),
) -> Result<M, E> {
    match (load(first.0), first.1) {
        (Ok(m), _) => Ok(m),
        (Err(e), Origin::Disk) => {
            refused(&e);
            load(again()?)
        }
        (Err(e), Origin::Process) => Err(e),
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

    /// The policy around NVRTC, with a counting stand-in for it and for the driver's load:
    /// compile once, then serve the file; a damaged file is compiled again and replaced; a
    /// file the loader refuses is compiled again, replaced and loaded; a refusal of fresh PTX is
    /// an error; an unwritable directory still yields the PTX; no cache compiles every time.
    #[test]
    fn fetch_and_load_compile_only_when_the_disk_cannot_serve() {
        use std::cell::Cell;
        let s = Scratch::new("policy");
        let c = DiskCache::new(s.0.clone());
        let k = key("m", &[], "sm_90", (12, 8));
        let compiles = Cell::new(0);
        let compile = |text: &'static str| {
            let compiles = &compiles;
            move || -> Result<String, String> {
                compiles.set(compiles.get() + 1);
                Ok(text.to_string())
            }
        };
        let no_write_error = |_: &DiskCache, e: std::io::Error| panic!("write failed: {e}");
        // First process: compiles and stores; the next one reads the file.
        let first = fetch(Some((&c, &k)), false, compile("good"), no_write_error).unwrap();
        assert_eq!(
            (first, compiles.get()),
            (("good".into(), Origin::Process), 1)
        );
        let again = fetch(Some((&c, &k)), false, compile("good"), no_write_error).unwrap();
        assert_eq!((again, compiles.get()), (("good".into(), Origin::Disk), 1));
        // A damaged file: compiled again and replaced.
        std::fs::write(c.path(&k), b"// dcc-ptx 00\ngood").unwrap();
        let fixed = fetch(Some((&c, &k)), false, compile("good"), no_write_error).unwrap();
        assert_eq!((fixed.1, compiles.get()), (Origin::Process, 2));
        assert_eq!(c.read(&k).as_deref(), Some("good"));
        // An intact file the loader refuses (say, PTX of a newer ISA than the driver's): the
        // refusal is reported, the module compiled again, the file replaced, the new PTX loaded.
        c.write(&k, "stale").unwrap();
        let loader = |p: String| {
            if p == "stale" {
                Err(format!("refused {p}"))
            } else {
                Ok(p)
            }
        };
        let refusals = Cell::new(0);
        let got = fetch(Some((&c, &k)), false, compile("good"), no_write_error).unwrap();
        assert_eq!(got, ("stale".into(), Origin::Disk));
        let m = load(
            got,
            loader,
            || fetch(Some((&c, &k)), true, compile("good"), no_write_error).map(|p| p.0),
            |_| refusals.set(refusals.get() + 1),
        );
        assert_eq!(
            (m, refusals.get(), compiles.get()),
            (Ok("good".into()), 1, 3)
        );
        assert_eq!(c.read(&k).as_deref(), Some("good"));
        // PTX this process compiled that the loader refuses: the loader's error, no retry.
        let m = load(
            ("stale".into(), Origin::Process),
            loader,
            || -> Result<String, String> { panic!("no second compile") },
            |_| panic!("not a disk refusal"),
        );
        assert_eq!(m, Err("refused stale".to_string()));
        // No cache: every fetch compiles.
        for n in 4..6 {
            let p = fetch(None, false, compile("good"), no_write_error).unwrap();
            assert_eq!((p.1, compiles.get()), (Origin::Process, n));
        }
        // An unwritable cache: the write error is reported, the PTX still served.
        let blocked = DiskCache::new(c.path(&k).join("sub"));
        let failed = Cell::new(false);
        let p = fetch(Some((&blocked, &k)), false, compile("good"), |_, _| {
            failed.set(true)
        });
        assert_eq!(p, Ok(("good".into(), Origin::Process)));
        assert!(failed.get());
        // A failed compile is the caller's error, and stores nothing.
        let k2 = key("broken", &[], "sm_90", (12, 8));
        let e = fetch(
            Some((&c, &k2)),
            false,
            || Err::<String, _>("nvrtc".to_string()),
            no_write_error,
        );
        assert_eq!(e, Err("nvrtc".to_string()));
        assert!(!c.path(&k2).exists());
    }
}
