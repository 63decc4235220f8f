//! API keys: stored by the hash of their secret, never the secret.

use super::{ApiKeyTable, now_ms};
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};

/// An API key as listed: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyInfo {
    /// The key's name.
    pub name: String,
    /// Its role, such as `operator`.
    pub role: String,
    /// The assignment groups whose outbound actions it decides; `None`
    /// for every group.
    pub groups: Option<Vec<String>>,
    /// When it was created.
    pub created_at_ms: u64,
}

/// How `api_keys.groups` holds a key's groups: one per line.
fn groups_column(groups: Option<&[String]>) -> Option<String> {
    groups.map(|groups| groups.join("\n"))
}

fn api_key_info(row: &dyn Row) -> Result<ApiKeyInfo, SqlError> {
    let groups = row.opt_text(2)?;
    Ok(ApiKeyInfo {
        name: row.text(0)?,
        role: row.text(1)?,
        groups: groups.map(|g| g.lines().map(str::to_owned).collect()),
        created_at_ms: row.int(3)? as u64,
    })
}

impl ApiKeyTable<'_> {
    /// Stores an API key by the hash of its secret, with the assignment
    /// groups it decides for (`None`: every group). Group names hold no
    /// line breaks; the caller checks them.
    ///
    /// # Errors
    ///
    /// [`StoreError::DuplicateKey`] when a key with this name exists; the
    /// database failed.
    pub async fn add(
        &self,
        name: &str,
        role: &str,
        groups: Option<&[String]>,
        hash: &str,
    ) -> Result<(), StoreError> {
        let (name, role, hash) = (name.to_owned(), role.to_owned(), hash.to_owned());
        let groups = groups_column(groups);
        self.registry.tx("adding an API key", move |db| {
            let what = failed("adding an API key");
            let taken = db
                .row("SELECT 1 FROM api_keys WHERE name = ?1", args![&name], |row| {
                    row.int(0)
                })
                .map_err(&what)?
                .is_some();
            if taken {
                return Err(StoreError::DuplicateKey(name));
            }
            db.execute(
                "INSERT INTO api_keys (hash, name, role, groups, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![&hash, &name, &role, groups.as_ref(), now_ms() as i64],
            )
            .map_err(&what)?;
            Ok(())
        })
        .await
    }

    /// The key whose secret has this hash.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn by_hash(&self, hash: &str) -> Result<Option<ApiKeyInfo>, StoreError> {
        let hash = hash.to_owned();
        self.registry
            .on("checking an API key", move |db| {
                db.row(
                    "SELECT name, role, groups, created_at FROM api_keys WHERE hash = ?1",
                    args![&hash],
                    api_key_info,
                )
                .map_err(failed("checking an API key"))
            })
            .await
    }

    /// Every API key, by name.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(&self) -> Result<Vec<ApiKeyInfo>, StoreError> {
        self.registry
            .on("listing API keys", |db| {
                db.rows(
                    "SELECT name, role, groups, created_at FROM api_keys ORDER BY name",
                    &[],
                    api_key_info,
                )
                .map_err(failed("listing API keys"))
            })
            .await
    }

    /// Removes the key with this name; false when there was none.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.registry
            .on("removing an API key", move |db| {
                let n = db
                    .execute("DELETE FROM api_keys WHERE name = ?1", args![&name])
                    .map_err(failed("removing an API key"))?;
                Ok(n > 0)
            })
            .await
    }
}
