//! A checked graph attached to a prebuilt server, the stub (docs/build.md): `mcpgraph build`
//! copies the stub, marks the copy as carrying a graph, and appends the graph with a trailer that
//! says what it is; the server reads its own file back at start-up. One module writes and reads
//! the format, so the two sides cannot drift.
//!
//! ```text
//! the stub's bytes, its mark's `attached=0` made `attached=1`
//! HEADER                     16 bytes
//! the payload                the checked IR as compact JSON
//! the trailer                TRAILER_LEN bytes:
//!   mcpgraph's version       32 bytes, NUL-padded
//!   the payload's length     u64, little-endian
//!   the format               u32, little-endian (FORMAT)
//!   reserved                 u32, zero
//!   SHA-256 of the payload   32 bytes
//!   MAGIC                    16 bytes: the file's last
//! ```
//!
//! The mark is a string in the stub's read-only data. It names the stub's format and version for
//! the builder, and it survives `strip`, which drops everything after the ELF image: a server
//! whose graph was stripped off is told apart from the bare stub by it.

use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The format of the attachment; a reader refuses any other.
pub const FORMAT: u32 = 1;
/// mcpgraph's version: the stub's, the builder's and the trailer's must all be this one.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
const VERSION_LEN: usize = 32;
const _: () = assert!(VERSION.len() <= VERSION_LEN);

/// The last bytes of a file that carries a graph.
const MAGIC: [u8; 16] = *b"\x89mcpgraph-attach";
/// The bytes before the payload. It ends in a raw newline, which compact JSON never contains.
const HEADER: [u8; 16] = *b"\x89mcpgraph-graph\n";
/// The trailer's length.
pub const TRAILER_LEN: usize = VERSION_LEN + 8 + 4 + 4 + 32 + MAGIC.len();

/// The stub's mark: found by the builder, flipped to `attached=1` in every server.
static MARK: &str = concat!(
    "\0mcpgraph-stub\0format=1\0version=",
    env!("CARGO_PKG_VERSION"),
    "\0attached=0\0"
);
const _: () = assert!(FORMAT == 1, "the mark's format= must follow FORMAT");

/// What a stub's mark says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// Where `attached=`'s digit is in the file.
    digit_at: usize,
    pub format: u32,
    pub version: String,
    pub attached: bool,
}

/// The marks in `bytes`: every occurrence of the mark's prefix that reads as a whole mark.
fn marks(bytes: &[u8]) -> Vec<Mark> {
    // Assembled at run time, so that the searching program holds no second copy of the prefix.
    let prefix = [b"\0mcpgraph-".as_slice(), b"stub\0format="].concat();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], &prefix) {
        let start = from + at + prefix.len();
        from = start;
        if let Some(mark) = read_mark(bytes, start) {
            found.push(mark);
        }
    }
    found
}

/// `FORMAT\0version=VERSION\0attached=D\0` from `start`.
fn read_mark(bytes: &[u8], start: usize) -> Option<Mark> {
    let rest = bytes.get(start..)?;
    let field =
        |rest: &[u8], max: usize| -> Option<usize> { rest.iter().take(max).position(|&b| b == 0) };
    let end = field(rest, 10)?;
    let format = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let rest = rest[end + 1..].strip_prefix(b"version=")?;
    let end = field(rest, VERSION_LEN + 1)?;
    let version = std::str::from_utf8(&rest[..end]).ok()?.to_string();
    let rest = rest[end + 1..].strip_prefix(b"attached=")?;
    let attached = match rest.get(..2)? {
        b"0\0" => false,
        b"1\0" => true,
        _ => return None,
    };
    let digit_at = bytes.len() - rest.len();
    Some(Mark {
        digit_at,
        format,
        version,
        attached,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Where a 64-bit little-endian ELF file's image ends: past its last section, segment and
/// header table. Anything after it was appended.
pub fn elf_end(bytes: &[u8]) -> Option<u64> {
    if bytes.len() < 64 || bytes[..4] != *b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return None;
    }
    let u16_at = |o: u64| -> Option<u64> {
        let o = usize::try_from(o).ok()?;
        Some(u64::from(u16::from_le_bytes(
            bytes.get(o..o + 2)?.try_into().ok()?,
        )))
    };
    let u32_at = |o: u64| -> Option<u32> {
        let o = usize::try_from(o).ok()?;
        Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?))
    };
    let u64_at = |o: u64| -> Option<u64> {
        let o = usize::try_from(o).ok()?;
        Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?))
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    let (shoff, shentsize, shnum) = (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?);
    // Every offset is the file's word: checked, so that a crafted header is refused (`None`),
    // never an overflow.
    let entry = |table: u64, size: u64, i: u64, field: u64| {
        table.checked_add(i.checked_mul(size)?)?.checked_add(field)
    };
    let mut end = 64u64
        .max(phoff.checked_add(phentsize * phnum)?)
        .max(shoff.checked_add(shentsize * shnum)?);
    for i in 0..phnum {
        let offset = u64_at(entry(phoff, phentsize, i, 8)?)?;
        let size = u64_at(entry(phoff, phentsize, i, 0x20)?)?;
        end = end.max(offset.checked_add(size)?);
    }
    const SHT_NOBITS: u32 = 8;
    for i in 0..shnum {
        if u32_at(entry(shoff, shentsize, i, 4)?)? != SHT_NOBITS {
            let offset = u64_at(entry(shoff, shentsize, i, 0x18)?)?;
            let size = u64_at(entry(shoff, shentsize, i, 0x20)?)?;
            end = end.max(offset.checked_add(size)?);
        }
    }
    Some(end)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Why a file cannot be a stub for this mcpgraph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StubError {
    NotElf,
    /// No mark, or more than one.
    NotAStub,
    OtherVersion {
        version: String,
        format: u32,
    },
    /// Its mark says so, or data follows its image.
    CarriesAGraph,
    /// Its ELF image says it is longer than the file.
    Truncated,
}

impl fmt::Display for StubError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StubError::NotElf => write!(f, "it is not a 64-bit ELF executable"),
            StubError::NotAStub => {
                write!(f, "it is not an mcpgraph server stub (it has no stub mark)")
            }
            StubError::OtherVersion { version, format } => write!(
                f,
                "it is the stub of mcpgraph {version} (attachment format {format}), and this is mcpgraph {VERSION} (format {FORMAT}): a stub and a builder of different versions are never combined"
            ),
            StubError::CarriesAGraph => write!(
                f,
                "it already carries a graph (it is a built server, not the bare stub)"
            ),
            StubError::Truncated => write!(
                f,
                "it is truncated (its ELF image is longer than the file): copy or build it again"
            ),
        }
    }
}

/// Checks that `stub` is this version's bare stub and returns the server: the stub marked as
/// carrying a graph, the header, `payload`, the trailer. Deterministic: the same stub and
/// payload give the same bytes.
pub fn attach(stub: &[u8], payload: &[u8]) -> Result<Vec<u8>, StubError> {
    let end = elf_end(stub).ok_or(StubError::NotElf)?;
    let found = marks(stub);
    let [mark] = found.as_slice() else {
        return Err(StubError::NotAStub);
    };
    if mark.version != VERSION || mark.format != FORMAT {
        return Err(StubError::OtherVersion {
            version: mark.version.clone(),
            format: mark.format,
        });
    }
    if mark.attached || end < stub.len() as u64 {
        return Err(StubError::CarriesAGraph);
    }
    if end > stub.len() as u64 {
        return Err(StubError::Truncated);
    }
    let mut out = Vec::with_capacity(stub.len() + HEADER.len() + payload.len() + TRAILER_LEN);
    out.extend_from_slice(stub);
    out[mark.digit_at] = b'1';
    out.extend_from_slice(&HEADER);
    out.extend_from_slice(payload);
    let mut version = [0u8; VERSION_LEN];
    version[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    out.extend_from_slice(&version);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&sha256(payload));
    out.extend_from_slice(&MAGIC);
    Ok(out)
}

/// Whether `bytes` end in an attached graph's trailer (a built server, or a stub someone has
/// already attached a graph to).
pub fn has_trailer(bytes: &[u8]) -> bool {
    bytes.ends_with(&MAGIC)
}

/// Whether the file at `path` ends in an attached graph's trailer: a server `mcpgraph build`
/// made from the stub (what the toolkit's `buildGraph` may replace). Reads its last bytes only.
pub fn carries_a_graph(path: &Path) -> std::io::Result<bool> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len < MAGIC.len() as u64 {
        return Ok(false);
    }
    let mut end = [0u8; MAGIC.len()];
    file.seek(SeekFrom::Start(len - MAGIC.len() as u64))?;
    file.read_exact(&mut end)?;
    Ok(end == MAGIC)
}

/// Why a server cannot run the graph attached to it. Each names what happened; a server never
/// runs a partial graph.
#[derive(Debug)]
pub enum AttachedError {
    Read(PathBuf, std::io::Error),
    /// The bare stub: nothing was ever attached.
    BareStub,
    /// Its mark says a graph was attached, and the file ends where the stub's image ends.
    Removed,
    /// The attachment starts, its trailer is missing: the file was cut short.
    Truncated {
        kept: u64,
    },
    /// Something after the stub, or a trailer whose payload does not match it.
    Corrupted(&'static str),
    OtherVersion {
        version: String,
        format: u32,
    },
}

impl AttachedError {
    /// The message a server prints before exiting 1: what happened and how to rebuild.
    pub fn message(&self, exe: &Path) -> String {
        let exe = exe.display();
        let rebuild =
            format!("rebuild it with mcpgraph {VERSION}: `mcpgraph build GRAPH.yaml -o {exe}`");
        match self {
            AttachedError::Read(path, e) => {
                format!("cannot read this server's own file {}: {e}", path.display())
            }
            AttachedError::BareStub => format!(
                "{exe} is mcpgraph's server stub (mcpgraph {VERSION}): it carries no graph. A server is made from it with `mcpgraph build GRAPH.yaml -o SERVER`"
            ),
            AttachedError::Removed => format!(
                "{exe} was built by mcpgraph, but its graph is gone: the file ends where the stub ends, so the data the build appended was removed (`strip`, `objcopy` and some packagers drop it). The stub is stripped already: do not strip a built server; {rebuild}"
            ),
            AttachedError::Truncated { kept } => format!(
                "{exe} is truncated: its graph stops after {kept} bytes and the trailer that ends the file is missing (an interrupted copy or download?); {rebuild}"
            ),
            AttachedError::Corrupted(what) => format!(
                "{exe} is corrupted: {what}, so the file changed after it was built; {rebuild}"
            ),
            AttachedError::OtherVersion { version, format } => format!(
                "{exe}'s graph was attached by mcpgraph {version} (format {format}), but its runtime is mcpgraph {VERSION} (format {FORMAT}): a graph and a runtime of different versions never run together; {rebuild}"
            ),
        }
    }
}

/// The payload attached to the file open as `file` (this server's own).
pub fn read_attached(file: &mut std::fs::File, path: &Path) -> Result<Vec<u8>, AttachedError> {
    let read = |e: std::io::Error| AttachedError::Read(path.to_path_buf(), e);
    let len = file.metadata().map_err(read)?.len();
    let mut trailer = [0u8; TRAILER_LEN];
    if len >= TRAILER_LEN as u64 {
        file.seek(SeekFrom::Start(len - TRAILER_LEN as u64))
            .map_err(read)?;
        file.read_exact(&mut trailer).map_err(read)?;
    }
    if !trailer.ends_with(&MAGIC) {
        return Err(diagnose(file, len).map_err(read)?);
    }
    let (version, rest) = trailer.split_at(VERSION_LEN);
    let version = String::from_utf8_lossy(version)
        .trim_end_matches('\0')
        .to_string();
    let payload_len = u64::from_le_bytes(rest[..8].try_into().unwrap_or_default());
    let format = u32::from_le_bytes(rest[8..12].try_into().unwrap_or_default());
    if version != VERSION || format != FORMAT {
        return Err(AttachedError::OtherVersion { version, format });
    }
    let checksum = &rest[16..48];
    let attached = (HEADER.len() as u64 + TRAILER_LEN as u64)
        .checked_add(payload_len)
        .filter(|&n| n <= len)
        .ok_or(AttachedError::Corrupted(
            "its trailer gives a graph longer than the file",
        ))?;
    let start = len - attached;
    let mut body = vec![0u8; HEADER.len() + payload_len as usize];
    file.seek(SeekFrom::Start(start)).map_err(read)?;
    file.read_exact(&mut body).map_err(read)?;
    if body[..HEADER.len()] != HEADER {
        return Err(AttachedError::Corrupted(
            "its graph does not start where its trailer says",
        ));
    }
    body.drain(..HEADER.len());
    if sha256(&body) != checksum {
        return Err(AttachedError::Corrupted(
            "its graph's SHA-256 is not the one its trailer records",
        ));
    }
    Ok(body)
}

/// Why a file without a trailer has no graph: read whole (this is the failure path only).
fn diagnose(file: &mut std::fs::File, len: u64) -> std::io::Result<AttachedError> {
    let mut bytes = Vec::with_capacity(len as usize);
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut bytes)?;
    let Some(end) = elf_end(&bytes).filter(|&end| end <= bytes.len() as u64) else {
        return Ok(AttachedError::Corrupted("its ELF image is damaged"));
    };
    let appended = &bytes[end as usize..];
    if !appended.is_empty() {
        return Ok(if find(appended, &MAGIC).is_some() {
            // A whole attachment, then more bytes (`cat >>`, a packager, a signature).
            AttachedError::Corrupted("data was appended after its graph")
        } else if appended.starts_with(&HEADER) {
            AttachedError::Truncated {
                kept: (appended.len() - HEADER.len()) as u64,
            }
        } else if HEADER.starts_with(appended) {
            AttachedError::Truncated { kept: 0 }
        } else {
            AttachedError::Corrupted("the data after the stub is not an attached graph")
        });
    }
    // The file's own mark, which `attach` flipped; the static in memory is the same bytes,
    // but the compiler may fold a read of it.
    Ok(match marks(&bytes).as_slice() {
        [mark] if mark.attached => AttachedError::Removed,
        _ => AttachedError::BareStub,
    })
}

/// This server's graph: its own file (`/proc/self/exe`, which stays readable when the file is
/// replaced while it runs), its trailer and payload checked.
pub fn own_payload() -> Result<Vec<u8>, (PathBuf, AttachedError)> {
    std::hint::black_box(MARK);
    let shown = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("this server"));
    let opened = std::fs::File::open("/proc/self/exe")
        .or_else(|_| std::fs::File::open(&shown))
        .map_err(|e| (shown.clone(), AttachedError::Read(shown.clone(), e)));
    let mut file = opened?;
    read_attached(&mut file, &shown).map_err(|e| (shown, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_whole_or_not_at_all() {
        let mut bytes = b"xx".to_vec();
        bytes.extend_from_slice(MARK.as_bytes());
        bytes.extend_from_slice(b"\0mcpgraph-stub\0format=1\0version=9");
        let found = marks(&bytes);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].version, VERSION);
        assert!(!found[0].attached);
        assert_eq!(bytes[found[0].digit_at], b'0');
    }

    /// A crafted ELF header (offsets near the top of u64) is refused, never an overflow.
    #[test]
    fn crafted_elf_headers_are_refused_without_overflow() {
        let mut bytes = vec![0u8; 128];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[0x20..0x28].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&1u16.to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(elf_end(&bytes), None);
        bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&u16::MAX.to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(elf_end(&bytes), None);
        assert_eq!(attach(&bytes, b"{}"), Err(StubError::NotElf));
    }

    #[test]
    fn the_trailer_has_its_documented_length() {
        assert_eq!(TRAILER_LEN, 96);
    }
}
