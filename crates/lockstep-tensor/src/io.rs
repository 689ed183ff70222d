//! Crash-safe file writes, shared by every writer of a file a user may rely on (the autotune
//! cache, checkpoints).

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` so that, whatever happens (a kill, a crash, a full disk, a power
/// cut after it returns), `path` holds either its previous content or exactly `bytes`:
///
/// 1. a temporary file with a unique name (`.NAME.XXXXXX.tmp`) is created in `path`'s own
///    directory (so the rename stays within one file system) — no other file is ever touched,
///    and two processes saving the same path do not collide;
/// 2. the bytes are written and the file is fsynced;
/// 3. it is renamed over `path` (atomic on POSIX and on Windows' `MoveFileEx`);
/// 4. the directory is fsynced (POSIX), so that the rename itself survives a power cut.
///
/// On an error the temporary file is removed and `path` is unchanged. The new file gets the
/// permissions of the file it replaces, or `0o644` (Unix) if there was none.
///
/// The writer holds an exclusive advisory lock (`flock`) on its temporary file from just after
/// creating it until the rename is done, so [`remove_stale_temporaries`] can tell a live
/// writer's file (locked) from one a killed writer left (the lock died with the process).
///
/// # Errors
/// Any I/O error of the steps above (the directory does not exist or is not writable, the
/// disk is full, `path` has no file name).
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> std::io::Result<()> {
    let path = path.as_ref();
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} has no file name", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = locked_temporary(dir, &format!(".{}.", name.to_string_lossy()))?;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    match std::fs::metadata(path) {
        Ok(m) => tmp.as_file().set_permissions(m.permissions())?,
        Err(_) => default_permissions(tmp.as_file())?,
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// A new temporary file `PREFIX.XXXXXX.tmp` in `dir`, exclusively locked. A cleaner may have
/// removed it between its creation and the lock (it was not locked yet): then the path no
/// longer names the locked file, and another one is made.
fn locked_temporary(dir: &Path, prefix: &str) -> std::io::Result<tempfile::NamedTempFile> {
    let mut tries = 0;
    loop {
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .suffix(".tmp")
            .tempfile_in(dir)?;
        tmp.as_file().lock()?;
        if names_file(tmp.path(), tmp.as_file()) {
            return Ok(tmp);
        }
        // Not ours any more: keep the path of whatever is there now (`into_parts` does not
        // delete it on drop) and try again.
        let _ = tmp.keep();
        tries += 1;
        if tries == 8 {
            return Err(std::io::Error::other(format!(
                "temporary files in {} keep disappearing",
                dir.display()
            )));
        }
    }
}

/// Whether `path` still names the open file `f` (same device and inode).
#[cfg(unix)]
fn names_file(path: &Path, f: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(path), f.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn names_file(path: &Path, _: &std::fs::File) -> bool {
    path.exists()
}

/// Removes the temporary files that writers of [`write_atomic`] left when they were killed, in
/// `dir`, among those whose file name `matches` (e.g. `.ckpt-*.safetensors.*.tmp`), and returns
/// how many it removed.
///
/// A temporary file is stale when nobody holds its lock: a live writer holds it until its
/// rename, and the lock ends with the writer's process. Each candidate is locked before it is
/// removed, and removed only if its path still names the locked file, so a live writer's file
/// is never touched, whatever the timing. Where locks are not supported (an error other than
/// "would block"), the file is kept: it may be live. Unreadable directories remove nothing.
pub fn remove_stale_temporaries(dir: &Path, matches: impl Fn(&str) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for p in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let candidate = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".tmp") && matches(n));
        if !candidate {
            continue;
        }
        let Ok(f) = std::fs::File::open(&p) else {
            continue;
        };
        // `try_lock` fails while the writer lives; the lock is dropped with `f`.
        if f.try_lock().is_ok() && names_file(&p, &f) && std::fs::remove_file(&p).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(unix)]
fn default_permissions(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn default_permissions(_: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_and_touches_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("model.json");
        let sibling = dir.path().join("model.tmp");
        std::fs::write(&sibling, b"user data").unwrap();
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read(&sibling).unwrap(), b"user data");
        // Only the two files: no temporary left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        // A `.tmp` target is written by rename too, never in place.
        let t = dir.path().join("x.tmp");
        write_atomic(&t, b"a").unwrap();
        write_atomic(&t, b"b").unwrap();
        assert_eq!(std::fs::read(&t).unwrap(), b"b");
        // A missing directory is an error and creates nothing.
        assert!(write_atomic(dir.path().join("no/such/f"), b"x").is_err());
    }

    #[test]
    fn only_unlocked_temporaries_are_stale() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let is_ckpt = |n: &str| n.starts_with(".ckpt-");
        // A killed writer's file: nobody holds its lock.
        std::fs::write(d.join(".ckpt-1.abc.tmp"), b"stale").unwrap();
        // A live writer's file: locked, as write_atomic holds it until its rename.
        let live = d.join(".ckpt-2.def.tmp");
        std::fs::write(&live, b"live").unwrap();
        let held = std::fs::File::open(&live).unwrap();
        held.lock().unwrap();
        // Not matched by the filter, or not a `.tmp`: never touched.
        std::fs::write(d.join(".other.ghi.tmp"), b"x").unwrap();
        std::fs::write(d.join(".ckpt-3.safetensors"), b"x").unwrap();
        assert_eq!(remove_stale_temporaries(d, is_ckpt), 1);
        assert!(!d.join(".ckpt-1.abc.tmp").exists());
        assert_eq!(std::fs::read(&live).unwrap(), b"live");
        assert!(d.join(".other.ghi.tmp").exists());
        assert!(d.join(".ckpt-3.safetensors").exists());
        // Once the writer is gone, its file is stale.
        drop(held);
        assert_eq!(remove_stale_temporaries(d, is_ckpt), 1);
        assert!(!live.exists());
        assert_eq!(remove_stale_temporaries(&d.join("missing"), is_ckpt), 0);
    }

    #[test]
    fn a_cleaner_never_breaks_a_live_writer() {
        // Writers and a cleaner on one directory at once: every write lands, and no
        // temporary file is left.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            // It may remove a file in the instant between its creation and its lock; the
            // writer then sees that and makes another.
            let cleaner = s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    remove_stale_temporaries(d, |_| true);
                }
            });
            let writers: Vec<_> = (0..4u8)
                .map(|k| {
                    s.spawn(move || {
                        for i in 0..50 {
                            write_atomic(d.join(format!("f{k}-{i}")), &[k; 64]).unwrap();
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            cleaner.join().unwrap();
        });
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 200);
    }

    #[test]
    fn concurrent_writers_of_one_path_do_not_fail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cache.json");
        std::thread::scope(|s| {
            for k in 0..8u8 {
                let p = &p;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(p, &[k; 100]).unwrap();
                    }
                });
            }
        });
        let b = std::fs::read(&p).unwrap();
        assert_eq!(b.len(), 100);
        assert!(b.iter().all(|&x| x == b[0]), "a torn write");
    }
}
