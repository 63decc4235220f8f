//! The lexical shortlist: BM25 over each agent's purpose and examples
//! (and its name and input fields' titles), pure and in memory.
//!
//! Words are lowercased runs of letters and digits, with a plural `s`
//! taken off and common English words left out; a run of Han, kana or
//! Hangul (which are written without spaces) becomes its single
//! characters and its pairs of neighbours, so `車検` matches inside
//! `車検証` as `inspection` matches `inspections`.

use std::collections::{BTreeMap, BTreeSet};

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;

/// Words too common to tell agents apart.
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "d", "did", "do", "does", "for", "from", "get", "give", "has", "have", "he",
    "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "know", "let", "like",
    "ll", "m", "me", "my", "need", "not", "of", "on", "or", "our", "please", "s", "she", "should",
    "so", "some", "t", "tell", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "to", "us", "up", "want", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// One agent's text, as indexed.
#[derive(Debug, Clone)]
struct Document {
    agent: String,
    terms: BTreeMap<String, u32>,
    length: u32,
}

/// A BM25 index of agents.
#[derive(Debug, Clone, Default)]
pub struct Index {
    documents: Vec<Document>,
    /// How many documents hold each term.
    frequency: BTreeMap<String, u32>,
    average_length: f64,
}

/// An agent and its score for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The agent.
    pub agent: String,
    /// Its BM25 score, above 0.
    pub score: f64,
}

impl Index {
    /// An index of `(agent, text)` pairs; an agent's text is everything it
    /// is known by, joined.
    pub fn new<'a>(agents: impl IntoIterator<Item = (&'a str, String)>) -> Self {
        let mut documents = Vec::new();
        let mut frequency: BTreeMap<String, u32> = BTreeMap::new();
        for (agent, text) in agents {
            let mut terms: BTreeMap<String, u32> = BTreeMap::new();
            let mut length = 0;
            for term in terms_of(&text) {
                *terms.entry(term).or_default() += 1;
                length += 1;
            }
            for term in terms.keys() {
                *frequency.entry(term.clone()).or_default() += 1;
            }
            documents.push(Document {
                agent: agent.to_owned(),
                terms,
                length,
            });
        }
        let total: u32 = documents.iter().map(|d| d.length).sum();
        let average_length = if documents.is_empty() {
            0.0
        } else {
            f64::from(total) / documents.len() as f64
        };
        Self {
            documents,
            frequency,
            average_length,
        }
    }

    /// The agents whose text shares a word with `query`, best first (ties
    /// by name), at most `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        let query: BTreeSet<String> = terms_of(query).collect();
        let n = self.documents.len() as f64;
        let mut scored: Vec<Scored> = self
            .documents
            .iter()
            .filter_map(|doc| {
                let score: f64 = query
                    .iter()
                    .filter_map(|term| {
                        let tf = f64::from(*doc.terms.get(term)?);
                        let df = f64::from(self.frequency[term]);
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        let norm = K1 * (1.0 - B + B * f64::from(doc.length) / self.average_length);
                        Some(idf * tf * (K1 + 1.0) / (tf + norm))
                    })
                    .sum();
                (score > 0.0).then(|| Scored {
                    agent: doc.agent.clone(),
                    score,
                })
            })
            .collect();
        scored.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.agent.cmp(&b.agent))
        });
        scored.truncate(limit);
        scored
    }
}

/// True for the scripts written without spaces between words.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF // hiragana, katakana
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF // Han
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xFF66..=0xFF9D) // half-width katakana
}

/// The terms of `text`, in order, repeated as often as they occur.
pub fn terms_of(text: &str) -> impl Iterator<Item = String> {
    let mut terms = Vec::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush_word = |word: &mut String, terms: &mut Vec<String>| {
        if word.is_empty() {
            return;
        }
        let mut w = std::mem::take(word);
        if STOPWORDS.contains(&w.as_str()) {
            return;
        }
        if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
            w.pop();
        }
        terms.push(w);
    };
    let flush_run = |run: &mut Vec<char>, terms: &mut Vec<String>| {
        for (i, c) in run.iter().enumerate() {
            terms.push(c.to_string());
            if let Some(next) = run.get(i + 1) {
                terms.push([*c, *next].iter().collect());
            }
        }
        run.clear();
    };
    for c in text.chars() {
        if unspaced(c) {
            flush_word(&mut word, &mut terms);
            run.push(c);
        } else if c.is_alphanumeric() {
            flush_run(&mut run, &mut terms);
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut terms);
            flush_run(&mut run, &mut terms);
        }
    }
    flush_word(&mut word, &mut terms);
    flush_run(&mut run, &mut terms);
    terms.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Index {
        Index::new([
            (
                "vehicle-check",
                "Look up a vehicle's model, inspection expiry, and mileage in the fleet ledger"
                    .to_owned(),
            ),
            (
                "lease-qa",
                "Summarize a vehicle lease contract from the lease documents".to_owned(),
            ),
            (
                "driver-text",
                "Send a short text message to a driver's phone".to_owned(),
            ),
        ])
    }

    #[test]
    fn words_are_lowercased_singular_and_without_common_ones() {
        let terms: Vec<String> = terms_of("What are the Inspections of THE vehicles?").collect();
        assert_eq!(terms, ["inspection", "vehicle"]);
    }

    #[test]
    fn unspaced_scripts_become_characters_and_pairs() {
        let terms: Vec<String> = terms_of("車検は").collect();
        assert_eq!(terms, ["車", "車検", "検", "検は", "は"]);
        let mixed: Vec<String> = terms_of("架空 300 あ").collect();
        assert_eq!(mixed, ["架", "架空", "空", "300", "あ"]);
    }

    #[test]
    fn the_best_match_comes_first_and_nothing_shared_scores_nothing() {
        let index = index();
        let found = index.search("When does the inspection of this vehicle expire?", 3);
        assert_eq!(found[0].agent, "vehicle-check");
        assert!(found.iter().all(|s| s.score > 0.0));
        let lease = index.search("What does my lease say about returning the car?", 3);
        assert_eq!(lease[0].agent, "lease-qa");
        assert!(index.search("Bake me a chocolate cake", 3).is_empty());
        assert!(index.search("", 3).is_empty());
        assert!(Index::new([]).search("vehicle", 3).is_empty());
    }

    #[test]
    fn a_rarer_word_weighs_more_than_a_common_one() {
        let index = index();
        // `vehicle` is in two agents' texts, `mileage` in one.
        let found = index.search("vehicle mileage", 3);
        assert_eq!(found[0].agent, "vehicle-check");
        assert_eq!(found[1].agent, "lease-qa");
        assert!(found[0].score > 2.0 * found[1].score, "{found:?}");
        assert_eq!(index.search("vehicle mileage", 1).len(), 1);
    }
}
