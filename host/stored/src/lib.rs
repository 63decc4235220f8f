//! How hane stores its items. Everything hane stores goes through [`seal`]
//! and [`open`]: a version envelope that names the item's kind and version
//! and refuses an item of an unknown version instead of misreading it.
//!
//! Each stored type of `hane-core` has its kind and version here, with the
//! frozen mirrors of the older versions a build still reads (`v1`, `v2`,
//! `v3`): postcard is not self-describing, so an old payload decodes only
//! as a copy of the old shape, which then converts to today's type.
//!
//! # Examples
//!
//! ```
//! use hane_core::{Conversation, ConversationId};
//!
//! let conversation = Conversation {
//!     id: ConversationId::new(),
//!     agent: "fleet-assistant".to_owned(),
//!     created_at_ms: 3,
//! };
//! let bytes = hane_stored::seal(&conversation);
//! assert_eq!(hane_stored::open::<Conversation>(&bytes).unwrap(), conversation);
//! ```

mod envelope;
mod kinds;
mod v1;
mod v2;
mod v3;

pub use envelope::{EnvelopeError, Versioned, open, seal};
