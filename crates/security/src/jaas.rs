//! The one-line JAAS configurations Kafka takes in `sasl.jaas.config` and
//! `listener.name.<l>.<mechanism>.sasl.jaas.config`:
//! `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s" user_alice="a";`

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module class.
    pub module: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// The options, in name order.
    pub options: BTreeMap<String, String>,
}

/// A JAAS line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JAAS configuration: {0}")]
pub struct JaasError(pub String);

impl JaasEntry {
    /// `username` and `password`, if both are set (the login credentials).
    pub fn credentials(&self) -> Option<(&str, &str)> {
        Some((self.options.get("username")?, self.options.get("password")?))
    }

    /// The `user_<name>="<password>"` options (PLAIN's server-side user list).
    pub fn plain_users(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_owned(), v.clone())))
            .collect()
    }
}

/// Parses one entry (a trailing `;` is required, as in Kafka).
pub fn parse(text: &str) -> Result<JaasEntry, JaasError> {
    let err = |why: &str| JaasError(why.to_owned());
    let text = text.trim();
    let body = text
        .strip_suffix(';')
        .ok_or_else(|| err("must end with ';'"))?
        .trim();
    let mut rest = body;
    let word = |rest: &mut &str| -> Option<String> {
        let trimmed = rest.trim_start();
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        let (w, r) = trimmed.split_at(end);
        *rest = r;
        (!w.is_empty()).then(|| w.to_owned())
    };
    let module = word(&mut rest).ok_or_else(|| err("missing login module"))?;
    let flag = word(&mut rest).ok_or_else(|| err("missing control flag"))?;
    if !["required", "requisite", "sufficient", "optional"]
        .contains(&flag.to_ascii_lowercase().as_str())
    {
        return Err(err(&format!("invalid control flag '{flag}'")));
    }
    let mut options = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let eq = rest.find('=').ok_or_else(|| err("expected name=value"))?;
        let name = rest[..eq].trim().to_owned();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(err("invalid option name"));
        }
        rest = rest[eq + 1..].trim_start();
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            value.push(next);
                        }
                    }
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or_else(|| err("unterminated quoted value"))?;
            rest = &quoted[end + 1..];
            value
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let value = rest[..end].to_owned();
            rest = &rest[end..];
            value
        };
        options.insert(name, value);
    }
    Ok(JaasEntry {
        module,
        flag,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_examples() {
        let entry = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice \"q\" secret";"#,
        )
        .unwrap();
        assert_eq!(
            entry.module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(entry.credentials(), Some(("admin", "admin-secret")));
        let users = entry.plain_users();
        assert_eq!(users["alice"], "alice \"q\" secret");
        assert_eq!(users.len(), 2);
        let scram = parse("org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=bob password=pw;").unwrap();
        assert_eq!(scram.credentials(), Some(("bob", "pw")));
        for bad in ["x required a=b", "x", "x always a=b;", "x required a=\"b;"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
