//! API keys: their roles, how a key is made, and the one hash of it that is
//! stored.

use std::fmt;
use std::str::FromStr;

use hane_store::{Registry, StoreError};
use sha2::{Digest as _, Sha256};

/// What every API key starts with, so a leaked one is easy to spot.
pub const KEY_PREFIX: &str = "hane_";

/// Random bytes in a key: 160 bits, written as 40 hex characters.
const KEY_RANDOM_BYTES: usize = 20;

/// The longest key name, in characters.
pub const MAX_KEY_NAME_LEN: usize = 64;

/// The longest assignment group name a key takes, in characters: as long
/// as an assignment a run may give.
pub const MAX_GROUP_LEN: usize = 200;

/// What a key may do.
///
/// A `viewer` reads runs, tools, actions, overrides and the budget; an
/// `approver` also approves, rejects and reconciles outbound actions; an
/// `operator` does all that, starts and cancels runs, and sets decider
/// overrides. An approver or operator key with groups (see
/// [`create_key`]) decides only the actions assigned to one of them;
/// cancelling a run, which withdraws its pending actions, and overrides
/// are not limited by groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyRole {
    /// Everything an approver does; starts and cancels runs, sets decider
    /// overrides.
    Operator,
    /// Reads; approves, rejects and reconciles outbound actions.
    Approver,
    /// Reads.
    Viewer,
}

impl KeyRole {
    /// Every role.
    pub const ALL: [KeyRole; 3] = [KeyRole::Operator, KeyRole::Approver, KeyRole::Viewer];

    /// The role as stored and written in the CLI, such as `operator`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyRole::Operator => "operator",
            KeyRole::Approver => "approver",
            KeyRole::Viewer => "viewer",
        }
    }
}

impl fmt::Display for KeyRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of [`Role::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role `{0}`: expected operator, approver or viewer")]
pub struct UnknownKeyRole(pub String);

impl FromStr for KeyRole {
    type Err = UnknownKeyRole;

    fn from_str(s: &str) -> Result<Self, UnknownKeyRole> {
        KeyRole::ALL
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| UnknownKeyRole(s.to_owned()))
    }
}

/// Why a key could not be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The name is empty, too long, or has characters other than ASCII
    /// letters, digits, `_`, `.` and `-`.
    #[error(
        "invalid key name `{0}`: use 1 to {MAX_KEY_NAME_LEN} ASCII letters, digits, `_`, `.` or `-`"
    )]
    InvalidName(String),
    /// A key with this name exists.
    #[error("a key named `{0}` already exists: remove it first or choose another name")]
    Duplicate(String),
    /// An assignment group name is empty, too long, starts or ends with
    /// white space, or holds a control character.
    #[error(
        "invalid group {0:?}: an assignment group is 1 to {MAX_GROUP_LEN} characters, none of them a control character, with no white space at either end"
    )]
    InvalidGroup(String),
    /// An empty list of groups: such a key would decide nothing.
    #[error("a key's groups name at least one group; without groups it decides for every group")]
    NoGroups,
    /// Groups given for a viewer key, which decides nothing.
    #[error(
        "a viewer key decides no actions, so it takes no groups: give groups to an approver or operator key"
    )]
    GroupsForViewer,
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

/// The SHA-256 of `secret`, in lowercase hex: what the registry stores and
/// looks keys up by. Keys are 160 random bits, so a fast hash is enough.
pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn valid_name(name: &str) -> bool {
    (1..=MAX_KEY_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn valid_group(group: &str) -> bool {
    (1..=MAX_GROUP_LEN).contains(&group.chars().count())
        && !group.chars().any(char::is_control)
        && group.trim() == group
}

/// The groups a key with `role` is stored with when `groups` are given:
/// each checked, repeats dropped, in the order given.
///
/// # Errors
///
/// A group is invalid, or groups were given for a viewer.
pub fn key_groups(
    role: KeyRole,
    groups: Option<&[String]>,
) -> Result<Option<Vec<String>>, KeyError> {
    let Some(given) = groups else {
        return Ok(None);
    };
    if role == KeyRole::Viewer {
        return Err(KeyError::GroupsForViewer);
    }
    if given.is_empty() {
        return Err(KeyError::NoGroups);
    }
    let mut groups: Vec<String> = Vec::with_capacity(given.len());
    for group in given {
        if !valid_group(group) {
            return Err(KeyError::InvalidGroup(group.clone()));
        }
        if !groups.contains(group) {
            groups.push(group.clone());
        }
    }
    Ok(Some(groups))
}

/// Creates a key named `name` with `role` and returns its secret:
/// [`KEY_PREFIX`] and 40 lowercase hex characters. Only its
/// [`hash_key`] is stored, so the secret cannot be shown again.
///
/// An approver or operator key with `groups` decides (approves, rejects,
/// reconciles) only the outbound actions assigned to one of them; without,
/// it decides those of every group.
///
/// # Errors
///
/// The name is invalid or taken, a group is invalid, groups were given for
/// a viewer, or the store failed.
pub async fn create_key(
    registry: &Registry,
    name: &str,
    role: KeyRole,
    groups: Option<&[String]>,
) -> Result<String, KeyError> {
    if !valid_name(name) {
        return Err(KeyError::InvalidName(name.to_owned()));
    }
    let groups = key_groups(role, groups)?;
    let mut random = [0u8; KEY_RANDOM_BYTES];
    // As for ids: without an entropy source the process cannot work at all.
    getrandom::fill(&mut random).expect("the operating system provides random bytes");
    let secret = format!("{KEY_PREFIX}{}", hex::encode(random));
    registry
        .api_keys()
        .add(name, role.as_str(), groups.as_deref(), &hash_key(&secret))
        .await
        .map_err(|e| match e {
            StoreError::DuplicateKey(name) => KeyError::Duplicate(name),
            e => KeyError::Store(e),
        })?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        for role in KeyRole::ALL {
            assert_eq!(role.as_str().parse::<KeyRole>(), Ok(role));
            assert_eq!(role.to_string(), role.as_str());
        }
        let err = "admin".parse::<KeyRole>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown role `admin`: expected operator, approver or viewer"
        );
    }

    #[test]
    fn names() {
        assert!(valid_name("ci-bot_1.prod"));
        assert!(valid_name(&"a".repeat(MAX_KEY_NAME_LEN)));
        assert!(!valid_name(""));
        assert!(!valid_name(&"a".repeat(MAX_KEY_NAME_LEN + 1)));
        assert!(!valid_name("has space"));
        assert!(!valid_name("slash/"));
        assert!(!valid_name("ключ"));
    }

    #[test]
    fn groups() {
        assert!(valid_group("fleet-desk"));
        assert!(valid_group("Lease desk (Tokyo)"));
        assert!(valid_group(&"群".repeat(MAX_GROUP_LEN)));
        assert!(!valid_group(""));
        assert!(!valid_group(&"a".repeat(MAX_GROUP_LEN + 1)));
        assert!(!valid_group("two\nlines"));
        assert!(!valid_group("tab\there"));
        assert!(!valid_group("desk "));
        assert!(!valid_group(" desk"));
    }

    #[test]
    fn group_lists() {
        let given = ["b".to_owned(), "a".to_owned(), "b".to_owned()];
        assert_eq!(key_groups(KeyRole::Approver, None).unwrap(), None);
        assert_eq!(
            key_groups(KeyRole::Operator, Some(&given)).unwrap(),
            Some(vec!["b".to_owned(), "a".to_owned()])
        );
        assert!(matches!(
            key_groups(KeyRole::Approver, Some(&[])),
            Err(KeyError::NoGroups)
        ));
        assert!(matches!(
            key_groups(KeyRole::Viewer, Some(&given)),
            Err(KeyError::GroupsForViewer)
        ));
        assert!(matches!(
            key_groups(KeyRole::Approver, Some(&["a".to_owned(), String::new()])),
            Err(KeyError::InvalidGroup(g)) if g.is_empty()
        ));
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
