//! How the kafka-*.sh-like commands build their admin client's options: the bootstrap
//! servers, the tool's `client.id`, and the settings of `--command-config FILE` (SASL, TLS,
//! timeouts), with the keys it does not honour printed to stderr as Kafka's AdminClient logs
//! them.

use std::path::Path;

use anyhow::Context as _;
use client::AdminOptions;

/// The options for `bootstrap` as `client_id`, with `config_file` (named `flag` in errors:
/// `--command-config`, or `--admin.config` for leader-election) applied when given.
pub(crate) fn admin_options(
    bootstrap: &str,
    client_id: &str,
    config_file: Option<&Path>,
    flag: &str,
) -> anyhow::Result<AdminOptions> {
    let mut options = AdminOptions::new(bootstrap);
    options.connection.client_id = client_id.to_owned();
    if let Some(path) = config_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {flag} {}", path.display()))?;
        let config = client::parse_command_config(&text)?;
        for ignored in &config.ignored {
            eprintln!("{ignored}");
        }
        options.apply(&config);
    }
    Ok(options)
}
