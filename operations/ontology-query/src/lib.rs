//! `ontology.query`: reads objects of the release's ontology by type,
//! filtered and ordered by their typed properties, and follows their links
//! to other objects and to documents in the same call.
//!
//! The ontology (from [`hane_guest::records::ontology`]) maps each object
//! type to a ledger collection. Everything the input names is checked
//! against it before anything is read, and a name that does not exist is
//! answered with [`Error::InvalidInput`] naming the ones that do. Filter
//! values are converted to their property's type, and the objects read are
//! typed the same way: `"48210"` in a CSV cell is `48210` in the answer.
//!
//! The operation reads through the host's `records` and `documents`
//! capabilities, so it sees only the collections and document sets its
//! policy grants. A followed link to objects costs one query per object it
//! is followed from; an answer holds at most [`MAX_OBJECTS`] objects and
//! says `truncated` when that cap cut something.
//!
//! The logic is [`query_objects`], which reads through a [`Ledger`] so it is
//! testable off wasm; the exported operation passes [`HostLedger`].
//!
//! # Examples
//!
//! ```
//! use hane_guest::Error;
//! use hane_guest::documents::Summary;
//! use hane_guest::records::{Comparison, Page, Query};
//! use ontology_query::{query_objects, Ledger, QueryInput};
//! use serde_json::{json, Value};
//!
//! struct OneVehicle;
//!
//! impl Ledger for OneVehicle {
//!     fn ontology(&self) -> Result<Option<Value>, Error> {
//!         Ok(Some(json!({"name": "fleet", "objectTypes": {"vehicle": {
//!             "description": "A leased vehicle", "collection": "vehicles", "key": "id",
//!             "properties": {
//!                 "id": {"type": "string", "description": "Fleet number"},
//!                 "mileage_km": {"type": "integer", "description": "Odometer reading"}
//!             },
//!             "links": {}, "knowledge": []
//!         }}})))
//!     }
//!     fn query(&self, query: &Query) -> Result<Page, Error> {
//!         assert_eq!(query.collection, "vehicles");
//!         assert_eq!(query.conditions[0].comparison, Comparison::GreaterOrEqual);
//!         assert_eq!(query.conditions[0].value, json!(40000));
//!         Ok(Page { records: vec![json!({"id": "V-001", "mileage_km": "48210"})], next: None })
//!     }
//!     fn read_summary(&self, _: &str, _: &str) -> Result<Summary, Error> {
//!         unreachable!("no document links")
//!     }
//! }
//!
//! let input: QueryInput = serde_json::from_value(json!({
//!     "type": "vehicle",
//!     "where": {"mileage_km": {"gte": "40000"}},
//! }))?;
//! let output = query_objects(input, &OneVehicle)?;
//! assert_eq!(output.objects[0]["mileage_km"], 48210);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use hane_guest::Error;
use hane_guest::documents::Summary;
use hane_guest::records::{Comparison, Condition, Page, Query};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub mod ontology;

use ontology::{Link, LinkTarget, Ontology, PropertyType, Type, name_text};

/// Objects returned, and objects per parent for a followed link, when the
/// input gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 10;
/// Largest `limit` accepted, at the top and for a followed link.
pub const MAX_LIMIT: u32 = 50;
/// Most links one chain of `follow` goes through.
pub const MAX_DEPTH: usize = 3;
/// Most objects in one answer, counting followed ones; past it the answer
/// says `truncated`.
pub const MAX_OBJECTS: usize = 500;
/// The key of an answer's object that lists its followed links whose
/// objects are not all there.
pub const TRUNCATED_KEY: &str = "_truncated";

/// Read objects of one type of the ontology (such as vehicles or leases),
/// filtered and ordered by their properties, with their links followed to
/// related objects and documents.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueryInput {
    /// The object type, such as "vehicle" or "lease". An unknown type is
    /// answered with the types that exist.
    #[serde(rename = "type")]
    pub object_type: String,
    /// Conditions on the type's properties, all of which must hold. A
    /// property's value is either a value it must equal, such as
    /// {"depot": "Shinagawa"}, or an object of comparisons, such as
    /// {"mileage_km": {"gte": 10000, "lt": 100000}}: eq, gt, gte, lt, lte,
    /// and prefix (text the value starts with; string and date properties
    /// only). Values are converted to the property's type: integers and
    /// numbers may be given as text, dates are "YYYY-MM-DD". Default: every
    /// object.
    #[serde(default, rename = "where")]
    #[schemars(schema_with = "where_schema")]
    pub filter: Map<String, Value>,
    /// The properties to return, such as ["id", "registration"]. Default:
    /// every property of the type.
    #[serde(default)]
    pub fields: Option<Vec<String>>,
    /// The property to order by: numbers by value, text (and dates) by
    /// characters, objects without a value last (first with `descending`).
    /// Default: the ledger's order.
    #[serde(default)]
    pub order_by: Option<String>,
    /// Largest first, with `orderBy`.
    #[serde(default)]
    pub descending: bool,
    /// Most objects to return, 1 to 50; default 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// The `next` of a previous answer: continue after its last object.
    /// Only with the same type, where, orderBy and descending.
    #[serde(default)]
    pub after: Option<String>,
    /// Links to follow from each object, such as [{"link": "leases"}]; each
    /// adds a key of that name to the objects. Up to 3 links deep.
    #[serde(default)]
    pub follow: Vec<Follow>,
}

/// A link to follow from each object, with what to read at its end.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Follow {
    /// The link's name, such as "leases" or "contract". An unknown link is
    /// answered with the links the type has.
    pub link: String,
    /// Conditions on the linked objects' properties, as the top-level
    /// `where`. Not for a link to a document.
    #[serde(default, rename = "where")]
    #[schemars(schema_with = "where_schema")]
    pub filter: Map<String, Value>,
    /// The linked objects' properties to return; default all. Not for a
    /// link to a document.
    #[serde(default)]
    pub fields: Option<Vec<String>>,
    /// The property to order the linked objects by. Only for a link to
    /// many objects.
    #[serde(default)]
    pub order_by: Option<String>,
    /// Largest first, with `orderBy`. Only for a link to many objects.
    #[serde(default)]
    pub descending: bool,
    /// Most linked objects per object, 1 to 50; default 10. Only for a link
    /// to many objects.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// Links to follow from the linked objects. Not for a link to a
    /// document.
    #[serde(default)]
    pub follow: Vec<Follow>,
}

/// The objects found, with their links followed.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct QueryOutput {
    /// The object type, as the ontology names it.
    #[serde(rename = "type")]
    pub object_type: String,
    /// The matching objects, in `orderBy` order, else the ledger's. Each
    /// holds its selected properties, typed as the ontology says (null when
    /// it has no value), and one key per followed link: a list of objects
    /// for a link to many, an object or null for a link to one, and
    /// {"document", "title", "summary", "pages"} or null (when the object
    /// names no document) for a link to a document. When present,
    /// "_truncated" lists the object's followed links whose objects are not
    /// all there: more matched than the link's `limit` (raise it or filter
    /// with `where`), or the answer's cap of 500 objects was reached (then
    /// `truncated` is true, and a link the cap kept from being followed has
    /// no key).
    pub objects: Vec<Map<String, Value>>,
    /// When more objects matched than `limit`: pass it as `after`, with the
    /// same type, where, orderBy and descending, to read the next ones.
    /// Null when there are no more.
    pub next: Option<String>,
    /// Whether the cap of 500 objects per answer left out followed objects;
    /// follow fewer links, or lower their limits.
    pub truncated: bool,
}

/// What [`query_objects`] reads through: the host's `records` and
/// `documents` capabilities ([`HostLedger`]), or a stand-in.
pub trait Ledger {
    /// The release's ontology as JSON, as
    /// [`hane_guest::records::ontology`] returns it.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::records::ontology`].
    fn ontology(&self) -> Result<Option<Value>, Error>;

    /// One page of records, as [`hane_guest::records::query`] returns it.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::records::query`]: [`Error::Denied`] for a collection
    /// that is not granted, [`Error::NotFound`] for a missing one.
    fn query(&self, query: &Query) -> Result<Page, Error>;

    /// A document's title, summary and page count, as
    /// [`hane_guest::documents::read_summary`] returns them.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::documents::read_summary`].
    fn read_summary(&self, set: &str, document: &str) -> Result<Summary, Error>;
}

/// The host's ledger, through `hane:operation/records` and `documents`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostLedger;

impl Ledger for HostLedger {
    fn ontology(&self) -> Result<Option<Value>, Error> {
        hane_guest::records::ontology()
    }

    fn query(&self, query: &Query) -> Result<Page, Error> {
        hane_guest::records::query(query)
    }

    fn read_summary(&self, set: &str, document: &str) -> Result<Summary, Error> {
        hane_guest::documents::read_summary(set, document)
    }
}

fn run(input: QueryInput) -> Result<QueryOutput, Error> {
    query_objects(input, &HostLedger)
}

hane_guest::operation! {
    name: "ontology.query",
    impact: Read,
    run: run,
}

/// Checks `input` against the ontology, then reads the objects and follows
/// their links through `ledger`.
///
/// # Errors
///
/// - [`Error::NotFound`] when the release defines no ontology;
/// - [`Error::InvalidInput`] naming what is wrong (and what exists) for an
///   unknown type, property or link, a value not of its property's type, a
///   comparison the property does not allow, a `limit` outside 1 to
///   [`MAX_LIMIT`], or `follow` deeper than [`MAX_DEPTH`];
/// - whatever `ledger` returns: [`Error::Denied`] for a collection or
///   document set that is not granted, [`Error::InvalidInput`] for an
///   `after` that is not a `next` of this query;
/// - [`Error::Failed`] when a record is not a JSON object.
pub fn query_objects<L: Ledger + ?Sized>(
    input: QueryInput,
    ledger: &L,
) -> Result<QueryOutput, Error> {
    let ontology = Ontology::from_host(ledger.ontology()?)?;
    let object_type = ontology.object_type(&input.object_type)?;
    let shape = Shape {
        filter: &input.filter,
        fields: input.fields.as_deref(),
        order_by: input.order_by.as_deref(),
        descending: input.descending,
        limit: input.limit,
        follow: &input.follow,
    };
    let plan = plan(&ontology, object_type, &shape, None, &mut Vec::new())?;
    let page = ledger.query(&Query {
        collection: object_type.def.collection.clone(),
        conditions: plan.conditions.clone(),
        order_by: plan.order_by.clone(),
        descending: plan.descending,
        after: input.after,
        limit: plan.limit,
    })?;
    let mut walk = Walk {
        ledger,
        objects: 0,
        truncated: false,
    };
    let mut records = page.records;
    records.truncate(plan.limit as usize);
    let objects = walk.objects(&plan, records)?;
    Ok(QueryOutput {
        object_type: object_type.name.to_owned(),
        objects,
        next: page.next,
        truncated: walk.truncated,
    })
}

/// The schema of a `where`: each property's value is a scalar to equal or
/// an object of comparisons.
fn where_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let scalar = json!({"type": ["string", "number", "boolean"]});
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [
                {
                    "type": ["string", "number", "boolean"],
                    "description": "The value the property must equal."
                },
                {
                    "type": "object",
                    "description": "Comparisons the property's value must all meet.",
                    "properties": {
                        "eq": scalar,
                        "gt": scalar,
                        "gte": scalar,
                        "lt": scalar,
                        "lte": scalar,
                        "prefix": {
                            "type": "string",
                            "description": "Text the value starts with, such as \"2027-03\" for a date in March 2027."
                        }
                    },
                    "minProperties": 1
                }
            ]
        }
    })
}

/// What [`QueryInput`] and [`Follow`] share: what to read of one type.
struct Shape<'i> {
    filter: &'i Map<String, Value>,
    fields: Option<&'i [String]>,
    order_by: Option<&'i str>,
    descending: bool,
    limit: Option<u32>,
    follow: &'i [Follow],
}

impl<'i> Shape<'i> {
    fn of(follow: &'i Follow) -> Self {
        Self {
            filter: &follow.filter,
            fields: follow.fields.as_deref(),
            order_by: follow.order_by.as_deref(),
            descending: follow.descending,
            limit: follow.limit,
            follow: &follow.follow,
        }
    }
}

/// A checked [`Shape`]: the queries to make and what to keep.
struct Plan<'o> {
    object_type: Type<'o>,
    conditions: Vec<Condition>,
    fields: Vec<&'o str>,
    order_by: Option<String>,
    descending: bool,
    limit: u32,
    steps: Vec<Step<'o>>,
}

/// A checked [`Follow`].
struct Step<'o> {
    name: &'o str,
    link: &'o Link,
    to: To<'o>,
}

/// Where a [`Step`] leads.
enum To<'o> {
    Objects {
        via: &'o str,
        many: bool,
        plan: Plan<'o>,
    },
    Document {
        set: &'o str,
    },
}

/// Checks `shape` against `object_type`; `link` is the link that leads
/// there (none at the top), `path` the links followed so far.
fn plan<'o>(
    ontology: &'o Ontology,
    object_type: Type<'o>,
    shape: &Shape<'_>,
    link: Option<&str>,
    path: &mut Vec<&'o str>,
) -> Result<Plan<'o>, Error> {
    let conditions = conditions(object_type, shape.filter)?;
    let fields = match shape.fields {
        None => object_type
            .def
            .properties
            .keys()
            .map(String::as_str)
            .collect(),
        Some(names) => {
            let mut fields = Vec::with_capacity(names.len());
            for name in names {
                let (name, _) = object_type.property(name)?;
                if !fields.contains(&name) {
                    fields.push(name);
                }
            }
            fields
        }
    };
    let order_by = shape
        .order_by
        .map(|name| object_type.property(name).map(|(name, _)| name.to_owned()))
        .transpose()?;
    if shape.descending && order_by.is_none() {
        return Err(Error::InvalidInput(
            "`descending` needs `orderBy`, the property to order by".to_owned(),
        ));
    }
    let limit = shape.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::InvalidInput(match link {
            None => format!("limit must be from 1 to {MAX_LIMIT}, not {limit}"),
            Some(link) => {
                format!("the limit of link `{link}` must be from 1 to {MAX_LIMIT}, not {limit}")
            }
        }));
    }
    let mut steps: Vec<Step<'o>> = Vec::with_capacity(shape.follow.len());
    for follow in shape.follow {
        let (name, link) = object_type.link(&follow.link)?;
        if steps.iter().any(|step| step.name == name) {
            return Err(Error::InvalidInput(format!(
                "`{}` follows `{name}` twice; follow each link once",
                object_type.name
            )));
        }
        if path.len() == MAX_DEPTH {
            return Err(Error::InvalidInput(format!(
                "follow goes at most {MAX_DEPTH} links deep; {} → {name} is {}",
                path.join(" → "),
                MAX_DEPTH + 1
            )));
        }
        path.push(name);
        let to = step_target(ontology, object_type, name, link, follow, path)?;
        path.pop();
        steps.push(Step { name, link, to });
    }
    Ok(Plan {
        object_type,
        conditions,
        fields,
        order_by,
        descending: shape.descending,
        limit,
        steps,
    })
}

/// Checks `follow`, which follows `link` (named `name`) from `from`.
fn step_target<'o>(
    ontology: &'o Ontology,
    from: Type<'o>,
    name: &'o str,
    link: &'o Link,
    follow: &Follow,
    path: &mut Vec<&'o str>,
) -> Result<To<'o>, Error> {
    // What applies only to objects, and only to many of them.
    let for_objects = [
        ("where", !follow.filter.is_empty()),
        ("fields", follow.fields.is_some()),
        ("follow", !follow.follow.is_empty()),
    ];
    let for_many = [
        ("orderBy", follow.order_by.is_some()),
        ("descending", follow.descending),
        ("limit", follow.limit.is_some()),
    ];
    let first_given = |options: &[(&'static str, bool)]| {
        options
            .iter()
            .find_map(|&(option, given)| given.then_some(option))
    };
    match &link.target {
        LinkTarget::Document { set } => {
            if let Some(option) = first_given(&for_objects).or(first_given(&for_many)) {
                return Err(Error::InvalidInput(format!(
                    "`{name}` leads to a document of set `{set}`, which has no objects to \
                     filter, order or follow: give it no `{option}`"
                )));
            }
            Ok(To::Document { set })
        }
        LinkTarget::Object { to, via, many } => {
            let target = ontology.object_type(to).map_err(|_| {
                Error::Failed(format!(
                    "link `{name}` of `{}` leads to object type `{to}`, which the ontology does \
                     not have",
                    from.name
                ))
            })?;
            if !many && let Some(option) = first_given(&for_many) {
                return Err(Error::InvalidInput(format!(
                    "`{name}` links a `{}` to one `{to}`; `{option}` applies only to links to \
                     many objects",
                    from.name
                )));
            }
            let plan = plan(ontology, target, &Shape::of(follow), Some(name), path)?;
            Ok(To::Objects {
                via,
                many: *many,
                plan,
            })
        }
    }
}

/// The conditions of a `where` on `object_type`, each value converted to
/// its property's type.
fn conditions(object_type: Type<'_>, filter: &Map<String, Value>) -> Result<Vec<Condition>, Error> {
    let mut conditions = Vec::with_capacity(filter.len());
    for (name, test) in filter {
        let (field, property) = object_type.property(name)?;
        let Value::Object(comparisons) = test else {
            conditions.push(condition(field, property.kind, Comparison::Equal, test)?);
            continue;
        };
        if comparisons.is_empty() {
            return Err(Error::InvalidInput(format!(
                "`{field}` has no comparison: give the value it must equal, or comparisons such \
                 as {{\"gte\": 10}} (eq, gt, gte, lt, lte, prefix)"
            )));
        }
        for (operator, value) in comparisons {
            let comparison = match operator.as_str() {
                "eq" => Comparison::Equal,
                "gt" => Comparison::Greater,
                "gte" => Comparison::GreaterOrEqual,
                "lt" => Comparison::Less,
                "lte" => Comparison::LessOrEqual,
                "prefix" => Comparison::Prefix,
                other => {
                    return Err(Error::InvalidInput(format!(
                        "`{field}` has an unknown comparison `{other}`; use eq, gt, gte, lt, lte \
                         or prefix"
                    )));
                }
            };
            conditions.push(condition(field, property.kind, comparison, value)?);
        }
    }
    Ok(conditions)
}

/// One condition on `field`, of type `kind`, with `value` converted.
fn condition(
    field: &str,
    kind: PropertyType,
    comparison: Comparison,
    value: &Value,
) -> Result<Condition, Error> {
    let value = match comparison {
        Comparison::Prefix => {
            if !matches!(kind, PropertyType::String | PropertyType::Date) {
                return Err(Error::InvalidInput(format!(
                    "`prefix` needs a string or date property; `{field}` is {kind:#}"
                )));
            }
            match value {
                Value::String(_) => value.clone(),
                Value::Number(n) if kind == PropertyType::String => Value::String(n.to_string()),
                other => {
                    return Err(Error::InvalidInput(format!(
                        "`prefix` of `{field}` needs text, not {other}"
                    )));
                }
            }
        }
        Comparison::Equal => kind.input(field, value)?,
        _ => {
            if kind == PropertyType::Boolean {
                return Err(Error::InvalidInput(format!(
                    "`{field}` is a boolean; compare it only for equality, with a value or `eq`"
                )));
            }
            kind.input(field, value)?
        }
    };
    Ok(Condition {
        field: field.to_owned(),
        comparison,
        value,
    })
}

/// Reads objects and follows their links, counting objects against
/// [`MAX_OBJECTS`].
struct Walk<'l, L: ?Sized> {
    ledger: &'l L,
    objects: usize,
    truncated: bool,
}

impl<L: Ledger + ?Sized> Walk<'_, L> {
    /// `records` (all counted first, so siblings come before their links)
    /// as the answer's objects of `plan`.
    fn objects(
        &mut self,
        plan: &Plan<'_>,
        records: Vec<Value>,
    ) -> Result<Vec<Map<String, Value>>, Error> {
        self.objects += records.len();
        records
            .into_iter()
            .map(|record| self.object(plan, record))
            .collect()
    }

    /// One record as an object of `plan`, with its links followed.
    fn object(&mut self, plan: &Plan<'_>, record: Value) -> Result<Map<String, Value>, Error> {
        let Value::Object(record) = record else {
            return Err(Error::Failed(format!(
                "a record of `{}` is not a JSON object: {record}",
                plan.object_type.def.collection
            )));
        };
        let mut object = plan.object_type.typed(&record, plan.fields.iter().copied());
        let mut cut: Vec<&str> = Vec::new();
        for step in &plan.steps {
            let from = record.get(&step.link.from);
            let value = match &step.to {
                To::Document { set } => match name_text(from) {
                    None => Value::Null,
                    Some(document) => {
                        let summary = self.ledger.read_summary(set, &document)?;
                        json!({
                            "document": summary.document,
                            "title": summary.title,
                            "summary": summary.summary,
                            "pages": summary.pages,
                        })
                    }
                },
                To::Objects { via, many, plan } => match self.follow(via, *many, plan, from)? {
                    Some((value, complete)) => {
                        if !complete {
                            cut.push(step.name);
                        }
                        value
                    }
                    None => {
                        cut.push(step.name);
                        continue;
                    }
                },
            };
            object.insert(step.name.to_owned(), value);
        }
        if !cut.is_empty() {
            object.insert(TRUNCATED_KEY.to_owned(), json!(cut));
        }
        Ok(object)
    }

    /// The objects of `plan` whose `via` equals `from`: a list (and
    /// whether it is complete) for a link to `many`, else an object or
    /// null; `None` when the cap is reached.
    fn follow(
        &mut self,
        via: &str,
        many: bool,
        plan: &Plan<'_>,
        from: Option<&Value>,
    ) -> Result<Option<(Value, bool)>, Error> {
        let Some(from) = from.filter(|value| name_text(Some(value)).is_some()) else {
            let none = if many { json!([]) } else { Value::Null };
            return Ok(Some((none, true)));
        };
        let wanted = if many { plan.limit as usize } else { 1 };
        let limit = wanted.min(MAX_OBJECTS - self.objects);
        if limit == 0 {
            self.truncated = true;
            return Ok(None);
        }
        let mut conditions = Vec::with_capacity(plan.conditions.len() + 1);
        conditions.push(Condition {
            field: via.to_owned(),
            comparison: Comparison::Equal,
            value: from.clone(),
        });
        conditions.extend(plan.conditions.iter().cloned());
        let page = self.ledger.query(&Query {
            collection: plan.object_type.def.collection.clone(),
            conditions,
            order_by: plan.order_by.clone(),
            descending: plan.descending,
            after: None,
            limit: limit as u32,
        })?;
        let mut records = page.records;
        records.truncate(limit);
        let more = page.next.is_some();
        let objects = self.objects(plan, records)?;
        if !many {
            let one = objects
                .into_iter()
                .next()
                .map_or(Value::Null, Value::Object);
            return Ok(Some((one, true)));
        }
        if more && limit < wanted {
            self.truncated = true;
        }
        Ok(Some((
            Value::Array(objects.into_iter().map(Value::Object).collect()),
            !more,
        )))
    }
}

#[cfg(test)]
mod tests;
