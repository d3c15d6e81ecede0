//! The global allocator of the plugin library and of the host binary: mimalloc, with its purge options
//! set before either allocates.
//!
//! Why not glibc's malloc: allocation and freeing were about a fifth of the CPU of a one-shot command
//! over a 10,000-session root (the index's rows, the listing's paths and headers, each an allocation
//! or several, and the page faults of fresh memory). With mimalloc, and the listing's other changes
//! of the same build, such a command took about a fifth less time (README, "Search at 1 GB"); a cold
//! build takes about as long.
//!
//! Why the options: at its defaults mimalloc keeps freed spans resident for a while before it returns
//! them, and a cold build frees read buffers of several MiB many times a second on each reader thread
//! (glibc unmaps such blocks at once). A 1 GB build's peak resident set was then 216-235 MB (188-269
//! MB at a 1 ms delay), against 192-198 MB with glibc and the 200 MB the build is held to. Purging at
//! once, but only spans of at least 1 MiB, kept it at 177-191 MB, for more system time in the build
//! (`madvise`) and less user time. (Committing arenas only as they are used lowered it further, to
//! 165 MB, but cost a one-shot command its gain: it faults its memory in page by page then.)
//!
//! Purging at once is only right while logs are read in bulk, so it is held by a guard
//! ([`purge_eagerly`]) for that time. Outside it the delay is [`RELAXED_PURGE_DELAY_MS`]: with purging
//! at once for the whole process, a one-shot search over an unchanged 10,000-session root spent about
//! a quarter of its CPU in the kernel zeroing pages it had just given back and touched again (11,700
//! page faults against 2,200, 117 ms against 90 ms, interleaved runs).
//!
//! Each library that installs it has an allocator of its own (the plugin is a `cdylib` loaded with
//! `dlopen`, hence mimalloc's dynamic TLS model, chosen in the workspace manifest). Nothing allocated on
//! one side is freed on the other: values that cross the plugin ABI carry their own deallocator.

pub use mimalloc::MiMalloc;

/// mimalloc's option numbers (`mi_option_t` in its `mimalloc.h`, version 3) that [`configure`] sets.
pub mod option {
    pub const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    pub const MINIMAL_PURGE_SIZE: libmimalloc_sys::mi_option_t = 44;
}

/// The purge delay outside [`purge_eagerly`], in milliseconds: longer than a one-shot command lives, so
/// it never purges what it will touch again, and short enough that a long-lived host gives freed memory
/// back within a second.
pub const RELAXED_PURGE_DELAY_MS: std::ffi::c_long = 1000;

/// Sets the options the module docs give. Called by [`install!`]'s constructor, before the library's
/// or the program's first allocation; an environment variable (`MIMALLOC_PURGE_DELAY` …) set by whoever
/// runs the program still wins, as mimalloc documents.
pub fn configure() {
    for (option, name, value) in [
        (
            option::PURGE_DELAY,
            c"MIMALLOC_PURGE_DELAY",
            RELAXED_PURGE_DELAY_MS,
        ),
        // In KiB.
        (
            option::MINIMAL_PURGE_SIZE,
            c"MIMALLOC_MINIMAL_PURGE_SIZE",
            1024,
        ),
    ] {
        // `getenv`, not `std::env`: this runs before the allocator may be used.
        // SAFETY: a NUL-terminated name; the result is only compared with null.
        let set_outside = unsafe { !libc::getenv(name.as_ptr()).is_null() };
        if !set_outside {
            // SAFETY: a valid option number and value; mimalloc's options are plain integers.
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

/// How many [`EagerPurge`] guards are alive in this library's allocator.
static EAGER_HOLDERS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// While alive, freed spans of at least the minimal purge size go back to the system at once (see the
/// module docs); the last guard dropped puts the relaxed delay back. Guards may overlap, from any
/// thread. Does nothing when `MIMALLOC_PURGE_DELAY` is set: whoever set it chose the delay.
#[must_use = "purging is eager only while the guard lives"]
pub struct EagerPurge(());

/// Purge at once until the returned guard is dropped: for a phase that frees large buffers many times
/// a second (a cold build's log readers) and would otherwise hold them resident.
pub fn purge_eagerly() -> EagerPurge {
    let mut holders = EAGER_HOLDERS.lock().unwrap_or_else(|p| p.into_inner());
    if *holders == 0 {
        set_purge_delay(0);
    }
    *holders += 1;
    EagerPurge(())
}

impl Drop for EagerPurge {
    fn drop(&mut self) {
        let mut holders = EAGER_HOLDERS.lock().unwrap_or_else(|p| p.into_inner());
        *holders -= 1;
        if *holders == 0 {
            set_purge_delay(RELAXED_PURGE_DELAY_MS);
        }
    }
}

fn set_purge_delay(ms: std::ffi::c_long) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: a valid option number and value; mimalloc reads the delay each time it schedules a
        // purge, so a change applies to what is freed from then on.
        unsafe { libmimalloc_sys::mi_option_set(option::PURGE_DELAY, ms) };
    }
}

/// Installs mimalloc as the global allocator of the crate that expands it, and runs [`configure`] when
/// the program starts or the library is loaded (an ELF constructor, so before `main` or before the host
/// calls into the library).
#[macro_export]
macro_rules! install {
    () => {
        #[global_allocator]
        static GLOBAL_ALLOCATOR: $crate::MiMalloc = $crate::MiMalloc;

        #[used]
        #[unsafe(link_section = ".init_array")]
        static CONFIGURE_ALLOCATOR: extern "C" fn() = {
            extern "C" fn configure_allocator() {
                $crate::configure();
            }
            configure_allocator
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options are process-wide: the tests that read them take turns.
    static OPTIONS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn get(option: libmimalloc_sys::mi_option_t) -> std::ffi::c_long {
        // SAFETY: a valid option number.
        unsafe { libmimalloc_sys::mi_option_get(option) }
    }

    #[test]
    fn configure_sets_the_purge_options_the_module_docs_give() {
        let _turn = OPTIONS.lock().unwrap_or_else(|p| p.into_inner());
        configure();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(get(option::PURGE_DELAY), RELAXED_PURGE_DELAY_MS);
        }
        if std::env::var_os("MIMALLOC_MINIMAL_PURGE_SIZE").is_none() {
            assert_eq!(get(option::MINIMAL_PURGE_SIZE), 1024);
        }
    }

    #[test]
    fn purging_is_eager_while_any_guard_lives_and_relaxed_after_the_last() {
        let _turn = OPTIONS.lock().unwrap_or_else(|p| p.into_inner());
        configure();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        let first = purge_eagerly();
        assert_eq!(get(option::PURGE_DELAY), 0);
        let second = std::thread::spawn(purge_eagerly).join().unwrap();
        drop(first);
        assert_eq!(get(option::PURGE_DELAY), 0, "one guard still lives");
        drop(second);
        assert_eq!(get(option::PURGE_DELAY), RELAXED_PURGE_DELAY_MS);
    }
}
