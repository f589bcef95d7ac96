//! Sealing what incidents keep before it leaves the process for a store replicas share: the
//! values a silent clear erased, and each incident's story (its path holds the resource's
//! ids). ChaCha20-Poly1305 (ring's, the AEAD rustls already links) under a key derived from the
//! operator's secret (`incidents.seal_key_file`, the same on every replica), a random nonce per
//! entry: the store's bytes hold neither the values nor the paths, and an entry changed in the
//! store fails to open and is refused.

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::Digest;

pub struct Seal {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(secret)")
    }
}

impl Seal {
    /// The seal of `secret` (the file's bytes): its key is SHA-256 of a context and the secret.
    pub fn new(secret: &[u8]) -> Seal {
        let digest = sha2::Sha256::new()
            .chain_update(b"driftwatch incidents seal v1\0")
            .chain_update(secret)
            .finalize();
        let key = UnboundKey::new(&CHACHA20_POLY1305, &digest).expect("a 32-byte key");
        Seal {
            key: LessSafeKey::new(key),
            random: SystemRandom::new(),
        }
    }

    /// `plain` sealed: nonce, then ciphertext and tag. `None` only if the system has no
    /// randomness to give.
    pub fn seal(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut body = plain.to_vec();
        let unique = Nonce::assume_unique_for_key(nonce);
        (self
            .key
            .seal_in_place_append_tag(unique, Aad::empty(), &mut body))
        .ok()?;
        let mut sealed = Vec::with_capacity(NONCE_LEN + body.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&body);
        Some(sealed)
    }

    /// What `sealed` holds; `None` when it was sealed under another key or changed since.
    pub fn open(&self, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut body)
            .ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_sealed_opens_with_the_same_secret_only_and_not_once_changed() {
        let seal = Seal::new(b"0123456789abcdef-seal");
        let plain = br#"{"graphicsElementIds":[3,7]}"#;
        let sealed = seal.seal(plain).unwrap();
        assert!(!sealed.windows(5).any(|w| w == b"[3,7]"));
        assert_eq!(seal.open(&sealed).unwrap(), plain);
        // Two seals of one value differ (a nonce each).
        assert_ne!(seal.seal(plain).unwrap(), sealed);
        assert!(Seal::new(b"another-secret-0123").open(&sealed).is_none());
        let mut changed = sealed.clone();
        let last = changed.len() - 1;
        changed[last] ^= 1;
        assert!(seal.open(&changed).is_none());
        assert!(seal.open(b"short").is_none());
    }
}
