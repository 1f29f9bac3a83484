//! The proof a controller attaches to its control requests (LeaderAndIsr, UpdateMetadata,
//! StopReplica), so a broker can tell its controller from a client that copied the epoch.
//!
//! Every broker of a cluster reads the same random secret from the metadata store (the store
//! is the root of trust, as ZooKeeper is for Kafka). The controller sends, in a tagged field of
//! the request header (header version 2, so only flexible request versions carry it),
//! `HMAC-SHA256(secret, "gregor-control-v1" ‖ controller id ‖ controller epoch ‖ receiver id)`.
//! The receiver recomputes it and, separately, checks the id and epoch against the store: a
//! proof shows the sender holds the secret, the store shows the sender is the current
//! controller. A client that knows the controller id (Metadata shows it) and guesses the
//! epoch still cannot forge the proof.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The request-header tag that carries the proof. Kafka defines no header tags, and brokers
/// that do not know a tag ignore it.
pub const PROOF_TAG: i32 = 0x4752;

/// Length of the store's secret in bytes.
pub const SECRET_LEN: usize = 32;

/// Domain separation: a MAC over these bytes means nothing in any other context.
const CONTEXT: &[u8] = b"gregor-control-v1";
/// The same for requests a broker sends to the controller (ControlledShutdown).
const BROKER_CONTEXT: &[u8] = b"gregor-broker-v1";

/// The cluster's control-plane secret, as read from the store.
#[derive(Clone, PartialEq, Eq)]
pub struct ControlPlaneKey([u8; SECRET_LEN]);

impl std::fmt::Debug for ControlPlaneKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret, not even in a debug dump of a config.
        f.write_str("ControlPlaneKey(..)")
    }
}

impl ControlPlaneKey {
    /// A key from the store's bytes.
    pub fn new(secret: [u8; SECRET_LEN]) -> Self {
        ControlPlaneKey(secret)
    }

    /// The raw secret (to write it to the store).
    pub fn secret(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }

    /// The proof for a request from controller `controller_id` at `controller_epoch` to
    /// broker `receiver`.
    pub fn proof(&self, controller_id: i32, controller_epoch: i32, receiver: i32) -> [u8; 32] {
        self.mac(controller_id, controller_epoch, receiver)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is the proof for these values (compared in constant time).
    pub fn verify(
        &self,
        proof: &[u8],
        controller_id: i32,
        controller_epoch: i32,
        receiver: i32,
    ) -> bool {
        self.mac(controller_id, controller_epoch, receiver)
            .verify_slice(proof)
            .is_ok()
    }

    /// The proof for a request a broker sends to the controller about itself: broker
    /// `broker_id` in its registration `broker_epoch`.
    pub fn broker_proof(&self, broker_id: i32, broker_epoch: i64) -> [u8; 32] {
        self.broker_mac(broker_id, broker_epoch)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is [`ControlPlaneKey::broker_proof`] for these values.
    pub fn verify_broker(&self, proof: &[u8], broker_id: i32, broker_epoch: i64) -> bool {
        self.broker_mac(broker_id, broker_epoch)
            .verify_slice(proof)
            .is_ok()
    }

    fn mac(&self, controller_id: i32, controller_epoch: i32, receiver: i32) -> Hmac<Sha256> {
        let mut mac = self.keyed();
        mac.update(CONTEXT);
        mac.update(&controller_id.to_be_bytes());
        mac.update(&controller_epoch.to_be_bytes());
        mac.update(&receiver.to_be_bytes());
        mac
    }

    fn broker_mac(&self, broker_id: i32, broker_epoch: i64) -> Hmac<Sha256> {
        let mut mac = self.keyed();
        mac.update(BROKER_CONTEXT);
        mac.update(&broker_id.to_be_bytes());
        mac.update(&broker_epoch.to_be_bytes());
        mac
    }

    fn keyed(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_verifies_only_for_its_own_values() {
        let key = ControlPlaneKey::new([7; SECRET_LEN]);
        let proof = key.proof(1, 5, 2);
        assert!(key.verify(&proof, 1, 5, 2));
        assert!(!key.verify(&proof, 0, 5, 2), "another controller id");
        assert!(!key.verify(&proof, 1, 6, 2), "another epoch");
        assert!(!key.verify(&proof, 1, 5, 3), "another receiver");
        assert!(!key.verify(&proof[..31], 1, 5, 2), "truncated");
        let other = ControlPlaneKey::new([8; SECRET_LEN]);
        assert!(!other.verify(&proof, 1, 5, 2), "another cluster's secret");
    }

    #[test]
    fn broker_proofs_are_separate_from_controller_proofs() {
        let key = ControlPlaneKey::new([7; SECRET_LEN]);
        let proof = key.broker_proof(1, 5);
        assert!(key.verify_broker(&proof, 1, 5));
        assert!(!key.verify_broker(&proof, 2, 5));
        assert!(!key.verify_broker(&proof, 1, 6));
        // A controller proof over the same numbers is no broker proof, and the reverse.
        assert!(!key.verify_broker(&key.proof(1, 5, 0), 1, 5));
        assert!(!key.verify(&proof, 1, 5, 0));
    }

    #[test]
    fn debug_does_not_show_the_secret() {
        let key = ControlPlaneKey::new([0xab; SECRET_LEN]);
        assert_eq!(format!("{key:?}"), "ControlPlaneKey(..)");
    }
}
