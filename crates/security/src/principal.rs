//! `ssl.principal.mapping.rules` (KIP-371): turning a client certificate's distinguished name
//! into a user name, as Kafka's `SslPrincipalMapper` does.
//!
//! Rules are tried in order; `DEFAULT` yields the DN unchanged, `RULE:pattern/replacement/`
//! (optionally followed by `L` or `U` to lower- or upper-case the result) applies when the
//! pattern matches the whole DN. When no rule applies the client is refused.

use regex::Regex;

/// One rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

/// Rules that do not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ssl.principal.mapping.rules: {0}")]
pub struct RuleError(pub String);

/// No rule applies to a DN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("No rules apply to {0}")]
pub struct NoMatchingRule(pub String);

impl Default for PrincipalMapper {
    fn default() -> Self {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapper {
    /// Parses the rules (Kafka's default is `DEFAULT`).
    pub fn parse(text: &str) -> Result<PrincipalMapper, RuleError> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after).ok_or_else(|| {
                    RuleError(format!("missing '/' after the pattern in '{rest}'"))
                })?;
                let (replacement, after) = until_slash(after).ok_or_else(|| {
                    RuleError(format!("missing '/' after the replacement in '{rest}'"))
                })?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| RuleError(format!("pattern '{pattern}': {e}")))?;
                rules.push(Rule::Replace {
                    pattern,
                    replacement: java_replacement(&replacement),
                    case,
                });
                rest = after;
            } else {
                return Err(RuleError(format!(
                    "'{rest}' is not DEFAULT or RULE:pattern/replacement/"
                )));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(RuleError(format!("expected ',' before '{rest}'"))),
            }
        }
        if rules.is_empty() {
            return Err(RuleError("no rules".into()));
        }
        Ok(PrincipalMapper { rules })
    }

    /// The user name for `dn` (RFC 2253, as Java's `X500Principal.getName()` writes it).
    pub fn name(&self, dn: &str) -> Result<String, NoMatchingRule> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_owned()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(dn) {
                        let name = pattern.replace(dn, replacement.as_str()).into_owned();
                        return Ok(match case {
                            Some('L') => name.to_lowercase(),
                            Some('U') => name.to_uppercase(),
                            _ => name,
                        });
                    }
                }
            }
        }
        Err(NoMatchingRule(dn.to_owned()))
    }
}

/// The text up to the next unescaped `/` (with `\/` unescaped), and what follows it.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` group references, written for the regex crate (`${1}`, so `$1x` stays group 1).
fn java_replacement(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' {
            let mut digits = String::new();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                chars.next();
            }
            if digits.is_empty() {
                out.push_str("$$");
            } else {
                out.push_str(&format!("${{{digits}}}"));
            }
        } else if c == '\\' {
            if let Some(next) = chars.next() {
                if next == '$' {
                    out.push_str("$$");
                } else {
                    out.push(next);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_documented_examples() {
        let mapper = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            mapper
                .name("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US")
                .unwrap(),
            "kafka-server1"
        );
        assert_eq!(
            mapper
                .name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US")
                .unwrap(),
            "duke@javasoft"
        );
        assert_eq!(mapper.name("OU=x,CN=Bob.Smith,O=y").unwrap(), "bob.smith");
        assert_eq!(mapper.name("O=nothing").unwrap(), "O=nothing");
        let upper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(upper.name("CN=alice").unwrap(), "ALICE");
        assert_eq!(upper.name("O=x"), Err(NoMatchingRule("O=x".into())));
        assert_eq!(
            PrincipalMapper::default().name("CN=a,O=b").unwrap(),
            "CN=a,O=b"
        );
        for bad in ["RULE:abc", "RULE:a/b", "SOMETHING", "RULE:(/x/"] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }
}
