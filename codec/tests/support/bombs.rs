//! Hostile zstd frames built by hand for tests and benchmarks: a frame of RLE blocks expands 32768-fold,
//! so gigabytes of plaintext fit in a few hundred KiB, and declaring the content size in the frame header
//! is what once made a reader reserve all of it up front.

/// The largest block a frame with a 128 KiB window may hold.
const BLOCK: u64 = 128 * 1024;

/// One zstd frame whose plaintext is `total` copies of `byte`, with `total` declared as its content size
/// and no checksum: magic, a frame header (8-byte content size, 128 KiB window), then RLE blocks.
pub fn rle_frame(byte: u8, total: u64) -> Vec<u8> {
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD];
    // Frame header descriptor: content-size field of 8 bytes, not single-segment, no checksum, no dict.
    frame.push(0xC0);
    // Window descriptor: exponent 7, mantissa 0 → 2^(10 + 7) bytes.
    frame.push(7 << 3);
    frame.extend(total.to_le_bytes());
    let blocks = total.div_ceil(BLOCK).max(1);
    for i in 0..blocks {
        let size = BLOCK.min(total - (i * BLOCK).min(total));
        let last = u32::from(i + 1 == blocks);
        let header = last | (1 << 1) | ((size as u32) << 3);
        frame.extend(&header.to_le_bytes()[..3]);
        frame.push(byte);
    }
    frame
}

/// 6 GiB of one non-LF byte: a line no cap admits.
pub const SIX_GIB: u64 = 6 << 30;
/// 1 GiB of LFs: a billion empty lines.
pub const ONE_GIB: u64 = 1 << 30;
