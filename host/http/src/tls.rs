//! The TLS configuration: rustls on ring, HTTP/1.1 by ALPN, trusting the
//! platform's roots and Mozilla's.
//!
//! The platform's roots are what its administrators chose (a company's own
//! CA, or one named by `SSL_CERT_FILE` or `SSL_CERT_DIR`); Mozilla's,
//! built in, are there for a device that has none (a scratch container, an
//! edge box). A client may add roots of its own (a test CA, a customer's
//! private CA).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

/// Why extra roots could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    /// The file could not be read.
    #[error("cannot read the root certificates at {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM certificate, or a broken one.
    #[error("{path} holds no PEM certificate{detail}")]
    NoCertificate {
        /// The file.
        path: String,
        /// What the parser said, if anything.
        detail: String,
    },
    /// rustls refused a certificate as a root.
    #[error("a certificate in {path} cannot be a root: {detail}")]
    Refused {
        /// The file.
        path: String,
        /// rustls' reason.
        detail: String,
    },
}

/// The certificates of the PEM file at `path`.
///
/// # Errors
///
/// [`RootsError`] naming the file when it cannot be read or holds no
/// certificate.
pub fn read_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>, RootsError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| RootsError::Read {
        path: shown.clone(),
        source,
    })?;
    parse_pem(&bytes, &shown)
}

/// The certificates of the PEM text `pem`; `origin` names it in errors
/// (a file, or what the text came from).
///
/// # Errors
///
/// [`RootsError::NoCertificate`] when `pem` holds no certificate or a
/// broken one.
pub fn parse_pem(pem: &[u8], origin: &str) -> Result<Vec<CertificateDer<'static>>, RootsError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| RootsError::NoCertificate {
            path: origin.to_owned(),
            detail: format!(": {e}"),
        })?;
    if certificates.is_empty() {
        return Err(RootsError::NoCertificate {
            path: origin.to_owned(),
            detail: String::new(),
        });
    }
    Ok(certificates)
}

/// The platform's roots and Mozilla's; read once per process.
fn base_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        // A platform certificate rustls cannot use is passed over: the
        // rest, and Mozilla's, still apply.
        let platform = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(platform.certs);
        roots
    })
}

/// The configuration for the base roots, built once.
pub(crate) fn default_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    CONFIG.get_or_init(|| config(base_roots().clone())).clone()
}

/// The configuration for the base roots and `extra`.
pub(crate) fn config_with(
    extra: Vec<CertificateDer<'static>>,
    origin: &str,
) -> Result<Arc<ClientConfig>, RootsError> {
    let mut roots = base_roots().clone();
    for certificate in extra {
        roots.add(certificate).map_err(|e| RootsError::Refused {
            path: origin.to_owned(),
            detail: e.to_string(),
        })?;
    }
    Ok(config(roots))
}

fn config(roots: RootCertStore) -> Arc<ClientConfig> {
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}
