//! The `Operation` manifest: a component with its policy and limits; and
//! the parsing every manifest kind shares, whose errors name the file, the
//! line and the field.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess,
    Visitor,
};
use serde::{Deserialize, Serialize};

use hane_core::file::{FileCap, read_capped_text};
use hane_core::ledger::LedgerError;
use hane_core::{Impact, LimitsSpec, Policy, policy::PolicyError};

/// The `apiVersion` of operation manifests.
pub const OPERATION_API_VERSION: &str = "operations/v1alpha1";

/// A manifest that could not be read or is not valid. Displays as
/// `FILE:LINE: FIELD: what was expected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// The file (or other source name) the manifest came from.
    pub file: String,
    /// The 1-based line of the problem, when known.
    pub line: Option<usize>,
    /// The dotted path of the field, such as `spec.limits.memory`; empty
    /// for the document itself.
    pub field: String,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ManifestError {}

/// A ledger folder a release names that could not be loaded, as the
/// release reports it.
impl From<LedgerError> for ManifestError {
    fn from(e: LedgerError) -> Self {
        ManifestError {
            file: e.path.display().to_string(),
            line: e.line,
            field: String::new(),
            message: e.problem.to_string(),
        }
    }
}

/// What is wrong with one field's value, as a [`ManifestError`] says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldProblem {
    /// Empty or only spaces.
    #[error("must not be empty")]
    Blank,
    /// Not a DNS label.
    #[error(
        "expected 1 to 63 lowercase letters, digits and `-`, starting with a letter, found `{0}`"
    )]
    DnsName(String),
    /// Not a tool's name.
    #[error("expected a tool name of lowercase letters, digits, `_` and `.`, found `{0}`")]
    ToolName(String),
    /// Not an image digest.
    #[error(
        "`{0}` is not an image digest: expected `sha256:` and 64 lowercase hex digits, as `hane image build PROFILE` prints"
    )]
    ImageDigest(String),
    /// A URL of another scheme than HTTP's.
    #[error("expected a URL starting with `http://` or `https://`, found `{0}`")]
    UrlScheme(String),
    /// A URL without a host, or with credentials.
    #[error("expected a URL with a host and no credentials in it, found `{0}`")]
    UrlHost(String),
    /// A URL with a query, a fragment or spaces.
    #[error("expected a URL without query, fragment or spaces, found `{0}`")]
    UrlExtras(String),
    /// Not a credential's name.
    #[error(
        "expected a credential name of letters, digits, `-`, `_` and `.` (at most 64), found `{0}`"
    )]
    CredentialName(String),
    /// `steps` with no step id after it.
    #[error("a step id must follow `steps`")]
    NoStepId,
    /// A step id that does not start with a letter.
    #[error("step id `{0}` must start with a letter")]
    StepIdStart(String),
    /// A step id with other characters than a step id's.
    #[error("step id `{0}` may hold only letters, digits, `_` and `-`")]
    StepIdChars(String),
}

/// `metadata` of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The definition's name, such as `documents.search`.
    pub name: String,
}

/// `spec` of an `Operation` manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperationSpec {
    /// A path to a `.wasm` component (relative to the manifest's folder), or
    /// `builtin:NAME` for an operation built into hane.
    pub component: String,
    /// What the operation may do outside its sandbox, as its component
    /// describes itself: `read`, `write` or `outbound`. Optional, but an
    /// operation granted `capabilities.actions` must say `outbound`, so
    /// that whoever reads the manifest sees it reaches people; the sandbox
    /// also refuses that grant to a component that does not describe
    /// itself as `outbound`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<Impact>,
    /// What the operation may touch; nothing when absent.
    #[serde(default)]
    pub capabilities: Policy,
    /// Overrides of the default limits.
    #[serde(default)]
    pub limits: LimitsSpec,
}

/// An `Operation` manifest (`operations/v1alpha1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperationManifest {
    /// Must be `operations/v1alpha1`.
    pub api_version: String,
    /// Must be `Operation`.
    pub kind: String,
    /// The name.
    pub metadata: Metadata,
    /// The component, capabilities and limits.
    pub spec: OperationSpec,
}

impl OperationManifest {
    /// Parses and validates a manifest; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// Malformed YAML, unknown fields, missing fields, bad values (sizes,
    /// durations, grants) and a wrong `apiVersion` or `kind`, each naming
    /// the field and, where known, the line; an `actions` grant naming a
    /// tool that is not outbound, or on an operation whose `impact` is not
    /// `outbound`.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: OperationManifest =
            source.parse_manifest(OPERATION_API_VERSION, "Operation")?;
        if manifest.metadata.name.trim().is_empty() {
            return Err(source.error("metadata.name", "must not be empty"));
        }
        if manifest.spec.component.trim().is_empty() {
            return Err(source.error("spec.component", "must not be empty"));
        }
        let spec = &manifest.spec;
        spec.capabilities.validate().map_err(|e| {
            let field = match &e {
                PolicyError::ActionTool { index, .. } => {
                    format!("spec.capabilities.actions[{index}]")
                }
                _ => "spec.capabilities".to_owned(),
            };
            source.error(&field, e)
        })?;
        if !spec.capabilities.actions.is_empty() && spec.impact != Some(Impact::Outbound) {
            let found = match spec.impact {
                Some(impact) => format!("the operation's impact is `{impact}`"),
                None => "the operation does not say its impact; add `impact: outbound` to spec"
                    .to_owned(),
            };
            return Err(source.error(
                "spec.capabilities.actions",
                format!(
                    "only an operation whose impact is `outbound` may propose actions, and {found}"
                ),
            ));
        }
        Ok(manifest)
    }

    /// Reads a manifest file; relative paths in it (the component and the
    /// granted directories) become relative to the file's folder.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or [`OperationManifest::from_yaml`] fails.
    pub fn from_file(path: &Path) -> Result<Self, ManifestError> {
        let file = path.display().to_string();
        let text = read_capped_text(path, FileCap::MANIFEST).map_err(|e| ManifestError {
            file: file.clone(),
            line: None,
            field: String::new(),
            message: e.problem.to_string(),
        })?;
        let mut manifest = Self::from_yaml(&file, &text)?;
        manifest.resolve_relative_to(path.parent().unwrap_or(Path::new(".")));
        Ok(manifest)
    }

    /// Makes the relative paths in the manifest (the component and the
    /// granted directories) relative to `base`, the manifest's folder.
    /// [`OperationManifest::from_file`] does this itself; a manifest read
    /// another way, such as from a bundle, keeps the paths as written.
    pub fn resolve_relative_to(&mut self, base: &Path) {
        self.spec.capabilities.resolve_relative_to(base);
        if !self.spec.component.starts_with("builtin:")
            && Path::new(&self.spec.component).is_relative()
        {
            self.spec.component = base
                .join(&self.spec.component)
                .to_string_lossy()
                .into_owned();
        }
    }

    /// The component as a path, or `None` for a `builtin:` one.
    pub fn component_path(&self) -> Option<PathBuf> {
        (!self.spec.component.starts_with("builtin:")).then(|| PathBuf::from(&self.spec.component))
    }
}

/// The two fields every manifest starts with, read before the rest so a
/// document of another kind is refused for its kind, not for its fields.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a manifest: a map with `apiVersion`, `kind`, `metadata` and `spec`"
)]
pub(crate) struct Header {
    pub(crate) api_version: String,
    pub(crate) kind: String,
}

/// One YAML document read as a manifest: the name of its source and its
/// text. Every manifest kind parses through it, so every error names the
/// file, the line, the dotted field path and what was expected.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    file: &'a str,
    text: &'a str,
}

impl<'a> Source<'a> {
    /// `text` is one YAML document; `file` names it in errors.
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Self { file, text }
    }

    /// Parses the document as `T`, refusing unknown fields where `T` does.
    pub(crate) fn parse<T: DeserializeOwned>(&self) -> Result<T, ManifestError> {
        let de = serde_yaml_ng::Deserializer::from_str(self.text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            let inner = e.into_inner();
            let mut line = inner.location().map(|l| l.line());
            // serde_yaml_ng appends " at line L column C"; the line is
            // reported separately.
            let message = inner.to_string();
            let message = match message.find(" at line ") {
                Some(i) => message[..i].to_owned(),
                None => message,
            };
            // It may also start with the field's parent path, which the
            // error reports on its own.
            let message = match message.split_once(": ") {
                Some((prefix, rest)) if path.starts_with(prefix) => rest.to_owned(),
                _ => message,
            };
            // A missing field is reported at the line of the map that
            // lacks it, under the field's own path.
            let mut field = path;
            if let Some(missing) = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.strip_suffix('`'))
            {
                if !field.is_empty() {
                    line = line_of(self.text, &field).or(line);
                    field.push('.');
                }
                field.push_str(missing);
            } else {
                // A type that checks a node after reading it (a decider's
                // "exactly one of") fails at the line of an enclosing node;
                // the field is never written before its own line.
                line = line.max(line_of(self.text, &field));
            }
            ManifestError {
                file: self.file.to_owned(),
                line,
                field,
                message,
            }
        })
    }

    /// Parses a manifest of one kind: the `apiVersion` and `kind` are
    /// checked first, then the whole document is parsed as `T`.
    pub(crate) fn parse_manifest<T: DeserializeOwned>(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<T, ManifestError> {
        let header: Header = self.parse()?;
        if header.api_version != api_version {
            return Err(self.error(
                "apiVersion",
                format!("expected `{api_version}`, found `{}`", header.api_version),
            ));
        }
        if header.kind != kind {
            return Err(self.error(
                "kind",
                format!("expected `{kind}`, found `{}`", header.kind),
            ));
        }
        self.parse()
    }

    /// An error about the field at `field` (a dotted path such as
    /// `spec.script[2].when`), found after parsing. The line is the one
    /// where the field is written or, when it is absent, where its nearest
    /// written parent is.
    pub(crate) fn error(&self, field: &str, message: impl fmt::Display) -> ManifestError {
        ManifestError {
            file: self.file.to_owned(),
            line: line_of(self.text, field),
            field: field.to_owned(),
            message: message.to_string(),
        }
    }
}

impl ManifestError {
    /// An error in `field` of `file`, with no line.
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ManifestError {
            file: file.into(),
            line: None,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error for a document that starts `lines` lines into its file.
    pub(crate) fn shifted(mut self, lines: usize) -> Self {
        self.line = self.line.map(|l| l + lines);
        self
    }
}

/// One step of a field path: a map key or a sequence index.
#[derive(Debug, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Splits a field path as serde_path_to_error writes it (`a.b[2].c`);
/// stops at the first segment it cannot read.
fn segments(field: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let (key, mut indexes) = part.split_at(part.find('[').unwrap_or(part.len()));
        match key {
            "?" => return out,
            "" if indexes.is_empty() => return out,
            "" => {}
            _ => out.push(Segment::Key(key.to_owned())),
        }
        while let Some(rest) = indexes.strip_prefix('[') {
            let Some((index, rest)) = rest.split_once(']') else {
                return out;
            };
            let Ok(index) = index.parse() else {
                return out;
            };
            out.push(Segment::Index(index));
            indexes = rest;
        }
        if !indexes.is_empty() {
            return out;
        }
    }
    out
}

/// The 1-based line where `field` is written in the YAML `text`, or where
/// its nearest written parent is.
///
/// The YAML parser knows where every node is but serde_yaml_ng does not
/// expose it, except in errors: so the text is read again by a visitor that
/// follows the path and fails on the field's key (or sequence item), and
/// the line comes from that error.
fn line_of(text: &str, field: &str) -> Option<usize> {
    let mut path = segments(field);
    while !path.is_empty() {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        match (Probe { rest: &path }).deserialize(de) {
            // The message may be prefixed with the path of the node.
            Err(e) if e.to_string().contains(FOUND) => return e.location().map(|l| l.line()),
            Ok(()) | Err(_) => {}
        }
        path.pop();
    }
    None
}

/// The message of the error a [`Probe`] fails with when it reaches its field.
const FOUND: &str = "hane manifest probe: field found";

/// Follows `rest` through a document; fails with [`FOUND`] on its last
/// segment, succeeds when the path is not there.
struct Probe<'p> {
    rest: &'p [Segment],
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Segment::Key(key), rest)) = self.rest.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        while let Some(hit) = map.next_key_seed(KeyProbe {
            key,
            last: rest.is_empty(),
        })? {
            if hit {
                map.next_value_seed(Probe { rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Segment::Index(index), rest)) = self.rest.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut i = 0;
        loop {
            let more = if i != *index {
                seq.next_element::<IgnoredAny>()?.is_some()
            } else if rest.is_empty() {
                seq.next_element_seed(Found)?.is_some()
            } else {
                seq.next_element_seed(Probe { rest })?.is_some()
            };
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node (`!tag value`): not part of any manifest path.
        let (IgnoredAny, variant) = data.variant()?;
        de::VariantAccess::newtype_variant::<IgnoredAny>(variant)?;
        Ok(())
    }
}

/// Reads one map key: whether it is the probed one, failing with
/// [`FOUND`] when it is the last segment.
struct KeyProbe<'p> {
    key: &'p str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        if v != self.key {
            Ok(false)
        } else if self.last {
            Err(E::custom(FOUND))
        } else {
            Ok(true)
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Fails with [`FOUND`] on whatever node it is given.
struct Found;

impl<'de> DeserializeSeed<'de> for Found {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Found {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(FOUND))
    }

    fn visit_some<D: Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(de::Error::custom(FOUND))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(FOUND))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(FOUND))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(FOUND))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hane_core::{Access, ByteSize};

    const GOOD: &str = "\
apiVersion: operations/v1alpha1
kind: Operation
metadata:
  name: documents.search
spec:
  component: builtin:documents.search
  capabilities:
    files:
      - host: docs
        guest: /documents
        access: ro
    env: [LANG, MODE=fast]
    http: [\"https://*.example.com\"]
  limits:
    fuel: 1000
    memory: 32Mi
    timeout: 2s
";

    #[test]
    fn a_full_manifest_parses() {
        let m = OperationManifest::from_yaml("op.yaml", GOOD).unwrap();
        assert_eq!(m.metadata.name, "documents.search");
        assert_eq!(m.spec.capabilities.files[0].access, Access::ReadOnly);
        assert_eq!(m.spec.capabilities.env.len(), 2);
        assert_eq!(m.spec.capabilities.http[0].host, "example.com");
        assert_eq!(m.spec.limits.memory, Some(ByteSize::mebibytes(32)));
        assert_eq!(m.spec.limits.fuel, Some(1000));
        assert_eq!(m.component_path(), None);
    }

    #[test]
    fn unknown_fields_are_named_with_their_path_and_line() {
        let text = GOOD.replace("    fuel: 1000", "    fuell: 1000");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert_eq!(err.field, "spec.limits.fuell");
        assert_eq!(err.line, Some(15));
        assert!(err.message.starts_with("unknown field `fuell`"), "{err}");
        assert!(
            err.to_string()
                .starts_with("op.yaml:15: spec.limits.fuell: "),
            "{err}"
        );
    }

    #[test]
    fn bad_values_name_the_field() {
        let text = GOOD.replace("memory: 32Mi", "memory: 32MB");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert_eq!(err.field, "spec.limits.memory");
        assert!(err.message.contains("invalid size `32MB`"), "{err}");

        let text = GOOD.replace("https://*.example.com", "ftp://x");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert_eq!(err.field, "spec.capabilities.http[0]");
        assert!(err.message.contains("http or https"), "{err}");

        let text = GOOD.replace("access: ro", "access: rx");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert_eq!(err.field, "spec.capabilities.files[0].access");
    }

    #[test]
    fn action_grants_need_outbound_tools_and_an_outbound_impact() {
        let outbound = GOOD.replace(
            "  capabilities:\n",
            "  impact: outbound\n  capabilities:\n    actions: [communication.send_email]\n",
        );
        let m = OperationManifest::from_yaml("op.yaml", &outbound).unwrap();
        assert_eq!(m.spec.impact, Some(Impact::Outbound));
        assert_eq!(m.spec.capabilities.actions, ["communication.send_email"]);

        let read = outbound.replace("impact: outbound", "impact: read");
        let err = OperationManifest::from_yaml("op.yaml", &read).unwrap_err();
        assert_eq!(err.field, "spec.capabilities.actions");
        assert_eq!(err.line, Some(9));
        assert!(err.message.contains("impact is `read`"), "{err}");

        let unsaid = outbound.replace("  impact: outbound\n", "");
        let err = OperationManifest::from_yaml("op.yaml", &unsaid).unwrap_err();
        assert_eq!(err.field, "spec.capabilities.actions");
        assert!(err.message.contains("add `impact: outbound`"), "{err}");

        let unknown = outbound.replace(
            "[communication.send_email]",
            "[communication.send_email, communication.send_fax]",
        );
        let err = OperationManifest::from_yaml("op.yaml", &unknown).unwrap_err();
        assert_eq!(err.field, "spec.capabilities.actions[1]");
        assert_eq!(err.line, Some(9));
        assert!(
            err.message
                .starts_with("invalid actions grant `communication.send_fax`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_kind_and_version_are_refused() {
        let text = GOOD.replace("kind: Operation", "kind: Agent");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert_eq!(err.field, "kind");
        assert_eq!(err.line, Some(2));

        let text = GOOD.replace("operations/v1alpha1", "operations/v2");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert_eq!(err.field, "apiVersion");
        assert!(err.message.contains("operations/v1alpha1"));
    }

    #[test]
    fn missing_fields_are_named_at_the_line_of_their_map() {
        let text = GOOD.replace("  component: builtin:documents.search\n", "");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert!(err.message.contains("missing field `component`"), "{err}");
        assert_eq!(err.field, "spec.component");
        assert_eq!(err.line, Some(5));
    }

    #[test]
    fn fields_are_found_on_their_own_line() {
        let text = "\
a:
  name: first
b:
  name: second        # not the first `name:`
  list:
    - x
    - { name: third, deep: [1, 2] }
  text: |
    name: not a key
  other: 1
";
        assert_eq!(line_of(text, "b.name"), Some(4));
        assert_eq!(line_of(text, "b.list[0]"), Some(6));
        assert_eq!(line_of(text, "b.list[1].name"), Some(7));
        assert_eq!(line_of(text, "b.list[1].deep[1]"), Some(7));
        assert_eq!(line_of(text, "b.other"), Some(10));
        // Absent fields fall back to their nearest written parent.
        assert_eq!(line_of(text, "b.list[5].name"), Some(5));
        assert_eq!(line_of(text, "b.missing"), Some(3));
        assert_eq!(line_of(text, "nothing.here"), None);
        assert_eq!(line_of(text, ""), None);
        assert_eq!(
            segments("a.b[2][0].c"),
            [
                Segment::Key("a".into()),
                Segment::Key("b".into()),
                Segment::Index(2),
                Segment::Index(0),
                Segment::Key("c".into()),
            ]
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_manifest_folder() {
        let dir = std::env::temp_dir().join(format!("hane-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("op.yaml");
        std::fs::write(&path, GOOD.replace("builtin:documents.search", "op.wasm")).unwrap();
        let m = OperationManifest::from_file(&path).unwrap();
        assert_eq!(m.component_path(), Some(dir.join("op.wasm")));
        assert_eq!(m.spec.capabilities.files[0].host, dir.join("docs"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
