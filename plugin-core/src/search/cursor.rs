//! Search cursors (spec §4.7): opaque, bound to the normalised request and the index generation, and
//! tamper-proof.
//!
//! A cursor is `base64url(payload) "." base64url(mac)`: the payload is JSON
//! `{"v":1,"scope":…,"fp":…,"gen":…,"off":…}` (`fp` a hash of the request's fingerprint) and the MAC is
//! BLAKE3 keyed with the index's random secret over the payload bytes, truncated to 16 bytes. So a cursor
//! from another index, or one whose bytes were edited in any way, is `SESSION_QUERY_INVALID_CURSOR`,
//! never a page. A well-formed cursor for the same request whose generation differs is
//! `SESSION_QUERY_STALE_CURSOR`. The secret replaces the reference's per-instance UUID: cursors survive a
//! reopen of the same index as long as the generation is unchanged.

use host_api::abi::{ErrorCode, PluginError};
use serde::{Deserialize, Serialize};

const VERSION: u32 = 1;
const MAC_LEN: usize = 16;

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    v: u32,
    scope: String,
    fp: String,
    gen: String,
    off: u64,
}

/// Signs and checks cursors with one index's secret.
pub struct Cursors {
    key: [u8; 32],
}

fn invalid(why: &str) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryInvalidCursor,
        format!("cursor is not valid for this request: {why}"),
    )
}

impl Cursors {
    /// `secret` is the index's random secret (any length; it is hashed into a key).
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: *blake3::hash(secret).as_bytes(),
        }
    }

    fn mac(&self, payload: &[u8]) -> [u8; MAC_LEN] {
        let full = blake3::keyed_hash(&self.key, payload);
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full.as_bytes()[..MAC_LEN]);
        out
    }

    /// A cursor continuing `fingerprint` at `offset` in `generation`.
    pub fn encode(&self, scope: &str, fingerprint: &str, generation: &str, offset: u64) -> String {
        let payload = Payload {
            v: VERSION,
            scope: scope.into(),
            fp: blake3::hash(fingerprint.as_bytes()).to_hex().to_string(),
            gen: generation.into(),
            off: offset,
        };
        let bytes = serde_json::to_vec(&payload).unwrap_or_default();
        format!("{}.{}", b64_encode(&bytes), b64_encode(&self.mac(&bytes)))
    }

    /// The offset a cursor continues at, after checking it belongs to this index, `scope` and
    /// `fingerprint` (else `INVALID_CURSOR`) and to `generation` (else `STALE_CURSOR`).
    pub fn decode(
        &self,
        cursor: &str,
        scope: &str,
        fingerprint: &str,
        generation: &str,
    ) -> Result<u64, PluginError> {
        let (payload, mac) = cursor
            .split_once('.')
            .ok_or_else(|| invalid("it is not a cursor this index issued"))?;
        let payload = b64_decode(payload).ok_or_else(|| invalid("it is not base64url"))?;
        let mac = b64_decode(mac).ok_or_else(|| invalid("it is not base64url"))?;
        let expected = self.mac(&payload);
        // Compared as BLAKE3 hashes' bytes in constant time is not needed for a 16-byte tag checked
        // once per request with no oracle beyond valid/invalid, but a length check comes first anyway.
        if mac.len() != MAC_LEN || !constant_time_eq(&mac, &expected) {
            return Err(invalid("it was not issued by this index or was altered"));
        }
        let payload: Payload =
            serde_json::from_slice(&payload).map_err(|_| invalid("its content is unreadable"))?;
        if payload.v != VERSION {
            return Err(invalid("unknown cursor version"));
        }
        if payload.scope != scope {
            return Err(invalid(&format!(
                "it continues a {} search, not a {scope} search",
                payload.scope
            )));
        }
        if payload.fp != blake3::hash(fingerprint.as_bytes()).to_hex().as_str() {
            return Err(invalid(
                "it continues a different query, filters, limit or session",
            ));
        }
        if payload.off > dsh_codec::json::MAX_SAFE_INTEGER as u64 {
            return Err(invalid("its offset is out of range"));
        }
        if payload.gen != generation {
            return Err(PluginError::new(
                ErrorCode::SessionQueryStaleCursor,
                format!(
                    "cursor is stale: the indexed sessions changed since it was issued (generation {} is now {generation}); search again",
                    payload.gen
                ),
            ));
        }
        Ok(payload.off)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url without padding.
fn b64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn b64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = B64.iter().position(|&x| x == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A lone 6-bit tail, or leftover bits that are not zero, is not canonical base64url.
    (bits < 6 && acc == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trips_and_refuses_junk() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 5) as u8).collect();
            assert_eq!(b64_decode(&b64_encode(&bytes)).unwrap(), bytes);
        }
        assert_eq!(b64_encode(b"hi?"), "aGk_");
        assert!(b64_decode("a+b").is_none());
        assert!(b64_decode("a").is_none());
    }

    #[test]
    fn round_trip_and_every_rejection() {
        let c = Cursors::new(b"secret");
        let token = c.encode("sessions", "fp", "7", 40);
        assert_eq!(c.decode(&token, "sessions", "fp", "7").unwrap(), 40);
        let code = |r: Result<u64, PluginError>| r.unwrap_err().code;
        assert_eq!(
            code(c.decode(&token, "sessions", "fp", "8")),
            ErrorCode::SessionQueryStaleCursor
        );
        assert_eq!(
            code(c.decode(&token, "events", "fp", "7")),
            ErrorCode::SessionQueryInvalidCursor
        );
        assert_eq!(
            code(c.decode(&token, "sessions", "other", "7")),
            ErrorCode::SessionQueryInvalidCursor
        );
        assert_eq!(
            code(Cursors::new(b"other").decode(&token, "sessions", "fp", "7")),
            ErrorCode::SessionQueryInvalidCursor
        );
        for junk in ["", "abc", "a.b", "!!.!!"] {
            assert_eq!(
                code(c.decode(junk, "sessions", "fp", "7")),
                ErrorCode::SessionQueryInvalidCursor,
                "{junk}"
            );
        }
        // An edited payload (a bigger offset) with the old MAC is refused.
        let (payload, mac) = token.split_once('.').unwrap();
        let mut json: serde_json::Value =
            serde_json::from_slice(&b64_decode(payload).unwrap()).unwrap();
        json["off"] = 4000.into();
        let forged = format!("{}.{mac}", b64_encode(json.to_string().as_bytes()));
        assert_eq!(
            code(c.decode(&forged, "sessions", "fp", "7")),
            ErrorCode::SessionQueryInvalidCursor
        );
        // Every single-character edit is refused.
        let chars: Vec<char> = token.chars().collect();
        for i in 0..chars.len() {
            let mut edited = chars.clone();
            edited[i] = if edited[i] == 'A' { 'B' } else { 'A' };
            let edited: String = edited.into_iter().collect();
            if edited != token {
                assert!(
                    c.decode(&edited, "sessions", "fp", "7").is_err(),
                    "{edited}"
                );
            }
        }
    }
}
