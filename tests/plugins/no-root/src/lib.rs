//! A shared library that is not a plugin: the host must refuse it and keep loading the others.

/// Something to export, so the library is not empty.
#[no_mangle]
pub extern "C" fn not_a_plugin() -> u32 {
    7
}
