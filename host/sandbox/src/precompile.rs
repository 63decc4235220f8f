//! Compiling components ahead of time (`hane op compile`), for this host
//! or another target, into artifacts named as the component cache names
//! its files.

use wasmtime::Engine;

use crate::error::LoadError;
use crate::sandbox::{
    EngineKind, HOST_TARGET, SandboxConfig, artifact_name, compile_error, compile_settings,
    component_digest, fingerprint, pulley_host_target,
};

/// Compiles components ahead of time, for a sandbox with the same
/// [`SandboxConfig`] on another (or this) target. Its artifacts are named as
/// the cache names its files, so a directory of them serves as a cache.
pub struct Precompiler {
    #[cfg_attr(
        not(feature = "compiler"),
        expect(dead_code, reason = "never made without a compiler")
    )]
    engine: Engine,
    fingerprint: String,
    target: String,
    kind: EngineKind,
}

/// What a build without a compiler says when asked to compile ahead of
/// time.
const NO_COMPILER: &str =
    "this hane was built without the `compiler` feature: compile where hane has it";

impl std::fmt::Debug for Precompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Precompiler")
            .field("engine", &self.kind)
            .field("target", &self.target)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// A [`Precompiler`] cannot compile for the target asked for.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot compile for `{target}`: {message}")]
pub struct UnsupportedTarget {
    target: String,
    message: String,
}

/// One component compiled by a [`Precompiler`].
#[derive(Debug, Clone)]
pub struct Artifact {
    /// `sha256:` digest of the component's bytes.
    pub digest: String,
    /// `DIGEST-FINGERPRINT.cwasm`, the name a cache looks for.
    pub file_name: String,
    /// The compiled component.
    pub bytes: Vec<u8>,
}

impl Precompiler {
    /// A compiler for sandboxes configured as `config` (its engine, fuel
    /// and pooling settings) running on `target`: `None` for this host, as
    /// its own sandboxes compile (with this CPU's features), or a triple
    /// such as `aarch64-unknown-linux-musl`, compiled with no CPU features
    /// assumed, which a sandbox on that target loads. A Pulley target
    /// (`pulley64`) or [`EngineKind::Pulley`] compiles for Pulley; Pulley
    /// artifacts run on every host of the same pointer width and byte order.
    ///
    /// # Errors
    ///
    /// The target is unknown, its back end is not built in (cranelift's
    /// x86-64 and aarch64 ones and Pulley are; without `cross-compile`,
    /// only the host's and Pulley), or its engine cannot be created.
    pub fn new(config: &SandboxConfig, target: Option<&str>) -> Result<Self, UnsupportedTarget> {
        let mut config = config.clone();
        if target.is_some_and(|t| t.starts_with("pulley")) {
            config.engine = EngineKind::Pulley;
        }
        let start = || -> wasmtime::Result<Self> {
            if cfg!(not(feature = "compiler")) {
                wasmtime::bail!("{NO_COMPILER}");
            }
            // Pulley's settings name its host target; cranelift infers the
            // host's CPU features unless a target is named.
            let mut wasm = compile_settings(&config, true)?;
            let target = match (config.engine, target) {
                (EngineKind::Pulley, Some(t)) if t.starts_with("pulley") => Some(t),
                (EngineKind::Pulley, _) => None,
                (EngineKind::Cranelift, t) => t,
            };
            if let Some(t) = target {
                wasm.target(t)?;
            }
            let engine = Engine::new(&wasm)?;
            let target = match (target, config.engine) {
                (Some(t), _) => t,
                (None, EngineKind::Pulley) => pulley_host_target(),
                (None, EngineKind::Cranelift) => HOST_TARGET,
            };
            Ok(Self {
                fingerprint: fingerprint(&engine),
                engine,
                target: target.to_owned(),
                kind: config.engine,
            })
        };
        start().map_err(|e| UnsupportedTarget {
            target: target.unwrap_or(HOST_TARGET).to_owned(),
            message: if cfg!(feature = "cross-compile") {
                format!("{e:#} (built in: x86_64 and aarch64 targets, and pulley32 and pulley64)")
            } else if cfg!(feature = "compiler") {
                format!(
                    "{e:#} (this hane was built without `cross-compile`: it compiles for its own architecture, {}, and for pulley32 and pulley64)",
                    std::env::consts::ARCH
                )
            } else {
                format!("{e:#}")
            },
        })
    }

    /// The engine it compiles for.
    pub fn engine(&self) -> EngineKind {
        self.kind
    }

    /// The target it compiles for, such as `x86_64-unknown-linux-gnu` or
    /// `pulley64`.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Compiles the component `bytes`; `name` is used in errors.
    ///
    /// # Errors
    ///
    /// The bytes are not a component wasmtime can compile.
    pub fn precompile(&self, name: &str, bytes: &[u8]) -> Result<Artifact, LoadError> {
        let digest = component_digest(bytes);
        let compiled = self
            .compile_component(bytes)
            .map_err(|e| compile_error(name, e))?;
        Ok(Artifact {
            file_name: artifact_name(&digest, &self.fingerprint),
            digest,
            bytes: compiled,
        })
    }

    #[cfg(feature = "compiler")]
    fn compile_component(&self, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        self.engine.precompile_component(bytes)
    }

    #[cfg(not(feature = "compiler"))]
    fn compile_component(&self, _bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        wasmtime::bail!("{NO_COMPILER}")
    }
}
