//! `hane chat`, run as the real binary with its stdin piped, on a release
//! whose model is a recorded provider. The recording pins each message's
//! whole context (the conversation so far, then the task), so a run given
//! the wrong conversation leaves the recording and fails.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hane_coordinator::conversation::{Memory, MemoryMessage, RunSummary, Speaker, ToolCallNote};
use hane_coordinator::drivers::{model_tool_name, task_message};
use hane_core::{RunId, RunStatus};
use hane_model::{Content, Message, ModelRequest, ModelResponse, Role, StopReason, Usage};
use serde_json::{Value, json};

use crate::common::{failed, ok, text};

const FOUND: &str = "架空 300 あ 10-02";
const FIRST: &str = "Is 架空 300 あ 10-02 in our fleet?";
const SECOND: &str = "Which model was that one again?";
const THIRD: &str = "And what did I ask first?";
const FIRST_RESULT: &str = r#"{"status": "found", "answer": "Toyota Hiace Van"}"#;
const SECOND_RESULT: &str = r#"{"status": "answered", "answer": "Toyota Hiace Van"}"#;
const THIRD_RESULT: &str = r#"{"status": "answered", "answer": "the first question"}"#;
/// The third reply tries to clear the screen and set the window's title.
const THIRD_TEXT: &str =
    "You asked whether 架空 300 あ 10-02 is in our fleet.\u{1b}[2J\u{1b}]0;hijacked\u{7}";

/// An `llm` agent that takes a message.
const FLEET_CHAT: &str = "apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: fleet-chat
spec:
  purpose: Answer questions about the fleet
  input:
    type: object
    required: [message]
    properties:
      message: { type: string }
  driver: llm
  instructions: Answer the person's message; look vehicles up with data.find_record.
  tools: [data.find_record]
  limits:
    maxToolCalls: 4
    maxModelTokens: 8000
  output:
    type: object
    required: [status, answer]
    properties:
      status: { type: string }
      answer: { type: string }
";

/// A scripted agent that emails the desk each message, which a person of
/// `desk` decides.
const DESK_NOTE: &str = r#"apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: desk-note
spec:
  purpose: Pass a person's note on to the fleet desk by email
  input:
    type: object
    required: [message]
    properties:
      message: { type: string }
  driver: scripted
  script:
    - id: send
      tool: communication.send_email
      input:
        to: desk@fleet.example
        subject: A note from the chat
        body: "${input.message}"
    - tool: submit_result
      input: { status: "${steps.send.state}" }
  tools: [communication.send_email]
  approval: { assignment: desk }
  handover: { assignment: desk }
  limits: { maxToolCalls: 4, maxSeconds: 120 }
  output:
    type: object
    required: [status]
    properties:
      status: { type: string }
"#;

/// How long a test waits for the chat to show something.
const PATIENCE: Duration = Duration::from_secs(60);

fn command(store: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(args)
        .arg("--store")
        .arg(store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("USER", "tester")
        // Nothing may leave: an approved email fails for want of a server.
        .env_remove("HANE_SMTP_URL");
    command
}

fn hane(store: &Path, args: &[&str]) -> Output {
    command(store, args).output().expect("run hane")
}

/// `hane chat ARGS` with `stdin` piped in, to its end.
fn chat(store: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = command(store, &[&["chat"], args].concat())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane chat");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || input.write_all(&stdin));
    let output = child.wait_with_output().expect("wait for hane chat");
    writer.join().unwrap().expect("write the chat's stdin");
    output
}

fn answer(content: Vec<Content>) -> ModelResponse {
    let calls = content
        .iter()
        .any(|c| matches!(c, Content::ToolCall { .. }));
    ModelResponse {
        content,
        stop_reason: if calls {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        },
        usage: Usage {
            input_tokens: 500,
            output_tokens: 20,
            cached_tokens: 0,
        },
        model: "fleet-assistant".to_owned(),
        request_id: None,
    }
}

fn call(id: &str, tool: &str, input: &str) -> Content {
    Content::ToolCall {
        id: id.to_owned(),
        name: model_tool_name(tool),
        input: serde_json::from_str(input).unwrap(),
    }
}

/// The recorded turns of one message's run: the conversation so far, the
/// task, then each answer followed by its calls' results.
fn turns(
    before: Vec<Message>,
    message: &str,
    answers: Vec<ModelResponse>,
) -> Vec<hane_model::Turn> {
    let tools: Vec<hane_model::ToolSpec> = ["data.find_record", "submit_result"]
        .iter()
        .map(|name| hane_model::ToolSpec {
            name: model_tool_name(name),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect();
    let mut messages = before;
    messages.push(task_message(&json!({ "message": message })));
    answers
        .into_iter()
        .map(|response| {
            let mut request = ModelRequest::new("fleet-assistant");
            request.messages = messages.clone();
            request.tools = tools.clone();
            let turn = hane_model::Turn {
                request: hane_model::pin(&request),
                response: response.clone(),
            };
            messages.push(response.message());
            messages.push(Message {
                role: Role::User,
                content: response
                    .message()
                    .tool_calls()
                    .map(|(id, _, _)| Content::ToolResult {
                        call_id: id.to_owned(),
                        content: String::new(),
                        is_error: false,
                    })
                    .collect(),
            });
            turn
        })
        .collect()
}

/// What a conversation's later message is given before its task: the
/// earlier messages, each with what its run did (`tools` it called, all
/// succeeded, and its result).
fn history(earlier: &[(&str, &[&str], &str)]) -> Vec<Message> {
    let mut memory = Memory::empty("fleet-chat");
    for (message, tools, result) in earlier {
        let run = RunId::new();
        memory.messages.push(MemoryMessage {
            role: Speaker::User,
            text: (*message).to_owned(),
            run: Some(run.clone()),
        });
        memory.runs.push(RunSummary {
            id: run,
            status: RunStatus::Succeeded,
            input: json!({ "message": message }),
            result: Some(serde_json::from_str(result).unwrap()),
            error: None,
            tool_calls: tools
                .iter()
                .map(|tool| ToolCallNote {
                    tool: (*tool).to_owned(),
                    status: hane_core::run::ToolCallEnd::Succeeded,
                    detail: String::new(),
                })
                .collect(),
        });
    }
    hane_coordinator::conversation::history(&memory)
}

/// A release of [`FLEET_CHAT`], [`DESK_NOTE`] and the example
/// `vehicle-check-scripted` (which takes no message), with the examples'
/// tools and ledger, and a recorded provider that answers [`FIRST`],
/// [`SECOND`] after it, and [`THIRD`] after both.
fn release(dir: &Path) -> PathBuf {
    let examples = hane_test_support::examples();
    let release = dir.join("release");
    for sub in ["tools", "ledger/records", "ledger/documents/leases"] {
        std::fs::create_dir_all(release.join(sub)).unwrap();
        for entry in std::fs::read_dir(examples.join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), release.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
    std::fs::create_dir_all(release.join("documents")).unwrap();
    std::fs::write(release.join("fleet-chat.yaml"), FLEET_CHAT).unwrap();
    std::fs::write(release.join("desk-note.yaml"), DESK_NOTE).unwrap();
    std::fs::copy(
        examples.join("agents/vehicle-check-scripted.yaml"),
        release.join("vehicle-check-scripted.yaml"),
    )
    .unwrap();

    let find = format!(r#"{{"collection": "vehicles", "match": {{"registration": "{FOUND}"}}}}"#);
    let mut recorded = turns(
        Vec::new(),
        FIRST,
        vec![
            answer(vec![call("c1", "data.find_record", &find)]),
            answer(vec![call("c2", "submit_result", FIRST_RESULT)]),
        ],
    );
    let first: (&str, &[&str], &str) =
        (FIRST, &["data.find_record", "submit_result"], FIRST_RESULT);
    let second: (&str, &[&str], &str) = (SECOND, &["submit_result"], SECOND_RESULT);
    recorded.extend(turns(
        history(&[first]),
        SECOND,
        vec![answer(vec![
            Content::text("It was the Toyota Hiace Van."),
            call("c3", "submit_result", SECOND_RESULT),
        ])],
    ));
    recorded.extend(turns(
        history(&[first, second]),
        THIRD,
        vec![answer(vec![
            Content::text(THIRD_TEXT),
            call("c4", "submit_result", THIRD_RESULT),
        ])],
    ));
    hane_model::Recording {
        format: hane_model::RECORDING_FORMAT.to_owned(),
        version: hane_model::RECORDING_VERSION,
        model: "fleet-assistant".to_owned(),
        turns: recorded,
    }
    .write(&release.join("replay.json"))
    .unwrap();
    std::fs::write(
        release.join("replay.yaml"),
        "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: replay\nspec:\n  api: recorded\n  recording: replay.json\n  default: true\n  models:\n    - { name: fleet-assistant, contextWindow: 8192, maxOutputTokens: 1024 }\n",
    )
    .unwrap();
    release
}

/// A store in `dir` with [`release`] active.
fn store_with_release(dir: &Path) -> PathBuf {
    let release = release(dir);
    let store = dir.join("hane.db");
    ok(&hane(
        &store,
        &["release", "activate", release.to_str().unwrap()],
    ));
    store
}

/// The conversation's id, from the chat's first line.
fn conversation_id(out: &str) -> String {
    let first = out.lines().next().unwrap_or_default();
    let id = first
        .strip_prefix("conversation ")
        .and_then(|rest| rest.split([' ', ',']).next())
        .unwrap_or_else(|| panic!("no conversation in {out}"));
    assert!(id.starts_with("conv_"), "{out}");
    id.to_owned()
}

/// What the chat printed of each reply, in order: the model's text, `tool
/// NAME STATUS` for each call, `run ID STATUS` for each end; its own
/// other lines left out.
fn transcript(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|line| {
            let words = |rest: &str| {
                rest.split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            if let Some(rest) = line.strip_prefix("  tool    ") {
                Some(format!("tool {}", words(rest)))
            } else if let Some(rest) = line.strip_prefix("  run     ") {
                Some(format!("run {}", words(rest)))
            } else if line.starts_with("  ") || line.starts_with("conversation ") {
                None
            } else {
                Some(line.to_owned())
            }
        })
        .collect()
}

/// The ids of the runs the chat printed, in order.
fn run_ids(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|line| line.strip_prefix("  run     "))
        .map(|rest| rest.split_whitespace().next().unwrap().to_owned())
        .collect()
}

/// The store's conversations, each with its number of entries.
fn stored_conversations(store: &Path) -> Vec<(String, usize)> {
    let registry = hane_store::Registry::open(store).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let mut out = Vec::new();
            for row in registry.conversations().list(None, 0).await.unwrap() {
                let entries = registry.conversations().entries(&row.id).await.unwrap();
                out.push((row.id, entries.len()));
            }
            out
        })
}

#[test]
fn a_chat_carries_its_context_across_messages_and_resumes_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_release(dir.path());

    // Two messages, with a refused one between them: too long (read only
    // up to a message's length, the rest skipped), then not UTF-8. The second is answered from the first's result, which the
    // recording gives only to a run that was given it.
    let mut stdin = format!("{FIRST}\n{}\n", "x".repeat(70_000)).into_bytes();
    stdin.extend_from_slice(b"\xff\xfe\n");
    stdin.extend_from_slice(format!("\n{SECOND}\n").as_bytes());
    let first = chat(&store, &["fleet-chat"], &stdin);
    let out = ok(&first);
    let id = conversation_id(&out);
    let runs = run_ids(&out);
    assert_eq!(runs.len(), 2, "{out}");
    assert_eq!(
        transcript(&out),
        [
            "tool data.find_record succeeded".to_owned(),
            "tool submit_result succeeded".to_owned(),
            format!("run {} succeeded", runs[0]),
            "It was the Toyota Hiace Van.".to_owned(),
            "tool submit_result succeeded".to_owned(),
            format!("run {} succeeded", runs[1]),
        ],
        "{out}"
    );
    // Each end shows the result as compact JSON.
    let ends: Vec<&str> = out.lines().filter(|l| l.starts_with("  run ")).collect();
    assert!(
        ends[0].contains("(2 tool calls)")
            && ends[0].contains(r#""status":"found""#)
            && ends[0].contains(r#""answer":"Toyota Hiace Van""#),
        "{out}"
    );
    assert!(ends[1].contains(r#""status":"answered""#), "{out}");
    // The refused lines said why, and the chat went on.
    let errors = text(&first.stderr);
    assert!(
        errors.contains(
            "error: not sent: the line is longer than 65536 bytes, the most a message may be"
        ),
        "{errors}"
    );
    assert!(
        errors.contains("error: not sent: the line is not UTF-8 text"),
        "{errors}"
    );
    // No prompt: stdin is not a terminal.
    assert!(!out.contains("you>"), "{out}");
    let resume = format!(
        "go on with `hane chat --resume {id} --store {}`",
        store.display()
    );
    assert!(
        out.trim_end()
            .ends_with(&format!("conversation {id}: 2 messages; {resume}")),
        "{out}"
    );

    // Both runs are ordinary runs.
    let listed = ok(&hane(&store, &["runs", "list", "--agent", "fleet-chat"]));
    for run in &runs {
        assert!(
            listed
                .lines()
                .any(|l| l.starts_with(run.as_str()) && l.contains("succeeded")),
            "{run} in {listed}"
        );
    }
    assert_eq!(stored_conversations(&store), [(id.clone(), 2)]);

    // Resumed: the history first, then a third message whose recorded
    // context holds the first two; nothing after /exit is sent.
    let third = chat(
        &store,
        &["--resume", &id],
        format!("{THIRD}\n{EXIT}\nthis is not sent\n", EXIT = "/exit").as_bytes(),
    );
    let out = ok(&third);
    assert_eq!(conversation_id(&out), id);
    assert!(
        out.starts_with(&format!(
            "conversation {id} with fleet-chat, 2 earlier messages\nyou> {FIRST}\n  run     {} succeeded",
            runs[0]
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("you> {SECOND}\n  run     {} succeeded", runs[1])),
        "{out}"
    );
    let all = run_ids(&out);
    assert_eq!(all.len(), 3, "{out}");
    assert_eq!(all[..2], runs[..]);
    // The model's escape sequences are shown, not acted on.
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert_eq!(
        transcript(&out)[4..],
        [
            r"You asked whether 架空 300 あ 10-02 is in our fleet.\u{1b}[2J\u{1b}]0;hijacked\u{7}"
                .to_owned(),
            "tool submit_result succeeded".to_owned(),
            format!("run {} succeeded", all[2]),
        ],
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with(&format!("conversation {id}: 3 messages; {resume}")),
        "{out}"
    );
    let listed = ok(&hane(&store, &["runs", "list", "--agent", "fleet-chat"]));
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert_eq!(stored_conversations(&store), [(id, 3)]);
}

#[test]
fn an_unknown_conversation_and_agent_are_refused_and_a_messages_input_is_derived() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_release(dir.path());

    let unknown = hane_core::ConversationId::new().to_string();
    let refused = chat(&store, &["--resume", &unknown], b"hello\n");
    let error = failed(&refused, 2);
    assert!(
        error.contains(&format!("conversation `{unknown}` not found")),
        "{error}"
    );
    let malformed = chat(&store, &["--resume", "run_0123"], b"");
    assert!(
        failed(&malformed, 2).contains("conversation id"),
        "{}",
        text(&malformed.stderr)
    );
    let nobody = chat(&store, &["nobody"], b"hello\n");
    assert!(
        failed(&nobody, 2).contains("agent `nobody` is not in the active release"),
        "{}",
        text(&nobody.stderr)
    );
    // Refused before a conversation was started, and nothing ran.
    assert!(stored_conversations(&store).is_empty());
    assert!(ok(&hane(&store, &["runs", "list"])).is_empty());

    // `vehicle-check-scripted` takes a vehicle, not a message: the model
    // derives its input from each message (the recording answers what
    // `hane ask --show-request --agent` says it is asked), or declines.
    const FOUND_MESSAGE: &str = "Check 架空 300 あ 10-02";
    const VAGUE_MESSAGE: &str = "Check my car";
    let asked = |message: &str| {
        let shown = ok(&hane(
            &store,
            &[
                "ask",
                "--show-request",
                "--agent",
                "vehicle-check-scripted",
                message,
            ],
        ));
        let request: ModelRequest = serde_json::from_str(&shown).unwrap();
        hane_model::pin(&request)
    };
    let chooses = |tool: &str, input: Value| {
        answer(vec![Content::ToolCall {
            id: "d1".to_owned(),
            name: tool.to_owned(),
            input,
        }])
    };
    let recording = dir.path().join("release/replay.json");
    let mut replay = hane_model::Recording::read(&recording).unwrap();
    replay.turns.push(hane_model::Turn {
        request: asked(FOUND_MESSAGE),
        response: chooses(
            "start_vehicle-check-scripted",
            json!({"input": {"vehicle": FOUND}, "reason": "a registration number"}),
        ),
    });
    replay.turns.push(hane_model::Turn {
        request: asked(VAGUE_MESSAGE),
        response: chooses(
            "decline",
            json!({"reason": "no vehicle is named", "missing": ["the registration number"]}),
        ),
    });
    replay.write(&recording).unwrap();
    ok(&hane(
        &store,
        &[
            "release",
            "activate",
            dir.path().join("release").to_str().unwrap(),
        ],
    ));
    let talked = chat(
        &store,
        &["vehicle-check-scripted"],
        format!("{FOUND_MESSAGE}\n{VAGUE_MESSAGE}\n").as_bytes(),
    );
    let out = ok(&talked);
    let err = text(&talked.stderr);
    assert!(
        transcript(&out)
            .iter()
            .any(|line| line.starts_with("run ") && line.ends_with(" succeeded")),
        "{out}"
    );
    assert!(out.contains(r#""status":"found""#), "{out}");
    assert!(
        err.contains("none could be derived from this one (no vehicle is named; missing: the registration number"),
        "{err}"
    );
    // One message accepted, with its run; the vague one added nothing.
    let conversations = stored_conversations(&store);
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    assert_eq!(conversations[0].1, 1, "{conversations:?}");
    let runs = ok(&hane(&store, &["runs", "list"]));
    assert_eq!(runs.matches("vehicle-check-scripted").count(), 1, "{runs}");
}

#[test]
fn an_action_waiting_for_a_person_shows_its_digest_and_the_command_that_approves_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_release(dir.path());
    let mut child = command(&store, &["chat", "desk-note"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane chat");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "The van at gate 3 is back.").unwrap();
    stdin.flush().unwrap();

    // The chat's lines as they come.
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut out = Vec::new();
    let approve = loop {
        let line = seen
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no approve line ({e}) after {out:#?}"));
        out.push(line.clone());
        if let Some(command) = line.trim_start().strip_prefix("approve ") {
            break command.to_owned();
        }
    };
    let action: Value = serde_json::from_str(&ok(&hane(
        &store,
        &["approvals", "list", "--state", "pending", "--json"],
    )))
    .unwrap();
    let (id, digest) = (
        action[0]["id"].as_str().unwrap(),
        action[0]["digest"].as_str().unwrap(),
    );
    let shown = out.join("\n");
    assert!(
        shown.contains(&format!(
            "  action  {id} communication.send_email to desk@fleet.example waits for a person of desk"
        )) && shown.contains(&format!("          digest  {digest}")),
        "{shown}"
    );
    assert_eq!(
        approve,
        format!(
            "hane approvals approve {id} --digest {digest} --store {}",
            store.display()
        )
    );

    // The person runs the command as printed, with a mail server set that
    // is not there: the delivery fails and nothing is sent.
    let words: Vec<&str> = approve.split_whitespace().collect();
    assert_eq!(words[0], "hane");
    let approved = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(&words[1..])
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("USER", "tester")
        .env("HANE_SMTP_URL", hane_test_support::unreachable_smtp_url())
        .output()
        .unwrap();
    ok(&approved);

    // The reply goes on to its end.
    let end = loop {
        let line = seen
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no end ({e}) after {out:#?}"));
        out.push(line.clone());
        if line.starts_with("  run     ") {
            break line;
        }
    };
    assert!(
        end.contains("succeeded (2 tool calls)") && end.contains(r#"{"status":"failed"}"#),
        "{end}"
    );
    assert!(
        out.iter()
            .any(|l| l.starts_with("  tool    communication.send_email  ")),
        "{out:#?}"
    );
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let rest: Vec<String> = seen.try_iter().collect();
    assert!(status.success(), "{status}: {rest:#?}");
    assert!(
        rest.last()
            .is_some_and(|l| l.contains("1 message; go on with")),
        "{rest:#?}"
    );
}
