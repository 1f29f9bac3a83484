//! The security znodes: the control-plane secret every broker of a cluster shares.
//!
//! `/gregor/control_plane_secret` is Gregor's own (Kafka has no equivalent): it holds the key
//! the controller proves itself with on control requests (see the `security` crate's
//! `control_plane` module). It is created once per cluster, like `/cluster/id`, and never
//! changes; whoever can read the store is trusted, as with ZooKeeper in Kafka.

use metastore::CreateMode;
use serde::{Deserialize, Serialize};

use crate::json::ZnodeJson;
use crate::zk_client::{decode, KafkaZkClient, Result};

/// `/gregor`: the parent of Gregor's own znodes.
pub fn gregor() -> &'static str {
    "/gregor"
}

/// `/gregor/control_plane_secret`.
pub fn control_plane_secret() -> &'static str {
    "/gregor/control_plane_secret"
}

/// Whether a znode holds a secret that tools showing the tree must not print.
pub fn is_secret(path: &str) -> bool {
    path == control_plane_secret()
}

/// `/gregor/control_plane_secret`: `{"version":1,"secret":"<base64 of 32 random bytes>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlPlaneSecretZNode {
    /// Format version: 1.
    pub version: i32,
    /// The secret, standard base64.
    pub secret: String,
}

impl ZnodeJson for ControlPlaneSecretZNode {
    const WHAT: &'static str = "control plane secret";
}

impl KafkaZkClient {
    /// Reads the cluster's control-plane secret (base64), creating it with `new_secret` when
    /// missing. Every broker calls this at start; the first one's secret wins.
    pub async fn get_or_create_control_plane_secret(&self, new_secret: &str) -> Result<String> {
        let path = control_plane_secret();
        loop {
            match self.client().get_data(path, false).await {
                Ok((data, _)) => {
                    return decode(path, &data, ControlPlaneSecretZNode::from_json_bytes)
                        .map(|z| z.secret)
                }
                Err(metastore::Error::NoNode(_)) => {}
                Err(err) => return Err(err.into()),
            }
            let data = ControlPlaneSecretZNode {
                version: 1,
                secret: new_secret.to_owned(),
            }
            .to_json_bytes();
            match self
                .client()
                .create_recursive(path, &data, CreateMode::Persistent)
                .await
            {
                Ok(_) => return Ok(new_secret.to_owned()),
                Err(metastore::Error::NodeExists(_)) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// The current controller as the store records it: (`/controller`'s broker id,
    /// `/controller_epoch`), read so that both belong to the same election (an election
    /// between the two reads is detected by reading the epoch again).
    pub async fn get_controller_identity(&self) -> Result<Option<(model::BrokerId, i32)>> {
        for _ in 0..3 {
            let before = self.get_controller_epoch().await?.map(|(epoch, _)| epoch);
            let id = self.get_controller_id(false).await?;
            let after = self.get_controller_epoch().await?.map(|(epoch, _)| epoch);
            if before == after {
                return Ok(id.zip(after));
            }
        }
        // Elections in a tight loop: report no controller; the caller refuses and the
        // controller retries its request.
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_json() {
        let z = ControlPlaneSecretZNode {
            version: 1,
            secret: "c2VjcmV0".into(),
        };
        assert_eq!(
            String::from_utf8(z.to_json_bytes()).unwrap(),
            r#"{"version":1,"secret":"c2VjcmV0"}"#
        );
        assert_eq!(control_plane_secret(), "/gregor/control_plane_secret");
    }
}
