//! Controller election through the ephemeral `/controller` znode (SPEC section 6).
//!
//! The first broker to create `/controller` wins; in the same multi it increments
//! `/controller_epoch` at the version it read, so two brokers can never both win the same
//! epoch. Everyone else watches `/controller` and runs again when it vanishes.

use std::time::{SystemTime, UNIX_EPOCH};

use tracing::info;

use model::BrokerId;
use znodes::zk_client::{KafkaZkClient, ZkClientError};

/// What an election attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionOutcome {
    /// This broker is now the controller at this epoch.
    Elected {
        /// The new controller epoch.
        epoch: i32,
        /// `/controller_epoch`'s version: every write is fenced on it.
        epoch_zk_version: i32,
    },
    /// Another broker is controller (or none could be read); a watch is set on `/controller`.
    NotElected {
        /// The active controller, if known.
        active_controller: Option<BrokerId>,
    },
}

/// Runs one election attempt for `broker_id`, leaving a watch on `/controller` either way.
pub async fn elect(
    zk: &KafkaZkClient,
    broker_id: BrokerId,
) -> Result<ElectionOutcome, ZkClientError> {
    if let Some(active) = zk.get_controller_id(true).await? {
        info!(
            broker_id,
            active_controller = active,
            "another broker is the controller"
        );
        return Ok(ElectionOutcome::NotElected {
            active_controller: Some(active),
        });
    }
    match zk
        .register_controller_and_increment_epoch(broker_id, now_ms())
        .await
    {
        Ok((epoch, epoch_zk_version)) => {
            // Watch our own node so that its deletion (by an operator) triggers a re-election.
            zk.get_controller_id(true).await?;
            info!(broker_id, epoch, "elected controller");
            Ok(ElectionOutcome::Elected {
                epoch,
                epoch_zk_version,
            })
        }
        Err(ZkClientError::NodeExists(_))
        | Err(ZkClientError::Store(metastore::Error::BadVersion { .. })) => {
            let active = zk.get_controller_id(true).await?;
            info!(broker_id, active_controller = ?active, "lost the controller election");
            Ok(ElectionOutcome::NotElected {
                active_controller: active,
            })
        }
        Err(err) => Err(err),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}
