//! `hane chat`: a conversation with an agent at the terminal, in this
//! process and on the store, like `hane run`. Each line read is a message
//! of a conversation the store keeps ([`Conversations::send`](hane_coordinator::Conversations::send)
//! starts an ordinary run with the conversation so far as its context),
//! and the reply is printed as the run's events come
//! ([`AgentRuntime::follow`]).
//!
//! What a model, a tool or a recipient wrote reaches the terminal only
//! through [`terminal_text`] or [`terminal_line`], so it cannot move the
//! cursor, recolour or rewrite the screen, or reorder what is shown.

use std::borrow::Cow;
use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::path::Path;
use std::pin::pin;
use std::process::ExitCode;

use clap::Args;
use hane_coordinator::conversation::{
    ConversationError, ConversationView, EntryView, MAX_MESSAGE_BYTES,
};
use hane_coordinator::{AgentRuntime, RunError, RunEvent};
use hane_core::{AgentRun, ConversationId, ErrorKind, LlmTurn, RunId, run::ToolCallSummary};
use hane_sandbox::SchemaViolation;
use tokio::sync::mpsc;

use crate::context::default_store_path;
use crate::context::{StoreArg, block_on, finish, serve_for_cli};
use crate::output::cut_line;
use crate::runtime::ENVIRONMENT_HELP;
use crate::terminal::{terminal_line, terminal_text};

#[derive(Args)]
#[command(after_long_help = ENVIRONMENT_HELP)]
pub struct ChatArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The agent of the active release to talk to: one whose input schema
    /// takes `{"message": TEXT}`.
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    agent: Option<String>,
    /// Go on with this conversation (`conv_…`): its earlier messages and
    /// how their runs ended are printed first.
    #[arg(long, value_name = "CONVERSATION")]
    resume: Option<ConversationId>,
}

/// The longest tool call detail shown on its line, in characters.
const DETAIL_CHARS: usize = 160;

/// The exit code after a second Ctrl-C during a reply, which leaves at
/// once (128 + SIGINT, as shells report it).
const INTERRUPTED: i32 = 130;

/// What the chat says it ends on.
const EXIT: &str = "/exit";

pub fn main(args: ChatArgs) -> ExitCode {
    finish(block_on(chat(args)))
}

async fn chat(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let path = args.store.path()?;
    let services = crate::runtime::open_runtime(&path).await?;
    let runtime = services.runs.clone();
    let interactive = std::io::stdin().is_terminal();
    let mut screen = Screen::new(&path);
    let view = match (args.resume, args.agent) {
        (Some(id), _) => {
            let view = services.conversations.get(&id).await?;
            takes_messages(&runtime, &view.conversation.agent).await?;
            screen.history(&view)?;
            view
        }
        (None, Some(agent)) => {
            // Checked first, so that no conversation is left behind that
            // could never take a message.
            takes_messages(&runtime, &agent).await?;
            let (view, _) = services.conversations.create(&agent, None).await?;
            screen.line(&format!(
                "conversation {} with {}",
                view.conversation.id,
                terminal_line(&view.conversation.agent)
            ))?;
            view
        }
        (None, None) => anyhow::bail!("name the agent to chat with, or --resume CONVERSATION"),
    };
    let id = view.conversation.id;
    // A CLI driver's CLI reaches its model and tools only through hane's
    // HTTP server: one runs in this process while the chat lasts.
    let _server = serve_for_cli(&services, &view.conversation.agent).await?;
    if interactive {
        screen.line(&format!(
            "type a message and press Enter; {EXIT} or Ctrl-D ends the chat, Ctrl-C during a reply cancels its run"
        ))?;
    }
    let mut lines = read_lines();
    loop {
        if interactive {
            screen.prompt()?;
        }
        let typed = tokio::select! {
            typed = lines.recv() => typed,
            _ = tokio::signal::ctrl_c() => None,
        };
        // What the person typed ended with their Enter, echoed by the
        // terminal.
        screen.fresh |= interactive && matches!(typed, Some(Typed::Line(_)));
        let text = match typed {
            None => break,
            Some(Typed::Line(text)) => text,
            Some(Typed::NotText) => {
                screen.refused("the line is not UTF-8 text")?;
                continue;
            }
            Some(Typed::TooLong) => {
                screen.refused(&format!(
                    "the line is longer than {MAX_MESSAGE_BYTES} bytes, the most a message may be"
                ))?;
                continue;
            }
            Some(Typed::Failed(e)) => return Err(anyhow::Error::new(e).context("reading stdin")),
        };
        match text.trim() {
            "" => continue,
            EXIT => break,
            _ => {}
        }
        match services.conversations.send(&id, &text, None).await {
            Ok(sent) => reply(&runtime, &mut screen, &sent.run.id, &id).await?,
            // The store or the runtime failed: the next message would too.
            Err(e) if e.kind() == ErrorKind::Internal => return Err(e.into()),
            Err(e) => screen.refused(&e.to_string())?,
        }
    }
    screen.farewell(&services.conversations.get(&id).await?)?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses `agent` unless the active release has it and either its input
/// schema can take `{"message": TEXT}`, the input each line becomes, or
/// the release has a default model to derive the agent's input from each
/// line: otherwise every message would be refused.
async fn takes_messages(runtime: &AgentRuntime, agent: &str) -> anyhow::Result<()> {
    let release = runtime.release().await?;
    let Some(loaded) = release.agents.get(agent) else {
        return Err(RunError::UnknownAgent {
            agent: agent.to_owned(),
            release: release.info.number,
            known: release.agents.keys().cloned().collect(),
        }
        .into());
    };
    let Err(violations) = loaded
        .input
        .check(&serde_json::json!({ "message": "hello" }))
    else {
        return Ok(());
    };
    if only_the_text(&violations) {
        return Ok(());
    }
    // The release's default model derives each message's input instead.
    let providers: Vec<_> = release.providers.values().map(|p| &p.manifest).collect();
    if hane_manifest::resolve_model(None, &providers).is_ok() {
        return Ok(());
    }
    Err(ConversationError::Invalid {
        path: "/input".to_owned(),
        message: format!(
            "agent `{agent}` does not take a message as its input ({}) and the release has no default model to derive one: `hane chat` sends each line as {{\"message\": TEXT}}; run it with `hane run {agent} --input JSON`",
            hane_sandbox::describe_violations(&violations)
        ),
    }
    .into())
}

/// Whether `violations` of a sample message speak only of its text (a
/// pattern, a length), which another message may meet; not of a missing or
/// extra field, or a `message` that is not a string.
fn only_the_text(violations: &[SchemaViolation]) -> bool {
    violations.iter().all(|v| {
        (v.instance_path == "/message" || v.instance_path.starts_with("/message/"))
            && !v.schema_path.ends_with("/type")
    })
}

/// Prints one message's reply as its run's events come, until the run
/// ends. A first Ctrl-C cancels the run (its end is still printed); a
/// second leaves at once.
async fn reply(
    runtime: &AgentRuntime,
    screen: &mut Screen,
    run: &RunId,
    conversation: &ConversationId,
) -> anyhow::Result<()> {
    let Some(mut events) = runtime.follow(run) else {
        // It ended before it could be followed: what it did is in the store.
        return replay(runtime, screen, run).await;
    };
    let mut cancelled = false;
    let mut interrupt = pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(RunEvent::End(ended)) => return Ok(screen.end(&ended)?),
                Some(event) => screen.event(&event)?,
                None => break,
            },
            _ = &mut interrupt => {
                if cancelled {
                    screen.farewell_now(conversation)?;
                    std::process::exit(INTERRUPTED);
                }
                cancelled = true;
                // After the `^C` a terminal echoes.
                screen.fresh = false;
                screen.line(&format!("  cancel  run {run}; Ctrl-C again leaves at once"))?;
                if let Err(e) = runtime.cancel(run).await {
                    screen.refused(&e.to_string())?;
                }
                interrupt.set(tokio::signal::ctrl_c());
            }
        }
    }
    // The events stopped short of the end: the store has it.
    let ended = runtime.wait(run).await?;
    Ok(screen.end(&ended)?)
}

/// Prints what an ended run did, from the store, as a follower would have
/// seen it.
async fn replay(runtime: &AgentRuntime, screen: &mut Screen, run: &RunId) -> anyhow::Result<()> {
    let ended = runtime.wait(run).await?;
    let turns = runtime.llm_turns(run).await?;
    for event in replayed(ended, &turns) {
        screen.event(&event)?;
    }
    Ok(())
}

/// The events of an ended `run` whose LLM turns were `turns`, in the order
/// they happened: each turn's text, then the tool calls it asked for; the
/// calls no turn asked for (a scripted or CLI driver's); then the end.
fn replayed(run: AgentRun, turns: &[LlmTurn]) -> Vec<RunEvent> {
    let mut events = Vec::new();
    let mut calls = run.tool_calls.iter().cloned();
    for turn in turns {
        let Some(response) = turn
            .response
            .to_value()
            .ok()
            .and_then(|v| serde_json::from_value::<hane_model::ModelResponse>(v).ok())
        else {
            continue;
        };
        let text = response.text();
        if !text.is_empty() {
            events.push(RunEvent::Text(text));
        }
        let asked = response.message().tool_calls().count();
        events.extend(calls.by_ref().take(asked).map(RunEvent::ToolCall));
    }
    events.extend(calls.map(RunEvent::ToolCall));
    events.push(RunEvent::End(Box::new(run)));
    events
}

/// One line from stdin.
enum Typed {
    /// The line, without its line ending.
    Line(String),
    /// A line that is not UTF-8.
    NotText,
    /// A line longer than a message may be, not kept.
    TooLong,
    /// Reading failed; nothing more comes.
    Failed(std::io::Error),
}

/// The most bytes of a line read: the longest message and its line
/// ending. The rest of a longer line is skipped, never held, so stdin
/// without line breaks (`< /dev/zero`) cannot fill the memory.
const MAX_LINE_BYTES: u64 = MAX_MESSAGE_BYTES as u64 + 2;

/// Reads stdin a line at a time, a few lines ahead, on a thread of its
/// own: a read of stdin cannot be cancelled, and the chat must be able to
/// end while one waits.
fn read_lines() -> mpsc::Receiver<Typed> {
    let (sender, receiver) = mpsc::channel(4);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut bytes = Vec::new();
            let read = (&mut stdin)
                .take(MAX_LINE_BYTES)
                .read_until(b'\n', &mut bytes);
            let typed = match read {
                Ok(0) => break,
                Ok(n) if n as u64 == MAX_LINE_BYTES && !bytes.ends_with(b"\n") => {
                    match stdin.skip_until(b'\n') {
                        Ok(_) => Typed::TooLong,
                        Err(e) => Typed::Failed(e),
                    }
                }
                Ok(_) => {
                    if bytes.ends_with(b"\n") {
                        bytes.pop();
                        if bytes.ends_with(b"\r") {
                            bytes.pop();
                        }
                    }
                    String::from_utf8(bytes).map_or(Typed::NotText, Typed::Line)
                }
                Err(e) => Typed::Failed(e),
            };
            let failed = matches!(typed, Typed::Failed(_));
            if sender.blocking_send(typed).is_err() || failed {
                break;
            }
        }
    });
    receiver
}

/// The chat's stdout: the model's text as it streams, and hane's own lines
/// (tool calls, actions, ends) each on a line of its own.
struct Screen {
    out: std::io::Stdout,
    /// Whether what comes next starts a line.
    fresh: bool,
    /// What the printed commands add to name the store: ` --store FILE`,
    /// or nothing for the store they find without it.
    store: String,
}

impl Screen {
    fn new(store: &Path) -> Self {
        let store = if default_store_path().as_deref() == Some(store) {
            String::new()
        } else {
            // A database's password is never printed: `***` stands in.
            let named = match hane_store::postgres_url(store) {
                Some(url) => hane_store::without_password(url),
                None => store.display().to_string(),
            };
            format!(" --store {}", shell_word(&terminal_line(&named)))
        };
        Screen {
            out: std::io::stdout(),
            fresh: true,
            store,
        }
    }

    /// `text` as it is, flushed: the model's text as it streams.
    fn text(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let mut out = self.out.lock();
        out.write_all(terminal_text(text).as_bytes())?;
        out.flush()?;
        self.fresh = text.ends_with('\n');
        Ok(())
    }

    /// `line` on a line of its own; what it holds of others' text must be
    /// made safe by the caller.
    fn line(&mut self, line: &str) -> std::io::Result<()> {
        let mut out = self.out.lock();
        if !self.fresh {
            out.write_all(b"\n")?;
        }
        writeln!(out, "{line}")?;
        out.flush()?;
        self.fresh = true;
        Ok(())
    }

    fn prompt(&mut self) -> std::io::Result<()> {
        self.line_start()?;
        let mut out = self.out.lock();
        out.write_all(b"you> ")?;
        out.flush()?;
        self.fresh = false;
        Ok(())
    }

    fn line_start(&mut self) -> std::io::Result<()> {
        if !self.fresh {
            self.out.lock().write_all(b"\n")?;
            self.fresh = true;
        }
        Ok(())
    }

    /// Why a message was not sent, on stderr; the chat goes on.
    fn refused(&mut self, why: &str) -> std::io::Result<()> {
        self.line_start()?;
        self.out.lock().flush()?;
        eprintln!("error: not sent: {}", terminal_line(why));
        Ok(())
    }

    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        match event {
            RunEvent::Text(text) => self.text(text),
            RunEvent::ToolCall(call) => self.tool_call(call),
            RunEvent::ActionPending {
                action,
                tool,
                recipient,
                digest,
                assignment,
            } => {
                let by = match assignment {
                    Some(group) => format!("a person of {}", terminal_line(group)),
                    None => "a person".to_owned(),
                };
                let (action, digest) = (action.as_str(), terminal_line(digest));
                let store = &self.store;
                let digest_arg = shell_word(&digest);
                let lines = [
                    format!(
                        "  action  {action} {} to {} waits for {by}",
                        terminal_line(tool),
                        terminal_line(recipient)
                    ),
                    format!("          digest  {digest}"),
                    format!("          see it  hane approvals show {action}{store}"),
                    format!(
                        "          approve hane approvals approve {action} --digest {digest_arg}{store}"
                    ),
                    format!(
                        "          reject  hane approvals reject {action} --digest {digest_arg}{store}"
                    ),
                    "          the reply waits for the decision".to_owned(),
                ];
                self.line(&lines.join("\n"))
            }
            RunEvent::End(run) => self.end(run),
        }
    }

    fn tool_call(&mut self, call: &ToolCallSummary) -> std::io::Result<()> {
        let detail = if call.detail.is_empty() {
            String::new()
        } else {
            format!("  {}", cut_line(&terminal_line(&call.detail), DETAIL_CHARS))
        };
        self.line(&format!(
            "  tool    {}  {}{detail}",
            terminal_line(&call.tool),
            call.status.as_str()
        ))
    }

    /// A run as it ended: its id, status, tool calls, and its result as
    /// compact JSON or its error.
    fn end(&mut self, run: &AgentRun) -> std::io::Result<()> {
        let mut line = format!(
            "  run     {} {} ({})",
            run.id,
            run.status,
            count(run.tool_calls.len(), "tool call")
        );
        if let Some(result) = &run.result {
            let compact = result
                .to_value()
                .map_or_else(|_| result.to_string(), |v| v.to_string());
            line.push_str(&format!("  {}", terminal_line(&compact)));
        }
        if let Some(error) = &run.error {
            line.push_str(&format!(": {}", terminal_line(error)));
        }
        self.line(&line)
    }

    /// A resumed conversation so far: each message and how its run ended.
    fn history(&mut self, view: &ConversationView) -> std::io::Result<()> {
        self.line(&format!(
            "conversation {} with {}, {}",
            view.conversation.id,
            terminal_line(&view.conversation.agent),
            count(messages(view), "earlier message")
        ))?;
        for entry in &view.entries {
            match entry {
                EntryView::Message { text, run, .. } => {
                    self.line(&format!("you> {}", terminal_line(text)))?;
                    self.end(run)?;
                }
                EntryView::Memory { messages, .. } => self.line(&format!(
                    "  memory  a saved history of {}",
                    count(*messages, "message")
                ))?,
            }
        }
        Ok(())
    }

    /// The end of the chat: the conversation and how to go on with it.
    fn farewell(&mut self, view: &ConversationView) -> std::io::Result<()> {
        let id = &view.conversation.id;
        self.line(&format!(
            "conversation {id}: {}; go on with `hane chat --resume {id}{}`",
            count(messages(view), "message"),
            self.store
        ))
    }

    /// The end of a chat left in the middle of a reply.
    fn farewell_now(&mut self, id: &ConversationId) -> std::io::Result<()> {
        self.line(&format!(
            "conversation {id} left; go on with `hane chat --resume {id}{}`",
            self.store
        ))
    }
}

/// How many messages a conversation holds.
fn messages(view: &ConversationView) -> usize {
    view.entries
        .iter()
        .filter(|e| matches!(e, EntryView::Message { .. }))
        .count()
}

/// `n` `noun`s, or one `noun`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `word` as one word of a POSIX shell command, quoted when it needs it.
fn shell_word(word: &str) -> Cow<'_, str> {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c));
    if plain {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use hane_model::{Content, ModelResponse, StopReason, Usage};

    use super::*;

    #[test]
    fn an_ended_run_is_replayed_in_the_order_a_follower_sees() {
        let summary = |tool: &str| ToolCallSummary {
            tool: tool.to_owned(),
            status: hane_core::run::ToolCallEnd::Succeeded,
            detail: String::new(),
            operation: None,
            duration_us: 1,
        };
        let turn = |content: Vec<Content>| LlmTurn {
            turn: 1,
            provider: "replay".to_owned(),
            model: "m".to_owned(),
            request_digest: "sha256:00".to_owned(),
            response: hane_core::JsonText::from_value(
                &serde_json::to_value(ModelResponse {
                    content,
                    stop_reason: StopReason::ToolUse,
                    usage: Usage::default(),
                    model: "m".to_owned(),
                    request_id: None,
                })
                .unwrap(),
            ),
            input_tokens: 1,
            output_tokens: 1,
            cached_tokens: 0,
            latency_ms: 1,
            max_output_tokens: 1,
            context: hane_core::JsonText::from_value(&serde_json::json!({})),
        };
        let call = |tool: &str| Content::ToolCall {
            id: tool.to_owned(),
            name: tool.to_owned(),
            input: serde_json::json!({}),
        };
        let mut run: AgentRun = serde_json::from_value(serde_json::json!({
            "id": RunId::new(), "agent": "a", "release": 1, "status": "succeeded",
            "shadow": false, "input": {}, "result": {"status": "ok"}, "error": null,
            "toolCalls": [], "tokensUsed": 0, "tasks": [], "session": null,
            "createdAtMs": 0, "updatedAtMs": 0
        }))
        .unwrap();
        run.tool_calls = vec![
            summary("find"),
            summary("read"),
            summary("submit_result"),
            summary("extra"),
        ];
        let turns = [
            turn(vec![call("find"), call("read")]),
            turn(vec![Content::text("Found it."), call("submit_result")]),
        ];
        assert_eq!(
            replayed(run.clone(), &turns),
            [
                RunEvent::ToolCall(summary("find")),
                RunEvent::ToolCall(summary("read")),
                RunEvent::Text("Found it.".to_owned()),
                RunEvent::ToolCall(summary("submit_result")),
                RunEvent::ToolCall(summary("extra")),
                RunEvent::End(Box::new(run.clone())),
            ]
        );
        // A run of no model (a scripted driver): its calls, then its end.
        let scripted = replayed(run.clone(), &[]);
        assert_eq!(scripted.len(), 5);
        assert_eq!(scripted[0], RunEvent::ToolCall(summary("find")));
    }

    #[test]
    fn a_store_path_is_one_shell_word() {
        assert_eq!(shell_word("/tmp/x/hane.db"), "/tmp/x/hane.db");
        assert_eq!(shell_word("my store.db"), "'my store.db'");
        assert_eq!(shell_word("it's.db"), r"'it'\''s.db'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn only_rules_on_the_text_itself_let_an_agent_chat() {
        let violation = |instance: &str, schema: &str| SchemaViolation {
            instance_path: instance.to_owned(),
            schema_path: schema.to_owned(),
            message: "broken".to_owned(),
        };
        assert!(only_the_text(&[violation(
            "/message",
            "/properties/message/minLength"
        )]));
        assert!(!only_the_text(&[violation("", "/required")]));
        assert!(!only_the_text(&[violation(
            "/message",
            "/properties/message/type"
        )]));
        assert!(!only_the_text(&[
            violation("/message", "/properties/message/pattern"),
            violation("", "/additionalProperties"),
        ]));
    }
}
