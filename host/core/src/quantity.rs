//! Sizes (`64Mi`), durations (`5s`) and the per-call [`Limits`] built from them.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A text quantity that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// A size such as `64Mi` was malformed.
    #[error(
        "invalid size `{0}`: expected a whole number with an optional unit Ki, Mi, Gi, Ti (powers of 1024) or k, M, G, T (powers of 1000), such as `64Mi`"
    )]
    Size(String),
    /// A duration such as `5s` was malformed.
    #[error(
        "invalid duration `{0}`: expected whole numbers with units ms, s, m or h, such as `5s`, `250ms` or `1m30s`"
    )]
    Duration(String),
}

/// A number of bytes, written like Kubernetes quantities: `64Mi`, `512Ki`,
/// `1G`, or a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

const BINARY_UNITS: [(&str, u64); 4] = [
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
    ("Mi", 1 << 20),
    ("Ki", 1 << 10),
];
const DECIMAL_UNITS: [(&str, u64); 4] = [
    ("T", 1_000_000_000_000),
    ("G", 1_000_000_000),
    ("M", 1_000_000),
    ("k", 1_000),
];

impl ByteSize {
    /// `n` KiB.
    pub const fn kibibytes(n: u64) -> Self {
        Self(n << 10)
    }

    /// `n` MiB.
    pub const fn mebibytes(n: u64) -> Self {
        Self(n << 20)
    }

    /// `n` GiB.
    pub const fn gibibytes(n: u64) -> Self {
        Self(n << 30)
    }

    /// The number of bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// The number of bytes as `usize`, saturating on 32-bit hosts.
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl FromStr for ByteSize {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || QuantityError::Size(s.to_owned());
        let text = s.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        if digits.is_empty() {
            return Err(err());
        }
        let n: u64 = digits.parse().map_err(|_| err())?;
        let multiplier = if unit.is_empty() {
            1
        } else {
            BINARY_UNITS
                .iter()
                .chain(DECIMAL_UNITS.iter())
                .find(|(name, _)| *name == unit)
                .map(|(_, m)| *m)
                .ok_or_else(err)?
        };
        n.checked_mul(multiplier).map(ByteSize).ok_or_else(err)
    }
}

impl fmt::Display for ByteSize {
    /// The largest binary unit that divides the size exactly, so `64Mi`
    /// prints back as `64Mi` and `1500` as `1500`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, m) in BINARY_UNITS {
            if self.0 >= m && self.0.is_multiple_of(m) {
                return write!(f, "{}{name}", self.0 / m);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as `64Mi` or a number of bytes")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("invalid size `{v}`: must not be negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
        }
        // Binary formats such as postcard are not self-describing; sizes are
        // always written as text, so read them back as text.
        if d.is_human_readable() {
            d.deserialize_any(V)
        } else {
            d.deserialize_str(V)
        }
    }
}

/// A span of time written as `5s`, `250ms`, `2m` or `1m30s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// `n` seconds.
    pub const fn seconds(n: u64) -> Self {
        Self(std::time::Duration::from_secs(n))
    }

    /// `n` milliseconds.
    pub const fn millis(n: u64) -> Self {
        Self(std::time::Duration::from_millis(n))
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

impl FromStr for Duration {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || QuantityError::Duration(s.to_owned());
        let mut rest = s.trim();
        if rest.is_empty() {
            return Err(err());
        }
        let mut total = std::time::Duration::ZERO;
        while !rest.is_empty() {
            let split = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
            let (digits, tail) = rest.split_at(split);
            let n: u64 = digits.parse().map_err(|_| err())?;
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let part = match unit {
                "ms" => std::time::Duration::from_millis(n),
                "s" => std::time::Duration::from_secs(n),
                "m" => std::time::Duration::from_secs(n.checked_mul(60).ok_or_else(err)?),
                "h" => std::time::Duration::from_secs(n.checked_mul(3600).ok_or_else(err)?),
                _ => return Err(err()),
            };
            total = total.checked_add(part).ok_or_else(err)?;
            rest = tail;
        }
        Ok(Duration(total))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) || ms == 0 {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// Everything one call may consume. Every limit has a default and each
/// exceeded limit ends the call with its own typed error.
///
/// | limit | default |
/// |---|---|
/// | `fuel` | 2,000,000,000 units (about one unit per wasm instruction) |
/// | `memory` | `64Mi` of linear memory, all memories together |
/// | `timeout` | `5s` of wall-clock time |
/// | `output_bytes` | `1Mi` of output JSON |
/// | `log_bytes` | `64Ki` of log messages |
/// | `http_requests` | 16 outgoing requests |
/// | `response_bytes` | `8Mi` of response bodies, all requests together |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Fuel units the guest may burn.
    pub fuel: u64,
    /// Linear memory, all of the component's memories together.
    pub memory: ByteSize,
    /// Wall-clock time from instantiation to the output being returned.
    pub timeout: Duration,
    /// Size of the output JSON text.
    pub output_bytes: ByteSize,
    /// Total size of log messages (the `log` import plus stdout and stderr).
    pub log_bytes: ByteSize,
    /// Number of outgoing HTTP requests.
    pub http_requests: u32,
    /// Total bytes of HTTP response bodies read by the guest.
    pub response_bytes: ByteSize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 2_000_000_000,
            memory: ByteSize::mebibytes(64),
            timeout: Duration::seconds(5),
            output_bytes: ByteSize::mebibytes(1),
            log_bytes: ByteSize::kibibytes(64),
            http_requests: 16,
            response_bytes: ByteSize::mebibytes(8),
        }
    }
}

/// Overrides of some limits, as written in a manifest's `spec.limits` or on
/// the command line; unset fields keep the value they are applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSpec {
    /// See [`Limits::fuel`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// See [`Limits::memory`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<ByteSize>,
    /// See [`Limits::timeout`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// See [`Limits::output_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<ByteSize>,
    /// See [`Limits::log_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<ByteSize>,
    /// See [`Limits::http_requests`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_requests: Option<u32>,
    /// See [`Limits::response_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<ByteSize>,
}

impl LimitsSpec {
    /// `base` with every field this spec sets replaced.
    pub fn apply_to(&self, base: Limits) -> Limits {
        Limits {
            fuel: self.fuel.unwrap_or(base.fuel),
            memory: self.memory.unwrap_or(base.memory),
            timeout: self.timeout.unwrap_or(base.timeout),
            output_bytes: self.output_bytes.unwrap_or(base.output_bytes),
            log_bytes: self.log_bytes.unwrap_or(base.log_bytes),
            http_requests: self.http_requests.unwrap_or(base.http_requests),
            response_bytes: self.response_bytes.unwrap_or(base.response_bytes),
        }
    }

    /// This spec with every field `other` sets replaced by `other`'s value.
    pub fn overridden_by(&self, other: &LimitsSpec) -> LimitsSpec {
        LimitsSpec {
            fuel: other.fuel.or(self.fuel),
            memory: other.memory.or(self.memory),
            timeout: other.timeout.or(self.timeout),
            output_bytes: other.output_bytes.or(self.output_bytes),
            log_bytes: other.log_bytes.or(self.log_bytes),
            http_requests: other.http_requests.or(self.http_requests),
            response_bytes: other.response_bytes.or(self.response_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!("64Mi".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
        assert_eq!("512Ki".parse::<ByteSize>().unwrap(), ByteSize(512 << 10));
        assert_eq!("2G".parse::<ByteSize>().unwrap(), ByteSize(2_000_000_000));
        assert_eq!("1500".parse::<ByteSize>().unwrap(), ByteSize(1500));
        assert_eq!(" 1Gi ".parse::<ByteSize>().unwrap(), ByteSize(1 << 30));
    }

    #[test]
    fn malformed_sizes_are_rejected_with_the_text() {
        for bad in ["", "Mi", "64MB", "-1", "1.5Gi", "64 Mi", "99999999999999Ti"] {
            let err = bad.parse::<ByteSize>().unwrap_err();
            assert_eq!(err, QuantityError::Size(bad.to_owned()), "{bad}");
        }
    }

    #[test]
    fn sizes_print_back_in_their_largest_exact_unit() {
        assert_eq!(ByteSize(64 << 20).to_string(), "64Mi");
        assert_eq!(ByteSize(1536).to_string(), "1536");
        assert_eq!(ByteSize(3 << 30).to_string(), "3Gi");
        assert_eq!(ByteSize(0).to_string(), "0");
    }

    #[test]
    fn durations_parse_units_and_combinations() {
        let d = |s: &str| s.parse::<Duration>().unwrap().0;
        assert_eq!(d("5s"), std::time::Duration::from_secs(5));
        assert_eq!(d("250ms"), std::time::Duration::from_millis(250));
        assert_eq!(d("1m30s"), std::time::Duration::from_secs(90));
        assert_eq!(d("2h"), std::time::Duration::from_secs(7200));
        for bad in ["", "5", "s", "5sec", "1.5s", "-1s", "5 s"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn durations_print_back() {
        assert_eq!(Duration::seconds(5).to_string(), "5s");
        assert_eq!(Duration::millis(1500).to_string(), "1500ms");
    }

    #[test]
    fn limits_spec_overrides_only_what_it_sets() {
        let spec = LimitsSpec {
            memory: Some(ByteSize::mebibytes(16)),
            http_requests: Some(2),
            ..LimitsSpec::default()
        };
        let limits = spec.apply_to(Limits::default());
        assert_eq!(limits.memory, ByteSize::mebibytes(16));
        assert_eq!(limits.http_requests, 2);
        assert_eq!(limits.fuel, Limits::default().fuel);
        assert_eq!(limits.timeout, Limits::default().timeout);

        let cli = LimitsSpec {
            memory: Some(ByteSize::mebibytes(8)),
            ..LimitsSpec::default()
        };
        let merged = spec.overridden_by(&cli);
        assert_eq!(merged.memory, Some(ByteSize::mebibytes(8)));
        assert_eq!(merged.http_requests, Some(2));
    }
}
