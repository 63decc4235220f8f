//! Conversations end to end, on a recorded provider: a later message's
//! run is given the earlier messages, runs and results (the recording pins
//! the exact context, so a context without them leaves the recording and
//! fails the run); the memory round-trips, holds no secret and grants
//! nothing; versions are upgraded or refused.

use hane_coordinator::conversation::{
    ConversationError, Memory, MemoryMessage, RunSummary, Speaker, ToolCallNote, history,
};
use hane_coordinator::{
    AgentRuntime, ModelConfig, RunEvent,
    drivers::{model_tool_name, task_message},
};
use hane_core::{ConversationId, RunId, RunStatus};
use hane_model::{Content, Message, ModelRequest, ModelResponse, Role, StopReason, Usage};
use serde_json::{Value, json};

use crate::agents::release_with;
use crate::model::{recorded_provider, runtime_with};

const FOUND: &str = "架空 300 あ 10-02";

const AGENT: &str = "apiVersion: agents/v1alpha1
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

fn call(id: &str, tool: &str, input: Value) -> Content {
    Content::ToolCall {
        id: id.to_owned(),
        name: model_tool_name(tool),
        input,
    }
}

/// The turns of one message's run: `before` (the conversation so far),
/// the task, then each answer and its calls' results.
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
    let mut out = Vec::new();
    for response in answers {
        let mut request = ModelRequest::new("fleet-assistant");
        request.messages = messages.clone();
        request.tools = tools.clone();
        out.push(hane_model::Turn {
            request: hane_model::pin(&request),
            response: response.clone(),
        });
        messages.push(response.message());
        let results: Vec<Content> = response
            .message()
            .tool_calls()
            .map(|(id, _, _)| Content::ToolResult {
                call_id: id.to_owned(),
                content: String::new(),
                is_error: false,
            })
            .collect();
        messages.push(Message {
            role: Role::User,
            content: results,
        });
    }
    out
}

const FIRST: &str = "Is 架空 300 あ 10-02 in our fleet?";
const SECOND: &str = "Which model was that one again?";

/// What the second message's run must be given before its task: the first
/// message and what its run did.
fn after_first() -> Vec<Message> {
    let run = RunId::new();
    history(&Memory {
        schema_version: 2,
        agent: "fleet-chat".to_owned(),
        messages: vec![MemoryMessage {
            role: Speaker::User,
            text: FIRST.to_owned(),
            run: Some(run.clone()),
        }],
        runs: vec![RunSummary {
            id: run,
            status: RunStatus::Succeeded,
            input: json!({ "message": FIRST }),
            result: Some(json!({ "status": "found", "answer": "Toyota Hiace Van" })),
            error: None,
            tool_calls: vec![
                ToolCallNote {
                    tool: "data.find_record".to_owned(),
                    status: hane_core::run::ToolCallEnd::Succeeded,
                    detail: String::new(),
                },
                ToolCallNote {
                    tool: "submit_result".to_owned(),
                    status: hane_core::run::ToolCallEnd::Succeeded,
                    detail: String::new(),
                },
            ],
        }],
        actions: Vec::new(),
    })
}

async fn chat_runtime(dir: &std::path::Path) -> AgentRuntime {
    chat_runtime_with(dir, ModelConfig::new()).await
}

async fn chat_runtime_with(dir: &std::path::Path, model: ModelConfig) -> AgentRuntime {
    let release = release_with(dir, &[("fleet-chat.yaml", AGENT)]);
    let mut recorded = turns(
        Vec::new(),
        FIRST,
        vec![
            answer(vec![call(
                "c1",
                "data.find_record",
                json!({"collection": "vehicles", "match": {"registration": FOUND}}),
            )]),
            answer(vec![call(
                "c2",
                "submit_result",
                json!({"status": "found", "answer": "Toyota Hiace Van"}),
            )]),
        ],
    );
    recorded.extend(turns(
        after_first(),
        SECOND,
        vec![answer(vec![
            Content::text("It was the Toyota Hiace Van."),
            call(
                "c3",
                "submit_result",
                json!({"status": "answered", "answer": "Toyota Hiace Van"}),
            ),
        ])],
    ));
    recorded_provider(&release, "replay", recorded);
    let runtime = runtime_with(dir, model);
    runtime.activate(&release).await.unwrap();
    runtime
}

async fn reply(
    runtime: &AgentRuntime,
    id: &ConversationId,
    text: &str,
) -> (hane_core::AgentRun, Vec<RunEvent>) {
    let services = hane_coordinator::Services::new(runtime.clone());
    let sent = services.conversations.send(id, text, None).await.unwrap();
    let mut events = Vec::new();
    if let Some(mut follow) = runtime.follow(&sent.run.id) {
        while let Some(event) = follow.recv().await {
            events.push(event);
        }
    }
    (runtime.wait(&sent.run.id).await.unwrap(), events)
}

#[tokio::test]
async fn a_later_message_is_answered_from_an_earlier_result() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = chat_runtime(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let (view, notes) = services
        .conversations
        .create("fleet-chat", None)
        .await
        .unwrap();
    assert!(notes.is_empty());
    let id = view.conversation.id;

    let (first, events) = reply(&runtime, &id, FIRST).await;
    assert_eq!(first.status, RunStatus::Succeeded, "{first:#?}");
    let tools: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolCall(call) => Some(call.tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tools, ["data.find_record", "submit_result"], "{events:?}");
    assert!(matches!(events.last(), Some(RunEvent::End(run)) if run.id == first.id));

    // The recording answers the second message only if its context holds
    // the first message and its run's result.
    let (second, events) = reply(&runtime, &id, SECOND).await;
    assert_eq!(second.status, RunStatus::Succeeded, "{second:#?}");
    let result = second.result.as_ref().unwrap().to_value().unwrap();
    assert_eq!(result["answer"], "Toyota Hiace Van");
    assert!(
        events.contains(&RunEvent::Text("It was the Toyota Hiace Van.".to_owned())),
        "{events:?}"
    );
    let turns = runtime.llm_turns(&second.id).await.unwrap();
    let context = turns[0].context.to_value().unwrap();
    // The first message and its run, then the task.
    assert_eq!(context["messages"], 3, "{context}");

    // Both runs are ordinary runs, listed with the rest.
    let listed = runtime
        .list(hane_store::RunQuery {
            agent: Some("fleet-chat".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 2);
    let view = services.conversations.get(&id).await.unwrap();
    assert_eq!(view.entries.len(), 2);

    // The memory says the same, and a conversation started from it
    // answers the second message the same way.
    let memory = services.conversations.memory(&id).await.unwrap();
    assert_eq!(memory.messages.len(), 2);
    assert_eq!(
        memory.runs[0].result,
        Some(json!({"status": "found", "answer": "Toyota Hiace Van"}))
    );
    let mut first_only = memory.to_value();
    first_only["messages"].as_array_mut().unwrap().truncate(1);
    first_only["runs"].as_array_mut().unwrap().truncate(1);
    let (restored, notes) = services
        .conversations
        .create("fleet-chat", Some(&first_only))
        .await
        .unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let (again, _) = reply(&runtime, &restored.conversation.id, SECOND).await;
    assert_eq!(again.status, RunStatus::Succeeded, "{again:#?}");
    assert_eq!(
        services
            .conversations
            .memory(&restored.conversation.id)
            .await
            .unwrap()
            .runs
            .len(),
        2
    );
}

#[tokio::test]
async fn a_message_while_the_last_one_is_answered_is_refused_and_nothing_is_added() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = chat_runtime(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let (view, _) = services
        .conversations
        .create("fleet-chat", None)
        .await
        .unwrap();
    let id = view.conversation.id;
    let sent = services.conversations.send(&id, FIRST, None).await.unwrap();
    let busy = services.conversations.send(&id, SECOND, None).await;
    // The first run may have ended already on a fast machine; if not, the
    // second message is refused, naming the run.
    if let Err(e) = &busy {
        assert!(
            matches!(e, ConversationError::Busy { run, .. } if *run == sent.run.id.to_string()),
            "{e}"
        );
    }
    runtime.wait(&sent.run.id).await.unwrap();
    let err = services
        .conversations
        .send(&id, "  ", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConversationError::Invalid { path, .. } if path == "/text"),
        "{err}"
    );
    let err = services
        .conversations
        .send(&id, "hi", Some(json!({"message": 3})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid input"), "{err}");
    let err = services
        .conversations
        .send(&ConversationId::new(), "hi", None)
        .await
        .unwrap_err();
    assert!(matches!(err, ConversationError::NotFound(_)), "{err}");
    let entries = services.conversations.get(&id).await.unwrap().entries.len();
    assert_eq!(entries, if busy.is_ok() { 2 } else { 1 });
}

#[tokio::test]
async fn an_agent_that_takes_no_message_gets_its_input_derived_by_the_model_or_asks_for_it() {
    let dir = tempfile::tempdir().unwrap();
    const FOUND_MESSAGE: &str = "Check 架空 300 あ 10-02";
    const VAGUE_MESSAGE: &str = "Check my car";
    let scripted = std::fs::read_to_string(
        crate::harness::examples().join("agents/vehicle-check-scripted.yaml"),
    )
    .unwrap();
    let release = release_with(dir.path(), &[("vehicle-check-scripted.yaml", &scripted)]);
    recorded_provider(&release, "replay", Vec::new());
    let runtime = runtime_with(dir.path(), ModelConfig::new());
    let services = hane_coordinator::Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    // What the model is asked for each message: the agent's input, from
    // the message alone.
    let mut recorded = Vec::new();
    for (message, tool, arguments) in [
        (
            FOUND_MESSAGE,
            "start_vehicle-check-scripted",
            json!({"input": {"vehicle": FOUND}, "reason": "a registration number"}),
        ),
        (
            VAGUE_MESSAGE,
            "decline",
            json!({"reason": "no vehicle is named", "missing": ["the registration number"]}),
        ),
    ] {
        let request = services
            .reception
            .model_request(message, Some("vehicle-check-scripted"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(request.tools.len(), 2, "{request:?}");
        recorded.push(hane_model::Turn {
            request: hane_model::pin(&request),
            response: answer(vec![call("d1", tool, arguments)]),
        });
    }
    recorded_provider(&release, "replay", recorded);
    runtime.activate(&release).await.unwrap();
    let (view, _) = services
        .conversations
        .create("vehicle-check-scripted", None)
        .await
        .unwrap();
    let id = view.conversation.id;
    let sent = services
        .conversations
        .send(&id, FOUND_MESSAGE, None)
        .await
        .unwrap();
    let run = runtime.wait(&sent.run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(run.input.to_value().unwrap(), json!({"vehicle": FOUND}));
    // A message the model finds nothing in is refused at `/input`, saying
    // what is missing, and nothing is added.
    let err = services
        .conversations
        .send(&id, VAGUE_MESSAGE, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConversationError::Invalid { path, .. } if path == "/input"),
        "{err}"
    );
    let said = err.to_string();
    assert!(
        said.contains("vehicle-check-scripted")
            && said.contains("no vehicle is named; missing: the registration number"),
        "{said}"
    );
    assert_eq!(
        services.conversations.get(&id).await.unwrap().entries.len(),
        1
    );
    // Each derivation is kept as a dry run of reception's.
    let kept = services.reception.list(0).await.unwrap().items;
    let statuses: Vec<_> = kept.iter().map(|r| (r.text.as_str(), r.status)).collect();
    assert_eq!(
        statuses,
        [
            (VAGUE_MESSAGE, hane_core::ReceptionStatus::Declined),
            (FOUND_MESSAGE, hane_core::ReceptionStatus::WouldStart)
        ]
    );
    let err = services
        .conversations
        .create("nobody", None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("agent `nobody`"), "{err}");
}

#[tokio::test]
async fn without_a_model_an_agent_that_takes_no_message_asks_for_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let scripted = std::fs::read_to_string(
        crate::harness::examples().join("agents/vehicle-check-scripted.yaml"),
    )
    .unwrap();
    let release = release_with(dir.path(), &[("vehicle-check-scripted.yaml", &scripted)]);
    let runtime = runtime_with(dir.path(), ModelConfig::new());
    let services = hane_coordinator::Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    let (view, _) = services
        .conversations
        .create("vehicle-check-scripted", None)
        .await
        .unwrap();
    let err = services
        .conversations
        .send(&view.conversation.id, "Check 架空 300 あ 10-02", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConversationError::Invalid { path, .. } if path == "/input"),
        "{err}"
    );
    assert!(
        err.to_string().contains("the release has no default model"),
        "{err}"
    );
    assert!(
        services
            .conversations
            .get(&view.conversation.id)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
}

#[tokio::test]
async fn a_memory_holds_no_secret_and_grants_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let credential = "planted-credential-value-0042";
    let mut model = ModelConfig::new();
    model.credential("fleet-key", hane_core::credential::Secret::new(credential));
    let runtime = chat_runtime_with(dir.path(), model).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let (view, _) = services
        .conversations
        .create("fleet-chat", None)
        .await
        .unwrap();
    let id = view.conversation.id;
    let (first, _) = reply(&runtime, &id, FIRST).await;

    // Secrets planted where a memory is made from: a message, a restored
    // run's input, result and error, and a transcript's reply.
    let token =
        "hrt1.run_0123456789abcdefghjkmnpqrs.1767225600000.c2lnbmF0dXJlLWJ5dGVzLW9mLWEtdG9rZW4";
    let key = "hane_0123456789abcdef0123456789abcdef01234567";
    let run = RunId::new();
    let planted = json!({
        "schemaVersion": 2,
        "agent": "fleet-chat",
        "messages": [
            { "role": "user", "text": format!("my token {token} and key {key}"), "run": run },
            { "role": "assistant", "text": format!("noted {credential}") }
        ],
        "runs": [{
            "id": run, "status": "failed",
            "input": { "message": token },
            "result": { "key": key },
            "error": format!("refused {credential}"),
            "toolCalls": [{ "tool": "communication.send_email", "status": "succeeded", "detail": key }]
        }],
        "actions": [{
            "id": hane_core::ActionId::new(), "run": run, "tool": "communication.send_email",
            "recipient": "boss@fleet.example", "state": "delivered", "digest": "sha256:00"
        }]
    });
    let saved = services
        .conversations
        .save_memory(&id, &planted)
        .await
        .unwrap();
    assert_eq!(saved.seq, 1);
    // The ledger has no such action: the memory's claim is left out.
    assert!(
        saved.memory.actions.is_empty(),
        "{:?}",
        saved.memory.actions
    );
    assert!(
        saved.notes.iter().any(|n| n.contains("no such action")),
        "{:?}",
        saved.notes
    );
    let exported = services
        .conversations
        .memory(&id)
        .await
        .unwrap()
        .to_value()
        .to_string();
    for secret in [token, key, credential] {
        assert!(!exported.contains(secret), "{secret} in {exported}");
    }
    // The store's files hold none either.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for secret in [token, key, credential] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds {secret}",
                path.display()
            );
        }
    }

    // A memory that claims a tool, a limit or a budget is refused by name.
    for (field, value) in [
        ("tools", json!(["communication.send_email"])),
        ("limits", json!({"maxModelTokens": 10_000_000})),
        ("budget", json!({"modelTokensPerDay": 10_000_000})),
    ] {
        let mut claim = Memory::empty("fleet-chat").to_value();
        claim[field] = value;
        let err = services
            .conversations
            .save_memory(&id, &claim)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
    // A run the store knows is told as the store has it, whatever the
    // memory says of it.
    let mut claim = Memory::empty("fleet-chat").to_value();
    claim["messages"] = json!([{ "role": "user", "text": FIRST, "run": first.id }]);
    claim["runs"] = json!([{ "id": first.id, "status": "failed", "input": {"message": "x"}, "error": "claimed" }]);
    let saved = services
        .conversations
        .save_memory(&id, &claim)
        .await
        .unwrap();
    assert_eq!(saved.memory.runs[0].status, RunStatus::Succeeded);
    assert!(
        saved.notes[0].contains("as this store has it"),
        "{:?}",
        saved.notes
    );
    // The agent still has exactly its tools, and its run its limits.
    let release = runtime.release().await.unwrap();
    let agent = &release.agents["fleet-chat"];
    assert_eq!(agent.manifest.spec.limits.max_model_tokens, 8000);
    assert!(!agent.tools.contains_key("communication.send_email"));

    // A newer memory is refused with the version error; an older one is
    // upgraded.
    let err = services
        .conversations
        .save_memory(&id, &json!({"schemaVersion": 3, "agent": "fleet-chat"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("schemaVersion 3 is newer"),
        "{err}"
    );
    let saved = services
        .conversations.save_memory(
            &id,
            &json!({"schemaVersion": 1, "agent": "fleet-chat", "messages": [{"role": "user", "text": "hello"}]}),
        )
        .await
        .unwrap();
    assert_eq!(saved.memory.schema_version, 2);
    let err = services
        .conversations.save_memory(&id, &json!({"schemaVersion": 2, "agent": "lease-qa", "messages": [], "runs": [], "actions": []}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("agent `lease-qa`"), "{err}");
}
