//! [`RunToken`]: the short-lived, signed proof that a call belongs to a run.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hane_core::RunId;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The prefix and version of the token format.
const PREFIX: &str = "hrt1";

/// A token as a driver holds it: `hrt1.RUN.EXPIRY_MS.SIGNATURE`, the
/// signature an HMAC-SHA256 of the first three parts under the runtime's
/// key. It names one run and expires; it grants nothing by itself — the
/// gateway still checks the run's tools, state and limits on every call.
#[derive(Clone, PartialEq, Eq)]
pub struct RunToken(String);

impl RunToken {
    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A token from text received from a driver; checked by
    /// [`RunTokenKey::verify`].
    pub fn from_text(text: impl Into<String>) -> Self {
        RunToken(text.into())
    }
}

impl std::fmt::Debug for RunToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The signature is a credential: never in logs.
        let shown = self.0.rsplit_once('.').map_or("?", |(head, _)| head);
        write!(f, "RunToken({shown}.…)")
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a token of this format.
    #[error("malformed run token")]
    Malformed,
    /// The signature does not match: forged or altered.
    #[error("run token signature does not match")]
    BadSignature,
    /// The token expired.
    #[error("run token expired")]
    Expired,
}

/// The secret that signs and checks run tokens. A new one per process by
/// default, so tokens die with the process that issued them.
#[derive(Clone)]
pub struct RunTokenKey([u8; 32]);

impl std::fmt::Debug for RunTokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunTokenKey(…)")
    }
}

impl RunTokenKey {
    /// A random key.
    pub fn generate() -> Self {
        let mut key = [0; 32];
        getrandom::fill(&mut key).expect("the operating system provides random bytes");
        RunTokenKey(key)
    }

    /// A key from bytes held elsewhere.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        RunTokenKey(bytes)
    }

    /// A token for `run` valid for `ttl` from now.
    pub fn issue(&self, run: &RunId, ttl: Duration) -> RunToken {
        self.issue_until(run, SystemTime::now() + ttl)
    }

    /// A token for `run` that expires at `expiry`.
    pub fn issue_until(&self, run: &RunId, expiry: SystemTime) -> RunToken {
        let ms = expiry
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let head = format!("{PREFIX}.{run}.{ms}");
        let signature = hex::encode(self.sign(&head));
        RunToken(format!("{head}.{signature}"))
    }

    /// The run a token names, if its signature matches and it has not
    /// expired.
    ///
    /// # Errors
    ///
    /// Malformed, forged or altered, or expired.
    pub fn verify(&self, token: &RunToken) -> Result<RunId, TokenError> {
        let (head, signature) = token.0.rsplit_once('.').ok_or(TokenError::Malformed)?;
        let signature = hex::decode(signature).map_err(|_| TokenError::Malformed)?;
        let mut mac = self.mac();
        mac.update(head.as_bytes());
        // Constant-time comparison.
        mac.verify_slice(&signature)
            .map_err(|_| TokenError::BadSignature)?;
        let mut parts = head.split('.');
        let (Some(PREFIX), Some(run), Some(ms), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let run: RunId = run.parse().map_err(|_| TokenError::Malformed)?;
        let ms: u64 = ms.parse().map_err(|_| TokenError::Malformed)?;
        if SystemTime::now() >= UNIX_EPOCH + Duration::from_millis(ms) {
            return Err(TokenError::Expired);
        }
        Ok(run)
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }

    fn sign(&self, head: &str) -> Vec<u8> {
        let mut mac = self.mac();
        mac.update(head.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_run_until_it_expires() {
        let key = RunTokenKey::generate();
        let run = RunId::new();
        let token = key.issue(&run, Duration::from_secs(60));
        assert_eq!(key.verify(&token), Ok(run.clone()));
        let expired = key.issue_until(&run, SystemTime::now() - Duration::from_secs(1));
        assert_eq!(key.verify(&expired), Err(TokenError::Expired));
        assert!(!format!("{token:?}").contains(token.as_str().rsplit('.').next().unwrap()));
    }

    #[test]
    fn forged_and_altered_tokens_are_refused() {
        let key = RunTokenKey::generate();
        let run = RunId::new();
        let token = key.issue(&run, Duration::from_secs(60));
        // Signed by another key.
        let other = RunTokenKey::generate().issue(&run, Duration::from_secs(60));
        assert_eq!(key.verify(&other), Err(TokenError::BadSignature));
        // Another run, or a later expiry, under the old signature.
        let (head, signature) = token.as_str().rsplit_once('.').unwrap();
        let another_run = head.replace(run.as_str(), RunId::new().as_str());
        let forged = RunToken::from_text(format!("{another_run}.{signature}"));
        assert_eq!(key.verify(&forged), Err(TokenError::BadSignature));
        let (prefix, _) = head.rsplit_once('.').unwrap();
        let later = RunToken::from_text(format!("{prefix}.99999999999999.{signature}"));
        assert_eq!(key.verify(&later), Err(TokenError::BadSignature));
        for text in ["", "hrt1", "hrt1.x.y.zz", "not a token at all"] {
            assert!(key.verify(&RunToken::from_text(text)).is_err(), "{text}");
        }
    }
}
