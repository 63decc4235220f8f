//! The version envelope around everything hane stores or sends.
//!
//! A stored item is `HANE` (4 bytes), then postcard of `(kind, version,
//! payload)`, where the payload is postcard of the item itself. Readers
//! check the kind and version before touching the payload, so an item
//! written by a newer hane is refused with the version it carries and the
//! versions this build reads, instead of being misread.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Marks the start of every envelope.
const MAGIC: &[u8; 4] = b"HANE";

/// A type stored inside an envelope.
pub trait Versioned: Serialize + DeserializeOwned {
    /// What the item is, such as `session-event`; checked on read.
    const KIND: &'static str;
    /// The version this build writes.
    const VERSION: u16;
    /// Every version this build reads; includes [`Versioned::VERSION`].
    /// Reading an older version goes through [`Versioned::upgrade`].
    const READS: &'static [u16] = &[Self::VERSION];

    /// Decodes the payload of an older supported `version`. The default
    /// reads only [`Versioned::VERSION`].
    ///
    /// # Errors
    ///
    /// The payload does not decode as that version.
    fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
        debug_assert_eq!(version, Self::VERSION);
        postcard::from_bytes(payload)
    }
}

/// An envelope that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The bytes do not start with the envelope's marker.
    #[error("not a hane envelope: the data does not start with `HANE`")]
    NotAnEnvelope,
    /// The envelope holds another kind of item.
    #[error("expected a `{expected}` envelope, found a `{found}` one")]
    WrongKind {
        /// The kind asked for.
        expected: &'static str,
        /// The kind found.
        found: String,
    },
    /// The item was written in a version this build does not read, such as
    /// one written by a newer hane.
    #[error("`{kind}` version {found} is not supported: this build reads version{} {}", if .supported.len() == 1 { "" } else { "s" }, versions(.supported))]
    UnsupportedVersion {
        /// The kind of item.
        kind: &'static str,
        /// The version it carries.
        found: u16,
        /// The versions this build reads.
        supported: &'static [u16],
    },
    /// The envelope or its payload is damaged.
    #[error("`{kind}` envelope is corrupt: {message}")]
    Corrupt {
        /// The kind of item (or `envelope` for the envelope itself).
        kind: &'static str,
        /// What postcard said.
        message: String,
    },
}

fn versions(v: &[u16]) -> String {
    v.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
}

/// Wraps `item` in its envelope.
pub fn seal<T: Versioned>(item: &T) -> Vec<u8> {
    // Serializing plain data into a Vec cannot fail.
    let payload = postcard::to_allocvec(item).expect("postcard encodes to a Vec");
    let mut out = MAGIC.to_vec();
    let envelope = (T::KIND, T::VERSION, payload.as_slice());
    out.extend(postcard::to_allocvec(&envelope).expect("postcard encodes to a Vec"));
    out
}

/// Reads an item of type `T` from its envelope.
///
/// # Errors
///
/// The bytes are not an envelope, hold another kind, carry a version `T`
/// does not read, or are damaged.
pub fn open<T: Versioned>(bytes: &[u8]) -> Result<T, EnvelopeError> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or(EnvelopeError::NotAnEnvelope)?;
    let (kind, version, payload): (&str, u16, &[u8]) =
        postcard::from_bytes(body).map_err(|e| EnvelopeError::Corrupt {
            kind: "envelope",
            message: e.to_string(),
        })?;
    if kind != T::KIND {
        return Err(EnvelopeError::WrongKind {
            expected: T::KIND,
            found: kind.to_owned(),
        });
    }
    if !T::READS.contains(&version) {
        return Err(EnvelopeError::UnsupportedVersion {
            kind: T::KIND,
            found: version,
            supported: T::READS,
        });
    }
    let decoded = if version == T::VERSION {
        postcard::from_bytes(payload)
    } else {
        T::upgrade(version, payload)
    };
    decoded.map_err(|e| EnvelopeError::Corrupt {
        kind: T::KIND,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct NoteV2 {
        text: String,
        pinned: bool,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct NoteV1 {
        text: String,
    }

    impl Versioned for NoteV2 {
        const KIND: &'static str = "note";
        const VERSION: u16 = 2;
        const READS: &'static [u16] = &[1, 2];

        fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
            assert_eq!(version, 1);
            let old: NoteV1 = postcard::from_bytes(payload)?;
            Ok(NoteV2 {
                text: old.text,
                pinned: false,
            })
        }
    }

    impl Versioned for NoteV1 {
        const KIND: &'static str = "note";
        const VERSION: u16 = 1;
    }

    /// Written by a later build that added a field in version 3.
    #[derive(Serialize, Deserialize)]
    struct NoteV3 {
        text: String,
        pinned: bool,
        color: u8,
    }

    impl Versioned for NoteV3 {
        const KIND: &'static str = "note";
        const VERSION: u16 = 3;
    }

    #[derive(Debug, Serialize, Deserialize)]
    struct Other(u8);

    impl Versioned for Other {
        const KIND: &'static str = "other";
        const VERSION: u16 = 1;
    }

    #[test]
    fn items_round_trip() {
        let note = NoteV2 {
            text: "remember".into(),
            pinned: true,
        };
        let bytes = seal(&note);
        assert!(bytes.starts_with(b"HANE"));
        assert_eq!(open::<NoteV2>(&bytes).unwrap(), note);
    }

    #[test]
    fn older_supported_versions_are_upgraded() {
        let old = seal(&NoteV1 { text: "old".into() });
        assert_eq!(
            open::<NoteV2>(&old).unwrap(),
            NoteV2 {
                text: "old".into(),
                pinned: false
            }
        );
    }

    #[test]
    fn a_newer_version_is_refused_by_name_never_misread() {
        let future = seal(&NoteV3 {
            text: "new".into(),
            pinned: true,
            color: 7,
        });
        let err = open::<NoteV2>(&future).unwrap_err();
        assert_eq!(
            err,
            EnvelopeError::UnsupportedVersion {
                kind: "note",
                found: 3,
                supported: &[1, 2],
            }
        );
        assert_eq!(
            err.to_string(),
            "`note` version 3 is not supported: this build reads versions 1, 2"
        );
        let err = open::<NoteV1>(&seal(&NoteV2 {
            text: "x".into(),
            pinned: false,
        }))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`note` version 2 is not supported: this build reads version 1"
        );
    }

    /// A blob as a future build stores it, kept as bytes so this test does
    /// not depend on the type that wrote it.
    #[test]
    fn a_stored_future_blob_is_refused() {
        let mut blob = b"HANE".to_vec();
        blob.extend(postcard::to_allocvec(&("note", 9u16, &[1u8, 2, 3][..])).unwrap());
        assert!(matches!(
            open::<NoteV2>(&blob),
            Err(EnvelopeError::UnsupportedVersion { found: 9, .. })
        ));
    }

    #[test]
    fn other_kinds_and_damage_are_errors() {
        let other = seal(&Other(1));
        assert_eq!(
            open::<NoteV2>(&other).unwrap_err(),
            EnvelopeError::WrongKind {
                expected: "note",
                found: "other".into()
            }
        );
        assert_eq!(
            open::<NoteV2>(b"nope").unwrap_err(),
            EnvelopeError::NotAnEnvelope
        );
        let mut cut = seal(&NoteV2 {
            text: "truncated".into(),
            pinned: true,
        });
        cut.truncate(cut.len() - 4);
        assert!(matches!(
            open::<NoteV2>(&cut),
            Err(EnvelopeError::Corrupt { .. })
        ));
    }
}
