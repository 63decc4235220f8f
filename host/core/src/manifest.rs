//! The `Operation` manifest: a component with its policy and limits.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{LimitsSpec, Policy};

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
    /// the field and, where known, the line.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let manifest: OperationManifest = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.location().map(|l| l.line());
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
                Some((prefix, rest)) if field.starts_with(prefix) => rest.to_owned(),
                _ => message,
            };
            ManifestError {
                file: file.to_owned(),
                line,
                field: if field == "." { String::new() } else { field },
                message,
            }
        })?;
        let fail = |field: &str, message: String| ManifestError {
            file: file.to_owned(),
            line: find_line(text, field.rsplit('.').next().unwrap_or(field)),
            field: field.to_owned(),
            message,
        };
        if manifest.api_version != OPERATION_API_VERSION {
            return Err(fail(
                "apiVersion",
                format!(
                    "expected `{OPERATION_API_VERSION}`, found `{}`",
                    manifest.api_version
                ),
            ));
        }
        if manifest.kind != "Operation" {
            return Err(fail(
                "kind",
                format!("expected `Operation`, found `{}`", manifest.kind),
            ));
        }
        if manifest.metadata.name.trim().is_empty() {
            return Err(fail("metadata.name", "must not be empty".to_owned()));
        }
        if manifest.spec.component.trim().is_empty() {
            return Err(fail("spec.component", "must not be empty".to_owned()));
        }
        manifest
            .spec
            .capabilities
            .validate()
            .map_err(|e| fail("spec.capabilities", e.to_string()))?;
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
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
            file: file.clone(),
            line: None,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let mut manifest = Self::from_yaml(&file, &text)?;
        let base = path.parent().unwrap_or(Path::new("."));
        manifest.spec.capabilities.resolve_relative_to(base);
        if !manifest.spec.component.starts_with("builtin:")
            && Path::new(&manifest.spec.component).is_relative()
        {
            manifest.spec.component = base
                .join(&manifest.spec.component)
                .to_string_lossy()
                .into_owned();
        }
        Ok(manifest)
    }

    /// The component as a path, or `None` for a `builtin:` one.
    pub fn component_path(&self) -> Option<PathBuf> {
        (!self.spec.component.starts_with("builtin:")).then(|| PathBuf::from(&self.spec.component))
    }
}

/// The first line where `key:` appears, for errors found after parsing.
fn find_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| l.trim_start().starts_with(&format!("{key}:")))
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, ByteSize};

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
    fn missing_fields_are_named() {
        let text = GOOD.replace("  component: builtin:documents.search\n", "");
        let err = OperationManifest::from_yaml("op.yaml", &text).unwrap_err();
        assert!(err.message.contains("missing field `component`"), "{err}");
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
