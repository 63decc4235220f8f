//! The capabilities a call is granted. Everything is denied unless listed.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A grant that did not parse or does not make sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A directory grant written as `HOST[:GUEST][:ro|:rw]` was malformed.
    #[error("invalid directory grant `{grant}`: {reason}")]
    Dir {
        /// The grant as written.
        grant: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An environment grant written as `KEY` or `KEY=VALUE` was malformed.
    #[error(
        "invalid environment grant `{0}`: expected KEY or KEY=VALUE, KEY made of letters, digits and `_`, not starting with a digit"
    )]
    Env(String),
    /// A grant would pass one of hane's own variables (`HANE_…`, where the
    /// host keeps delivery credentials and worker secrets) to a guest.
    #[error(
        "environment grant `{0}` would pass hane's own setting to the guest; `HANE_` variables hold the host's credentials and are never passed through (set a value with KEY=VALUE if the guest needs one)"
    )]
    HostSetting(String),
    /// An HTTP pattern such as `https://*.example.com:8443` was malformed.
    #[error("invalid http pattern `{pattern}`: {reason}")]
    Http {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two directory grants use the same guest path.
    #[error("guest path `{0}` is granted twice")]
    DuplicateGuestPath(String),
    /// A collection or document set grant that is not a ledger name.
    #[error(
        "invalid {what} grant `{name}`: names are 1 to 64 of a-z, 0-9, `_` and `-`, such as `vehicles`"
    )]
    LedgerName {
        /// `records` or `documents`.
        what: &'static str,
        /// The name as written.
        name: String,
    },
    /// An `actions` grant that is not an outbound tool.
    #[error(
        "invalid actions grant `{tool}`: expected one of the outbound tools {}",
        outbound_tools()
    )]
    ActionTool {
        /// Its position in the `actions` list.
        index: usize,
        /// The tool as written.
        tool: String,
    },
}

/// The tools an `actions` grant may name, for errors.
fn outbound_tools() -> String {
    let names: Vec<String> = crate::tool::OUTBOUND_TOOLS
        .iter()
        .map(|t| format!("`{t}`"))
        .collect();
    names.join(", ")
}

/// Whether a granted directory may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Access {
    /// Read only (the default).
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read and write.
    #[serde(rename = "rw")]
    ReadWrite,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::ReadOnly => "ro",
            Access::ReadWrite => "rw",
        })
    }
}

/// A host directory made visible to the guest at `guest`. Nothing outside it
/// is reachable: `..`, absolute paths elsewhere and symlinks that point out
/// all fail inside the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The directory on the host. Relative paths in a manifest are relative
    /// to the manifest's folder.
    pub host: PathBuf,
    /// Where the guest sees it: an absolute path such as `/documents`.
    /// Defaults to `/` followed by the host directory's name.
    #[serde(default)]
    pub guest: String,
    /// `ro` (default) or `rw`.
    #[serde(default)]
    pub access: Access,
}

impl DirGrant {
    /// The guest path, defaulted from the host directory's name when unset.
    pub fn guest_path(&self) -> String {
        if !self.guest.is_empty() {
            return self.guest.clone();
        }
        let name = self
            .host
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .or_else(|| {
                std::path::absolute(&self.host)
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            })
            .unwrap_or_default();
        format!("/{name}")
    }

    fn check(&self, grant: &str) -> Result<(), PolicyError> {
        let err = |reason: &str| PolicyError::Dir {
            grant: grant.to_owned(),
            reason: reason.to_owned(),
        };
        if self.host.as_os_str().is_empty() {
            return Err(err("the host directory is empty"));
        }
        let guest = self.guest_path();
        if !guest.starts_with('/') {
            return Err(err("the guest path must be absolute, such as `/documents`"));
        }
        if Path::new(&guest)
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return Err(err("the guest path must not contain `.` or `..`"));
        }
        Ok(())
    }
}

impl FromStr for DirGrant {
    type Err = PolicyError;

    /// Parses `HOST[:GUEST][:ro|:rw]`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts: Vec<&str> = s.split(':').collect();
        let access = match parts.last() {
            Some(&"ro") if parts.len() > 1 => {
                parts.pop();
                Access::ReadOnly
            }
            Some(&"rw") if parts.len() > 1 => {
                parts.pop();
                Access::ReadWrite
            }
            _ => Access::ReadOnly,
        };
        let (host, guest) = match parts.as_slice() {
            [host] => (*host, ""),
            [host, guest] => (*host, *guest),
            _ => {
                return Err(PolicyError::Dir {
                    grant: s.to_owned(),
                    reason: "expected HOST[:GUEST][:ro|:rw]".to_owned(),
                });
            }
        };
        let grant = DirGrant {
            host: PathBuf::from(host),
            guest: guest.to_owned(),
            access,
        };
        grant.check(s)?;
        Ok(grant)
    }
}

/// An environment variable the guest may see: `KEY` passes the host's value
/// through (if it has one), `KEY=VALUE` sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvGrant {
    /// The variable's name.
    pub key: String,
    /// A fixed value, or `None` to pass the host's value through.
    pub value: Option<String>,
}

impl FromStr for EnvGrant {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (key, value) = match s.split_once('=') {
            Some((k, v)) => (k, Some(v.to_owned())),
            None => (s, None),
        };
        let valid = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(PolicyError::Env(s.to_owned()));
        }
        if value.is_none() && key.to_ascii_uppercase().starts_with("HANE_") {
            return Err(PolicyError::HostSetting(s.to_owned()));
        }
        Ok(EnvGrant {
            key: key.to_owned(),
            value,
        })
    }
}

impl fmt::Display for EnvGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={v}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP, default port 80.
    Http,
    /// HTTP over TLS, default port 443.
    Https,
}

impl Scheme {
    /// The port used when a URL names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// Parses `http` or `https`, case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        })
    }
}

/// An entry of the outgoing HTTP allow-list: `SCHEME://HOST[:PORT]`, where
/// HOST may start with `*.` to match any subdomain (but not the domain
/// itself) and PORT defaults to the scheme's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// The scheme a request must use.
    pub scheme: Scheme,
    /// Lowercase host name or IP literal, without the `*.` prefix.
    pub host: String,
    /// Whether `host` is a `*.` suffix pattern.
    pub wildcard: bool,
    /// The port a request must use.
    pub port: u16,
}

impl HostPattern {
    /// Whether a request to `scheme://host:port` is allowed by this entry.
    pub fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        if scheme != self.scheme || port != self.port {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

impl FromStr for HostPattern {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| PolicyError::Http {
            pattern: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            err("expected SCHEME://HOST[:PORT], such as `https://api.example.com`")
        })?;
        let scheme =
            Scheme::parse(scheme).ok_or_else(|| err("the scheme must be http or https"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(err(
                "only a host and port may follow the scheme, no path, query or user",
            ));
        }
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (ip, tail) = inner
                .split_once(']')
                .ok_or_else(|| err("unclosed `[` in an IPv6 address"))?;
            let port = match tail.strip_prefix(':') {
                Some(p) => Some(p),
                None if tail.is_empty() => None,
                None => return Err(err("unexpected text after the IPv6 address")),
            };
            (format!("[{}]", ip.to_ascii_lowercase()), port)
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
                None => (rest.to_ascii_lowercase(), None),
            }
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| err("the port must be a number from 1 to 65535"))?,
            None => scheme.default_port(),
        };
        let (wildcard, host) = match host.strip_prefix("*.") {
            Some(h) => (true, h.to_owned()),
            None => (false, host),
        };
        let valid_host = !host.is_empty()
            && (host.starts_with('[')
                || host.split('.').all(|l| {
                    !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                }));
        if !valid_host {
            return Err(err(
                "the host must be a name such as `api.example.com`, `*.example.com`, or an IP address",
            ));
        }
        Ok(HostPattern {
            scheme,
            host,
            wildcard,
            port,
        })
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let star = if self.wildcard { "*." } else { "" };
        write!(f, "{}://{star}{}", self.scheme, self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

macro_rules! serde_via_str {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_via_str!(EnvGrant);
serde_via_str!(HostPattern);

/// What one operation may touch. The default grants nothing: no
/// directories, no environment, no outgoing HTTP, no ledger collections or
/// document sets, no outbound actions to propose; raw sockets and name
/// lookups are never granted.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Preopened directories.
    #[serde(default)]
    pub files: Vec<DirGrant>,
    /// Environment variables.
    #[serde(default)]
    pub env: Vec<EnvGrant>,
    /// Outgoing HTTP allow-list.
    #[serde(default)]
    pub http: Vec<HostPattern>,
    /// Ledger collections the `records` capability may read, such as
    /// `vehicles`.
    #[serde(default)]
    pub records: Vec<String>,
    /// Ledger document sets the `documents` capability may read, such as
    /// `leases`.
    #[serde(default)]
    pub documents: Vec<String>,
    /// Outbound tools the `actions` capability may propose, from
    /// [`OUTBOUND_TOOLS`](crate::tool::OUTBOUND_TOOLS), such as
    /// `communication.send_email`. Proposing sends nothing; only an
    /// operation whose impact is `outbound` may hold this grant.
    #[serde(default)]
    pub actions: Vec<String>,
}

impl Policy {
    /// Checks the grants together: guest paths well formed and distinct,
    /// collection and document set names well formed, action grants
    /// outbound tools.
    ///
    /// # Errors
    ///
    /// The first grant that is malformed or collides with another.
    pub fn validate(&self) -> Result<(), PolicyError> {
        for (what, names) in [("records", &self.records), ("documents", &self.documents)] {
            if let Some(name) = names.iter().find(|n| !crate::ledger::is_valid_name(n)) {
                return Err(PolicyError::LedgerName {
                    what,
                    name: name.clone(),
                });
            }
        }
        if let Some((index, tool)) = self
            .actions
            .iter()
            .enumerate()
            .find(|(_, t)| !crate::tool::OUTBOUND_TOOLS.contains(&t.as_str()))
        {
            return Err(PolicyError::ActionTool {
                index,
                tool: tool.clone(),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for grant in &self.files {
            grant.check(&grant.host.display().to_string())?;
            let guest = grant.guest_path();
            if !seen.insert(guest.clone()) {
                return Err(PolicyError::DuplicateGuestPath(guest));
            }
        }
        Ok(())
    }

    /// Makes relative host paths relative to `base` (a manifest's folder).
    pub fn resolve_relative_to(&mut self, base: &Path) {
        for grant in &mut self.files {
            if grant.host.is_relative() {
                grant.host = base.join(&grant.host);
            }
        }
    }

    /// Whether any entry of the allow-list permits `scheme://host:port`.
    pub fn allows_http(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        self.http.iter().any(|p| p.matches(scheme, host, port))
    }

    /// Whether the `records` capability may read `collection`.
    pub fn allows_records(&self, collection: &str) -> bool {
        self.records.iter().any(|c| c == collection)
    }

    /// Whether the `documents` capability may read `set`.
    pub fn allows_documents(&self, set: &str) -> bool {
        self.documents.iter().any(|s| s == set)
    }

    /// Whether the `actions` capability may propose `tool`.
    pub fn allows_action(&self, tool: &str) -> bool {
        self.actions.iter().any(|t| t == tool)
    }

    /// The grants of `other` added to these; a collection, document set or
    /// action tool granted by both is listed once.
    pub fn merge(&mut self, other: Policy) {
        self.files.extend(other.files);
        self.env.extend(other.env);
        self.http.extend(other.http);
        for (mine, theirs) in [
            (&mut self.records, other.records),
            (&mut self.documents, other.documents),
            (&mut self.actions, other.actions),
        ] {
            for name in theirs {
                if !mine.contains(&name) {
                    mine.push(name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_grants_parse_host_guest_and_access() {
        let g: DirGrant = "data:/in:rw".parse().unwrap();
        assert_eq!(g.host, PathBuf::from("data"));
        assert_eq!(g.guest_path(), "/in");
        assert_eq!(g.access, Access::ReadWrite);

        let g: DirGrant = "examples/documents".parse().unwrap();
        assert_eq!(g.guest_path(), "/documents");
        assert_eq!(g.access, Access::ReadOnly);

        let g: DirGrant = "/srv/files:ro".parse().unwrap();
        assert_eq!(g.guest_path(), "/files");
        assert_eq!(g.access, Access::ReadOnly);
    }

    #[test]
    fn dir_grants_refuse_relative_or_escaping_guest_paths() {
        assert!("data:in".parse::<DirGrant>().is_err());
        assert!("data:/in/../etc".parse::<DirGrant>().is_err());
        assert!("a:b:c:d".parse::<DirGrant>().is_err());
        assert!(":/x".parse::<DirGrant>().is_err());
    }

    #[test]
    fn env_grants() {
        let e: EnvGrant = "LANG".parse().unwrap();
        assert_eq!(e.value, None);
        let e: EnvGrant = "MODE=fast=yes".parse().unwrap();
        assert_eq!(e.key, "MODE");
        assert_eq!(e.value.as_deref(), Some("fast=yes"));
        for bad in ["", "1A", "A-B", "=x", "A B"] {
            assert!(bad.parse::<EnvGrant>().is_err(), "{bad}");
        }
        // The host's own settings (delivery credentials among them) are
        // never passed through; a fixed value is the policy's own.
        for host in [
            "HANE_SMTP_PASSWORD",
            "HANE_CREDENTIAL_CRM",
            "hane_sms_token",
        ] {
            let err = host.parse::<EnvGrant>().unwrap_err();
            assert!(matches!(err, PolicyError::HostSetting(_)), "{host}: {err}");
            assert!(err.to_string().contains("never passed through"), "{err}");
        }
        let fixed: EnvGrant = "HANE_MODE=test".parse().unwrap();
        assert_eq!(fixed.value.as_deref(), Some("test"));
    }

    #[test]
    fn host_patterns_match_scheme_host_and_port() {
        let p: HostPattern = "https://api.example.com".parse().unwrap();
        assert!(p.matches(Scheme::Https, "api.example.com", 443));
        assert!(p.matches(Scheme::Https, "API.Example.com.", 443));
        assert!(!p.matches(Scheme::Http, "api.example.com", 80));
        assert!(!p.matches(Scheme::Https, "api.example.com", 8443));
        assert!(!p.matches(Scheme::Https, "evil-api.example.com", 443));
        assert!(!p.matches(Scheme::Https, "api.example.com.evil.net", 443));

        let w: HostPattern = "http://*.example.org:8080".parse().unwrap();
        assert!(w.matches(Scheme::Http, "a.example.org", 8080));
        assert!(w.matches(Scheme::Http, "a.b.example.org", 8080));
        assert!(!w.matches(Scheme::Http, "example.org", 8080));
        assert!(!w.matches(Scheme::Http, "badexample.org", 8080));
        assert!(!w.matches(Scheme::Http, "a.example.org", 80));

        let ip: HostPattern = "http://127.0.0.1:9000".parse().unwrap();
        assert!(ip.matches(Scheme::Http, "127.0.0.1", 9000));
        assert_eq!(ip.to_string(), "http://127.0.0.1:9000");
        assert_eq!(w.to_string(), "http://*.example.org:8080");
    }

    #[test]
    fn host_patterns_reject_paths_and_bad_ports() {
        for bad in [
            "api.example.com",
            "ftp://x.com",
            "https://x.com/path",
            "https://x.com:0",
            "https://x.com:99999",
            "https://user@x.com",
            "https://",
            "https://*.",
            "https://a..b",
        ] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad}");
        }
    }

    #[test]
    fn duplicate_guest_paths_are_refused() {
        let policy = Policy {
            files: vec!["a:/x".parse().unwrap(), "b:/x".parse().unwrap()],
            ..Policy::default()
        };
        assert_eq!(
            policy.validate(),
            Err(PolicyError::DuplicateGuestPath("/x".into()))
        );
    }

    #[test]
    fn ledger_grants_are_names_and_merge_without_repeats() {
        let mut policy = Policy {
            records: vec!["vehicles".into()],
            documents: vec!["leases".into()],
            ..Policy::default()
        };
        policy.validate().unwrap();
        policy.merge(Policy {
            records: vec!["vehicles".into(), "leases".into()],
            ..Policy::default()
        });
        assert_eq!(policy.records, ["vehicles", "leases"]);
        assert!(policy.allows_records("leases"));
        assert!(!policy.allows_records("contracts"));
        assert!(policy.allows_documents("leases"));
        assert!(!policy.allows_documents("vehicles"));

        let bad = Policy {
            documents: vec!["../etc".into()],
            ..Policy::default()
        };
        let err = bad.validate().unwrap_err();
        assert_eq!(
            err,
            PolicyError::LedgerName {
                what: "documents",
                name: "../etc".into()
            }
        );
        assert!(
            err.to_string()
                .starts_with("invalid documents grant `../etc`")
        );
    }

    #[test]
    fn action_grants_are_outbound_tools_and_merge_without_repeats() {
        let mut policy = Policy {
            actions: vec!["communication.send_email".into()],
            ..Policy::default()
        };
        policy.validate().unwrap();
        assert!(!Policy::default().allows_action("communication.send_email"));
        policy.merge(Policy {
            actions: vec![
                "communication.send_email".into(),
                "communication.send_sms".into(),
            ],
            ..Policy::default()
        });
        assert_eq!(
            policy.actions,
            ["communication.send_email", "communication.send_sms"]
        );
        assert!(policy.allows_action("communication.send_sms"));
        assert!(!policy.allows_action("communication.place_call"));

        policy.actions.push("communication.send_fax".into());
        let err = policy.validate().unwrap_err();
        assert_eq!(
            err,
            PolicyError::ActionTool {
                index: 2,
                tool: "communication.send_fax".into()
            }
        );
        assert!(
            err.to_string().starts_with(
                "invalid actions grant `communication.send_fax`: expected one of the outbound tools `communication.send_email`, "
            ),
            "{err}"
        );
    }
}
