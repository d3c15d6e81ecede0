//! Page checksums: damaged pages are detected, never answered from.
//!
//! SQLite trusts what it reads; a flipped byte inside a row or a doclist can change an answer without
//! any error. So the index is opened through a small VFS of ours, [`VFS_NAME`], that wraps the default
//! one: every database page keeps its last [`RESERVE`] bytes for a checksum of the rest (SQLite's
//! "reserved bytes", set when the file is created), written whenever a page is written to the
//! database file (by a WAL checkpoint) and verified whenever a page is read from it, so a page that
//! fails is the read error `SQLITE_IOERR_DATA` and the index is rebuilt ([`super::Index::is_damage`]).
//! Pages in SQLite's cache are not verified again. Pages still in the WAL (the commits since the last
//! checkpoint, a few MB at most; none once the index is closed) are covered by the WAL's own frame
//! checksums, which SQLite checks when it recovers a WAL after a crash; this layer leaves WAL bytes
//! untouched so those stay valid. Memory-mapped reads are turned off (the I/O methods are version 2), since they
//! would bypass the check. A read of part of a database page (an overflow page SQLite reads directly,
//! around its cache) reads and checks the whole page; the header SQLite reads before it takes a lock
//! is not checked, since page 1 is read again whole, and checked, before SQLite trusts it. A file whose header reserves no
//! checksum bytes (an index built before this) passes through whole until it is rebuilt.
//!
//! The checksum is two running 64-bit sums over the page's 8-byte words (Fletcher-style: the second sum
//! makes the order of words count), ~4 GB/s on one core.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name connections pass to open the index through this VFS.
pub const VFS_NAME: &CStr = c"dsh-checksum";

/// Bytes every page reserves for its checksum.
pub const RESERVE: c_int = 8;

/// One open file: ours first (SQLite sees only `base`), the wrapped VFS's file right after.
#[repr(C)]
struct File {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    /// The main database file (the one whose pages carry checksums).
    pages: bool,
    /// For a main database file: its header reserves [`RESERVE`] bytes per page.
    enabled: bool,
    /// For a main database file: its page size, from its header (0 until known).
    page_size: u32,
}

const FILE_SIZE: usize = std::mem::size_of::<File>().next_multiple_of(16);

/// The checksum of `page` without its last 8 bytes.
pub fn checksum(page: &[u8]) -> [u8; 8] {
    let body = &page[..page.len() - 8];
    let (mut a, mut b) = (0x9E37_79B9_7F4A_7C15u64, 0u64);
    for word in body.chunks_exact(8) {
        a = a.wrapping_add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        b = b.wrapping_add(a);
    }
    (a ^ b.rotate_left(29)).to_le_bytes()
}

fn is_page(amount: c_int) -> bool {
    amount >= 512 && (amount as u32).is_power_of_two()
}

/// Registers the VFS once per copy of SQLite (each plugin copy has its own); `Err` with SQLite's code
/// when it cannot be.
pub fn register() -> Result<(), c_int> {
    static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find with null returns the default VFS, which lives as long as the
        // library; the new VFS is leaked so it does too.
        unsafe {
            let parent = ffi::sqlite3_vfs_find(ptr::null());
            if parent.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            let mut vfs: ffi::sqlite3_vfs = ptr::read(parent);
            vfs.iVersion = (*parent).iVersion.min(3);
            vfs.szOsFile = (FILE_SIZE as c_int) + (*parent).szOsFile;
            vfs.pNext = ptr::null_mut();
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pAppData = parent.cast();
            vfs.xOpen = Some(x_open);
            vfs.xDelete = Some(x_delete);
            vfs.xAccess = Some(x_access);
            vfs.xFullPathname = Some(x_full_pathname);
            let vfs = Box::leak(Box::new(vfs));
            match ffi::sqlite3_vfs_register(vfs, 0) {
                ffi::SQLITE_OK => Ok(()),
                rc => Err(rc),
            }
        }
    })
}

/// Asks SQLite to reserve checksum bytes in every page of `conn`'s (still empty) main database.
pub fn reserve_bytes(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let mut n: c_int = RESERVE;
    // SAFETY: the handle is open for the call; the file control reads and writes one c_int.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_RESERVE_BYTES,
            (&mut n as *mut c_int).cast(),
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
    }
    // A new database's first pages go to the WAL, before its header is ever written to the file this
    // layer learns from: say now that its pages carry checksums.
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: as above; the file control writes one pointer.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast(),
        )
    };
    // SAFETY: a file whose methods are ours is one of our `File`s, open for the connection's life.
    unsafe {
        if rc == ffi::SQLITE_OK && !file.is_null() && ptr::eq((*file).pMethods, &METHODS) {
            let ours = file.cast::<File>();
            (*ours).enabled = true;
            (*ours).page_size = u32::try_from(page_size).unwrap_or(0);
        }
    }
    Ok(())
}

unsafe fn parent(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    (*vfs).pAppData.cast()
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let parent = parent(vfs);
    let ours = file.cast::<File>();
    let inner = file.cast::<u8>().add(FILE_SIZE).cast::<ffi::sqlite3_file>();
    let Some(open) = (*parent).xOpen else {
        return ffi::SQLITE_ERROR;
    };
    let rc = open(parent, name, inner, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        (*ours).base.pMethods = ptr::null();
        return rc;
    }
    let main = flags & ffi::SQLITE_OPEN_MAIN_DB != 0;
    ptr::write(
        ours,
        File {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            inner,
            pages: main,
            enabled: false,
            page_size: 0,
        },
    );
    if main {
        let mut head = [0u8; 100];
        if inner_read(ours, head.as_mut_ptr().cast(), 100, 0) == ffi::SQLITE_OK {
            note_header(ours, &head);
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync: c_int,
) -> c_int {
    let parent = parent(vfs);
    match (*parent).xDelete {
        Some(f) => f(parent, name, sync),
        None => ffi::SQLITE_ERROR,
    }
}

unsafe extern "C" fn x_access(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let parent = parent(vfs);
    match (*parent).xAccess {
        Some(f) => f(parent, name, flags, out),
        None => ffi::SQLITE_ERROR,
    }
}

unsafe extern "C" fn x_full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let parent = parent(vfs);
    match (*parent).xFullPathname {
        Some(f) => f(parent, name, n, out),
        None => ffi::SQLITE_ERROR,
    }
}

unsafe fn inner(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    (*file.cast::<File>()).inner
}

unsafe fn methods(file: *mut ffi::sqlite3_file) -> *const ffi::sqlite3_io_methods {
    (*inner(file)).pMethods
}

unsafe fn inner_read(ours: *mut File, buf: *mut c_void, amount: c_int, offset: i64) -> c_int {
    let inner = (*ours).inner;
    match (*(*inner).pMethods).xRead {
        Some(f) => f(inner, buf, amount, offset),
        None => ffi::SQLITE_IOERR_READ,
    }
}

/// Whether pages of this file carry checksums.
unsafe fn checked(ours: *mut File) -> bool {
    (*ours).pages && (*ours).enabled
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let ours = file.cast::<File>();
    let rc = inner_read(ours, buf, amount, offset);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let main = (*ours).pages;
    if main && offset == 0 && amount >= 100 {
        note_header(ours, std::slice::from_raw_parts(buf.cast::<u8>(), 100));
    }
    if !checked(ours) {
        return ffi::SQLITE_OK;
    }
    if main && offset == 0 && !is_page(amount) {
        // The database header, which SQLite reads before it takes any lock (so a checkpoint of another
        // connection may be rewriting page 1 at that moment) and trusts only after reading page 1 whole
        // again under a lock, a read this layer checks.
        return ffi::SQLITE_OK;
    }
    if is_page(amount) {
        let page = std::slice::from_raw_parts(buf.cast::<u8>(), amount as usize);
        return verify(page);
    }
    // Part of a page of the database file (its header, or an overflow page SQLite reads directly,
    // bypassing its cache): the whole page is read and checked, so no byte is taken unchecked.
    let size = i64::from((*ours).page_size);
    if main && size > 0 && amount > 0 {
        let start = offset - offset % size;
        if offset + i64::from(amount) <= start + size {
            let mut page = vec![0u8; size as usize];
            let rc = inner_read(ours, page.as_mut_ptr().cast(), size as c_int, start);
            if rc == ffi::SQLITE_OK {
                return verify(&page);
            }
        }
    }
    ffi::SQLITE_OK
}

/// `SQLITE_IOERR_DATA` unless `page` carries its own checksum.
fn verify(page: &[u8]) -> c_int {
    let stored = &page[page.len() - 8..];
    // A page never written (all zeros) has no checksum to check.
    if checksum(page) != stored && page.iter().any(|&b| b != 0) {
        return ffi::SQLITE_IOERR_DATA;
    }
    ffi::SQLITE_OK
}

/// Learns from a main database file's header whether its pages carry checksums, and their size.
unsafe fn note_header(ours: *mut File, head: &[u8]) {
    if head[20] as c_int == RESERVE {
        (*ours).enabled = true;
        (*ours).page_size = match u16::from_be_bytes([head[16], head[17]]) {
            1 => 65536,
            p => u32::from(p),
        };
    }
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let ours = file.cast::<File>();
    if (*ours).pages && offset == 0 && amount >= 100 {
        note_header(ours, std::slice::from_raw_parts(buf.cast::<u8>(), 100));
    }
    if checked(ours) && is_page(amount) {
        // The reserved bytes belong to whoever reserved them: SQLite leaves them alone, so the page
        // buffer may carry its checksum. Only database-file writes get one: a page's bytes in the WAL
        // are covered by the WAL frame's own checksum, computed before the write reaches this layer,
        // which must stay valid for recovery after a crash.
        let page = std::slice::from_raw_parts_mut(buf.cast::<u8>().cast_mut(), amount as usize);
        let sum = checksum(page);
        let at = page.len() - 8;
        page[at..].copy_from_slice(&sum);
    }
    match (*methods(file)).xWrite {
        Some(f) => f(inner(file), buf, amount, offset),
        None => ffi::SQLITE_IOERR_WRITE,
    }
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    let inner = inner(file);
    let rc = match (*(*inner).pMethods).xClose {
        Some(f) => f(inner),
        None => ffi::SQLITE_OK,
    };
    (*file).pMethods = ptr::null();
    rc
}

macro_rules! forward {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*), $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            match (*methods(file)).$field {
                Some(f) => f(inner(file) $(, $arg)*),
                None => $missing,
            }
        }
    };
}

forward!(x_truncate, xTruncate, (size: i64), ffi::SQLITE_IOERR_TRUNCATE);
forward!(x_sync, xSync, (flags: c_int), ffi::SQLITE_IOERR_FSYNC);
forward!(x_file_size, xFileSize, (size: *mut i64), ffi::SQLITE_IOERR_FSTAT);
forward!(x_lock, xLock, (level: c_int), ffi::SQLITE_IOERR_LOCK);
forward!(x_unlock, xUnlock, (level: c_int), ffi::SQLITE_IOERR_UNLOCK);
forward!(x_check_reserved_lock, xCheckReservedLock, (out: *mut c_int), ffi::SQLITE_IOERR_CHECKRESERVEDLOCK);
forward!(x_file_control, xFileControl, (op: c_int, arg: *mut c_void), ffi::SQLITE_NOTFOUND);
forward!(x_sector_size, xSectorSize, (), 4096);
forward!(x_device_characteristics, xDeviceCharacteristics, (), 0);
forward!(x_shm_map, xShmMap, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void), ffi::SQLITE_IOERR_SHMMAP);
forward!(x_shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int), ffi::SQLITE_IOERR_SHMLOCK);
forward!(x_shm_unmap, xShmUnmap, (delete: c_int), ffi::SQLITE_OK);

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    if let Some(f) = (*methods(file)).xShmBarrier {
        f(inner(file))
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_covers_every_byte_and_their_order() {
        let mut page = vec![0u8; 4096];
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i * 7 % 251) as u8;
        }
        let sum = checksum(&page);
        for at in [0, 1, 8, 2047, 4087] {
            let mut flipped = page.clone();
            flipped[at] ^= 0x10;
            assert_ne!(checksum(&flipped), sum, "byte {at}");
        }
        let mut swapped = page.clone();
        swapped.swap(0, 8);
        assert_ne!(checksum(&swapped), sum, "word order");
        // The stored bytes themselves are not covered.
        page[4090] ^= 1;
        assert_eq!(checksum(&page), sum);
    }

    fn open(path: &std::path::Path) -> rusqlite::Connection {
        register().expect("the VFS registers");
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_CREATE;
        rusqlite::Connection::open_with_flags_and_vfs(path, flags, VFS_NAME).expect("opens")
    }

    /// SQLite reads a database's first 100 bytes before it takes any lock, and trusts them only once it
    /// has read page 1 again under one. Checking that unlocked read as a page made a checkpoint that was
    /// rewriting page 1 at that moment (the page count in the header changes as the index grows) look
    /// like damage: opening the index beside another process's update failed with an I/O error.
    #[test]
    fn opening_while_a_checkpoint_rewrote_page_one_was_taken_for_a_damaged_page() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("index.sqlite");
        let conn = open(&path);
        reserve_bytes(&conn).expect("reserves");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (x BLOB); INSERT INTO t VALUES (zeroblob(100));",
        )
        .expect("creates");
        drop(conn);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let conn = open(&path);
                let mut rounds = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    conn.execute("INSERT INTO t VALUES (zeroblob(5000))", [])
                        .expect("inserts");
                    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                        .expect("checkpoints");
                    rounds += 1;
                }
                rounds
            })
        };
        let started = std::time::Instant::now();
        let mut opened = 0u32;
        let mut failure = None;
        while started.elapsed() < std::time::Duration::from_millis(1500) && failure.is_none() {
            let conn = open(&path);
            match conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)) {
                Ok(_) => opened += 1,
                Err(e) => failure = Some(e),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = writer.join().expect("the writer ends");
        assert!(
            rounds > 10 && opened > 10,
            "{rounds} checkpoints, {opened} opens"
        );
        assert!(failure.is_none(), "after {opened} opens: {failure:?}");
    }
}
