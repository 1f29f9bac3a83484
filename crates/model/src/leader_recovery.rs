//! A partition's leader recovery state (KIP-704, Kafka's `LeaderRecoveryState`).

/// Whether a partition's leader came from an unclean election and has not told the
/// controller yet that it recovered. Kafka's byte values: RECOVERED 0, RECOVERING 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LeaderRecoveryState {
    /// The leader was elected from the ISR, or has recovered from an unclean election.
    #[default]
    Recovered,
    /// The leader was elected from outside the ISR (unclean election) and is recovering;
    /// its ISR holds only itself until it reports RECOVERED.
    Recovering,
}

impl LeaderRecoveryState {
    /// The state's byte on the wire and in the partition-state znode.
    pub fn value(self) -> i8 {
        match self {
            LeaderRecoveryState::Recovered => 0,
            LeaderRecoveryState::Recovering => 1,
        }
    }

    /// The state with byte `value`, `None` for any other byte (Kafka's `optionalOf`).
    pub fn from_value(value: i8) -> Option<Self> {
        match value {
            0 => Some(LeaderRecoveryState::Recovered),
            1 => Some(LeaderRecoveryState::Recovering),
            _ => None,
        }
    }

    /// Whether this is [`LeaderRecoveryState::Recovered`].
    pub fn is_recovered(&self) -> bool {
        *self == LeaderRecoveryState::Recovered
    }
}

#[cfg(test)]
mod tests {
    use super::LeaderRecoveryState;

    #[test]
    fn bytes_are_kafkas() {
        for state in [
            LeaderRecoveryState::Recovered,
            LeaderRecoveryState::Recovering,
        ] {
            assert_eq!(LeaderRecoveryState::from_value(state.value()), Some(state));
        }
        assert_eq!(LeaderRecoveryState::Recovering.value(), 1);
        assert_eq!(LeaderRecoveryState::default().value(), 0);
        assert_eq!(LeaderRecoveryState::from_value(2), None);
        assert_eq!(LeaderRecoveryState::from_value(-1), None);
    }
}
