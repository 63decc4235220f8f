//! [`Inbox`]: a session's recent input ids, in memory.

use std::collections::{HashSet, VecDeque};

use hane_core::InputId;

/// The input ids a session accepted lately, so that a redelivery is turned
/// away without a trip to the store.
///
/// The inbox is volatile and bounded: it forgets the oldest ids beyond its
/// capacity and everything on restart. It is a fast path, not the guard;
/// the store refuses a second copy of an input durably.
#[derive(Debug, Clone)]
pub struct Inbox {
    capacity: usize,
    seen: HashSet<InputId>,
    order: VecDeque<InputId>,
}

impl Inbox {
    /// How many ids an inbox keeps unless told otherwise.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// An empty inbox that keeps up to `capacity` ids (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// Whether `id` was remembered and not yet forgotten.
    pub fn contains(&self, id: &InputId) -> bool {
        self.seen.contains(id)
    }

    /// Remembers `id`, forgetting the oldest id when full.
    pub fn remember(&mut self, id: InputId) {
        if self.seen.contains(&id) {
            return;
        }
        if self.order.len() == self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        self.seen.insert(id.clone());
        self.order.push_back(id);
    }

    /// How many ids it holds.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

impl Default for Inbox {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> InputId {
        format!("input-{n}").parse().unwrap()
    }

    #[test]
    fn remembers_up_to_its_capacity_and_forgets_the_oldest() {
        let mut inbox = Inbox::new(3);
        for n in 0..5 {
            inbox.remember(id(n));
        }
        assert_eq!(inbox.len(), 3);
        assert!(!inbox.contains(&id(0)));
        assert!(!inbox.contains(&id(1)));
        assert!((2..5).all(|n| inbox.contains(&id(n))));
    }

    #[test]
    fn remembering_twice_keeps_one_entry() {
        let mut inbox = Inbox::new(2);
        inbox.remember(id(1));
        inbox.remember(id(1));
        inbox.remember(id(2));
        assert_eq!(inbox.len(), 2);
        assert!(inbox.contains(&id(1)) && inbox.contains(&id(2)));
    }
}
