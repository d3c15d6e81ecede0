//! `install!` as the plugin and the host expand it: the constructor alone (nothing here calls
//! `configure`) must have set the purge options by the time a test runs.

dsh_alloc::install!();

fn option(option: libmimalloc_sys::mi_option_t) -> std::ffi::c_long {
    // SAFETY: a valid option number.
    unsafe { libmimalloc_sys::mi_option_get(option) }
}

#[test]
fn the_installed_allocator_has_its_purge_options_before_the_first_call() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        assert_eq!(
            option(dsh_alloc::option::PURGE_DELAY),
            dsh_alloc::RELAXED_PURGE_DELAY_MS
        );
    }
    if std::env::var_os("MIMALLOC_MINIMAL_PURGE_SIZE").is_none() {
        assert_eq!(option(dsh_alloc::option::MINIMAL_PURGE_SIZE), 1024);
    }
    // And it allocates.
    let v: Vec<u64> = (0..1000).collect();
    assert_eq!(v.iter().sum::<u64>(), 499_500);
}
