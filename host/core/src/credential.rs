//! Credentials the host holds: read from its environment, printed as `***`.

use std::fmt;

/// The prefix of the variables holding credentials; see
/// [`credential_env_var`].
pub const CREDENTIAL_ENV_PREFIX: &str = "HANE_CREDENTIAL_";

/// A credential held by the host. `Debug` and `Display` print `***`, and it
/// is deliberately not `Serialize`: the only way to read it is
/// [`Secret::expose`], at the point where it goes on the wire.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The credential named `name`, from the host's environment variable
    /// [`credential_env_var`]`(name)`; `None` when it is unset or empty.
    pub fn from_env(name: &str) -> Option<Self> {
        std::env::var(credential_env_var(name))
            .ok()
            .filter(|s| !s.is_empty())
            .map(Self)
    }

    /// The credential itself, for putting on the wire and nowhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the credential replaced by `***`: for
    /// quoting what a provider answered, which may echo the request.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

impl From<String> for Secret {
    fn from(secret: String) -> Self {
        Self(secret)
    }
}

impl From<&str> for Secret {
    fn from(secret: &str) -> Self {
        Self(secret.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The environment variable that holds the credential named `name`:
/// `HANE_CREDENTIAL_` followed by the name upper-cased, with `-`, `.` and
/// any other character that is not an ASCII letter or digit turned into `_`.
///
/// ```
/// use hane_core::credential::credential_env_var;
/// assert_eq!(credential_env_var("crm-api.key"), "HANE_CREDENTIAL_CRM_API_KEY");
/// ```
pub fn credential_env_var(name: &str) -> String {
    format!("{CREDENTIAL_ENV_PREFIX}{}", credential_key(name))
}

/// The key a credential named `name` is held under, so that a name and its
/// variable always meet: `crm-api` and `CRM_API` are the same credential.
pub fn credential_key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print_and_are_redacted() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?} {secret}"), "*** ***");
        assert_eq!(secret.redact("key hunter2 bad"), "key *** bad");
        assert_eq!(Secret::new("").redact("as is"), "as is");
        assert_eq!(credential_key("my-api.v2"), "MY_API_V2");
    }
}
