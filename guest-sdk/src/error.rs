use std::io;

/// An error an operation reports to the host.
///
/// The four cases are the WIT `error` variant: each tells the model what it
/// can do about the failure (fix the input, look elsewhere, ask for access,
/// or give up). The string is a lowercase message for people and models.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is malformed or asks for something impossible.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// What the input names does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The host did not grant what the operation needed.
    #[error("denied: {0}")]
    Denied(String),
    /// Anything else went wrong.
    #[error("failed: {0}")]
    Failed(String),
}

impl Error {
    /// The message without the name of the case.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidInput(m) | Self::NotFound(m) | Self::Denied(m) | Self::Failed(m) => m,
        }
    }

    /// Classifies an I/O error as `From<std::io::Error>` does, with `context`
    /// (usually the path involved) before its message.
    ///
    /// # Examples
    ///
    /// ```
    /// use hane_guest::Error;
    ///
    /// let err = std::io::Error::from(std::io::ErrorKind::NotFound);
    /// assert!(matches!(Error::from_io(&err, "/docs/a.md"), Error::NotFound(m) if m.starts_with("/docs/a.md: ")));
    /// ```
    pub fn from_io(err: &io::Error, context: impl std::fmt::Display) -> Self {
        Self::with_io_kind(err.kind(), format!("{context}: {err}"))
    }

    fn with_io_kind(kind: io::ErrorKind, message: String) -> Self {
        match kind {
            io::ErrorKind::NotFound => Self::NotFound(message),
            io::ErrorKind::PermissionDenied => Self::Denied(message),
            io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => Self::InvalidInput(message),
            _ => Self::Failed(message),
        }
    }
}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Self {
        Self::with_io_kind(err.kind(), err.to_string())
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_owned())
    }
}

/// JSON that does not fit the expected shape is the caller's mistake.
impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Self::InvalidInput(err.to_string())
    }
}

/// An error a host capability returned, as the same case.
impl From<crate::wit::Error> for Error {
    fn from(err: crate::wit::Error) -> Self {
        use crate::wit::Error as Wit;
        match err {
            Wit::InvalidInput(m) => Self::InvalidInput(m),
            Wit::NotFound(m) => Self::NotFound(m),
            Wit::Denied(m) => Self::Denied(m),
            Wit::Failed(m) => Self::Failed(m),
        }
    }
}

impl From<Error> for crate::wit::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::InvalidInput(m) => Self::InvalidInput(m),
            Error::NotFound(m) => Self::NotFound(m),
            Error::Denied(m) => Self::Denied(m),
            Error::Failed(m) => Self::Failed(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_lowercase_and_names_the_case() {
        assert_eq!(
            Error::InvalidInput("limit must be at most 50".into()).to_string(),
            "invalid input: limit must be at most 50"
        );
        assert_eq!(
            Error::NotFound("/docs/a.md".into()).to_string(),
            "not found: /docs/a.md"
        );
        assert_eq!(Error::Denied("/etc".into()).to_string(), "denied: /etc");
        assert_eq!(Error::Failed("boom".into()).to_string(), "failed: boom");
    }

    #[test]
    fn io_errors_map_by_kind() {
        let cases = [
            (io::ErrorKind::NotFound, "NotFound"),
            (io::ErrorKind::PermissionDenied, "Denied"),
            (io::ErrorKind::InvalidInput, "InvalidInput"),
            (io::ErrorKind::InvalidData, "InvalidInput"),
            (io::ErrorKind::TimedOut, "Failed"),
            (io::ErrorKind::Other, "Failed"),
        ];
        for (kind, case) in cases {
            let err = Error::from(io::Error::new(kind, "boom"));
            assert!(format!("{err:?}").starts_with(case), "{kind:?} -> {err:?}");
            assert_eq!(err.message(), "boom");
        }
    }

    #[test]
    fn io_errors_with_context_name_the_path() {
        let err = Error::from_io(&io::Error::from(io::ErrorKind::NotFound), "/docs/a.md");
        assert!(matches!(&err, Error::NotFound(m) if m.starts_with("/docs/a.md: ")));
    }

    #[test]
    fn strings_are_failures_and_json_errors_are_invalid_input() {
        assert_eq!(Error::from("boom"), Error::Failed("boom".into()));
        assert_eq!(
            Error::from(String::from("boom")),
            Error::Failed("boom".into())
        );
        let json = serde_json::from_str::<u32>("\"x\"").unwrap_err();
        assert!(matches!(Error::from(json), Error::InvalidInput(_)));
    }

    #[test]
    fn converts_to_the_wit_error_without_the_case_prefix() {
        let wit: crate::wit::Error = Error::Denied("no grant".into()).into();
        assert!(matches!(wit, crate::wit::Error::Denied(m) if m == "no grant"));
    }
}
