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
//! Each library that installs it has an allocator of its own (the plugin is a `cdylib` loaded with
//! `dlopen`, hence mimalloc's dynamic TLS model, chosen in the workspace manifest). Nothing allocated on
//! one side is freed on the other: values that cross the plugin ABI carry their own deallocator.

pub use mimalloc::MiMalloc;

/// mimalloc's option numbers (`mi_option_t` in its `mimalloc.h`, version 3) that [`configure`] sets.
pub mod option {
    pub const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    pub const MINIMAL_PURGE_SIZE: libmimalloc_sys::mi_option_t = 44;
}

/// Sets the options the module docs give. Called by [`install!`]'s constructor, before the library's
/// or the program's first allocation; an environment variable (`MIMALLOC_PURGE_DELAY` …) set by whoever
/// runs the program still wins, as mimalloc documents.
pub fn configure() {
    for (option, name, value) in [
        (option::PURGE_DELAY, c"MIMALLOC_PURGE_DELAY", 0),
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

    fn get(option: libmimalloc_sys::mi_option_t) -> std::ffi::c_long {
        // SAFETY: a valid option number.
        unsafe { libmimalloc_sys::mi_option_get(option) }
    }

    #[test]
    fn configure_sets_the_purge_options_the_build_memory_bound_needs() {
        configure();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(get(option::PURGE_DELAY), 0);
        }
        if std::env::var_os("MIMALLOC_MINIMAL_PURGE_SIZE").is_none() {
            assert_eq!(get(option::MINIMAL_PURGE_SIZE), 1024);
        }
    }
}
