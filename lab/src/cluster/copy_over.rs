//! A base backup written over the old standby's files, in place.
//!
//! Every timeline of F14 and F18 needs a fresh standby: a copy of the
//! primary as it is now. `pg_basebackup` makes one into an empty folder,
//! so each build used to create the standby's ~1,600 files anew and remove
//! the old ones. On an ext4 without a journal, as on the machine the lab
//! is measured on, that costs more than the copy: the inode allocator
//! skips, one lookup each, every inode freed in the last minute (six
//! minutes while its inode-table block is dirty) in the group the new
//! files go to, which is the group the old standby's files were freed in.
//! Measured in F14 and F18 here: a base backup into a fresh folder took
//! 0.15 s on a quiet disk and 0.6–1.1 s after a few runs' removals; the
//! same copy written over the old files, 0.18–0.25 s either way.
//!
//! So the copy comes as one tar stream on `pg_basebackup`'s stdout (`-D -
//! -Ft`), and the lab compares each file of it with the file of the same
//! name in the old standby's data folder: the same bytes are left alone,
//! other bytes are written over the old ones in place (`rsync --inplace`
//! does the same), a missing file is made; then whatever the copy does
//! not have is removed. The folder then holds exactly the copy, as a fresh
//! one would, and only the few files whose names changed (a truncated
//! table's, the WAL's) are made or removed. Emptying each file and
//! writing it again would free and allocate its blocks: measured, that
//! took 0.5 s a copy here; most of a standby's files (the catalogs of
//! `template0`, `template1`, `postgres`) do not change between two
//! copies.
//!
//! The data folder is the server account's, so nothing here follows a
//! path that account could change: every folder is entered through its
//! parent's descriptor ([`SafeDir::sub_dir`]), every file is opened
//! beneath it with no link followed and checked (a regular file of that
//! account's with one link, [`SafeDir::open_file`]) before it is read,
//! written or cut, and removal goes by descriptors
//! ([`SafeDir::remove_entry`]).
//! A name in the stream that is not a plain relative path, an entry of a
//! kind a base backup does not hold here (a link: the lab makes no
//! tablespaces), a damaged header, a stream that ends early or goes on
//! after its end marker, and an old entry whose name is not UTF-8 are
//! errors, never skipped.

use crate::error::{Result, ResultExt};
use crate::safe_dir::{plain_name, Account, SafeDir};
use nix::fcntl::OFlag;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::FileExt;

/// A tar block: headers and the padding of contents come in these.
const BLOCK: usize = 512;

/// What one copy wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Files of the copy that were missing or held other bytes: written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files of the copy the old standby already held byte for byte.
    pub unchanged: usize,
    /// Files and folders of the old standby the copy did not have, or had
    /// as the other kind (a file for a folder), removed.
    pub removed: usize,
}

/// An entry of the stream.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    File(u64),
    Folder,
}

/// Writes the tar stream `tar` over the folder `data`, whose files and
/// folders belong to `owner`; see the module's opening.
pub fn write_over(data: &SafeDir, owner: Account, mut tar: impl Read) -> Result<Written> {
    let mut written = Written::default();
    // Every path of the copy, relative to `data`, and whether it is a
    // folder: a path that comes back as the other kind is refused.
    let mut kept: BTreeMap<String, bool> = BTreeMap::new();
    // The folders entered so far, by path: each opened once.
    let mut folders: BTreeMap<String, SafeDir> = BTreeMap::new();
    let mut header = [0u8; BLOCK];
    // The file as the copy has it, and as the old standby had it.
    let (mut incoming, mut old) = (Vec::new(), Vec::new());
    loop {
        tar.read_exact(&mut header).context("reading the base backup's next tar header")?;
        let Some((path, kind)) = parse_header(&header)? else { break };
        let names: Vec<&str> = path.split('/').collect();
        for n in 1..=names.len() {
            let is_folder = n < names.len() || kind == Kind::Folder;
            if *kept.entry(names[..n].join("/")).or_insert(is_folder) != is_folder {
                return Err(format!("the base backup names {} both a file and a folder", names[..n].join("/")).into());
            }
        }
        match kind {
            Kind::Folder => {
                written.removed += folder(data, &mut folders, &names, owner)?.1;
            }
            Kind::File(size) => {
                let (name, parent) = names.split_last().expect("a path has a name");
                let (dir, replaced) = folder(data, &mut folders, parent, owner)?;
                written.removed += replaced;
                // read_to_end, not a zeroed buffer and read_exact: in the
                // lab's unoptimised build, Vec::resize writes byte by byte.
                incoming.clear();
                (&mut tar).take(size).read_to_end(&mut incoming).with_context(|| format!("reading {path} from the base backup"))?;
                if incoming.len() as u64 != size {
                    return Err(format!("the base backup ended inside {path} ({} of {size} bytes)", incoming.len()).into());
                }
                let padding = (BLOCK - (incoming.len() % BLOCK)) % BLOCK;
                tar.read_exact(&mut header[..padding]).with_context(|| format!("reading the padding after {path}"))?;
                let name = plain_name(name)?;
                let existed = match kind_of(dir, name)? {
                    // A folder where the copy has a file: replaced, as a
                    // fresh folder would hold the file.
                    Some(true) => {
                        dir.remove_entry(name)?;
                        written.removed += 1;
                        false
                    }
                    found => found.is_some(),
                };
                // Checked before anything is read or written: a regular
                // file of the server account's with one link, reached
                // without a link. Anything else in its place (a link, a
                // FIFO) is refused here, not replaced.
                let mut file = dir.open_file(name, OFlag::O_RDWR | OFlag::O_CREAT, owner)?;
                // Compared only at the same length: an old file cut to an
                // empty copy must be cut, not taken for the same.
                let same = if existed && file.metadata()?.len() == size {
                    old.clear();
                    file.read_to_end(&mut old).with_context(|| format!("reading the old {path}"))?;
                    old == incoming
                } else {
                    false
                };
                if same {
                    written.unchanged += 1;
                } else {
                    file.write_all_at(&incoming, 0).with_context(|| format!("writing {path}"))?;
                    file.set_len(size).with_context(|| format!("cutting {path} to its size"))?;
                    written.files += 1;
                    written.bytes += size;
                }
            }
        }
    }
    // After the end, only the archive's zero padding: read to the end, so
    // that pg_basebackup finishes its writing, and refuse anything else.
    let mut rest = Vec::new();
    tar.read_to_end(&mut rest).context("reading the end of the base backup")?;
    if rest.iter().any(|&b| b != 0) {
        return Err(format!("the base backup goes on after its end marker ({} more bytes)", rest.len()).into());
    }
    written.removed += remove_others(data, "", &kept, owner)?;
    Ok(written)
}

/// The folder `names` below `data`, made (for `owner`, mode 0700) where
/// missing, entered through its parent's descriptor; with how many old
/// entries in the way were replaced.
fn folder<'a>(data: &'a SafeDir, folders: &'a mut BTreeMap<String, SafeDir>, names: &[&str], owner: Account) -> Result<(&'a SafeDir, usize)> {
    let mut replaced = 0;
    for n in 1..=names.len() {
        let path = names[..n].join("/");
        if !folders.contains_key(&path) {
            let parent = if n == 1 { data } else { &folders[&names[..n - 1].join("/")] };
            if kind_of(parent, names[n - 1])? == Some(false) {
                // Anything but a folder where the copy has one (a file, a
                // link, a FIFO): removed, never followed, and replaced.
                parent.remove_entry(names[n - 1])?;
                replaced += 1;
            }
            let made = parent.sub_dir(names[n - 1], owner, 0o700)?;
            folders.insert(path, made);
        }
    }
    Ok((if names.is_empty() { data } else { &folders[&names.join("/")] }, replaced))
}

/// Whether `name` in `dir` is a folder (`Some(true)`), anything else
/// (`Some(false)`: a file, a link, a FIFO) or missing (`None`), not
/// following a link; any other failure to look is an error.
fn kind_of(dir: &SafeDir, name: &str) -> Result<Option<bool>> {
    match nix::sys::stat::fstatat(dir.fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(nix::sys::stat::SFlag::from_bits_truncate(st.st_mode & nix::sys::stat::SFlag::S_IFMT.bits()) == nix::sys::stat::SFlag::S_IFDIR)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("looking at {}", dir.path().join(name).display())),
    }
}

/// Removes every entry below `dir` (at `path` in the copy) that the copy
/// did not have; returns how many.
fn remove_others(dir: &SafeDir, path: &str, kept: &BTreeMap<String, bool>, owner: Account) -> Result<usize> {
    let mut removed = 0;
    for (name, is_folder) in dir.entries()? {
        let below = if path.is_empty() { name.clone() } else { format!("{path}/{name}") };
        if !kept.contains_key(&below) {
            dir.remove_entry(&name)?;
            removed += 1;
        } else if is_folder {
            // Entered without following a link; checked as the copy's own.
            let sub = dir.existing_sub_dir(&name, owner, 0o700)?.ok_or_else(|| format!("{below} went away while the copy was written"))?;
            removed += remove_others(&sub, &below, kept, owner)?;
        }
    }
    Ok(removed)
}

/// The path and kind of the entry whose header is `block`; `None` at the
/// end of the archive (a block of zeros).
fn parse_header(block: &[u8; BLOCK]) -> Result<Option<(String, Kind)>> {
    if block.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    // The checksum: the sum of the header's bytes, its own field as spaces.
    let sum: u64 = block.iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { b' ' as u64 } else { b as u64 }).sum();
    let recorded = number(&block[148..156])?;
    if sum != recorded {
        return Err(format!("a tar header of the base backup is damaged (checksum {recorded}, computed {sum})").into());
    }
    let text = |bytes: &[u8]| -> Result<String> {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Ok(std::str::from_utf8(&bytes[..end]).map_err(|_| "a name in the base backup is not UTF-8")?.to_owned())
    };
    let (name, prefix) = (text(&block[0..100])?, if &block[257..262] == b"ustar" { text(&block[345..500])? } else { String::new() });
    let whole = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
    let path = whole.trim_start_matches("./").trim_end_matches('/').to_owned();
    if path.is_empty() || path.split('/').any(|part| plain_name(part).is_err()) {
        return Err(format!("the base backup names {whole:?}, which is not a plain path below the data folder").into());
    }
    let kind = match block[156] {
        // A name ending in '/' is old tar's folder: never a file here.
        b'0' | 0 if whole.ends_with('/') => return Err(format!("the base backup names {whole:?} a file and a folder at once").into()),
        b'0' | 0 => Kind::File(number(&block[124..136])?),
        b'5' => Kind::Folder,
        other => return Err(format!("the base backup holds {path:?} of tar type {:?}, which a standby's copy here never has (a link would be a tablespace)", other as char).into()),
    };
    Ok(Some((path, kind)))
}

/// A tar number: octal digits ended by a space or a zero byte, or, with
/// the top bit of the first byte set, a big-endian binary number.
fn number(field: &[u8]) -> Result<u64> {
    if field[0] & 0x80 != 0 {
        return Ok(field[1..].iter().fold(u64::from(field[0] & 0x7f), |n, &b| (n << 8) | u64::from(b)));
    }
    let digits: &[u8] = field.split(|&b| b == 0 || b == b' ').find(|part| !part.is_empty()).unwrap_or(&[]);
    let text = std::str::from_utf8(digits).map_err(|_| "a tar number is not text")?;
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, 8).map_err(|_| format!("{text:?} in a tar header is not an octal number").into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::DirBuilderExt;

    /// A ustar header for `name` of `kind`, checksummed as tar writes it.
    fn header(name: &str, kind: &Kind) -> [u8; BLOCK] {
        let mut block = [0u8; BLOCK];
        block[..name.len()].copy_from_slice(name.as_bytes());
        block[100..107].copy_from_slice(b"0000600");
        let size = match kind {
            Kind::File(size) => *size,
            Kind::Folder => 0,
        };
        block[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        block[156] = if matches!(kind, Kind::Folder) { b'5' } else { b'0' };
        block[257..263].copy_from_slice(b"ustar\0");
        block[148..156].copy_from_slice(b"        ");
        let sum: u64 = block.iter().map(|&b| b as u64).sum();
        block[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        block
    }

    /// A stream of `entries`: (path, contents; `None` for a folder).
    fn stream(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (path, contents) in entries {
            match contents {
                None => out.extend_from_slice(&header(path, &Kind::Folder)),
                Some(text) => {
                    out.extend_from_slice(&header(path, &Kind::File(text.len() as u64)));
                    out.extend_from_slice(text.as_bytes());
                    out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
                }
            }
        }
        out.extend_from_slice(&[0u8; 2 * BLOCK]);
        out
    }

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("lab-copy-over-").tempdir_in(std::env::var_os("LAB_TEST_TMP").unwrap_or_else(|| std::env::temp_dir().into())).unwrap()
    }

    /// The folder ends up holding exactly the copy: files written over
    /// (shorter ones too), new ones made, the old standby's others
    /// removed, a link removed as a link.
    #[test]
    fn the_folder_holds_exactly_the_copy() {
        let tmp = scratch();
        let data = tmp.path().join("data");
        let mut folders = std::fs::DirBuilder::new();
        folders.recursive(true).mode(0o700);
        folders.create(data.join("base/1")).unwrap();
        folders.create(data.join("pg_wal")).unwrap();
        std::fs::write(data.join("base/1/1259"), "an old catalog, longer than the new one").unwrap();
        std::fs::write(data.join("base/1/16384"), "a truncated table's old file").unwrap();
        std::fs::write(data.join("pg_wal/00000002.history"), "the old timeline").unwrap();
        std::fs::write(data.join("postmaster.pid"), "1").unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, data.join("base/link")).unwrap();
        let copy = stream(&[
            ("base/", None),
            ("base/1/", None),
            ("base/1/1259", Some("new catalog")),
            ("base/1/16390", Some("the new file")),
            ("pg_wal/", None),
            ("pg_wal/archive_status/", None),
            ("pg_wal/000000010000000000000003", Some("wal")),
            ("backup_label", Some("START WAL LOCATION")),
            ("global/pg_control", Some("control")),
        ]);
        let dir = SafeDir::open(&data).unwrap();
        let written = write_over(&dir, Account::me(), copy.as_slice()).unwrap();
        assert_eq!(written, Written { files: 5, bytes: 11 + 12 + 3 + 18 + 7, unchanged: 0, removed: 4 });
        let read = |p: &str| std::fs::read_to_string(data.join(p)).unwrap();
        assert_eq!(read("base/1/1259"), "new catalog");
        assert_eq!(read("base/1/16390"), "the new file");
        assert_eq!(read("global/pg_control"), "control");
        assert!(data.join("pg_wal/archive_status").is_dir());
        for gone in ["base/1/16384", "pg_wal/00000002.history", "postmaster.pid", "base/link"] {
            assert!(std::fs::symlink_metadata(data.join(gone)).is_err(), "{gone} is still there");
        }
        assert!(outside.is_dir(), "the link's target went with the link");
        // The same copy again: nothing to write, nothing to remove; one
        // file changed and one shorter are written, the shorter cut.
        let again = write_over(&dir, Account::me(), copy.as_slice()).unwrap();
        assert_eq!(again, Written { files: 0, bytes: 0, unchanged: 5, removed: 0 });
        let changed = stream(&[("base/1/1259", Some("new catalog")), ("base/1/16390", Some("the NEW file")), ("pg_wal/000000010000000000000003", Some("w")), ("backup_label", Some("START WAL LOCATION")), ("global/pg_control", Some("control")), ("pg_wal/archive_status/", None)]);
        let third = write_over(&dir, Account::me(), changed.as_slice()).unwrap();
        assert_eq!(third, Written { files: 2, bytes: 12 + 1, unchanged: 3, removed: 0 });
        assert_eq!(read("base/1/16390"), "the NEW file");
        assert_eq!(read("pg_wal/000000010000000000000003"), "w");
        // An empty file in the copy empties the old one.
        let emptied = stream(&[("base/1/1259", Some("new catalog")), ("base/1/16390", Some("")), ("pg_wal/000000010000000000000003", Some("w")), ("backup_label", Some("START WAL LOCATION")), ("global/pg_control", Some("control")), ("pg_wal/archive_status/", None)]);
        let fourth = write_over(&dir, Account::me(), emptied.as_slice()).unwrap();
        assert_eq!(fourth, Written { files: 1, bytes: 0, unchanged: 4, removed: 0 });
        assert_eq!(read("base/1/16390"), "");
        // A new empty file is written, not taken for unchanged; a folder
        // where the copy has a file, and a file where it has a folder, are
        // replaced, as a fresh folder would hold them.
        std::fs::DirBuilder::new().mode(0o700).create(data.join("base/1/16391")).unwrap();
        std::fs::write(data.join("pg_notify"), "a file").unwrap();
        let kinds = stream(&[("base/1/1259", Some("new catalog")), ("base/1/16390", Some("")), ("base/1/16391", Some("now a file")), ("pg_wal/000000010000000000000003", Some("w")), ("pg_wal/new", Some("")), ("backup_label", Some("START WAL LOCATION")), ("global/pg_control", Some("control")), ("pg_wal/archive_status/", None), ("pg_notify/", None)]);
        let fifth = write_over(&dir, Account::me(), kinds.as_slice()).unwrap();
        assert_eq!(fifth, Written { files: 2, bytes: 10, unchanged: 5, removed: 2 });
        assert_eq!(read("base/1/16391"), "now a file");
        assert!(data.join("pg_notify").is_dir() && data.join("pg_wal/new").is_file());
    }

    /// A name that leaves the folder, a link, a damaged header, and a
    /// stream that ends inside a file are errors.
    #[test]
    fn a_stream_that_is_not_a_plain_copy_is_refused() {
        let tmp = scratch();
        let data = tmp.path().join("data");
        std::fs::DirBuilder::new().mode(0o700).create(&data).unwrap();
        let dir = SafeDir::open(&data).unwrap();
        let escape = stream(&[("../outside", Some("x"))]);
        let err = write_over(&dir, Account::me(), escape.as_slice()).unwrap_err().to_string();
        assert!(err.contains("not a plain path"), "{err}");
        assert!(!tmp.path().join("outside").exists());
        let mut link = stream(&[("pg_tblspc/16400", Some(""))]);
        link[156] = b'2';
        let sum: u64 = link[..BLOCK].iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { b' ' as u64 } else { b as u64 }).sum();
        link[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let err = write_over(&dir, Account::me(), link.as_slice()).unwrap_err().to_string();
        assert!(err.contains("tar type '2'"), "{err}");
        for both in [stream(&[("a/b", Some("x")), ("a", Some("y"))]), stream(&[("a", Some("y")), ("a/b", Some("x"))]), stream(&[("a/", None), ("a", Some("y"))])] {
            let err = write_over(&dir, Account::me(), both.as_slice()).unwrap_err().to_string();
            assert!(err.contains("both a file and a folder"), "{err}");
        }
        let folder_as_file = stream(&[("base/", Some(""))]);
        let err = write_over(&dir, Account::me(), folder_as_file.as_slice()).unwrap_err().to_string();
        assert!(err.contains("a file and a folder at once"), "{err}");
        let mut damaged = stream(&[("base", None)]);
        damaged[0] = b'c';
        let err = write_over(&dir, Account::me(), damaged.as_slice()).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
        let short = stream(&[("PG_VERSION", Some("15\n"))]);
        let err = write_over(&dir, Account::me(), &short[..BLOCK + 1]).unwrap_err().to_string();
        assert!(err.contains("ended inside PG_VERSION"), "{err}");
        assert!(!data.join("PG_VERSION").exists(), "a file was made from half a stream");
        let mut trailing = stream(&[("PG_VERSION", Some("15\n"))]);
        trailing.extend_from_slice(b"more");
        let err = write_over(&dir, Account::me(), trailing.as_slice()).unwrap_err().to_string();
        assert!(err.contains("after its end marker"), "{err}");
    }
}
