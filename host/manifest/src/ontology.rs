//! The `Ontology` manifest (`platform/v1alpha1`): object types over the
//! ledger's collections, their typed properties, links and knowledge.
//!
//! [`OntologyManifest::from_yaml`] checks what the manifest says on its own
//! (names, types, that links and keys name properties that exist);
//! [`OntologyManifest::ontology`] gives the checked form the ledger keeps,
//! which a release then checks against its ledger's records
//! ([`hane_core::ontology::Ontology::check`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::agent::{check_dns_name, not_blank};
use crate::manifest::Source;
use crate::{ManifestError, Metadata, PLATFORM_API_VERSION};
use hane_core::ledger::is_valid_name;
use hane_core::ontology::{
    KnowledgeSource, Link, LinkTarget, MAX_DESCRIPTION_CHARS, MAX_LINKS, MAX_OBJECT_TYPES,
    MAX_PROPERTIES, ObjectType, Ontology, Property, PropertyType,
};

/// Longest property name, in bytes: a record's top-level field.
const MAX_PROPERTY_NAME_BYTES: usize = 256;

/// An `Ontology` manifest.
///
/// # Examples
///
/// ```
/// use hane_manifest::OntologyManifest;
///
/// let manifest = OntologyManifest::from_yaml("fleet.yaml", r#"
/// apiVersion: platform/v1alpha1
/// kind: Ontology
/// metadata:
///   name: fleet
/// spec:
///   objectTypes:
///     vehicle:
///       description: A vehicle the fleet leases out
///       collection: vehicles
///       properties:
///         id: { type: string, description: "The vehicle's id, such as V-001" }
///         mileage_km: { type: integer }
///       links:
///         leases: { to: lease, via: vehicle }
///     lease:
///       description: A lease of one vehicle
///       collection: leases
///       properties:
///         id: { type: string }
///         vehicle: { type: string }
///         document: { type: string }
///       links:
///         leased_vehicle: { to: vehicle, from: vehicle }
///         contract: { documents: leases, from: document }
/// "#).unwrap();
/// let ontology = manifest.ontology();
/// let leases = &ontology.object_types["vehicle"].links["leases"];
/// assert_eq!(leases.from, "id");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OntologyManifest {
    /// Must be `platform/v1alpha1`.
    pub api_version: String,
    /// Must be `Ontology`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The object types.
    pub spec: OntologySpec,
}

/// `spec` of an `Ontology`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OntologySpec {
    /// The object types, by name (`a-z`, `0-9` and `_`, starting with a
    /// letter).
    pub object_types: BTreeMap<String, ObjectTypeSpec>,
}

/// One object type of an `Ontology`.
///
/// | YAML | meaning | default |
/// |---|---|---|
/// | `description` | what an object of this type is, for people and models | required |
/// | `collection` | the ledger collection whose records are the objects | required |
/// | `key` | the property that names one object, unique in the collection | `id` |
/// | `properties` | name → `{type, description}`; types `string`, `integer`, `number`, `boolean`, `date` | required |
/// | `links` | name → `{to, from, via}` (objects of type `to` whose `via` equals this object's `from`; `from` defaults to the key, `via` to `to`'s key) or `{documents, from}` (the document of that set this object's `from` names) | none |
/// | `knowledge` | `[{documents, from}]`: a document set about the type, or with `from` each object's own document in it | none |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectTypeSpec {
    /// What an object of this type is.
    pub description: String,
    /// The collection.
    pub collection: String,
    /// The key property.
    #[serde(default = "default_key")]
    pub key: String,
    /// The properties, by name.
    pub properties: BTreeMap<String, PropertySpec>,
    /// The links, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, LinkSpec>,
    /// The documents that hold knowledge about the type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowledge: Vec<KnowledgeSpec>,
}

fn default_key() -> String {
    "id".to_owned()
}

/// A property: its type and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropertySpec {
    /// `string`, `integer`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What it holds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A link: to objects of another type (`to`) or to a document (`documents`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkSpec {
    /// The object type it leads to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The document set it leads to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<String>,
    /// This type's property whose value it follows; default the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The property of `to` that holds the value; default `to`'s key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// What the link means.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A document set that holds knowledge about an object type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KnowledgeSpec {
    /// The set.
    pub documents: String,
    /// The property naming each object's own document; none when the whole
    /// set is about the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Whether `name` may name an object type: `a-z`, `0-9` and `_`, starting
/// with a letter, at most 64 bytes.
fn is_type_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let all: Vec<&str> = keys.map(String::as_str).collect();
    if all.is_empty() {
        "none".to_owned()
    } else {
        all.join(", ")
    }
}

impl OntologyManifest {
    /// Parses and validates an `Ontology` manifest; `file` names it in
    /// errors.
    ///
    /// # Errors
    ///
    /// The first problem, naming the field and its line: malformed YAML, an
    /// unknown or missing field, a name that is not a DNS label, no object
    /// types or too many, a type name or collection name outside the
    /// allowed characters, an unknown property type, a key that is not a
    /// property, a link that names both or neither of `to` and `documents`,
    /// a type or property that does not exist, a link named like a
    /// property, an over-long description.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(PLATFORM_API_VERSION, "Ontology")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let types = &manifest.spec.object_types;
        if types.is_empty() {
            return Err(fail(
                "spec.objectTypes",
                "defines no object type; map each type's name to its collection and properties"
                    .to_owned(),
            ));
        }
        if types.len() > MAX_OBJECT_TYPES {
            return Err(fail(
                "spec.objectTypes",
                format!(
                    "{} object types; at most {MAX_OBJECT_TYPES} are allowed",
                    types.len()
                ),
            ));
        }
        for (name, spec) in types {
            let at = format!("spec.objectTypes.{name}");
            if !is_type_name(name) {
                return Err(fail(
                    &at,
                    format!(
                        "`{name}` is not a type name: use 1 to 64 of a-z, 0-9 and `_`, starting with a letter"
                    ),
                ));
            }
            check_type(name, spec, types)
                .map_err(|(field, m)| fail(&format!("{at}.{field}"), m))?;
        }
        Ok(manifest)
    }

    /// The ontology the ledger keeps, with every default filled in.
    pub fn ontology(&self) -> Ontology {
        let types = &self.spec.object_types;
        let object_types = types
            .iter()
            .map(|(name, spec)| {
                let properties = spec
                    .properties
                    .iter()
                    .map(|(p, property)| {
                        let kind =
                            PropertyType::from_name(&property.kind).expect("checked by from_yaml");
                        let description = property.description.clone();
                        (p.clone(), Property { kind, description })
                    })
                    .collect();
                let links = spec
                    .links
                    .iter()
                    .map(|(l, link)| {
                        let from = link.from.clone().unwrap_or_else(|| spec.key.clone());
                        let target = match (&link.to, &link.documents) {
                            (Some(to), _) => {
                                let key = &types[to].key;
                                let via = link.via.clone().unwrap_or_else(|| key.clone());
                                let many = via != *key;
                                LinkTarget::Object {
                                    to: to.clone(),
                                    via,
                                    many,
                                }
                            }
                            (None, Some(set)) => LinkTarget::Document { set: set.clone() },
                            (None, None) => unreachable!("checked by from_yaml"),
                        };
                        let description = link.description.clone();
                        (
                            l.clone(),
                            Link {
                                description,
                                from,
                                target,
                            },
                        )
                    })
                    .collect();
                let knowledge = spec
                    .knowledge
                    .iter()
                    .map(|k| KnowledgeSource {
                        documents: k.documents.clone(),
                        from: k.from.clone(),
                    })
                    .collect();
                let object_type = ObjectType {
                    description: spec.description.clone(),
                    collection: spec.collection.clone(),
                    key: spec.key.clone(),
                    properties,
                    links,
                    knowledge,
                };
                (name.clone(), object_type)
            })
            .collect();
        Ontology {
            name: self.metadata.name.clone(),
            object_types,
        }
    }
}

/// Checks one object type; the error's field is relative to the type.
fn check_type(
    name: &str,
    spec: &ObjectTypeSpec,
    types: &BTreeMap<String, ObjectTypeSpec>,
) -> Result<(), (String, String)> {
    let fail = |field: &str, message: String| Err((field.to_owned(), message));
    not_blank(&spec.description).map_err(|m| ("description".to_owned(), m.to_string()))?;
    check_description(&spec.description).map_err(|m| ("description".to_owned(), m))?;
    if !is_valid_name(&spec.collection) {
        return fail(
            "collection",
            format!(
                "`{}` is not a collection name: use 1 to 64 of a-z, 0-9, `_` and `-`",
                spec.collection
            ),
        );
    }
    if spec.properties.is_empty() {
        return fail(
            "properties",
            "lists no property; list at least the key".to_owned(),
        );
    }
    if spec.properties.len() > MAX_PROPERTIES {
        return fail(
            "properties",
            format!(
                "{} properties; at most {MAX_PROPERTIES} are allowed",
                spec.properties.len()
            ),
        );
    }
    for (property, p) in &spec.properties {
        let at = format!("properties.{property}");
        if property.is_empty() || property.len() > MAX_PROPERTY_NAME_BYTES {
            return fail(
                &at,
                format!("a property name is 1 to {MAX_PROPERTY_NAME_BYTES} bytes"),
            );
        }
        if PropertyType::from_name(&p.kind).is_none() {
            return fail(
                &format!("{at}.type"),
                format!(
                    "unknown type `{}`; use string, integer, number, boolean or date",
                    p.kind
                ),
            );
        }
        check_description(&p.description).map_err(|m| (format!("{at}.description"), m))?;
    }
    let has = |property: &str| spec.properties.contains_key(property);
    if !has(&spec.key) {
        return fail(
            "key",
            format!(
                "`{}` is not a property of `{name}`; it has {}",
                spec.key,
                names(spec.properties.keys())
            ),
        );
    }
    if spec.links.len() > MAX_LINKS {
        return fail(
            "links",
            format!(
                "{} links; at most {MAX_LINKS} are allowed",
                spec.links.len()
            ),
        );
    }
    for (link, l) in &spec.links {
        let at = format!("links.{link}");
        if !is_type_name(link) {
            return fail(
                &at,
                format!(
                    "`{link}` is not a link name: use 1 to 64 of a-z, 0-9 and `_`, starting with a letter"
                ),
            );
        }
        if has(link) {
            return fail(
                &at,
                format!("`{link}` is also a property of `{name}`; a link needs a name of its own"),
            );
        }
        check_description(&l.description).map_err(|m| (format!("{at}.description"), m))?;
        let from = l.from.as_deref().unwrap_or(&spec.key);
        if !has(from) {
            return fail(
                &format!("{at}.from"),
                format!(
                    "`{from}` is not a property of `{name}`; it has {}",
                    names(spec.properties.keys())
                ),
            );
        }
        match (&l.to, &l.documents) {
            (Some(_), Some(_)) | (None, None) => {
                return fail(
                    &at,
                    "name exactly one of `to` (an object type) and `documents` (a document set)"
                        .to_owned(),
                );
            }
            (Some(to), None) => {
                let Some(target) = types.get(to) else {
                    return fail(
                        &format!("{at}.to"),
                        format!(
                            "no object type `{to}`; the ontology has {}",
                            names(types.keys())
                        ),
                    );
                };
                let via = l.via.as_deref().unwrap_or(&target.key);
                if !target.properties.contains_key(via) {
                    return fail(
                        &format!("{at}.via"),
                        format!(
                            "`{via}` is not a property of `{to}`; it has {}",
                            names(target.properties.keys())
                        ),
                    );
                }
            }
            (None, Some(set)) => {
                if !is_valid_name(set) {
                    return fail(
                        &format!("{at}.documents"),
                        format!("`{set}` is not a document set name"),
                    );
                }
                if l.via.is_some() {
                    return fail(
                        &format!("{at}.via"),
                        "a link to a document has no `via`: `from` names the document".to_owned(),
                    );
                }
                if l.from.is_none() {
                    return fail(
                        &at,
                        "a link to a document needs `from`: the property that names the document"
                            .to_owned(),
                    );
                }
            }
        }
    }
    for (i, k) in spec.knowledge.iter().enumerate() {
        let at = format!("knowledge[{i}]");
        if !is_valid_name(&k.documents) {
            return fail(
                &format!("{at}.documents"),
                format!("`{}` is not a document set name", k.documents),
            );
        }
        if let Some(from) = &k.from
            && !has(from)
        {
            return fail(
                &format!("{at}.from"),
                format!(
                    "`{from}` is not a property of `{name}`; it has {}",
                    names(spec.properties.keys())
                ),
            );
        }
    }
    Ok(())
}

fn check_description(description: &str) -> Result<(), String> {
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        Err(format!(
            "{chars} characters; at most {MAX_DESCRIPTION_CHARS} are allowed"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLEET: &str = include_str!("../../../examples/ontology/fleet.yaml");

    fn with(replace: &str, by: &str) -> Result<OntologyManifest, ManifestError> {
        assert!(FLEET.contains(replace), "{replace}");
        OntologyManifest::from_yaml("fleet.yaml", &FLEET.replacen(replace, by, 1))
    }

    #[test]
    fn the_example_compiles_with_its_defaults() {
        let manifest = OntologyManifest::from_yaml("fleet.yaml", FLEET).unwrap();
        let ontology = manifest.ontology();
        assert_eq!(ontology.name, "fleet");
        let vehicle = &ontology.object_types["vehicle"];
        assert_eq!(vehicle.key, "id");
        assert_eq!(vehicle.properties["mileage_km"].kind, PropertyType::Integer);
        assert_eq!(
            vehicle.links["leases"].target,
            LinkTarget::Object {
                to: "lease".into(),
                via: "vehicle".into(),
                many: true
            }
        );
        assert_eq!(vehicle.links["leases"].from, "id");
        let lease = &ontology.object_types["lease"];
        assert_eq!(
            lease.links["leased_vehicle"].target,
            LinkTarget::Object {
                to: "vehicle".into(),
                via: "id".into(),
                many: false
            }
        );
        assert_eq!(
            lease.links["contract"].target,
            LinkTarget::Document {
                set: "leases".into()
            }
        );
    }

    #[test]
    fn problems_name_the_field_and_line() {
        let err = with("mileage_km: { type: integer", "mileage_km: { type: int").unwrap_err();
        assert_eq!(
            err.field,
            "spec.objectTypes.vehicle.properties.mileage_km.type"
        );
        assert!(err.message.starts_with("unknown type `int`"), "{err}");
        assert!(err.line.is_some(), "{err}");

        let err = with("to: lease,", "to: leasing,").unwrap_err();
        assert_eq!(err.field, "spec.objectTypes.vehicle.links.leases.to");
        assert!(
            err.message
                .contains("no object type `leasing`; the ontology has driver, lease, vehicle"),
            "{err}"
        );

        let err = with("via: vehicle,", "via: car,").unwrap_err();
        assert!(
            err.message
                .starts_with("`car` is not a property of `lease`"),
            "{err}"
        );

        let err = with(
            "contract: { documents: leases",
            "contract: { to: vehicle, documents: leases",
        )
        .unwrap_err();
        assert!(err.message.contains("exactly one of `to`"), "{err}");

        let err = with("      key: contract_no", "      key: number").unwrap_err();
        assert_eq!(err.field, "spec.objectTypes.lease.key");

        let err = with("  objectTypes:\n", "  objectTypes:\n    Bad-Name: {description: x, collection: x, properties: {id: {type: string}}}\n").unwrap_err();
        assert!(err.message.contains("is not a type name"), "{err}");
    }
}
