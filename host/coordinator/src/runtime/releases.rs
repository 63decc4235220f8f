//! The releases a runtime runs: activating one, loading the active one
//! again when another process changed it, and making a release's
//! components known to the operation manager.

use super::*;

impl AgentRuntime {
    /// Checks the release in `dir` and makes it active (see
    /// [`activate_dir`](crate::activate_dir)); runs started afterwards use it.
    ///
    /// # Errors
    ///
    /// What is wrong with the release; nothing changed.
    pub async fn activate(
        &self,
        dir: &std::path::Path,
    ) -> Result<hane_store::ReleaseInfo, ActivationError> {
        let (info, loaded) = crate::release::activate_dir(
            dir,
            &self.inner.sandbox,
            &self.inner.components,
            &self.inner.registry,
            self.inner.external.as_deref(),
        )
        .await?;
        Releases::of(self).install(Arc::new(loaded)).await?;
        Ok(info)
    }

    /// The active release, loaded again when another process activated or
    /// rolled back since.
    ///
    /// # Errors
    ///
    /// [`RunError::NoRelease`], or the store failed.
    pub async fn release(&self) -> Result<Arc<LoadedRelease>, RunError> {
        let number = self.inner.registry.releases().active_number().await?;
        let current = self
            .inner
            .release
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match (number, current) {
            (None, _) => Err(RunError::NoRelease),
            (Some(n), Some(current)) if current.info.number == n => Ok(current),
            (Some(_), _) => {
                let unloaded = |e| match e {
                    ReleaseLoadError::Store(e) => RunError::Store(e),
                    e => RunError::Corrupt(e.to_string()),
                };
                let loaded = load_active(&self.inner.registry)
                    .await
                    .map_err(unloaded)?
                    .ok_or(RunError::NoRelease)?;
                let loaded = Arc::new(loaded);
                Releases::of(self)
                    .install(loaded.clone())
                    .await
                    .map_err(unloaded)?;
                Ok(loaded)
            }
        }
    }

    /// Every tool the active release offers.
    ///
    /// # Errors
    ///
    /// No release is active, or the store failed.
    pub async fn tools(&self) -> Result<Vec<ToolDefinition>, RunError> {
        Ok(self.release().await?.tools.values().cloned().collect())
    }
}

/// Releases as runs use them: loaded, their components installed in
/// the sandbox, by number.
pub(crate) struct Releases<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> Releases<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// Checks the release in `dir` as [`AgentRuntime::activate`] would,
    /// without storing it: what to store, and the release loaded.
    ///
    /// # Errors
    ///
    /// What is wrong with the release.
    pub(crate) async fn prepare_release(
        &self,
        dir: &std::path::Path,
    ) -> Result<(hane_store::NewRelease, LoadedRelease), ActivationError> {
        crate::release::prepare_dir(
            dir,
            &self.kernel.inner.sandbox,
            &self.kernel.inner.components,
            self.kernel.inner.external.as_deref(),
        )
        .await
    }

    /// Makes `release` the one runs use: its components known to the
    /// operation manager, its ledger in the sandbox.
    pub(super) async fn install(
        &self,
        release: Arc<LoadedRelease>,
    ) -> Result<(), ReleaseLoadError> {
        self.install_components(&release).await?;
        self.kernel.inner.sandbox.set_ledger(release.ledger.clone());
        self.kernel
            .inner
            .coordinator
            .manager()
            .set_ledger(&release.ledger);
        self.kernel
            .inner
            .actions
            .set_budget(release.budget_for(self.kernel.inner.actions.scope()));
        *self
            .kernel
            .inner
            .release
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(release);
        Ok(())
    }

    /// Makes `release`'s components known to the operation manager, from
    /// the store.
    pub(crate) async fn install_components(
        &self,
        release: &LoadedRelease,
    ) -> Result<(), ReleaseLoadError> {
        for digest in &release.digests {
            if self.kernel.inner.components.contains(digest) {
                continue;
            }
            let bytes = self
                .kernel
                .inner
                .registry
                .releases()
                .component(digest)
                .await?
                .ok_or_else(|| ReleaseLoadError::Corrupt {
                    release: release.info.number,
                    message: format!("component {digest} is missing from the store"),
                })?;
            self.kernel.inner.components.insert(bytes);
        }
        Ok(())
    }

    /// Release `number`: the active one, or one loaded from the store (its
    /// components made known to the operation manager), such as the
    /// release a workflow case started in.
    ///
    /// # Errors
    ///
    /// No such release, it does not read, or the store failed.
    pub(crate) async fn release_numbered(
        &self,
        number: u64,
    ) -> Result<Arc<LoadedRelease>, RunError> {
        let active = self.kernel.release().await?;
        if active.info.number == number {
            return Ok(active);
        }
        let unloaded = |e| match e {
            ReleaseLoadError::Store(e) => RunError::Store(e),
            e => RunError::Corrupt(e.to_string()),
        };
        let loaded = crate::release::load_numbered(&self.kernel.inner.registry, number)
            .await
            .map_err(unloaded)?
            .ok_or_else(|| RunError::Corrupt(format!("release {number} is not in the store")))?;
        let loaded = Arc::new(loaded);
        self.install_components(&loaded).await.map_err(unloaded)?;
        Ok(loaded)
    }
}
