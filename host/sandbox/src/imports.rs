//! What a component imports, and which grant each import needs.

use hane_core::Policy;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::LoadError;

/// The grant an import needs before it can do anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// Always available (logging, clocks, randomness, streams).
    None,
    /// Directories must be granted (`capabilities.files`, `--allow-dir`);
    /// without them the guest sees no filesystem.
    Files,
    /// Variables must be granted (`capabilities.env`, `--env`); without
    /// them the guest sees an empty environment.
    Env,
    /// Hosts must be granted (`capabilities.http`, `--allow-host`); a
    /// component importing outgoing HTTP without such a grant is refused
    /// at load.
    Http,
    /// Ledger collections must be granted (`capabilities.records`,
    /// `--allow-records`); a component importing `records` without such a
    /// grant is refused at load.
    Records,
    /// Ledger document sets must be granted (`capabilities.documents`,
    /// `--allow-documents`); a component importing `documents` without such
    /// a grant is refused at load.
    Documents,
    /// Outbound tools must be granted (`capabilities.actions`,
    /// `--allow-actions`) before the guest can propose actions of them; a
    /// component importing `actions` without such a grant is refused at
    /// load.
    Actions,
    /// Never granted: raw sockets and name lookups always fail.
    Never,
}

impl Grant {
    /// A short human description, for `hane op inspect`.
    pub fn describe(self) -> &'static str {
        match self {
            Grant::None => "-",
            Grant::Files => "files grant (--allow-dir)",
            Grant::Env => "env grant (--env)",
            Grant::Http => "http grant (--allow-host)",
            Grant::Records => "records grant (--allow-records)",
            Grant::Documents => "documents grant (--allow-documents)",
            Grant::Actions => "actions grant (--allow-actions)",
            Grant::Never => "never granted (raw sockets are denied)",
        }
    }
}

/// One import of a component.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Import {
    /// The full name, such as `wasi:http/outgoing-handler@0.2.6`.
    pub name: String,
    /// What it needs.
    pub grant: Grant,
}

/// Interfaces the host provides, by name without version, and their grant.
const PROVIDED: &[(&str, Grant)] = &[
    ("hane:operation/types", Grant::None),
    ("hane:operation/log", Grant::None),
    ("hane:operation/records", Grant::Records),
    ("hane:operation/documents", Grant::Documents),
    ("hane:operation/actions", Grant::Actions),
    ("wasi:cli/environment", Grant::Env),
    ("wasi:cli/exit", Grant::None),
    ("wasi:cli/stdin", Grant::None),
    ("wasi:cli/stdout", Grant::None),
    ("wasi:cli/stderr", Grant::None),
    ("wasi:cli/terminal-input", Grant::None),
    ("wasi:cli/terminal-output", Grant::None),
    ("wasi:cli/terminal-stdin", Grant::None),
    ("wasi:cli/terminal-stdout", Grant::None),
    ("wasi:cli/terminal-stderr", Grant::None),
    ("wasi:clocks/monotonic-clock", Grant::None),
    ("wasi:clocks/wall-clock", Grant::None),
    ("wasi:filesystem/types", Grant::Files),
    ("wasi:filesystem/preopens", Grant::Files),
    ("wasi:io/error", Grant::None),
    ("wasi:io/poll", Grant::None),
    ("wasi:io/streams", Grant::None),
    ("wasi:random/random", Grant::None),
    ("wasi:random/insecure", Grant::None),
    ("wasi:random/insecure-seed", Grant::None),
    ("wasi:sockets/network", Grant::Never),
    ("wasi:sockets/instance-network", Grant::Never),
    ("wasi:sockets/tcp", Grant::Never),
    ("wasi:sockets/tcp-create-socket", Grant::Never),
    ("wasi:sockets/udp", Grant::Never),
    ("wasi:sockets/udp-create-socket", Grant::Never),
    ("wasi:sockets/ip-name-lookup", Grant::Never),
    ("wasi:http/types", Grant::None),
    ("wasi:http/outgoing-handler", Grant::Http),
];

/// The component's imports in order, each with its grant; imports the
/// host does not provide get [`Grant::Never`] here and are refused by
/// [`check`].
pub(crate) fn of(engine: &Engine, component: &Component) -> Vec<Import> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| Import {
            name: name.to_owned(),
            grant: provided(name).unwrap_or(Grant::Never),
        })
        .collect()
}

fn provided(name: &str) -> Option<Grant> {
    let (unversioned, version) = name.split_once('@').unwrap_or((name, ""));
    let grant = PROVIDED
        .iter()
        .find(|(n, _)| *n == unversioned)
        .map(|(_, g)| *g)?;
    let supported = if unversioned.starts_with("hane:operation/") {
        version.starts_with("0.1.")
    } else {
        version.starts_with("0.2.")
    };
    supported.then_some(grant)
}

/// Refuses a component that imports something the host does not provide.
pub(crate) fn check_provided(imports: &[Import]) -> Result<(), LoadError> {
    match imports.iter().find(|i| provided(&i.name).is_none()) {
        Some(i) => Err(LoadError::UnknownImport {
            import: i.name.clone(),
        }),
        None => Ok(()),
    }
}

/// Refuses a component that imports something the host does not provide,
/// or a capability the policy does not grant.
pub(crate) fn check(imports: &[Import], policy: &Policy) -> Result<(), LoadError> {
    check_provided(imports)?;
    for import in imports {
        let (granted, grant, hint) = match import.grant {
            Grant::Http => (
                !policy.http.is_empty(),
                "http hosts",
                "`capabilities.http` to the manifest or `--allow-host PATTERN`",
            ),
            Grant::Records => (
                !policy.records.is_empty(),
                "collections",
                "`capabilities.records` to the manifest or `--allow-records NAME`",
            ),
            Grant::Documents => (
                !policy.documents.is_empty(),
                "document sets",
                "`capabilities.documents` to the manifest or `--allow-documents NAME`",
            ),
            Grant::Actions => (
                !policy.actions.is_empty(),
                "action tools",
                "`capabilities.actions` to the manifest or `--allow-actions TOOL`",
            ),
            Grant::None | Grant::Files | Grant::Env | Grant::Never => continue,
        };
        if !granted {
            return Err(LoadError::NotGranted {
                import: import.name.clone(),
                grant,
                hint,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_outside_the_supported_lines_are_unknown() {
        assert_eq!(
            provided("wasi:http/outgoing-handler@0.2.6"),
            Some(Grant::Http)
        );
        assert_eq!(provided("hane:operation/log@0.1.0"), Some(Grant::None));
        assert_eq!(provided("hane:operation/log@0.2.0"), None);
        assert_eq!(provided("wasi:http/outgoing-handler@0.3.0"), None);
        assert_eq!(
            provided("hane:operation/records@0.1.0"),
            Some(Grant::Records)
        );
        assert_eq!(
            provided("hane:operation/documents@0.1.3"),
            Some(Grant::Documents)
        );
        assert_eq!(
            provided("hane:operation/actions@0.1.0"),
            Some(Grant::Actions)
        );
        assert_eq!(provided("hane:operation/actions@0.2.0"), None);
    }

    #[test]
    fn ledger_and_action_imports_need_their_grant() {
        for (name, grant, missing) in [
            (
                "hane:operation/records@0.1.0",
                Grant::Records,
                "grants no collections; add `capabilities.records`",
            ),
            (
                "hane:operation/documents@0.1.0",
                Grant::Documents,
                "grants no document sets; add `capabilities.documents`",
            ),
            (
                "hane:operation/actions@0.1.0",
                Grant::Actions,
                "grants no action tools; add `capabilities.actions`",
            ),
        ] {
            let imports = vec![Import {
                name: name.into(),
                grant,
            }];
            let err = check(&imports, &Policy::default()).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(&format!("imports `{name}`")), "{text}");
            assert!(text.contains(missing), "{text}");
            let policy = Policy {
                records: vec!["vehicles".into()],
                documents: vec!["leases".into()],
                actions: vec!["communication.send_email".into()],
                ..Policy::default()
            };
            check(&imports, &policy).unwrap();
        }
    }

    #[test]
    fn http_imports_need_an_http_grant() {
        let imports = vec![Import {
            name: "wasi:http/outgoing-handler@0.2.6".into(),
            grant: Grant::Http,
        }];
        let err = check(&imports, &Policy::default()).unwrap_err();
        assert!(
            err.to_string().contains(
                "imports `wasi:http/outgoing-handler@0.2.6`, but its policy grants no http hosts"
            ),
            "{err}"
        );
        let policy = Policy {
            http: vec!["https://example.com".parse().unwrap()],
            ..Policy::default()
        };
        check(&imports, &policy).unwrap();
    }

    #[test]
    fn unknown_imports_are_refused_by_name() {
        let imports = vec![Import {
            name: "acme:evil/backdoor@1.0.0".into(),
            grant: Grant::Never,
        }];
        let err = check(&imports, &Policy::default()).unwrap_err();
        assert!(
            err.to_string().contains("`acme:evil/backdoor@1.0.0`"),
            "{err}"
        );
    }
}
