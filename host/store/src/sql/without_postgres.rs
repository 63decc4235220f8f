//! A build without PostgreSQL (the `postgres` feature off, as in the
//! device build): an address of a database is refused when opened, with
//! what is missing; nothing else changes.

use super::Sql;
use crate::StoreError;

pub use super::pg_common::redact;
pub(crate) use super::pg_common::{DEFAULT_CONNECTIONS, off_runtime};

/// No pool can exist in this build: [`connect`] refuses every address.
pub(crate) enum Pool {}

impl Pool {
    pub(crate) fn target(&self) -> &str {
        match *self {}
    }

    pub(crate) fn with<T>(
        &self,
        _f: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match *self {}
    }

    pub(crate) fn write<T, E>(&self, _f: impl FnOnce(&mut dyn Sql) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match *self {}
    }

    pub(crate) fn write_rows<T, E>(
        &self,
        _f: impl FnOnce(&mut dyn Sql) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match *self {}
    }
}

/// Refuses `url`: this build has no PostgreSQL client.
pub(crate) fn connect(url: &str) -> Result<Pool, StoreError> {
    Err(StoreError::Database(format!(
        "`{}` is a PostgreSQL database, and this hane was built without PostgreSQL (the `postgres` feature is off, as in the device build): give the path of a SQLite file instead",
        redact(url)
    )))
}
