//! How commands show what they did: runs and their turns, receptions,
//! receipts, evaluations, times. Everything a person sees goes through
//! [`crate::terminal`]'s escaping first.

use crate::terminal::terminal_json;
use crate::terminal::terminal_line;
use crate::terminal::terminal_text;
use hane_coordinator::AgentRuntime;
use hane_core::AgentRun;
use hane_core::Evaluation;
use hane_core::LlmTurn;
use hane_core::Receipt;
use hane_core::Reception;
use hane_core::Task;
use hane_core::evaluation::CaseResult;
use hane_core::evaluation::Difference;
use hane_core::evaluation::EvaluationComparison;
use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;
use std::time::UNIX_EPOCH;

use hane_coordinator::Skipped;
use hane_core::evaluation::{CaseChange, CaseOutcome};

/// `line`, at most `max` characters.
pub(crate) fn cut_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

pub(crate) fn result_status(run: &AgentRun) -> String {
    run.result
        .as_ref()
        .and_then(|r| r.to_value().ok())
        .and_then(|v| v.get("status").and_then(|s| s.as_str()).map(str::to_owned))
        .map(|s| format!("→ {s}"))
        .unwrap_or_default()
}

pub(crate) async fn print_run(
    runtime: &AgentRuntime,
    run: &AgentRun,
    json: bool,
) -> anyhow::Result<()> {
    let tasks = runtime.tasks(&run.id).await?;
    note_skipped(("task", "tasks"), &tasks.skipped);
    let tasks: Vec<Task> = tasks.items;
    let turns = runtime.llm_turns(&run.id).await?;
    let cli = runtime.cli_output(&run.id).await?;
    if json {
        let mut value = serde_json::to_value(run)?;
        value["taskDetails"] = serde_json::to_value(&tasks)?;
        value["llmTurns"] = serde_json::to_value(&turns)?;
        if let Some(cli) = &cli {
            value["cliOutput"] = serde_json::to_value(cli)?;
        }
        println!("{}", terminal_json(&value)?);
        return Ok(());
    }
    let elapsed = run.updated_at_ms.saturating_sub(run.created_at_ms);
    println!(
        "run {}  {}  {}  (release {}, {} tool call{}, {elapsed} ms{})",
        run.id,
        terminal_line(&run.agent),
        run.status,
        run.release,
        run.tool_calls.len(),
        if run.tool_calls.len() == 1 { "" } else { "s" },
        if run.shadow { ", shadow" } else { "" }
    );
    println!("  input   {}", terminal_line(run.input.as_str()));
    for (i, call) in run.tool_calls.iter().enumerate() {
        let detail = if call.detail.is_empty() {
            String::new()
        } else {
            format!("  {}", terminal_line(&call.detail))
        };
        println!(
            "  {:>2}. {:<24} {:<9} {:>8.2} ms{detail}",
            i + 1,
            terminal_line(&call.tool),
            call.status.as_str(),
            call.duration_us as f64 / 1000.0
        );
    }
    for turn in &turns {
        print_turn(turn);
    }
    if let Some(cli) = &cli {
        println!(
            "  cli     {} {}: {} event{}{}, {}",
            cli.driver,
            terminal_line(&cli.version),
            cli.events.len(),
            if cli.events.len() == 1 { "" } else { "s" },
            if cli.events_omitted_bytes > 0 {
                format!(" ({} bytes more not kept)", cli.events_omitted_bytes)
            } else {
                String::new()
            },
            cli.exit
        );
        for event in &cli.events {
            println!("          {}", cut_line(&terminal_line(event), 160));
        }
        if let Some(line) = cli.stderr_tail.lines().rev().find(|l| !l.trim().is_empty()) {
            println!("  stderr  {}", cut_line(&terminal_line(line), 160));
        }
    }
    if let Some(result) = &run.result {
        // Pretty JSON: its only raw newlines are its own, between lines.
        let pretty = match result.to_value() {
            Ok(value) => terminal_json(&value).unwrap_or_default(),
            Err(_) => terminal_line(result.as_str()).into_owned(),
        };
        println!("  result  {}", pretty.replace('\n', "\n          "));
    }
    if let Some(error) = &run.error {
        println!("  error   {}", terminal_text(error));
    }
    for task in &tasks {
        println!(
            "  task    {} {} for {}: {}",
            task.id,
            task.kind,
            terminal_line(&task.assignment),
            terminal_line(&task.title)
        );
    }
    if let Some(session) = &run.session {
        println!("  session {session}");
    }
    Ok(())
}

/// One LLM turn: the model, its usage and latency, what it asked for, and
/// what the context builder left out.
fn print_turn(turn: &LlmTurn) {
    let response: Option<hane_model::ModelResponse> = turn
        .response
        .to_value()
        .ok()
        .and_then(|v| serde_json::from_value(v).ok());
    let (stop, calls) = match &response {
        Some(r) => {
            let calls: Vec<String> = r
                .message()
                .tool_calls()
                .map(|(_, name, _)| name.replace('-', "."))
                .collect();
            (r.stop_reason.as_str(), calls)
        }
        None => ("?", Vec::new()),
    };
    let asked = if calls.is_empty() {
        "no tool call".to_owned()
    } else {
        format!("calls {}", calls.join(", "))
    };
    println!(
        "  model   turn {}  {}/{}  {} in + {} out tokens{}  {} ms  {stop}, {asked}",
        turn.turn,
        terminal_line(&turn.provider),
        terminal_line(&turn.model),
        turn.input_tokens,
        turn.output_tokens,
        if turn.cached_tokens > 0 {
            format!(" ({} cached)", turn.cached_tokens)
        } else {
            String::new()
        },
        turn.latency_ms,
        asked = terminal_line(&asked)
    );
    println!(
        "          context {}",
        terminal_line(&context_summary(&turn.context))
    );
}

/// The context report in a line: how many messages were kept of how
/// many, what was left out, and how tokens were counted.
fn context_summary(context: &hane_core::JsonText) -> String {
    let Ok(report) = context.to_value() else {
        return "(unreadable report)".to_owned();
    };
    // A call a client made over HTTP brought its own context.
    if let Some(format) = report["served"].as_str() {
        return format!(
            "sent by a client in the {format} format{}, about {} input tokens ({})",
            if report["stream"] == true {
                ", streamed"
            } else {
                ""
            },
            report["inputTokens"],
            report["tokenizer"].as_str().unwrap_or("?"),
        );
    }
    let items = report["items"].as_array().map_or(0, Vec::len);
    let left_out = if items == 0 {
        "nothing omitted, truncated or compacted".to_owned()
    } else {
        let mut parts = Vec::new();
        for item in report["items"].as_array().into_iter().flatten() {
            parts.push(format!(
                "message {} {} ({} → {} tokens: {})",
                item["message"],
                item["action"].as_str().unwrap_or("?"),
                item["tokensBefore"],
                item["tokensAfter"],
                item["reason"].as_str().unwrap_or_default()
            ));
        }
        parts.join("; ")
    };
    format!(
        "{} input tokens of a {}-token window ({}), {} messages kept; {left_out}",
        report["inputTokens"],
        report["window"],
        report["tokenizer"].as_str().unwrap_or("?"),
        report["kept"],
    )
}

/// `ms` since the Unix epoch as RFC 3339 to the second, as every listing
/// prints times.
pub(crate) fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// Prints what reception answered. Its text, the model's reasons and
/// what is missing reach the terminal escaped ([`terminal_line`]).
pub(crate) fn print_reception(reception: &Reception) {
    let agent = terminal_line(reception.agent.as_deref().unwrap_or("-"));
    println!(
        "request {}  {}  {agent}  (release {})",
        reception.id, reception.status, reception.release
    );
    if let Some(input) = &reception.input {
        println!("  input         {}", terminal_line(input.as_str()));
    }
    if !reception.reasons.is_empty() {
        println!("  reasons       {}", terminal_line(&reception.reasons));
    }
    for missing in &reception.missing {
        println!("  missing       {}", terminal_line(missing));
    }
    let shortlist: Vec<String> = reception
        .shortlist
        .iter()
        .map(|c| format!("{} ({:.2})", c.agent, c.score))
        .collect();
    if !shortlist.is_empty() {
        println!("  shortlist     {}", shortlist.join(", "));
    }
    if !reception.alternatives.is_empty() {
        println!("  alternatives  {}", reception.alternatives.join(", "));
    }
    if let Some(call) = &reception.model_call {
        println!(
            "  model         {}/{}: {} input + {} output tokens, {} ms",
            call.provider, call.model, call.input_tokens, call.output_tokens, call.latency_ms
        );
    }
    if let Some(error) = &reception.error {
        println!("  error         {}", terminal_line(error));
    }
}

/// A receipt in a line; the operation's name and version are the
/// component's own words, shown escaped.
pub(crate) fn receipt_line(r: &Receipt) -> String {
    format!(
        "receipt: {} {} {} in {}, fuel {}, peak memory {}, host calls {} log / {} http / {} records / {} documents / {} denied",
        terminal_line(&r.operation),
        terminal_line(&r.version),
        r.outcome,
        micros(r.wall_time_us),
        thousands(r.fuel_consumed),
        mebibytes(r.peak_memory_bytes),
        r.host_calls.log,
        r.host_calls.http_requests,
        r.host_calls.records,
        r.host_calls.documents,
        r.host_calls.denied
    )
}

fn micros(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else {
        format!("{:.2} ms", us as f64 / 1000.0)
    }
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub(crate) struct Progress {
    pub(crate) label: String,
    pub(crate) total: usize,
    pub(crate) done: usize,
    pub(crate) failed: usize,
    pub(crate) draw: bool,
}

impl Progress {
    pub(crate) fn new(label: &str, total: usize, wanted: bool) -> Self {
        let progress = Self {
            label: terminal_line(label).into_owned(),
            total,
            done: 0,
            failed: 0,
            draw: wanted && std::io::stderr().is_terminal(),
        };
        progress.show();
        progress
    }

    pub(crate) fn case(&mut self, case: &CaseResult) {
        self.done += 1;
        if case.outcome == CaseOutcome::Failed {
            self.failed += 1;
        }
        self.show();
    }

    fn show(&self) {
        if !self.draw {
            return;
        }
        const WIDTH: usize = 30;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(0);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{} [{}{}] {}/{}{}",
            self.label,
            "#".repeat(filled),
            " ".repeat(WIDTH - filled),
            self.done,
            self.total,
            match self.failed {
                0 => String::new(),
                n => format!(", {n} failed"),
            }
        );
        let _ = err.flush();
    }

    pub(crate) fn clear(&self) {
        if self.draw {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

/// How much [`print_evaluation`] says of each case.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// What differs from what was expected.
    Differences,
    /// That, and each case's input and result.
    InputsAndResults,
}

/// An evaluation as a table, a line per case and a line per difference
/// (and with [`Detail::InputsAndResults`], its input and result).
pub(crate) fn print_evaluation(e: &Evaluation, detail: Detail) {
    println!(
        "evaluation {} of {} (agent {}, release {}{}): {}/{} passed, {:.0}% (passRate {:.0}%): {}",
        e.id,
        terminal_line(&e.suite),
        terminal_line(&e.agent),
        e.release,
        if e.candidate { ", candidate" } else { "" },
        e.passed,
        e.cases.len(),
        e.rate() * 100.0,
        e.pass_rate * 100.0,
        if e.meets_pass_rate() {
            "ok"
        } else {
            "below passRate"
        },
    );
    let width = e
        .cases
        .iter()
        .map(|c| terminal_line(&c.name).chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    println!(
        "  {:<width$}  {:<6}  {:>6}  {:>8}  RUN",
        "CASE", "RESULT", "TOKENS", "TIME"
    );
    for case in &e.cases {
        let name = cut_line(&terminal_line(&case.name), width);
        println!(
            "  {:<width$}  {:<6}  {:>6}  {:>5} ms  {}",
            name,
            case.outcome,
            case.tokens,
            case.duration_ms,
            case.run
                .as_ref()
                .map_or("-".to_owned(), ToString::to_string),
        );
        if detail == Detail::InputsAndResults {
            println!("      input   {}", terminal_line(case.input.as_str()));
            let result = case.result.as_ref().map_or("none", |r| r.as_str());
            println!("      result  {}", terminal_line(result));
        }
        print_differences(&case.differences, case.error.as_deref());
    }
    println!("  took {} ms", e.duration_ms);
}

fn print_differences(differences: &[Difference], error: Option<&str>) {
    for d in differences {
        let path = if d.path.is_empty() { "/" } else { &d.path };
        let found = d
            .found
            .as_ref()
            .map_or_else(|| "nothing".to_owned(), |f| f.as_str().to_owned());
        println!(
            "      {}: expected {}, found {}",
            terminal_line(path),
            terminal_line(d.expected.as_str()),
            terminal_line(&found)
        );
    }
    if let Some(error) = error {
        println!("      {}", terminal_line(error));
    }
}

/// Two evaluations compared, a line per case.
pub(crate) fn print_comparison(c: &EvaluationComparison) {
    println!(
        "{}: {} (release {}, {} passed) -> {} (release {}, {} passed)",
        terminal_line(&c.suite),
        c.a,
        c.a_release,
        c.a_passed,
        c.b,
        c.b_release,
        c.b_passed
    );
    let mut counts = std::collections::BTreeMap::new();
    for case in &c.cases {
        *counts.entry(case.change.as_str()).or_insert(0) += 1;
        println!("  {:<13}  {}", case.change, terminal_line(&case.name));
        if matches!(
            case.change,
            CaseChange::Regressed | CaseChange::StillFailing
        ) {
            print_differences(&case.differences, case.error.as_deref());
        }
    }
    let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!("{}", summary.join(", "));
}

/// The stored items a listing names before it says how many more.
const SKIPPED_NAMED: usize = 3;

/// Says on stderr, in one line, which stored items a listing left out
/// because they do not read (`what`: the singular and plural of their
/// kind); nothing when none was.
pub(crate) fn note_skipped(what: (&str, &str), skipped: &[Skipped]) {
    if skipped.is_empty() {
        return;
    }
    let mut named: Vec<String> = skipped
        .iter()
        .take(SKIPPED_NAMED)
        .map(|s| format!("{} ({})", s.id, s.error))
        .collect();
    if skipped.len() > SKIPPED_NAMED {
        named.push(format!("{} more", skipped.len() - SKIPPED_NAMED));
    }
    let (one, many) = what;
    eprintln!(
        "hane: skipped {} that could not be read: {}; `hane store check` reports every one",
        plural(skipped.len(), one, many),
        named.join(", ")
    );
}

pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_turns_context_says_who_sent_it() {
        let served = hane_core::JsonText::from_value(&serde_json::json!({
            "served": "responses", "stream": true, "tokenizer": "estimate", "inputTokens": 42
        }));
        assert_eq!(
            context_summary(&served),
            "sent by a client in the responses format, streamed, about 42 input tokens (estimate)"
        );
    }
}
