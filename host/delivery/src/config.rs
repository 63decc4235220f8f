//! Where approved outbound actions go, and the credentials they go with.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;

pub use hane_core::credential::{CREDENTIAL_ENV_PREFIX, Secret, credential_env_var};
use hane_core::{
    credential::credential_key,
    file::{FileCap, read_capped},
};
use std::path::PathBuf;
use std::time::Duration;

use lettre::message::Mailbox;
use percent_encoding::percent_decode_str;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

/// The SMTP server, as a URL: `smtp://[user[:password]@]host[:port]?from=ADDRESS[&tls=MODE]`.
pub const SMTP_URL_ENV: &str = "HANE_SMTP_URL";
/// The SMTP password, when it should not sit in [`SMTP_URL_ENV`].
pub const SMTP_PASSWORD_ENV: &str = "HANE_SMTP_PASSWORD";
/// An extra root certificate (PEM) to trust for the SMTP server.
pub const SMTP_CA_FILE_ENV: &str = "HANE_SMTP_CA_FILE";
/// The most bytes of the [`SMTP_CA_FILE_ENV`] file (1 MiB): a bundle of a
/// few hundred PEM certificates.
pub const MAX_CA_FILE_BYTES: u64 = 1 << 20;
/// What the [`SMTP_CA_FILE_ENV`] file is read as.
pub(crate) const CA_FILE_CAP: FileCap = FileCap::new(MAX_CA_FILE_BYTES, "certificate files");
/// The SMS provider's endpoint.
pub const SMS_URL_ENV: &str = "HANE_SMS_URL";
/// The bearer token for the SMS provider.
pub const SMS_TOKEN_ENV: &str = "HANE_SMS_TOKEN";
/// The call provider's endpoint.
pub const CALL_URL_ENV: &str = "HANE_CALL_URL";
/// The bearer token for the call provider.
pub const CALL_TOKEN_ENV: &str = "HANE_CALL_TOKEN";
/// How long one delivery attempt may take, in milliseconds.
pub const TIMEOUT_ENV: &str = "HANE_DELIVERY_TIMEOUT_MS";

/// How long one delivery attempt may take unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How the SMTP connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain text throughout (`tls=none`); for local relays and tests.
    None,
    /// Plain connect, then `STARTTLS`, required (`tls=starttls`, the default
    /// for `smtp://`). A server that does not offer it is a failure, never a
    /// silent downgrade.
    StartTls,
    /// TLS from the first byte (`tls=tls`, the default for `smtps://`).
    Tls,
}

impl SmtpTls {
    /// The port for this mode when the URL names none: 25, 587 or 465.
    pub fn default_port(self) -> u16 {
        match self {
            Self::None => 25,
            Self::StartTls => 587,
            Self::Tls => 465,
        }
    }
}

/// The SMTP server email goes through.
#[derive(Debug, Clone)]
pub struct SmtpConfig {
    /// Host name or IP address; also the name the TLS certificate must carry.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Encryption.
    pub tls: SmtpTls,
    /// User and password for `AUTH PLAIN` or `AUTH LOGIN`; `None` sends no
    /// `AUTH`.
    pub auth: Option<(String, Secret)>,
    /// The `From` address (and envelope sender), e.g. `hane@example.com` or
    /// `Hane <hane@example.com>`.
    pub from: String,
    /// A PEM file of extra root certificates to trust besides the bundled
    /// Mozilla roots, e.g. a self-signed test certificate.
    pub root_certificate: Option<PathBuf>,
}

impl SmtpConfig {
    /// A server at `host` using `tls` on that mode's default port, with no
    /// `AUTH` and no extra root certificate.
    pub fn new(host: impl Into<String>, tls: SmtpTls, from: impl Into<String>) -> Self {
        Self {
            host: host.into(),
            port: tls.default_port(),
            tls,
            auth: None,
            from: from.into(),
            root_certificate: None,
        }
    }
}

/// An HTTP provider that sends SMS or places calls: hane `POST`s JSON to
/// `url` (see [`deliver`](super::deliver) for the body).
#[derive(Clone)]
pub struct HttpProvider {
    /// The endpoint, `http://` or `https://`.
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<Secret>,
}

impl fmt::Debug for HttpProvider {
    /// The URL without its query or user info (either may hold a key), and
    /// the token as `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = match url::Url::parse(&self.url) {
            Ok(mut url) => {
                url.set_query(None);
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url.to_string()
            }
            Err(_) => "(not a URL)".to_owned(),
        };
        f.debug_struct("HttpProvider")
            .field("url", &url)
            .field("token", &self.token)
            .finish()
    }
}

impl HttpProvider {
    /// A provider at `url` with no token.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            token: None,
        }
    }

    /// The same provider with a bearer token.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Secret::new(token));
        self
    }
}

/// A delivery setting that cannot be used: which variable, and what is wrong
/// with it. Never contains a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {problem}")]
pub struct ConfigError {
    var: String,
    problem: String,
}

impl ConfigError {
    fn new(var: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            var: var.into(),
            problem: problem.into(),
        }
    }

    /// The environment variable at fault.
    pub fn var(&self) -> &str {
        &self.var
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

/// Where approved outbound actions go and the credentials they use.
///
/// Nothing is configured by default: every kind of outbound action fails
/// with a detail naming the variable to set, and the timeout is
/// [`DEFAULT_TIMEOUT`]. Build one with the methods below or read it from the
/// environment with [`DeliveryConfig::from_env`].
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub(super) smtp: Option<SmtpConfig>,
    pub(super) sms: Option<HttpProvider>,
    pub(super) call: Option<HttpProvider>,
    pub(super) credentials: BTreeMap<String, Secret>,
    pub(super) timeout: Duration,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl DeliveryConfig {
    /// Nothing configured, [`DEFAULT_TIMEOUT`].
    pub fn new() -> Self {
        Self {
            smtp: None,
            sms: None,
            call: None,
            credentials: BTreeMap::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Reads the variables listed in the [module docs](super).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first variable that is malformed or set
    /// without the one it belongs to.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(std::env::vars_os())
    }

    /// [`DeliveryConfig::from_env`] over the given variables instead of the
    /// process environment. Other variables are ignored, and so are these
    /// when set to the empty string.
    ///
    /// # Errors
    ///
    /// As [`DeliveryConfig::from_env`].
    pub fn from_vars<I, K, V>(vars: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let mut env = BTreeMap::new();
        for (name, value) in vars {
            let Ok(name) = name.into().into_string() else {
                continue;
            };
            let ours = [
                SMTP_URL_ENV,
                SMTP_PASSWORD_ENV,
                SMTP_CA_FILE_ENV,
                SMS_URL_ENV,
                SMS_TOKEN_ENV,
                CALL_URL_ENV,
                CALL_TOKEN_ENV,
                TIMEOUT_ENV,
            ]
            .contains(&name.as_str())
                || name.starts_with(CREDENTIAL_ENV_PREFIX);
            if !ours {
                continue;
            }
            let value = value
                .into()
                .into_string()
                .map_err(|_| ConfigError::new(&name, "is not valid UTF-8"))?;
            if !value.is_empty() {
                env.insert(name, value);
            }
        }
        let var = |name: &str| env.get(name).map(String::as_str);
        let requires = |dependent: &str, required: &str| -> Result<(), ConfigError> {
            if var(dependent).is_some() && var(required).is_none() {
                return Err(ConfigError::new(
                    dependent,
                    format!("is set but {required} is not"),
                ));
            }
            Ok(())
        };

        let mut config = Self::new();
        requires(SMTP_PASSWORD_ENV, SMTP_URL_ENV)?;
        requires(SMTP_CA_FILE_ENV, SMTP_URL_ENV)?;
        if let Some(url) = var(SMTP_URL_ENV) {
            let mut smtp = parse_smtp_url(url, var(SMTP_PASSWORD_ENV).map(Secret::from))?;
            if let Some(path) = var(SMTP_CA_FILE_ENV) {
                check_root_certificate(path)?;
                smtp.root_certificate = Some(PathBuf::from(path));
            }
            config.smtp(smtp);
        }
        for (url_var, token_var, slot) in [
            (SMS_URL_ENV, SMS_TOKEN_ENV, &mut config.sms),
            (CALL_URL_ENV, CALL_TOKEN_ENV, &mut config.call),
        ] {
            requires(token_var, url_var)?;
            if let Some(url) = var(url_var) {
                check_http_url(url)
                    .map_err(|problem| ConfigError::new(url_var, problem.to_string()))?;
                *slot = Some(HttpProvider {
                    url: url.to_owned(),
                    token: var(token_var).map(Secret::from),
                });
            }
        }
        for (name, value) in &env {
            let Some(credential) = name.strip_prefix(CREDENTIAL_ENV_PREFIX) else {
                continue;
            };
            if credential.is_empty() {
                return Err(ConfigError::new(name, "names no credential"));
            }
            config.credential(credential, value.as_str());
        }
        if let Some(ms) = var(TIMEOUT_ENV) {
            let ms = ms.parse::<u64>().ok().filter(|&ms| ms > 0).ok_or_else(|| {
                ConfigError::new(
                    TIMEOUT_ENV,
                    format!("must be a whole number of milliseconds above 0, not {ms:?}"),
                )
            })?;
            config.timeout(Duration::from_millis(ms));
        }
        Ok(config)
    }

    /// Sends email through this SMTP server.
    pub fn smtp(&mut self, config: SmtpConfig) -> &mut Self {
        self.smtp = Some(config);
        self
    }

    /// Sends SMS through this provider.
    pub fn sms(&mut self, provider: HttpProvider) -> &mut Self {
        self.sms = Some(provider);
        self
    }

    /// Places calls through this provider.
    pub fn call(&mut self, provider: HttpProvider) -> &mut Self {
        self.call = Some(provider);
        self
    }

    /// Holds the credential that connections name `name` (compared as
    /// [`credential_env_var`] spells it).
    pub fn credential(&mut self, name: &str, secret: impl Into<String>) -> &mut Self {
        self.credentials
            .insert(credential_key(name), Secret::new(secret));
        self
    }

    /// Whether the host holds the credential a connection names `name`.
    pub fn holds_credential(&self, name: &str) -> bool {
        self.credentials.contains_key(&credential_key(name))
    }

    pub(super) fn credential_for(&self, name: &str) -> Option<&Secret> {
        self.credentials.get(&credential_key(name))
    }

    /// How long one attempt may take, from the first connection to the final
    /// answer. Default [`DEFAULT_TIMEOUT`].
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout;
        self
    }
}

/// Parses [`SMTP_URL_ENV`]. Problems never quote the URL, which may hold a
/// password.
fn parse_smtp_url(raw: &str, password: Option<Secret>) -> Result<SmtpConfig, ConfigError> {
    let error = |problem: String| ConfigError::new(SMTP_URL_ENV, problem);
    let url = url::Url::parse(raw).map_err(|e| error(format!("is not a URL: {e}")))?;
    let default_tls = match url.scheme() {
        "smtp" => SmtpTls::StartTls,
        "smtps" => SmtpTls::Tls,
        other => return Err(error(format!("scheme must be smtp or smtps, not {other}"))),
    };
    let host = match url.host() {
        Some(url::Host::Domain(domain)) => domain.to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(error("names no host".to_owned())),
    };
    if !matches!(url.path(), "" | "/") || url.fragment().is_some() {
        return Err(error(
            "must look like smtp://[user[:password]@]host[:port]?from=ADDRESS[&tls=none|starttls|tls]"
                .to_owned(),
        ));
    }

    let (tls, from) = smtp_query(&url, default_tls)?;

    let auth = smtp_auth(&url, password)?;

    Ok(SmtpConfig {
        host,
        port: url.port().unwrap_or(tls.default_port()),
        tls,
        auth,
        from,
        root_certificate: None,
    })
}

/// The `tls` and `from` query parameters of an SMTP URL whose scheme
/// implies `default_tls`.
fn smtp_query(url: &url::Url, default_tls: SmtpTls) -> Result<(SmtpTls, String), ConfigError> {
    let error = |problem: String| ConfigError::new(SMTP_URL_ENV, problem);
    let mut tls = None;
    let mut from = None;
    for (key, value) in url.query_pairs() {
        let slot = match &*key {
            "tls" => &mut tls,
            "from" => &mut from,
            other => {
                return Err(error(format!(
                    "unknown query parameter {other:?} (expected tls or from)"
                )));
            }
        };
        if slot.replace(value.into_owned()).is_some() {
            return Err(error(format!("query parameter {key} is given twice")));
        }
    }
    let tls = match tls.as_deref() {
        None => default_tls,
        Some("none") => SmtpTls::None,
        Some("starttls") => SmtpTls::StartTls,
        Some("tls") => SmtpTls::Tls,
        Some(other) => {
            return Err(error(format!(
                "tls={other} is not one of none, starttls, tls"
            )));
        }
    };
    if default_tls == SmtpTls::Tls && tls != SmtpTls::Tls {
        return Err(error(
            "smtps:// is TLS from the first byte; use smtp:// for tls=none or tls=starttls"
                .to_owned(),
        ));
    }
    let from = from.ok_or_else(|| {
        error(
            "has no from= query parameter (the sender address, e.g. from=hane@example.com)"
                .to_owned(),
        )
    })?;
    if from.parse::<Mailbox>().is_err() {
        return Err(error(format!("from={from} is not an email address")));
    }
    Ok((tls, from))
}

/// The user and password of an SMTP URL, the password given apart (from
/// [`SMTP_PASSWORD_ENV`]) taking precedence: both or neither.
fn smtp_auth(
    url: &url::Url,
    password: Option<Secret>,
) -> Result<Option<(String, Secret)>, ConfigError> {
    let error = |problem: String| ConfigError::new(SMTP_URL_ENV, problem);
    let decode = |part: &str, what: &str| {
        percent_decode_str(part)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| error(format!("{what} is not UTF-8 once percent-decoded")))
    };
    let user = decode(url.username(), "the user")?;
    let url_password = url
        .password()
        .map(|p| decode(p, "the password"))
        .transpose()?;
    let auth = match (user.is_empty(), password.or(url_password.map(Secret::from))) {
        (true, None) => None,
        (true, Some(_)) if url.password().is_some() => {
            return Err(error("has a password but no user".to_owned()));
        }
        (true, Some(_)) => {
            return Err(ConfigError::new(
                SMTP_PASSWORD_ENV,
                format!("is set but {SMTP_URL_ENV} names no user"),
            ));
        }
        (false, None) => {
            return Err(error(format!(
                "names a user but no password (put it in the URL or in {SMTP_PASSWORD_ENV})"
            )));
        }
        (false, Some(password)) => Some((user, password)),
    };
    Ok(auth)
}

/// Checks at startup that [`SMTP_CA_FILE_ENV`] names a readable PEM file with
/// at least one certificate, so a typo shows up before the first email.
fn check_root_certificate(path: &str) -> Result<(), ConfigError> {
    let error = |problem: String| ConfigError::new(SMTP_CA_FILE_ENV, problem);
    let pem = read_capped(path.as_ref(), CA_FILE_CAP).map_err(|e| error(e.to_string()))?;
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        cert.map_err(|e| error(format!("{path} is not valid PEM: {e}")))?;
        count += 1;
    }
    if count == 0 {
        return Err(error(format!("{path} holds no PEM certificate")));
    }
    Ok(())
}

/// What is wrong with a provider or connection URL; the text follows the
/// URL's name ("the SMS URL must be ...").
#[derive(Debug, thiserror::Error)]
pub(super) enum UrlProblem {
    #[error("is not a URL: {0}")]
    NotUrl(#[source] http::uri::InvalidUri),
    #[error("must be an http:// or https:// URL")]
    NotHttp,
    #[error("names no host")]
    NoHost,
    #[error("must not carry credentials before the host; use the token variable")]
    Credentials,
}

/// The provider URL, if nothing is wrong with it.
pub(super) fn check_http_url(url: &str) -> Result<http::Uri, UrlProblem> {
    let uri: http::Uri = url.parse().map_err(UrlProblem::NotUrl)?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(UrlProblem::NotHttp);
    }
    match uri.authority() {
        None => Err(UrlProblem::NoHost),
        Some(authority) if authority.as_str().contains('@') => Err(UrlProblem::Credentials),
        Some(_) => Ok(uri),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<DeliveryConfig, ConfigError> {
        DeliveryConfig::from_vars(vars.iter().copied())
    }

    #[test]
    fn nothing_set_configures_nothing() {
        let config = config(&[("PATH", "/bin")]).unwrap();
        assert!(config.smtp.is_none() && config.sms.is_none() && config.call.is_none());
        assert!(config.credentials.is_empty());
        assert_eq!(config.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn smtp_url_with_everything() {
        let config = config(&[(
            SMTP_URL_ENV,
            "smtp://us%40er:p%3Ass@mail.example.com:2525?tls=starttls&from=Hane%20%3Chane@example.com%3E",
        )])
        .unwrap();
        let smtp = config.smtp.unwrap();
        assert_eq!(smtp.host, "mail.example.com");
        assert_eq!(smtp.port, 2525);
        assert_eq!(smtp.tls, SmtpTls::StartTls);
        assert_eq!(smtp.from, "Hane <hane@example.com>");
        let (user, password) = smtp.auth.unwrap();
        assert_eq!(user, "us@er");
        assert_eq!(password.expose(), "p:ss");
    }

    #[test]
    fn smtp_defaults_follow_the_scheme() {
        let smtp = config(&[(SMTP_URL_ENV, "smtp://mail.example.com?from=a@b.c")])
            .unwrap()
            .smtp
            .unwrap();
        assert_eq!((smtp.tls, smtp.port), (SmtpTls::StartTls, 587));
        assert!(smtp.auth.is_none());
        let smtp = config(&[(SMTP_URL_ENV, "smtps://mail.example.com?from=a@b.c")])
            .unwrap()
            .smtp
            .unwrap();
        assert_eq!((smtp.tls, smtp.port), (SmtpTls::Tls, 465));
        let smtp = config(&[(SMTP_URL_ENV, "smtp://[::1]?from=a@b.c&tls=none")])
            .unwrap()
            .smtp
            .unwrap();
        assert_eq!(
            (smtp.host.as_str(), smtp.tls, smtp.port),
            ("::1", SmtpTls::None, 25)
        );
    }

    #[test]
    fn password_variable_overrides_the_url() {
        let smtp = config(&[
            (SMTP_URL_ENV, "smtp://user:old@mail.example.com?from=a@b.c"),
            (SMTP_PASSWORD_ENV, "new"),
        ])
        .unwrap()
        .smtp
        .unwrap();
        assert_eq!(smtp.auth.unwrap().1.expose(), "new");
        let smtp = config(&[
            (SMTP_URL_ENV, "smtp://user@mail.example.com?from=a@b.c"),
            (SMTP_PASSWORD_ENV, "only-here"),
        ])
        .unwrap()
        .smtp
        .unwrap();
        assert_eq!(smtp.auth.unwrap().1.expose(), "only-here");
    }

    #[test]
    fn smtp_url_errors_name_the_variable_and_never_the_password() {
        // (variables, the variable blamed, part of the problem)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case] = &[
            (&[(SMTP_URL_ENV, "not a url")], SMTP_URL_ENV, "is not a URL"),
            (
                &[(SMTP_URL_ENV, "http://h?from=a@b.c")],
                SMTP_URL_ENV,
                "scheme",
            ),
            (
                &[(SMTP_URL_ENV, "smtp://u:hunter2@h")],
                SMTP_URL_ENV,
                "from=",
            ),
            (
                &[(SMTP_URL_ENV, "smtp://u:hunter2@h?from=nope")],
                SMTP_URL_ENV,
                "not an email address",
            ),
            (
                &[(SMTP_URL_ENV, "smtp://u:hunter2@h?from=a@b.c&tls=ssl")],
                SMTP_URL_ENV,
                "tls=ssl",
            ),
            (
                &[(SMTP_URL_ENV, "smtp://u:hunter2@h?from=a@b.c&port=1")],
                SMTP_URL_ENV,
                "unknown query parameter",
            ),
            (
                &[(SMTP_URL_ENV, "smtps://u:hunter2@h?from=a@b.c&tls=none")],
                SMTP_URL_ENV,
                "smtps://",
            ),
            (
                &[(SMTP_URL_ENV, "smtp://u@h?from=a@b.c")],
                SMTP_URL_ENV,
                "no password",
            ),
            (
                &[(SMTP_URL_ENV, "smtp://:hunter2@h?from=a@b.c")],
                SMTP_URL_ENV,
                "no user",
            ),
            (
                &[
                    (SMTP_URL_ENV, "smtp://h?from=a@b.c"),
                    (SMTP_PASSWORD_ENV, "hunter2"),
                ],
                SMTP_PASSWORD_ENV,
                "names no user",
            ),
            (
                &[(SMTP_PASSWORD_ENV, "hunter2")],
                SMTP_PASSWORD_ENV,
                SMTP_URL_ENV,
            ),
            (
                &[
                    (SMTP_URL_ENV, "smtp://h?from=a@b.c"),
                    (SMTP_CA_FILE_ENV, "/nonexistent.pem"),
                ],
                SMTP_CA_FILE_ENV,
                "cannot read /nonexistent.pem",
            ),
            (
                &[
                    (SMTP_URL_ENV, "smtp://h?from=a@b.c"),
                    (SMTP_CA_FILE_ENV, "/dev/zero"),
                ],
                SMTP_CA_FILE_ENV,
                "/dev/zero is a character device, not a regular file",
            ),
        ];
        for (vars, var, problem) in cases {
            let error = config(vars).unwrap_err();
            assert_eq!(error.var(), *var, "{vars:?}: {error}");
            assert!(error.problem().contains(problem), "{vars:?}: {error}");
            assert!(!error.to_string().contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn providers_and_tokens() {
        let config = config(&[
            (SMS_URL_ENV, "https://sms.example.com/send"),
            (SMS_TOKEN_ENV, "sms-token"),
            (CALL_URL_ENV, "http://127.0.0.1:8080/call"),
        ])
        .unwrap();
        let sms = config.sms.unwrap();
        assert_eq!(sms.url, "https://sms.example.com/send");
        assert_eq!(sms.token.unwrap().expose(), "sms-token");
        let call = config.call.unwrap();
        assert!(call.token.is_none());

        let error = self::config(&[(CALL_TOKEN_ENV, "t")]).unwrap_err();
        assert_eq!(
            (error.var(), error.problem()),
            (CALL_TOKEN_ENV, "is set but HANE_CALL_URL is not")
        );
        let error = self::config(&[(SMS_URL_ENV, "ftp://x/y")]).unwrap_err();
        assert_eq!(error.var(), SMS_URL_ENV);
        let error = self::config(&[(SMS_URL_ENV, "https://user:pw@x/y")]).unwrap_err();
        assert!(!error.to_string().contains("pw@"), "{error}");
    }

    #[test]
    fn credentials_and_their_variables() {
        assert_eq!(credential_env_var("crm"), "HANE_CREDENTIAL_CRM");
        assert_eq!(credential_env_var("my-api.v2"), "HANE_CREDENTIAL_MY_API_V2");
        let config = config(&[
            ("HANE_CREDENTIAL_MY_API_V2", "s1"),
            ("HANE_CREDENTIAL_CRM", "s2"),
            ("HANE_CREDENTIALS", "not one"),
        ])
        .unwrap();
        assert_eq!(config.credential_for("my-api.v2").unwrap().expose(), "s1");
        assert_eq!(config.credential_for("crm").unwrap().expose(), "s2");
        assert!(config.holds_credential("CRM"));
        assert!(!config.holds_credential("other"));
        assert_eq!(config.credentials.len(), 2);
        let error = self::config(&[("HANE_CREDENTIAL_", "x")]).unwrap_err();
        assert_eq!(error.var(), "HANE_CREDENTIAL_");
    }

    #[test]
    fn timeout_variable() {
        let config = config(&[(TIMEOUT_ENV, "1500")]).unwrap();
        assert_eq!(config.timeout, Duration::from_millis(1500));
        for bad in ["0", "-1", "1.5", "soon"] {
            let error = self::config(&[(TIMEOUT_ENV, bad)]).unwrap_err();
            assert_eq!(error.var(), TIMEOUT_ENV);
            assert!(error.problem().contains(bad), "{error}");
        }
    }

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?} {secret}"), "*** ***");
        let mut config = DeliveryConfig::new();
        config
            .credential("crm", "hunter2")
            .sms(HttpProvider::new("http://x/").with_token("hunter2"));
        config.smtp(SmtpConfig {
            auth: Some(("user".into(), Secret::new("hunter2"))),
            ..SmtpConfig::new("h", SmtpTls::None, "a@b.c")
        });
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn a_provider_prints_without_its_query_user_or_token() {
        let provider = HttpProvider::new("https://user:pw@sms.example.com/send?key=s3cret")
            .with_token("t0ken");
        let shown = format!("{provider:?}");
        assert!(shown.contains("https://sms.example.com/send"), "{shown}");
        for secret in ["s3cret", "t0ken", "pw", "user"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
