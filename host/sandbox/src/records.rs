//! The `hane:operation/records` capability: read-only access to the
//! [`Ledger`]'s collections that the call's policy grants.
//!
//! A call sees the ledger the [`Sandbox`](crate::Sandbox) held when the call
//! started ([`Sandbox::set_ledger`](crate::Sandbox::set_ledger)), so a ledger
//! replaced mid-call does not change what the call reads. Asking for a
//! collection that is not granted returns the WIT `denied` error and is
//! recorded as a denial in the receipt; everything the guest passes in is
//! capped by the constants below.

use std::sync::Arc;

use hane_core::ledger::MAX_RECORD_BYTES;
use hane_core::{Ledger, Policy};
use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};

use hane_core::ledger::{Comparison, FieldCondition, RecordQuery};

use crate::bindings::hane::operation::records::{self, Found, Page};
use crate::bindings::hane::operation::types::Error;
use crate::state::{Incidents, NameGrant, NamedCapability, query_error};

/// Most records one `find` returns; a larger `limit` is lowered to this.
pub const MAX_FIND_LIMIT: u32 = 100;
/// Most bytes of records one `find` returns: 1 MiB. Records past it are left
/// out and the result says `truncated`.
pub const MAX_FIND_BYTES: usize = 1024 * 1024;
/// Most `(field, value)` pairs one `find` may match on.
pub const MAX_MATCH_FIELDS: usize = 16;
/// Longest field name or record id a guest may pass, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Longest value text a guest may match on: the size of a whole record.
pub const MAX_VALUE_BYTES: usize = MAX_RECORD_BYTES;

/// The `records` state of one call: the ledger it reads, the collections it
/// may read, and how many calls it made.
pub(crate) struct RecordsCtx {
    ledger: Arc<Ledger>,
    grant: NameGrant,
    calls: u32,
}

impl RecordsCtx {
    /// Calls of the import so far, for the receipt.
    pub(crate) fn calls(&self) -> u32 {
        self.calls
    }
}

/// Builds a [`RecordsCtx`]; each method documents its default.
#[derive(Default)]
pub(crate) struct RecordsCtxBuilder {
    ledger: Arc<Ledger>,
    policy: Arc<Policy>,
}

impl RecordsCtxBuilder {
    /// Nothing to read: an empty ledger and no collection granted.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The ledger the call reads. Default: an empty one.
    pub(crate) fn ledger(&mut self, ledger: Arc<Ledger>) -> &mut Self {
        self.ledger = ledger;
        self
    }

    /// The policy whose `records` grant is checked. Default: one that
    /// grants nothing.
    pub(crate) fn policy(&mut self, policy: Arc<Policy>) -> &mut Self {
        self.policy = policy;
        self
    }

    /// The context; refusals are recorded in `incidents`.
    pub(crate) fn build(&mut self, incidents: Arc<Incidents>) -> RecordsCtx {
        RecordsCtx {
            ledger: std::mem::take(&mut self.ledger),
            grant: NameGrant::new(
                NamedCapability::Records,
                std::mem::take(&mut self.policy),
                incidents,
            ),
            calls: 0,
        }
    }
}

/// Adds `hane:operation/records` to `linker`, reading each call's context
/// with `get`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut RecordsCtx,
) -> wasmtime::Result<()> {
    records::add_to_linker::<T, HasSelf<RecordsCtx>>(linker, get)
}

impl records::Host for RecordsCtx {
    fn find(
        &mut self,
        collection: String,
        fields: Vec<(String, String)>,
        limit: u32,
    ) -> wasmtime::Result<Result<Found, Error>> {
        self.calls += 1;
        if let Err(denied) = self.grant.check(&collection) {
            return Ok(Err(denied));
        }
        let fields = match parse_fields(fields) {
            Ok(fields) => fields,
            Err(refused) => return Ok(Err(Error::InvalidInput(refused.to_string()))),
        };
        let found = match self
            .ledger
            .find(&collection, &fields, limit.min(MAX_FIND_LIMIT) as usize)
        {
            Ok(found) => found,
            Err(e) => return Ok(Err(query_error(e))),
        };
        let mut truncated = found.truncated;
        let mut bytes = 0;
        let mut records = Vec::with_capacity(found.records.len());
        for record in found.records {
            bytes += record.json.as_str().len();
            if bytes > MAX_FIND_BYTES {
                truncated = true;
                break;
            }
            records.push(record.json.as_str().to_owned());
        }
        Ok(Ok(Found { records, truncated }))
    }

    fn get(
        &mut self,
        collection: String,
        id: String,
    ) -> wasmtime::Result<Result<Option<String>, Error>> {
        self.calls += 1;
        if let Err(denied) = self.grant.check(&collection) {
            return Ok(Err(denied));
        }
        if id.len() > MAX_KEY_BYTES {
            return Ok(Err(Error::InvalidInput(format!(
                "the id is {} bytes; ids are at most {MAX_KEY_BYTES}",
                id.len()
            ))));
        }
        Ok(self
            .ledger
            .get(&collection, &id)
            .map(|record| record.map(|r| r.json.as_str().to_owned()))
            .map_err(query_error))
    }

    fn query(&mut self, query: records::RecordQuery) -> wasmtime::Result<Result<Page, Error>> {
        self.calls += 1;
        if let Err(denied) = self.grant.check(&query.collection) {
            return Ok(Err(denied));
        }
        let query = match parse_query(query) {
            Ok(query) => query,
            Err(refused) => return Ok(Err(Error::InvalidInput(refused))),
        };
        Ok(self
            .ledger
            .query(&query)
            .map(|page| Page {
                records: page
                    .records
                    .iter()
                    .map(|r| r.json.as_str().to_owned())
                    .collect(),
                next: page.next,
            })
            .map_err(query_error))
    }

    fn ontology(&mut self) -> wasmtime::Result<Option<String>> {
        self.calls += 1;
        Ok(self
            .ledger
            .ontology
            .as_ref()
            .map(|o| serde_json::to_string(o).expect("an ontology serializes")))
    }
}

/// The guest's query as the ledger's, within the caps.
fn parse_query(query: records::RecordQuery) -> Result<RecordQuery, String> {
    let pairs = query
        .conditions
        .iter()
        .map(|c| (c.field.clone(), c.value.clone()))
        .collect();
    let values = parse_fields(pairs).map_err(|e| e.to_string())?;
    let conditions = query
        .conditions
        .iter()
        .zip(values)
        .map(|(c, (field, value))| FieldCondition {
            field,
            comparison: match c.comparison {
                records::Comparison::Equal => Comparison::Equal,
                records::Comparison::Less => Comparison::Less,
                records::Comparison::LessOrEqual => Comparison::LessOrEqual,
                records::Comparison::Greater => Comparison::Greater,
                records::Comparison::GreaterOrEqual => Comparison::GreaterOrEqual,
                records::Comparison::Prefix => Comparison::Prefix,
            },
            value,
        })
        .collect();
    if let Some(order) = &query.order_by
        && order.len() > MAX_KEY_BYTES
    {
        return Err(format!(
            "`order-by` is {} bytes; field names are at most {MAX_KEY_BYTES}",
            order.len()
        ));
    }
    if let Some(after) = &query.after
        && after.len() > MAX_KEY_BYTES + 16
    {
        return Err("`after` is not a continuation the host gave".to_owned());
    }
    Ok(RecordQuery {
        collection: query.collection,
        conditions,
        order_by: query.order_by,
        descending: query.descending,
        after: query.after,
        limit: query.limit.min(MAX_FIND_LIMIT) as usize,
        max_bytes: MAX_FIND_BYTES,
    })
}

/// Why [`parse_fields`] refused a `find` or a `query`; the guest reads its text in the
/// WIT `invalid-input` error.
#[derive(Debug, thiserror::Error)]
enum FieldsError {
    #[error("{count} fields to match or conditions; at most {MAX_MATCH_FIELDS} are allowed")]
    TooMany { count: usize },
    #[error("a field name is {bytes} bytes; field names are at most {MAX_KEY_BYTES}")]
    NameTooLong { bytes: usize },
    #[error("the value of `{field}` is {bytes} bytes; values are at most {MAX_VALUE_BYTES}")]
    ValueTooLong { field: String, bytes: usize },
    #[error("the value of `{field}` is not JSON: {source}")]
    NotJson {
        field: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The guest's `(field, JSON text)` pairs as values, within the caps.
fn parse_fields(fields: Vec<(String, String)>) -> Result<Vec<(String, Value)>, FieldsError> {
    if fields.len() > MAX_MATCH_FIELDS {
        return Err(FieldsError::TooMany {
            count: fields.len(),
        });
    }
    fields
        .into_iter()
        .map(|(field, value)| {
            if field.len() > MAX_KEY_BYTES {
                return Err(FieldsError::NameTooLong { bytes: field.len() });
            }
            if value.len() > MAX_VALUE_BYTES {
                return Err(FieldsError::ValueTooLong {
                    bytes: value.len(),
                    field,
                });
            }
            match serde_json::from_str(&value) {
                Ok(value) => Ok((field, value)),
                Err(source) => Err(FieldsError::NotJson { field, source }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use records::Host as _;

    use super::*;

    fn ctx(granted: &[&str]) -> (RecordsCtx, Arc<Incidents>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ledger");
        let ledger = Ledger::load_dir(&dir).unwrap();
        let incidents = Arc::new(Incidents::default());
        let policy = Arc::new(Policy {
            records: granted.iter().map(|s| (*s).to_owned()).collect(),
            ..Policy::default()
        });
        let ctx = RecordsCtxBuilder::new()
            .ledger(Arc::new(ledger))
            .policy(policy)
            .build(incidents.clone());
        (ctx, incidents)
    }

    fn pair(field: &str, value: &str) -> (String, String) {
        (field.to_owned(), value.to_owned())
    }

    #[test]
    fn granted_collections_are_read_and_others_denied_and_counted() {
        let (mut ctx, incidents) = ctx(&["vehicles", "ghosts"]);
        let found = ctx
            .find("vehicles".into(), vec![pair("depot", "\"Kawasaki\"")], 1)
            .unwrap()
            .unwrap();
        assert_eq!(found.records.len(), 1);
        assert!(found.records[0].contains("\"V-003\""));
        assert!(found.truncated);

        let err = ctx
            .find("leases".into(), vec![pair("id", "\"L-01\"")], 5)
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(&err, Error::Denied(m) if m.contains("collection `leases` is not granted")),
            "{err:?}"
        );
        assert_eq!(incidents.denied(), 1);
        assert!(incidents.first_denial().unwrap().contains("`leases`"));

        // Granted but not in the ledger.
        let err = ctx.get("ghosts".into(), "G-1".into()).unwrap().unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err:?}");
        assert_eq!(
            ctx.get("vehicles".into(), "V-404".into()).unwrap().unwrap(),
            None
        );
        assert_eq!(ctx.calls(), 4);
        assert_eq!(incidents.denied(), 1);
    }

    #[test]
    fn guest_input_is_capped_and_checked() {
        let (mut ctx, _) = ctx(&["vehicles"]);
        let too_many = (0..=MAX_MATCH_FIELDS)
            .map(|i| pair(&format!("f{i}"), "1"))
            .collect();
        let err = ctx
            .find("vehicles".into(), too_many, 5)
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        let err = ctx
            .find("vehicles".into(), vec![pair("depot", "Kawasaki")], 5)
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.starts_with("the value of `depot` is not JSON")),
            "{err:?}"
        );
        let err = ctx.find("vehicles".into(), vec![], 5).unwrap().unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        let err = ctx
            .get("vehicles".into(), "x".repeat(MAX_KEY_BYTES + 1))
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        let all = ctx
            .find(
                "vehicles".into(),
                vec![pair("registration", "\"架空 300 あ 10-02\"")],
                u32::MAX,
            )
            .unwrap()
            .unwrap();
        assert_eq!(all.records.len(), 1);
    }

    fn condition(field: &str, comparison: records::Comparison, value: &str) -> records::Condition {
        records::Condition {
            field: field.to_owned(),
            comparison,
            value: value.to_owned(),
        }
    }

    #[test]
    fn queries_page_through_granted_collections() {
        let (mut ctx, incidents) = ctx(&["vehicles"]);
        let mut query = records::RecordQuery {
            collection: "vehicles".to_owned(),
            conditions: vec![condition(
                "mileage_km",
                records::Comparison::Greater,
                "20000",
            )],
            order_by: Some("mileage_km".to_owned()),
            descending: true,
            after: None,
            limit: 2,
        };
        let page = ctx.query(query.clone()).unwrap().unwrap();
        assert_eq!(page.records.len(), 2);
        assert!(page.records[0].contains("\"V-004\""), "{:?}", page.records);
        query.after = page.next;
        let rest = ctx.query(query.clone()).unwrap().unwrap();
        assert!(rest.next.is_none());
        assert!(rest.records.iter().all(|r| !page.records.contains(r)));

        query.after = Some("x".repeat(MAX_KEY_BYTES + 17));
        let err = ctx.query(query.clone()).unwrap().unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        query.after = None;
        query.conditions = vec![condition("depot", records::Comparison::Prefix, "Shin")];
        query.conditions[0].value = "Shin".to_owned();
        let err = ctx.query(query.clone()).unwrap().unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("`depot` is not JSON")),
            "{err:?}"
        );

        query.collection = "leases".to_owned();
        let err = ctx.query(query).unwrap().unwrap_err();
        assert!(matches!(err, Error::Denied(_)), "{err:?}");
        assert_eq!(incidents.denied(), 1);
        // The example ledger has no ontology until a release gives it one.
        assert_eq!(ctx.ontology().unwrap(), None);
    }
}
