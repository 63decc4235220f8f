//! [`Ledger::query`]: conditions, order and pages over one collection,
//! answered from columns built once per field.
//!
//! A collection keeps its records as JSON text, so reading a field means
//! parsing every record. The first query that needs a field parses the
//! collection once and keeps that field as a [`Column`]: a typed cell per
//! record and a map from each value to the records holding it. Later queries
//! on the field look the value up instead of scanning, which is what makes a
//! link from one object to its linked objects cheap on a large collection.
//! Columns are built lazily and shared by every call reading the same
//! ledger; they are not stored.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::{Collection, Ledger, QueryError, Record};

/// Most conditions one query may have.
pub const MAX_CONDITIONS: usize = 16;

/// How a [`FieldCondition`] compares a field with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// Equal, as [`Ledger::find`] compares.
    Equal,
    /// Less than.
    Less,
    /// Less than or equal.
    LessOrEqual,
    /// Greater than.
    Greater,
    /// Greater than or equal.
    GreaterOrEqual,
    /// A string that starts with the value.
    Prefix,
}

/// One condition on a top-level field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldCondition {
    /// The field.
    pub field: String,
    /// How it compares.
    pub comparison: Comparison,
    /// A string, a number, a boolean or null.
    pub value: Value,
}

/// A query over one collection; see [`Ledger::query`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordQuery {
    /// The collection.
    pub collection: String,
    /// Conditions that must all hold.
    pub conditions: Vec<FieldCondition>,
    /// The field to order by; none keeps the collection's order.
    pub order_by: Option<String>,
    /// Whether `order_by` is reversed.
    pub descending: bool,
    /// A previous page's `next`.
    pub after: Option<String>,
    /// Most records in the page.
    pub limit: usize,
    /// Most bytes of record text in the page; a page holds at least one
    /// record when one matched.
    pub max_bytes: usize,
}

/// One page of a [`Ledger::query`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryPage<'a> {
    /// The records, in the query's order.
    pub records: Vec<&'a Record>,
    /// Where the next page starts, when more matched.
    pub next: Option<String>,
}

/// The fields of a collection parsed so far, by name.
#[derive(Default)]
pub(crate) struct Columns(RwLock<HashMap<String, Arc<Column>>>);

// Columns are derived from the records: a copy starts without them, and
// they never make two collections differ.
impl Clone for Columns {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Columns {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Columns {}

impl fmt::Debug for Columns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let built = self.0.read().map(|c| c.len()).unwrap_or(0);
        write!(f, "Columns({built} built)")
    }
}

/// One field of every record, and where each value occurs.
struct Column {
    cells: Vec<Cell>,
    /// Records whose field is a string, by the string.
    by_text: HashMap<Box<str>, Vec<u32>>,
    /// Records whose field is a number or a number's text, by the number's
    /// bits.
    by_number: HashMap<u64, Vec<u32>>,
}

/// A field's value in one record.
enum Cell {
    /// The record has no such field, or it is an array or an object.
    Missing,
    Null,
    Bool(bool),
    Number(f64),
    /// A string, and its value when it is a number's text (CSV cells).
    Text(Box<str>, Option<f64>),
}

impl Cell {
    fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => n.as_f64().map_or(Self::Missing, Self::Number),
            Value::String(s) => Self::Text(s.as_str().into(), number_text(s)),
            Value::Array(_) | Value::Object(_) => Self::Missing,
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Self::Number(n) | Self::Text(_, Some(n)) => Some(*n),
            _ => None,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Self::Text(s, _) => Some(s),
            _ => None,
        }
    }

    /// Whether this cell meets `comparison` with `value` (checked by
    /// [`check_condition`]).
    fn meets(&self, comparison: Comparison, value: &Value) -> bool {
        match (comparison, value) {
            (Comparison::Equal, Value::Null) => {
                matches!(self, Self::Null | Self::Missing) || self.text() == Some("")
            }
            (Comparison::Equal, Value::Bool(b)) => match self {
                Self::Bool(x) => x == b,
                Self::Text(s, _) => **s == *if *b { "true" } else { "false" },
                _ => false,
            },
            (Comparison::Equal, Value::String(s)) => match self {
                Self::Text(t, _) => **t == **s,
                Self::Number(n) => number_text(s) == Some(*n),
                _ => false,
            },
            (Comparison::Prefix, Value::String(s)) => {
                self.text().is_some_and(|t| t.starts_with(s.as_str()))
            }
            (_, Value::Number(n)) => {
                let (Some(cell), Some(value)) = (self.number(), n.as_f64()) else {
                    return false;
                };
                ordered(comparison, cell.partial_cmp(&value))
            }
            (_, Value::String(s)) => self
                .text()
                .is_some_and(|t| ordered(comparison, Some(t.cmp(s.as_str())))),
            _ => false,
        }
    }
}

fn ordered(comparison: Comparison, ordering: Option<Ordering>) -> bool {
    let Some(ordering) = ordering else {
        return false;
    };
    match comparison {
        Comparison::Equal => ordering.is_eq(),
        Comparison::Less => ordering.is_lt(),
        Comparison::LessOrEqual => ordering.is_le(),
        Comparison::Greater => ordering.is_gt(),
        Comparison::GreaterOrEqual => ordering.is_ge(),
        Comparison::Prefix => false,
    }
}

/// The value of a number's text, as JSON writes numbers.
fn number_text(s: &str) -> Option<f64> {
    s.trim()
        .parse::<serde_json::Number>()
        .ok()
        .and_then(|n| n.as_f64())
}

/// `n`'s bits, with `-0` as `0` so both find the same records.
fn number_key(n: f64) -> u64 {
    if n == 0.0 { 0 } else { n.to_bits() }
}

/// Numbers first (by value), then strings (by characters), then booleans,
/// then records without a value.
fn order_cells(a: &Cell, b: &Cell) -> Ordering {
    fn rank(cell: &Cell) -> u8 {
        match cell {
            Cell::Number(_) | Cell::Text(_, Some(_)) => 0,
            Cell::Text(..) => 1,
            Cell::Bool(_) => 2,
            Cell::Null | Cell::Missing => 3,
        }
    }
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Cell::Bool(x), Cell::Bool(y)) => x.cmp(y),
        _ => match (a.number(), b.number()) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => a.text().cmp(&b.text()),
        },
    })
}

impl Column {
    fn build(
        records: &[Record],
        parsed: &[Option<serde_json::Map<String, Value>>],
        field: &str,
    ) -> Self {
        let mut column = Column {
            cells: Vec::with_capacity(records.len()),
            by_text: HashMap::new(),
            by_number: HashMap::new(),
        };
        for (position, object) in parsed.iter().enumerate() {
            let cell = object
                .as_ref()
                .and_then(|o| o.get(field))
                .map_or(Cell::Missing, Cell::of);
            let position = position as u32;
            if let Cell::Text(s, _) = &cell {
                column.by_text.entry(s.clone()).or_default().push(position);
            }
            if let Some(n) = cell.number() {
                column
                    .by_number
                    .entry(number_key(n))
                    .or_default()
                    .push(position);
            }
            column.cells.push(cell);
        }
        column
    }

    /// The records, in order, that may equal `value`: every one that does,
    /// and for a string also the numbers it may be the text of. `None` when
    /// the value is not looked up (`null`, booleans).
    fn equal_candidates(&self, value: &Value) -> Option<Vec<u32>> {
        match value {
            Value::Number(n) => Some(
                n.as_f64()
                    .and_then(|n| self.by_number.get(&number_key(n)))
                    .cloned()
                    .unwrap_or_default(),
            ),
            Value::String(s) => {
                let mut found = self.by_text.get(s.as_str()).cloned().unwrap_or_default();
                if let Some(numbers) =
                    number_text(s).and_then(|n| self.by_number.get(&number_key(n)))
                {
                    found.extend(
                        numbers
                            .iter()
                            .filter(|&&p| matches!(self.cells[p as usize], Cell::Number(_))),
                    );
                    found.sort_unstable();
                }
                Some(found)
            }
            _ => None,
        }
    }
}

impl Collection {
    /// The columns of `fields`, building those not built yet in one pass
    /// over the records.
    fn columns(&self, fields: &[&str]) -> Vec<Arc<Column>> {
        {
            let built = self.columns.0.read().expect("columns lock");
            if let Some(found) = fields
                .iter()
                .map(|f| built.get(*f).cloned())
                .collect::<Option<Vec<_>>>()
            {
                return found;
            }
        }
        let mut built = self.columns.0.write().expect("columns lock");
        let missing: Vec<&str> = fields
            .iter()
            .copied()
            .filter(|f| !built.contains_key(*f))
            .collect();
        if !missing.is_empty() {
            let parsed: Vec<_> = self
                .records
                .iter()
                .map(|r| match r.json.to_value() {
                    Ok(Value::Object(o)) => Some(o),
                    _ => None,
                })
                .collect();
            for field in missing {
                let column = Column::build(&self.records, &parsed, field);
                built.insert(field.to_owned(), Arc::new(column));
            }
        }
        fields.iter().map(|f| built[*f].clone()).collect()
    }
}

impl Collection {
    /// The positions, in order, of every record that may have all of
    /// `fields` (a superset: each must still be compared), looked up in the
    /// column of the first field whose value is a number or a string; `None`
    /// when no field's value can be looked up.
    pub(super) fn equal_candidates(&self, fields: &[(String, Value)]) -> Option<Vec<u32>> {
        let (field, value) = fields
            .iter()
            .find(|(_, v)| matches!(v, Value::Number(_) | Value::String(_)))?;
        let column = self.columns(&[field.as_str()]).pop()?;
        column.equal_candidates(value)
    }
}

fn check_condition(condition: &FieldCondition) -> Result<(), QueryError> {
    let field = &condition.field;
    match (&condition.value, condition.comparison) {
        (Value::Array(_) | Value::Object(_), _) => Err(QueryError::Invalid(format!(
            "the value for `{field}` must be a string, a number, a boolean or null"
        ))),
        (Value::String(_), Comparison::Prefix) => Ok(()),
        (_, Comparison::Prefix) => Err(QueryError::Invalid(format!(
            "`prefix` on `{field}` needs a string"
        ))),
        (Value::Null | Value::Bool(_), c) if c != Comparison::Equal => Err(QueryError::Invalid(
            format!("comparing `{field}` by order needs a number or a string"),
        )),
        _ => Ok(()),
    }
}

/// The continuation after the record at `position`: its position and id,
/// so a continuation from another ledger is refused instead of read wrong.
fn continuation(position: u32, record: &Record) -> String {
    format!("{position}:{}", record.id)
}

impl Ledger {
    /// The records of `query.collection` that meet every condition, in the
    /// collection's order or by `order_by` (ties in the collection's
    /// order), after `query.after`, at most `query.limit` of them and
    /// `query.max_bytes` of text.
    ///
    /// Values compare as [`Ledger::find`] compares for equality; a number
    /// orders against fields holding numbers or their text, and a string
    /// against string fields, by characters (so ISO dates order as dates).
    /// Orders put numbers first, then strings, booleans and records without
    /// the field.
    ///
    /// # Errors
    ///
    /// [`QueryError::NoCollection`]; [`QueryError::Invalid`] for more than
    /// [`MAX_CONDITIONS`] conditions, a value that is an array or an object,
    /// `prefix` without a string, an order comparison with `null` or a
    /// boolean, or an `after` that is not a continuation on this ledger.
    pub fn query(&self, query: &RecordQuery) -> Result<QueryPage<'_>, QueryError> {
        let collection = self.collection(&query.collection)?;
        if query.conditions.len() > MAX_CONDITIONS {
            return Err(QueryError::Invalid(format!(
                "a query has at most {MAX_CONDITIONS} conditions, not {}",
                query.conditions.len()
            )));
        }
        for condition in &query.conditions {
            check_condition(condition)?;
        }
        let mut fields: Vec<&str> = query.conditions.iter().map(|c| c.field.as_str()).collect();
        if let Some(order) = &query.order_by {
            fields.push(order);
        }
        fields.sort_unstable();
        fields.dedup();
        let columns: HashMap<&str, Arc<Column>> = fields
            .iter()
            .copied()
            .zip(collection.columns(&fields))
            .collect();

        // The fewest records an equality leaves, then every condition.
        let mut candidates: Option<Vec<u32>> = None;
        for condition in &query.conditions {
            if condition.comparison != Comparison::Equal {
                continue;
            }
            if let Some(found) =
                columns[condition.field.as_str()].equal_candidates(&condition.value)
                && candidates.as_ref().is_none_or(|c| found.len() < c.len())
            {
                candidates = Some(found);
            }
        }
        let mut candidates =
            candidates.unwrap_or_else(|| (0..collection.records.len() as u32).collect());
        candidates.retain(|&p| {
            query
                .conditions
                .iter()
                .all(|c| columns[c.field.as_str()].cells[p as usize].meets(c.comparison, &c.value))
        });

        let order = query.order_by.as_deref().map(|f| &columns[f].cells);
        let compare = |a: u32, b: u32| -> Ordering {
            let by_value = order.map_or(Ordering::Equal, |cells| {
                let o = order_cells(&cells[a as usize], &cells[b as usize]);
                if query.descending { o.reverse() } else { o }
            });
            by_value.then(a.cmp(&b))
        };
        if let Some(after) = &query.after {
            let position = after
                .split_once(':')
                .and_then(|(p, id)| {
                    let p: u32 = p.parse().ok()?;
                    (collection.records.get(p as usize)?.id == id).then_some(p)
                })
                .ok_or_else(|| {
                    QueryError::Invalid(format!(
                        "`after` ({after:?}) is not the `next` of a page of `{}` on this ledger; start again without it",
                        query.collection
                    ))
                })?;
            candidates.retain(|&p| compare(p, position).is_gt());
        }
        let wanted = query.limit.saturating_add(1);
        if order.is_some() {
            if candidates.len() > wanted {
                candidates.select_nth_unstable_by(wanted - 1, |&a, &b| compare(a, b));
                candidates.truncate(wanted);
            }
            candidates.sort_unstable_by(|&a, &b| compare(a, b));
        }
        let mut page = QueryPage {
            records: Vec::new(),
            next: None,
        };
        let mut bytes = 0;
        let mut last = None;
        for &position in &candidates {
            let record = &collection.records[position as usize];
            let size = record.json.as_str().len();
            let full = page.records.len() == query.limit
                || (!page.records.is_empty() && bytes + size > query.max_bytes);
            if full {
                page.next = last.map(|p: u32| continuation(p, &collection.records[p as usize]));
                break;
            }
            bytes += size;
            page.records.push(record);
            last = Some(position);
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ledger() -> Ledger {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ledger");
        Ledger::load_dir(&dir).unwrap()
    }

    fn ids<'a>(page: &QueryPage<'a>) -> Vec<&'a str> {
        page.records.iter().map(|r| r.id.as_str()).collect()
    }

    fn query(collection: &str, conditions: &[(&str, Comparison, Value)]) -> RecordQuery {
        RecordQuery {
            collection: collection.to_owned(),
            conditions: conditions
                .iter()
                .map(|(f, c, v)| FieldCondition {
                    field: (*f).to_owned(),
                    comparison: *c,
                    value: v.clone(),
                })
                .collect(),
            limit: 10,
            max_bytes: 1 << 20,
            ..RecordQuery::default()
        }
    }

    #[test]
    fn equality_finds_what_find_finds() {
        let ledger = ledger();
        let q = query(
            "vehicles",
            &[("depot", Comparison::Equal, json!("Shinagawa"))],
        );
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["V-001", "V-002"]);
        // CSV cells are text; a number finds its text, and text a number.
        let q = query(
            "vehicles",
            &[("mileage_km", Comparison::Equal, json!(48210))],
        );
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["V-001"]);
        let q = query("leases", &[("months", Comparison::Equal, json!("36"))]);
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["L-01"]);
        let q = query("leases", &[("months", Comparison::Equal, json!(36.0))]);
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["L-01"]);
    }

    #[test]
    fn ranges_prefixes_and_order() {
        let ledger = ledger();
        let mut q = query(
            "vehicles",
            &[
                ("mileage_km", Comparison::GreaterOrEqual, json!(12903)),
                ("mileage_km", Comparison::Less, json!(133870)),
                (
                    "inspection_expiry",
                    Comparison::Greater,
                    json!("2026-12-31"),
                ),
            ],
        );
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["V-001", "V-003"]);
        q.order_by = Some("mileage_km".to_owned());
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["V-003", "V-001"]);
        q.descending = true;
        assert_eq!(ids(&ledger.query(&q).unwrap()), ["V-001", "V-003"]);
        let q = query(
            "leases",
            &[("contract_no", Comparison::Prefix, json!("C-100"))],
        );
        assert_eq!(ids(&ledger.query(&q).unwrap()).len(), 3);
    }

    #[test]
    fn pages_continue_where_they_stopped_in_any_order() {
        let ledger = ledger();
        let all = ledger.collections["vehicles"].records.len();
        for (order, descending) in [
            (None, false),
            (Some("mileage_km"), false),
            (Some("depot"), true),
        ] {
            let mut q = query("vehicles", &[]);
            q.order_by = order.map(str::to_owned);
            q.descending = descending;
            q.limit = all;
            let expected = ids(&ledger.query(&q).unwrap())
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>();
            q.limit = 2;
            let mut seen = Vec::new();
            loop {
                let page = ledger.query(&q).unwrap();
                seen.extend(ids(&page).into_iter().map(str::to_owned));
                match page.next {
                    Some(next) => q.after = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen, expected, "{order:?} {descending}");
        }
    }

    #[test]
    fn a_page_stops_at_its_bytes_and_says_where_to_go_on() {
        let ledger = ledger();
        let mut q = query("leases", &[]);
        q.max_bytes = 10;
        let page = ledger.query(&q).unwrap();
        assert_eq!(ids(&page), ["L-01"]);
        assert_eq!(page.next.as_deref(), Some("0:L-01"));
    }

    #[test]
    fn find_through_a_column_matches_as_a_scan_does() {
        let records: Vec<Record> = [
            json!({"id": "a", "n": 7, "s": "007", "t": "x"}),
            json!({"id": "b", "n": "7", "s": 7, "t": "x"}),
            json!({"id": "c", "n": 7.0, "s": "7", "t": ["x"]}),
            json!({"id": "d", "n": -0.0, "s": "0", "t": null}),
            json!({"id": "e", "n": 0, "s": " 7 ", "t": true}),
            json!({"id": "f", "s": "x"}),
        ]
        .iter()
        .map(|v| Record {
            id: v["id"].as_str().unwrap().to_owned(),
            json: crate::JsonText::from_value(v),
        })
        .collect();
        let ledger = Ledger {
            collections: [("c".to_owned(), Collection::new(records))].into(),
            ..Ledger::default()
        };
        let cases = [
            vec![("n", json!(7))],
            vec![("n", json!("7"))],
            vec![("n", json!(0))],
            vec![("s", json!(7))],
            vec![("s", json!("7"))],
            vec![("s", json!("007"))],
            vec![("t", json!("x"))],
            vec![("t", json!(null))],
            vec![("t", json!(true))],
            vec![("t", json!(["x"]))],
            vec![("n", json!(7)), ("s", json!("7"))],
        ];
        for case in cases {
            let fields: Vec<(String, Value)> = case
                .iter()
                .map(|(f, v)| ((*f).to_owned(), v.clone()))
                .collect();
            let through = ledger.find("c", &fields, 10).unwrap();
            // The same comparison over every record, without a column.
            let scanned: Vec<&str> = ledger.collections["c"]
                .records
                .iter()
                .filter(|r| {
                    let object = r.json.to_value().unwrap();
                    fields.iter().all(|(f, v)| {
                        object
                            .get(f)
                            .is_some_and(|a| super::super::json_equal(a, v))
                    })
                })
                .map(|r| r.id.as_str())
                .collect();
            let found: Vec<&str> = through.records.iter().map(|r| r.id.as_str()).collect();
            assert_eq!(found, scanned, "{case:?}");
        }
        let seven = ledger.find("c", &[("n".to_owned(), json!(7))], 10).unwrap();
        assert_eq!(seven.records.len(), 3);
        let one = ledger.find("c", &[("n".to_owned(), json!(7))], 1).unwrap();
        assert!(one.truncated);
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        let ledger = ledger();
        let err = |q: RecordQuery| ledger.query(&q).unwrap_err().to_string();
        assert_eq!(
            err(query("cars", &[])),
            "the ledger has no collection `cars`"
        );
        assert!(
            err(query("vehicles", &[("id", Comparison::Prefix, json!(1))]))
                .contains("`prefix` on `id` needs a string")
        );
        assert!(
            err(query("vehicles", &[("id", Comparison::Less, json!(null))])).contains("by order")
        );
        assert!(
            err(query("vehicles", &[("id", Comparison::Equal, json!([1]))]))
                .contains("must be a string")
        );
        let mut q = query("vehicles", &[]);
        q.after = Some("1:V-009".to_owned());
        assert!(err(q).contains("is not the `next` of a page of `vehicles`"));
    }
}
