//! Replacing a file in one step. The new contents go to a temporary file in the same directory,
//! are flushed to disk, get the replaced file's permissions, and are renamed over the file. A
//! reader (`serve --watch`, an editor, a running server binary) sees the old file or the new one,
//! never half of one; a failure at any point leaves the old file as it was and no temporary file
//! behind. Everything mcpgraph writes over a user's file goes through [`write`]: lock files
//! (`crate::lock`), the toolkit's edits of the graph (`crate::toolkit`, by [`write_over`], which
//! replaces only the bytes the edit was made from), built server binaries (`crate::aot`).
//!
//! It lives here rather than in the compiler crate: the compiler and the `graph!` macro never
//! write files, and `std::fs` is all it needs.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Replaces the file at `path` (the file a symbolic link points to, when it is one) with
/// `contents`, or creates it. A file that exists keeps its permissions; a new one gets
/// `new_file_mode` less the process's umask, as `open(2)` gives it (`0o666` makes a file as
/// `std::fs::write` does, `0o755` an executable as cargo does).
pub fn write(path: &Path, contents: &[u8], new_file_mode: u32) -> io::Result<()> {
    replace(path, contents, Mode::KeepOr(new_file_mode), None)?;
    Ok(())
}

/// What [`write_over`] found just before the rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// The file still held the bytes that were read; it now holds the new contents.
    Written,
    /// It no longer did (another program wrote or removed it meanwhile): nothing was written.
    ChangedSinceRead,
}

/// [`write`] over the bytes `read`, from which `contents` were made: the file is replaced only
/// while it still holds exactly them, compared once `contents` are on disk, just before the
/// rename, so that a change another program made meanwhile (an editor's save during a long
/// edit) is never overwritten. A file that is gone counts as changed, and is not created. Only
/// what another program writes between the compare and the rename (microseconds) can still be
/// lost: a rename cannot be made conditional on what it replaces.
pub fn write_over(path: &Path, read: &[u8], contents: &[u8]) -> io::Result<Overwrite> {
    // The file exists (or it counts as changed): the temporary file gets its permissions, and
    // this mode is the temporary file's only until then.
    replace(path, contents, Mode::KeepOr(0o600), Some(read))
}

/// [`write`] for a program (a built server): the file ends with exactly `mode` (`0o755`),
/// whatever the replaced file had, so that what was built can always be run; a symbolic link at
/// `path` is replaced, not written through.
pub fn write_program(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    replace(path, contents, Mode::Exactly(mode), None)?;
    Ok(())
}

/// The permissions a written file gets.
#[derive(Clone, Copy)]
enum Mode {
    /// Those of the file it replaces; a new file's, less the umask.
    KeepOr(u32),
    /// Exactly these.
    Exactly(u32),
}

/// Replaces `path`; with `read`, only while it still holds those bytes ([`write_over`]).
fn replace(path: &Path, contents: &[u8], mode: Mode, read: Option<&[u8]>) -> io::Result<Overwrite> {
    // A user's file behind a link is written where it is (an editor saves through a link); a
    // program replaces the link itself, as `cp` over it would not, so that building to
    // `~/.local/bin/x -> /opt/pkg/x` never overwrites `/opt/pkg/x`.
    let target = match mode {
        Mode::KeepOr(_) => resolve(path)?,
        Mode::Exactly(_) => path.to_path_buf(),
    };
    let existing = match fs::metadata(&target) {
        Ok(metadata) => Some(metadata.permissions()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(error),
    };
    if read.is_some() && existing.is_none() {
        return Ok(Overwrite::ChangedSinceRead);
    }
    // A file its owner made read-only is not replaced behind their back (a rename would: it
    // needs only the directory to be writable), as an editor refuses to save over it.
    if let (Mode::KeepOr(_), Some(permissions)) = (mode, &existing)
        && permissions.readonly()
    {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is read-only", path.display()),
        ));
    }
    let (new_file_mode, kept) = match mode {
        Mode::KeepOr(new_file_mode) => (new_file_mode, existing),
        Mode::Exactly(mode) => (mode, Some(Permissions::from_mode(mode))),
    };
    let Some(name) = target.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        ));
    };
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let temporary = directory.join(temporary_name(name));
    // `create_new`: a file of that name that is not ours is neither written nor removed below.
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(new_file_mode)
        .open(&temporary)?;
    let replaced = fill(file, contents, kept).and_then(|()| {
        if let Some(read) = read
            && !holds(&target, read)?
        {
            return Ok(Overwrite::ChangedSinceRead);
        }
        fs::rename(&temporary, &target).map(|()| Overwrite::Written)
    });
    if !matches!(replaced, Ok(Overwrite::Written)) {
        // Best effort: the failure worth reporting is the one that got here.
        let _ = fs::remove_file(&temporary);
        return replaced;
    }
    // The rename itself is on disk once the directory is. Best effort: not every file system
    // lets a directory be synced, and the file is in place either way.
    if let Ok(directory) = File::open(directory) {
        let _ = directory.sync_all();
    }
    Ok(Overwrite::Written)
}

/// Whether `path` is a regular file holding exactly `expected`. One that is gone, or is no
/// longer a regular file (which could block the read, as a FIFO does), does not.
fn holds(path: &Path, expected: &[u8]) -> io::Result<bool> {
    let gone = |error: io::Error| match error.kind() {
        io::ErrorKind::NotFound => Ok(false),
        _ => Err(error),
    };
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) => return gone(error),
    };
    if !metadata.is_file() || metadata.len() != expected.len() as u64 {
        return Ok(false);
    }
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) => return gone(error),
    };
    // One byte more than expected tells a file that grew since it was measured, without
    // reading all of it.
    let mut bytes = Vec::with_capacity(expected.len() + 1);
    file.take(expected.len() as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes.as_slice() == expected)
}

/// Writes the contents, gives the file the kept permissions, and flushes it, so that the rename
/// never puts a file in place whose contents are still only in memory.
fn fill(mut file: File, contents: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    file.write_all(contents)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()
}

/// The real file behind `path` (links followed); `path` itself when nothing is there yet.
fn resolve(path: &Path) -> io::Result<PathBuf> {
    match fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(path.to_path_buf()),
        Err(error) => Err(error),
    }
}

/// `.NAME.PID.N.tmp`: hidden, and unique across processes and within one.
fn temporary_name(name: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut temporary = OsString::from(".");
    temporary.push(name);
    temporary.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    temporary
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A fresh directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "mcpgraph-atomic-write-{test}-{}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn path(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }

        /// Every name in the directory, sorted: a temporary file left behind shows here.
        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::set_permissions(&self.0, Permissions::from_mode(0o755));
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_read_only_file_is_left_alone() {
        let scratch = Scratch::new("read-only");
        let file = scratch.path("g.yaml");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o444)).unwrap();
        let error = write(&file, b"new", 0o666).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            error.to_string().ends_with("g.yaml is read-only"),
            "{error}"
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(mode(&file), 0o444);
        assert_eq!(scratch.names(), ["g.yaml"]);
    }

    #[test]
    fn a_program_replaces_a_link_rather_than_writing_through_it() {
        let scratch = Scratch::new("program-link");
        let elsewhere = scratch.path("elsewhere");
        fs::write(&elsewhere, "someone else's program").unwrap();
        let link = scratch.path("server");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        write_program(&link, b"\x7fELF", 0o755).unwrap();
        assert_eq!(
            fs::read_to_string(&elsewhere).unwrap(),
            "someone else's program"
        );
        assert!(
            !fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&link).unwrap(), b"\x7fELF");
        assert_eq!(mode(&link), 0o755);
    }

    #[test]
    fn a_program_gets_exactly_its_mode() {
        let scratch = Scratch::new("program");
        let file = scratch.path("server");
        fs::write(&file, "not a program").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o600)).unwrap();
        write_program(&file, b"\x7fELF", 0o755).unwrap();
        assert_eq!(mode(&file), 0o755);
        let new = scratch.path("new-server");
        write_program(&new, b"\x7fELF", 0o755).unwrap();
        assert_eq!(mode(&new), 0o755);
        assert_eq!(scratch.names(), ["new-server", "server"]);
    }

    #[test]
    fn the_file_is_replaced_by_a_rename_not_overwritten() {
        let scratch = Scratch::new("replace");
        let file = scratch.path("out.txt");
        fs::write(&file, "old").unwrap();
        // A second name for the old file: an overwrite in place would change it too, a rename
        // leaves it whole (as a reader that opened the old file sees it).
        let old = scratch.path("old-name");
        fs::hard_link(&file, &old).unwrap();
        write(&file, b"new", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(fs::read_to_string(&old).unwrap(), "old");
        assert_ne!(
            fs::metadata(&file).unwrap().ino(),
            fs::metadata(&old).unwrap().ino()
        );
        assert_eq!(scratch.names(), ["old-name", "out.txt"]);
    }

    #[test]
    fn a_replaced_file_keeps_its_permissions() {
        let scratch = Scratch::new("keep");
        let file = scratch.path("graph.yaml");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o640)).unwrap();
        write(&file, b"new", 0o755).unwrap();
        assert_eq!(mode(&file), 0o640);
        let binary = scratch.path("server");
        fs::write(&binary, "old").unwrap();
        fs::set_permissions(&binary, Permissions::from_mode(0o750)).unwrap();
        write(&binary, b"new", 0o644).unwrap();
        assert_eq!(mode(&binary), 0o750);
        assert_eq!(fs::read_to_string(&binary).unwrap(), "new");
    }

    #[test]
    fn a_new_file_gets_the_mode() {
        let scratch = Scratch::new("new");
        // Modes no common umask (022, 002, 077) takes bits from, and neither what a plain
        // `fs::write` would give.
        write(&scratch.path("a"), b"a", 0o700).unwrap();
        write(&scratch.path("b"), b"b", 0o600).unwrap();
        assert_eq!(mode(&scratch.path("a")), 0o700);
        assert_eq!(mode(&scratch.path("b")), 0o600);
        assert_eq!(fs::read_to_string(scratch.path("a")).unwrap(), "a");
        assert_eq!(scratch.names(), ["a", "b"]);
    }

    #[test]
    fn a_link_is_followed_and_kept() {
        let scratch = Scratch::new("link");
        let real = scratch.path("real");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o640)).unwrap();
        let link = scratch.path("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write(&link, b"new", 0o644).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(mode(&real), 0o640);
        assert_eq!(scratch.names(), ["link", "real"]);
    }

    #[test]
    fn a_file_changed_since_it_was_read_is_not_replaced() {
        let scratch = Scratch::new("changed-since-read");
        let file = scratch.path("graph.yaml");
        fs::write(&file, "saved by an editor").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o640)).unwrap();
        let changed = write_over(&file, b"read", b"new").unwrap();
        assert_eq!(changed, Overwrite::ChangedSinceRead);
        // Of the same length as the file, to be told apart by its bytes.
        let changed = write_over(&file, b"saved by an EDITOR", b"new").unwrap();
        assert_eq!(changed, Overwrite::ChangedSinceRead);
        assert_eq!(fs::read_to_string(&file).unwrap(), "saved by an editor");
        assert_eq!(scratch.names(), ["graph.yaml"]);

        let written = write_over(&file, b"saved by an editor", b"new").unwrap();
        assert_eq!(written, Overwrite::Written);
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(mode(&file), 0o640);

        let gone = scratch.path("gone.yaml");
        let changed = write_over(&gone, b"read", b"new").unwrap();
        assert_eq!(changed, Overwrite::ChangedSinceRead);
        assert_eq!(scratch.names(), ["graph.yaml"]);
    }

    /// The rename fails after the temporary file was written: it is removed again.
    #[test]
    fn a_directory_is_not_replaced_and_nothing_is_left() {
        let scratch = Scratch::new("directory");
        let target = scratch.path("target");
        fs::create_dir(&target).unwrap();
        assert!(write(&target, b"x", 0o644).is_err());
        assert!(fs::metadata(&target).unwrap().is_dir());
        assert_eq!(scratch.names(), ["target"]);
    }

    #[test]
    fn a_read_only_directory_is_an_error_and_nothing_is_left() {
        let scratch = Scratch::new("read-only-directory");
        let file = scratch.path("out");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&scratch.0, Permissions::from_mode(0o555)).unwrap();
        // Root ignores directory permissions: then the write lands, which is right too (a
        // directory no one may write is tested on /proc below).
        let privileged = fs::write(scratch.path("probe"), "").is_ok();
        let _ = fs::remove_file(scratch.path("probe"));
        let result = write(&file, b"new", 0o644);
        fs::set_permissions(&scratch.0, Permissions::from_mode(0o755)).unwrap();
        if privileged {
            assert!(result.is_ok(), "{result:?}");
            assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        } else {
            assert!(result.is_err());
            assert_eq!(fs::read_to_string(&file).unwrap(), "old");
        }
        assert_eq!(scratch.names(), ["out"]);
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let scratch = Scratch::new("missing");
        assert!(write(&scratch.path("no/such/dir/out"), b"x", 0o644).is_err());
        assert!(scratch.names().is_empty());
    }

    /// A directory no one may create files in, root included.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_in_proc_is_an_error_and_stays() {
        let path = Path::new("/proc/self/status");
        let error = write(path, b"version: x\n", 0o644).unwrap_err();
        assert!(!error.to_string().is_empty());
        assert!(fs::read_to_string(path).unwrap().contains("Pid:"));
    }
}
