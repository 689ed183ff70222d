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
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .tempfile_in(dir)?;
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
