//! The fuzzing engine every target shares: mutation of a corpus, guided
//! by the outcomes a target reports, for a bounded time.
//!
//! Each target starts from seeds (valid inputs) and the regression inputs
//! kept under `tests/fuzz/regressions/TARGET/`, then mutates inputs from
//! its corpus: bytes (flips, interesting bytes, tokens from the target's
//! dictionary, cuts, copies, splices of two inputs) and, where an input
//! reads as JSON or as lines of YAML, its structure. The target answers
//! each input with its outcome, a short text such as `ok` or an error's
//! shape; an input that gives an outcome not seen before joins the
//! corpus. This is the feedback a coverage-guided fuzzer takes from
//! edges, taken here from what the code under test says, so it builds on
//! the pinned toolchain.
//!
//! A panic, anywhere in the process (a spawned task's too), or an input
//! that runs longer than [`STUCK`] is a crash: the input is written to
//! `target/fuzz/crashes/TARGET/`, and the test fails naming the file. A
//! crash fixed is kept as a regression input.
//!
//! `HANE_FUZZ_SECONDS` sets each target's time (10 s unless set);
//! `HANE_FUZZ_SEED` a seed, to repeat a run; `HANE_FUZZ_VERBOSE` prints
//! each new outcome.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest one input may run before it counts as a hang.
pub const STUCK: Duration = Duration::from_secs(20);

/// The most inputs kept in a corpus.
const MAX_CORPUS: usize = 4096;

/// The largest input made by mutation.
const MAX_INPUT: usize = 256 * 1024;

/// Panics, counted by the name of the thread they happened on, by the
/// hook [`count_panics`] installs: a panic a runtime caught (a spawned
/// task's) is found there too. A target's runtime names its threads with
/// [`threads`].
static PANICS: Mutex<Vec<(String, u64, String)>> = Mutex::new(Vec::new());

fn count_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current().name().unwrap_or_default().to_owned();
            let mut panics = PANICS.lock().unwrap_or_else(|e| e.into_inner());
            match panics.iter_mut().find(|(name, ..)| *name == thread) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = info.to_string();
                }
                None => panics.push((thread, 1, info.to_string())),
            }
            drop(panics);
            previous(info);
        }));
    });
}

/// The name a target's runtime gives its threads.
pub fn threads(target: &str) -> String {
    format!("fuzz-{target}")
}

/// A runtime for `target`, its threads named [`threads`] so that a panic
/// on one is the target's.
pub fn runtime(target: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name(threads(target))
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Panics so far on the threads named `names`, and the last one's message.
fn panics(names: &[&str]) -> (u64, String) {
    let panics = PANICS.lock().unwrap_or_else(|e| e.into_inner());
    let mut count = 0;
    let mut last = String::new();
    for (name, n, message) in panics.iter() {
        if names.contains(&name.as_str()) {
            count += n;
            last.clone_from(message);
        }
    }
    (count, last)
}

/// The input running and since when, for the watchdog.
type Running = Option<(Instant, Vec<u8>)>;

/// How a target's structure-aware mutations read its inputs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Bytes: byte mutations only.
    Bytes,
    /// JSON text: also mutated as a JSON value.
    Json,
    /// YAML text: also mutated line by line and scalar by scalar.
    Yaml,
    /// A first line, then JSON text mutated as [`Shape::Json`] is.
    HeadedJson,
}

/// A fuzz target's settings.
pub struct Target {
    /// Its name: the folder of its regressions and crashes.
    pub name: &'static str,
    /// Valid inputs to start from.
    pub seeds: Vec<Vec<u8>>,
    /// Tokens worth inserting, beyond the shared ones.
    pub dictionary: Vec<Vec<u8>>,
    /// How its inputs are read.
    pub shape: Shape,
}

/// What a fuzz run did.
#[derive(Debug)]
pub struct Report {
    pub inputs: u64,
    pub corpus: usize,
    pub outcomes: usize,
    pub seconds: f64,
}

/// Tokens every target gets.
fn shared_tokens() -> Vec<Vec<u8>> {
    [
        "\"",
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\\",
        "\\u0000",
        "\\u001b[2J",
        "\\ud800",
        "null",
        "true",
        "-1",
        "0",
        "1e999",
        "-0",
        "18446744073709551616",
        "9007199254740993",
        "\u{1b}[31m",
        "\u{202e}",
        "\u{0}",
        "\r\n",
        "\n",
        "~",
        "*a",
        "&a",
        "!!binary",
        "- ",
        "---",
        "@",
        "%",
        "sha256:",
        "run_",
        "ses_",
        "act_",
        "key:",
    ]
    .iter()
    .map(|t| t.as_bytes().to_vec())
    .collect()
}

/// Values a JSON node may become.
fn interesting_values(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => Value::from(-1),
        3 => Value::from(u64::MAX),
        4 => Value::from(i64::MIN),
        5 => Value::from(1.5e300),
        6 => Value::from(""),
        7 => Value::from("x".repeat(1 + rng.below(70_000))),
        8 => Value::from("a\u{1b}[2J\u{0}\u{202e}b"),
        9 => Value::Array(vec![]),
        10 => Value::Object(Default::default()),
        11 => {
            let mut v = Value::Null;
            for _ in 0..(1 + rng.below(300)) {
                v = Value::Array(vec![v]);
            }
            v
        }
        12 => Value::from(0),
        13 => Value::from("sha256:0000"),
        14 => Value::from(rng.next() as i64),
        _ => Value::from("../../etc/passwd"),
    }
}

/// xorshift64*: small, fast and repeatable from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Runs `target` on seeds, regressions and mutated inputs for the time
/// `HANE_FUZZ_SECONDS` gives, failing on a crash.
pub fn fuzz(spec: Target, mut target: impl FnMut(&[u8]) -> String) -> Report {
    count_panics();
    let seconds: f64 = std::env::var("HANE_FUZZ_SECONDS")
        .ok()
        .map(|s| s.parse().expect("HANE_FUZZ_SECONDS is a number of seconds"))
        .unwrap_or(10.0);
    let seed = std::env::var("HANE_FUZZ_SEED")
        .ok()
        .map(|s| s.parse().expect("HANE_FUZZ_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let verbose = std::env::var_os("HANE_FUZZ_VERBOSE").is_some();
    let mut rng = Rng::new(seed);
    let mut dictionary = shared_tokens();
    dictionary.extend(spec.dictionary.iter().cloned());

    // The watchdog: an input still running after STUCK is written out and
    // the process aborted, since a hung thread cannot be stopped.
    let current: Arc<Mutex<Running>> = Arc::new(Mutex::new(None));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let current = current.clone();
        let stop = stop.clone();
        let name = spec.name;
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                let guard = current.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((started, input)) = guard.as_ref()
                    && started.elapsed() > STUCK
                {
                    let path = save_crash(name, input);
                    eprintln!(
                        "fuzz {name}: an input ran longer than {STUCK:?}; it is in {}",
                        path.display()
                    );
                    std::process::abort();
                }
            }
        })
    };

    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut outcomes: HashSet<u64> = HashSet::new();
    let mut inputs = 0u64;
    let started = Instant::now();
    let this = std::thread::current().name().unwrap_or_default().to_owned();
    let runtime = threads(spec.name);
    let watched = [this.as_str(), runtime.as_str()];
    let mut one = |input: &[u8], corpus: &mut Vec<Vec<u8>>| {
        *current.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), input.to_vec()));
        let (before, _) = panics(&watched);
        let outcome = catch_unwind(AssertUnwindSafe(|| target(input)));
        *current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let (after, message) = panics(&watched);
        let panicked = after != before;
        match outcome {
            Ok(outcome) if !panicked => {
                let shape = shape_of(&outcome);
                if outcomes.insert(hash(&shape)) {
                    if verbose {
                        eprintln!("fuzz {}: new outcome {shape}", spec.name);
                    }
                    if corpus.len() < MAX_CORPUS {
                        corpus.push(input.to_vec());
                    }
                }
            }
            _ => {
                let path = save_crash(spec.name, input);
                panic!(
                    "fuzz {}: crashed ({message}) on the input in {}",
                    spec.name,
                    path.display()
                );
            }
        }
    };
    for input in regressions(spec.name).iter().chain(&spec.seeds) {
        one(input, &mut corpus);
        inputs += 1;
        // Seeds stay whatever their outcome.
        if !corpus.iter().any(|c| c == input) {
            corpus.push(input.clone());
        }
    }
    while started.elapsed().as_secs_f64() < seconds {
        let mut input = corpus[rng.below(corpus.len())].clone();
        for _ in 0..(1 + rng.below(4)) {
            let other = &corpus[rng.below(corpus.len())];
            mutate(&mut input, other, spec.shape, &dictionary, &mut rng);
        }
        input.truncate(MAX_INPUT);
        one(&input, &mut corpus);
        inputs += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    let report = Report {
        inputs,
        corpus: corpus.len(),
        outcomes: outcomes.len(),
        seconds: started.elapsed().as_secs_f64(),
    };
    eprintln!(
        "fuzz {}: {} inputs in {:.0} s (seed {seed}), {} outcomes, corpus {}, no crash",
        spec.name, report.inputs, report.seconds, report.outcomes, report.corpus
    );
    report
}

/// An outcome's shape: numbers, quoted text and other marks left out, so
/// that one error about many values is one outcome.
fn shape_of(outcome: &str) -> String {
    let mut shape = String::new();
    let mut quoted = None;
    for c in outcome.chars().take(240) {
        match quoted {
            Some(q) if c == q => quoted = None,
            Some(_) => {}
            None if c == '`' || c == '"' => {
                quoted = Some(c);
                shape.push('…');
            }
            None if c.is_ascii_digit() && !shape.ends_with('#') => shape.push('#'),
            None if c.is_ascii_digit() => {}
            // Letters and the marks between clauses say what happened;
            // anything else is likely a value echoed unquoted.
            None if c.is_ascii_alphabetic() || " :;,".contains(c) => shape.push(c),
            None => {}
        }
    }
    shape.chars().take(96).collect()
}

fn hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The inputs kept under `tests/fuzz/regressions/NAME/`.
fn regressions(name: &str) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/regressions").join(name);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

fn save_crash(name: &str, input: &[u8]) -> PathBuf {
    let dir = root().join("../target/fuzz/crashes").join(name);
    let _ = std::fs::create_dir_all(&dir);
    let mut h = DefaultHasher::new();
    input.hash(&mut h);
    let path = dir.join(format!("crash-{:016x}", h.finish()));
    let _ = std::fs::write(&path, input);
    path
}

/// One mutation of `input`; `other` is another corpus input to splice.
fn mutate(input: &mut Vec<u8>, other: &[u8], shape: Shape, dictionary: &[Vec<u8>], rng: &mut Rng) {
    if shape == Shape::Json && rng.below(3) == 0 && mutate_json(input, other, rng) {
        return;
    }
    if shape == Shape::Yaml && rng.below(3) == 0 {
        mutate_lines(input, other, rng);
        return;
    }
    // A headed input's line changes one time in ten; its body the rest.
    if shape == Shape::HeadedJson
        && rng.below(10) != 0
        && let Some(at) = input.iter().position(|&b| b == b'\n')
    {
        let mut body = input.split_off(at + 1);
        let donor = other
            .iter()
            .position(|&b| b == b'\n')
            .map_or(other, |i| &other[i + 1..]);
        mutate(&mut body, donor, Shape::Json, dictionary, rng);
        input.extend(body);
        return;
    }
    let at = |rng: &mut Rng, len: usize| rng.below(len + 1);
    match rng.below(9) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] = [0, 0xff, 0x7f, 0x80, b'"', b'\\', 0x1b, b'\n', b'{', b'['][rng.below(10)];
        }
        2 | 3 => {
            let token = &dictionary[rng.below(dictionary.len())];
            let i = at(rng, input.len());
            input.splice(i..i, token.iter().copied());
        }
        4 if !input.is_empty() => {
            let i = rng.below(input.len());
            let n = 1 + rng.below((input.len() - i).min(64));
            input.drain(i..i + n);
        }
        5 if !input.is_empty() => {
            let i = rng.below(input.len());
            let n = 1 + rng.below((input.len() - i).min(256));
            let copy: Vec<u8> = input[i..i + n].to_vec();
            let j = at(rng, input.len());
            for _ in 0..(1 + rng.below(3)) {
                input.splice(j..j, copy.iter().copied());
            }
        }
        6 if !other.is_empty() => {
            let i = at(rng, input.len());
            let j = rng.below(other.len());
            input.truncate(i);
            input.extend_from_slice(&other[j..]);
        }
        7 if !input.is_empty() => {
            input.truncate(rng.below(input.len()));
        }
        _ => {
            let i = at(rng, input.len());
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            input.splice(i..i, bytes);
        }
    }
}

/// Mutates `input` as a JSON value; false when it does not read as one.
fn mutate_json(input: &mut Vec<u8>, other: &[u8], rng: &mut Rng) -> bool {
    let Ok(mut value) = serde_json::from_slice::<Value>(input) else {
        return false;
    };
    let donor = serde_json::from_slice::<Value>(other).ok();
    let mut nodes = 0;
    count_nodes(&value, &mut nodes);
    let target = rng.below(nodes.max(1));
    let mut seen = 0;
    let node = nth_node(&mut value, target, &mut seen).expect("a node");
    match rng.below(6) {
        0 | 1 => *node = interesting_values(rng),
        2 => {
            if let Some(donor) = donor {
                let mut n = 0;
                count_nodes(&donor, &mut n);
                let mut donor = donor;
                let mut s = 0;
                let pick = rng.below(n.max(1));
                *node = nth_node(&mut donor, pick, &mut s).expect("a node").take();
            }
        }
        3 => {
            if let Value::Object(map) = node
                && !map.is_empty()
            {
                let key = map
                    .keys()
                    .nth(rng.below(map.len()))
                    .cloned()
                    .expect("a key");
                map.remove(&key);
            }
        }
        4 => {
            if let Value::Object(map) = node {
                let keys = ["id", "type", "name", "input", "content", "role", "x", ""];
                map.insert(
                    keys[rng.below(keys.len())].to_owned(),
                    interesting_values(rng),
                );
            } else if let Value::Array(items) = node {
                items.push(interesting_values(rng));
            }
        }
        _ => {
            // A key given twice, which no JSON value can hold.
            let text = serde_json::to_string(&value).expect("JSON");
            if let Some(i) = text.find('{')
                && let Some(end) = text[i..].find(',')
            {
                let first = text[i + 1..i + end].to_owned();
                *input = format!("{}{},{}", &text[..=i], first, &text[i + 1..]).into_bytes();
                return true;
            }
        }
    }
    *input = serde_json::to_vec(&value).expect("JSON");
    true
}

fn count_nodes(value: &Value, n: &mut usize) {
    *n += 1;
    match value {
        Value::Array(items) => items.iter().for_each(|v| count_nodes(v, n)),
        Value::Object(map) => map.values().for_each(|v| count_nodes(v, n)),
        _ => {}
    }
}

fn nth_node<'a>(value: &'a mut Value, target: usize, seen: &mut usize) -> Option<&'a mut Value> {
    if *seen == target {
        return Some(value);
    }
    *seen += 1;
    match value {
        Value::Array(items) => items
            .iter_mut()
            .find_map(|v| nth_node_inner(v, target, seen)),
        Value::Object(map) => map
            .values_mut()
            .find_map(|v| nth_node_inner(v, target, seen)),
        _ => None,
    }
}

fn nth_node_inner<'a>(
    value: &'a mut Value,
    target: usize,
    seen: &mut usize,
) -> Option<&'a mut Value> {
    nth_node(value, target, seen)
}

/// Mutates `input` as lines of YAML: lines copied, dropped, swapped,
/// indented, or a scalar after `: ` replaced.
fn mutate_lines(input: &mut Vec<u8>, other: &[u8], rng: &mut Rng) {
    let text = String::from_utf8_lossy(input).into_owned();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let donor: Vec<String> = String::from_utf8_lossy(other)
        .lines()
        .map(str::to_owned)
        .collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let i = rng.below(lines.len());
    match rng.below(6) {
        0 => {
            let line = lines[i].clone();
            lines.insert(rng.below(lines.len() + 1), line);
        }
        1 => {
            lines.remove(i);
        }
        2 => {
            let j = rng.below(lines.len());
            lines.swap(i, j);
        }
        3 => {
            if rng.below(2) == 0 {
                lines[i].insert_str(0, "  ");
            } else if let Some(rest) = lines[i].strip_prefix("  ") {
                lines[i] = rest.to_owned();
            }
        }
        4 if !donor.is_empty() => {
            let line = donor[rng.below(donor.len())].clone();
            lines.insert(rng.below(lines.len() + 1), line);
        }
        _ => {
            let scalars = [
                "~",
                "-1",
                "1e999",
                "\"\\e[2J\"",
                "[a, b]",
                "{}",
                "*nope",
                "&a x",
                "!!binary AAAA",
                "0x10",
                "yes",
                "\"\"",
                "18446744073709551616",
                "|",
                ">-",
                "- a",
                "'''",
                "\"\\u202e\"",
                "60s",
                "1 GiB",
                "-5 MiB",
                "999999999999 ms",
            ];
            let scalar = scalars[rng.below(scalars.len())];
            if let Some(at) = lines[i].find(": ") {
                lines[i].truncate(at + 2);
                lines[i].push_str(scalar);
            } else {
                lines[i].push_str(": ");
                lines[i].push_str(scalar);
            }
        }
    }
    *input = lines.join("\n").into_bytes();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &'static str, seed: &str) -> Target {
        Target {
            name,
            seeds: vec![seed.as_bytes().to_vec()],
            dictionary: Vec::new(),
            shape: Shape::Bytes,
        }
    }

    #[test]
    #[should_panic(expected = "fuzz engine_panics: crashed (panicked at")]
    fn a_panic_in_the_target_is_a_crash() {
        fuzz(target("engine_panics", "boom"), |bytes| {
            assert!(bytes != b"boom", "the target broke");
            "ok".into()
        });
    }

    #[test]
    #[should_panic(expected = "fuzz engine_tasks: crashed (panicked at")]
    fn a_panic_in_a_task_the_runtime_caught_is_a_crash() {
        let tokio = runtime("engine_tasks");
        fuzz(target("engine_tasks", "boom"), |bytes| {
            let bytes = bytes.to_vec();
            let task = tokio.spawn(async move { assert!(bytes != b"boom", "the task broke") });
            // The runtime catches the task's panic: the join says so, the
            // target does not look.
            let _ = tokio.block_on(task);
            "ok".into()
        });
    }

    #[test]
    fn mutation_finds_new_outcomes_and_keeps_their_inputs() {
        // Outcomes by the input's first byte: mutation reaches many of
        // them from one seed.
        let report = fuzz(
            Target {
                name: "engine_outcomes",
                seeds: vec![b"a".to_vec()],
                dictionary: Vec::new(),
                shape: Shape::Bytes,
            },
            |bytes| match bytes.first() {
                Some(b) => format!("first {}", char::from(b'a' + b % 26)),
                None => "empty".into(),
            },
        );
        assert!(report.outcomes > 10, "{report:?}");
        assert!(report.corpus > 10, "{report:?}");
    }
}
