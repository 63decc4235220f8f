//! `/mcp`: one run's tools, for the holder of its token. Every call is
//! [`AgentRuntime::call_tool`], in a task of its own, so a client that
//! goes away or cancels never cuts a call short: it ends, is journaled and
//! counted as any driver's call.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hane_coordinator::{
    AgentRuntime, GatewayError, RunError, Tool, ToolResult, drivers::model_tool_name,
    gateway::TOKEN_GRACE, release::LoadedAgent, tools::ToolKind,
};
use hane_core::ControlTool;
use hane_core::{ActionRequest, ActionState, DeciderKind, Impact, RunId};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{McpConfig, RunCaller, annotations, caller, object_schema, schema_object};

/// How often the ledger is read while a new call's action is told apart
/// from the run's others.
const PROPOSAL_POLL: Duration = Duration::from_millis(20);

/// How long the refusal of a call of a run that is ending waits to say
/// how it ended.
const ENDING_WAIT: Duration = Duration::from_secs(1);

/// What an outbound tool's description adds over MCP.
const PENDING_NOTE: &str = "Over MCP the answer may come before the decision: it then says the action is pending and for whom. Calling again with the same input reports its state and proposes nothing new.";

/// What the server says of itself at `initialize`.
const INSTRUCTIONS: &str = "These are the tools of one hane agent run. Every call goes through hane's Tool Gateway, which checks it against the run's tools and limits. Outbound tools (email, text messages, calls, customer APIs) only propose an action: a person, a review agent or a policy decides it, and it is sent at most once. When a result says an action is pending, carry on or call the same tool with the same input later to learn its state; never propose it again in other words. End the run with submit_result.";

/// The run-scoped MCP server. Cheap to clone; clones share everything.
#[derive(Clone)]
pub(super) struct RunTools {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: AgentRuntime,
    approval_wait: Duration,
    /// Each run's agent as its release defines it, kept while its token
    /// may be valid: a release activated during the run does not change
    /// the run's tools.
    agents: Mutex<HashMap<RunId, (Arc<LoadedAgent>, Instant)>>,
    /// Outbound calls by run, tool and input, from their start until
    /// their result was answered or their run ended.
    outbound: Mutex<HashMap<CallKey, Arc<OutboundCall>>>,
    /// Held while a run's new outbound call is told apart in the ledger.
    proposing: Mutex<HashMap<RunId, Arc<tokio::sync::Mutex<()>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One outbound call: the run, the tool and the canonical digest of its
/// input.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CallKey {
    run: RunId,
    tool: String,
    input: String,
}

/// An outbound call under way or ended.
struct OutboundCall {
    /// Its result, once it ended.
    result: watch::Sender<Option<Result<ToolResult, GatewayError>>>,
    /// The actions it proposed, as far as they are known.
    actions: Mutex<Vec<String>>,
}

/// What proposes an outbound tool's actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outbound {
    /// An outbound control tool: one action.
    Tool,
    /// An outbound operation: any number, one after another.
    Operation,
}

fn outbound_kind(tool: &Tool) -> Option<Outbound> {
    match &tool.kind {
        ToolKind::Control(control) if control.is_outbound() => Some(Outbound::Tool),
        ToolKind::Api(api) if api.impact != Impact::Read => Some(Outbound::Tool),
        ToolKind::Operation(op) if op.operation.impact == Impact::Outbound => {
            Some(Outbound::Operation)
        }
        _ => None,
    }
}

impl RunTools {
    pub(super) fn new(runtime: AgentRuntime, config: &McpConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                approval_wait: config.approval_wait,
                agents: Mutex::new(HashMap::new()),
                outbound: Mutex::new(HashMap::new()),
                proposing: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The agent of `run`, from the release the run started in.
    async fn agent_of(&self, run: &RunId) -> Result<Arc<LoadedAgent>, AgentError> {
        let now = Instant::now();
        {
            let mut agents = lock(&self.inner.agents);
            agents.retain(|_, (_, until)| *until > now);
            if let Some((agent, _)) = agents.get(run) {
                return Ok(agent.clone());
            }
        }
        let runtime = &self.inner.runtime;
        let found = runtime.get(run).await?;
        let release = runtime.release().await?;
        if release.info.number != found.release {
            return Err(AgentError::OtherRelease {
                run: run.clone(),
                started: found.release,
                active: release.info.number,
            });
        }
        let agent =
            release
                .agents
                .get(&found.agent)
                .cloned()
                .ok_or_else(|| AgentError::NotInRelease {
                    agent: found.agent.clone(),
                    run: run.clone(),
                    release: release.info.number,
                })?;
        // A token lives the run's maxSeconds and a grace from when its
        // gate opened, which is after now only by the time to get here.
        let until = now
            + Duration::from_secs(agent.manifest.spec.limits.max_seconds)
            + TOKEN_GRACE
            + Duration::from_secs(60);
        lock(&self.inner.agents).insert(run.clone(), (agent.clone(), until));
        Ok(agent)
    }

    /// Calls `name` (as listed) for `caller`'s run. The call itself runs
    /// in a task of its own: dropping this future loses only its answer.
    #[tracing::instrument(name = "mcp_call", skip_all, fields(run = %caller.run, tool = name))]
    pub(super) async fn call(&self, caller: RunCaller, name: &str, input: Value) -> CallToolResult {
        let agent = self.agent_of(&caller.run).await;
        let (tool, outbound) = match &agent {
            Ok(agent) => {
                let tool = hane_name(agent, name);
                let outbound = agent.tools.get(&tool).and_then(outbound_kind);
                (tool, outbound)
            }
            // The gateway still decides; only the wait for an outbound
            // tool's decision is lost.
            Err(e) => {
                tracing::warn!(run = %caller.run, "MCP call of a run whose agent is unknown: {e}");
                (name.replace('-', "."), None)
            }
        };
        match outbound {
            None => {
                let result = self.spawn_call(&caller, &tool, input).await;
                self.respond(result).await
            }
            // In a task of its own too: the call's bookkeeping is not cut
            // off half-way when the client goes.
            Some(kind) => {
                let this = self.clone();
                let call =
                    tokio::spawn(
                        async move { this.call_outbound(caller, tool, input, kind).await },
                    );
                match call.await {
                    Ok(result) => result,
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "the call failed inside hane: {e}"
                    ))]),
                }
            }
        }
    }

    /// A call's result as MCP has it (see [`answer`]); the refusal of a
    /// run that is not running says how it ended.
    async fn respond(&self, result: Result<ToolResult, GatewayError>) -> CallToolResult {
        let Err(GatewayError::NotRunning(run)) = result else {
            return answer(result);
        };
        let mut why = refusal(&GatewayError::NotRunning(run.clone()));
        // A run whose gate closed is ending, or ended.
        let ended = tokio::time::timeout(ENDING_WAIT, self.inner.runtime.wait(&run)).await;
        if let Ok(Ok(ended)) = ended
            && ended.status.is_final()
        {
            let status = ended.status;
            why.push_str(&format!(": it ended {status}"));
            if let Some(error) = ended
                .error
                .filter(|e| !e.is_empty() && e != status.as_str())
            {
                why.push_str(&format!(" ({error})"));
            }
        }
        CallToolResult::error(vec![ContentBlock::text(why)])
    }

    /// [`AgentRuntime::call_tool`] in a task of its own, waited for.
    async fn spawn_call(
        &self,
        caller: &RunCaller,
        tool: &str,
        input: Value,
    ) -> Result<ToolResult, GatewayError> {
        let runtime = self.inner.runtime.clone();
        let token = caller.token.clone();
        let tool = tool.to_owned();
        let call = tokio::spawn(async move { runtime.call_tool(&token, &tool, input).await });
        match call.await {
            Ok(result) => result,
            Err(e) => Ok(ToolResult::error(
                "failed",
                format!("the call failed inside hane: {e}"),
            )),
        }
    }

    /// An outbound tool's call: started once per run, tool and input, and
    /// answered with its result when it ends within the approval wait, or
    /// else with the state of its actions.
    async fn call_outbound(
        &self,
        caller: RunCaller,
        tool: String,
        input: Value,
        kind: Outbound,
    ) -> CallToolResult {
        let deadline = Instant::now() + self.inner.approval_wait;
        let key = CallKey {
            run: caller.run.clone(),
            tool: tool.clone(),
            input: hane_core::approval::canonical_sha256(&input),
        };
        let (call, new) = {
            let mut calls = lock(&self.inner.outbound);
            match calls.get(&key) {
                Some(call) => (call.clone(), false),
                None => {
                    let call = Arc::new(OutboundCall {
                        result: watch::Sender::new(None),
                        actions: Mutex::new(Vec::new()),
                    });
                    calls.insert(key.clone(), call.clone());
                    (call, true)
                }
            }
        };
        if new {
            self.start_outbound(&caller, &key, &call, input, kind, deadline)
                .await;
        }
        let mut ended = call.result.subscribe();
        let wait = deadline.saturating_duration_since(Instant::now());
        let result = match tokio::time::timeout(wait, ended.wait_for(Option::is_some)).await {
            Ok(Ok(result)) => result.clone(),
            _ => None,
        };
        match result {
            Some(result) => {
                // Answered: the same call made again proposes anew.
                self.forget(&key, &call);
                self.respond(result).await
            }
            None => self.pending(&call, &tool, kind).await,
        }
    }

    /// Starts `call` in a task of its own and notes the actions it
    /// proposes, telling them apart from the run's earlier ones while no
    /// other new outbound call of the run does the same.
    async fn start_outbound(
        &self,
        caller: &RunCaller,
        key: &CallKey,
        call: &Arc<OutboundCall>,
        input: Value,
        kind: Outbound,
        deadline: Instant,
    ) {
        let runtime = &self.inner.runtime;
        let proposing = lock(&self.inner.proposing)
            .entry(caller.run.clone())
            .or_default()
            .clone();
        let _alone = proposing.lock().await;
        let known = |actions: &[ActionRequest]| -> HashSet<String> {
            actions.iter().map(|a| a.id.to_string()).collect()
        };
        let before = match runtime.actions().list(None, Some(&caller.run)).await {
            Ok(actions) => known(&actions.items),
            Err(e) => {
                tracing::warn!(run = %caller.run, "reading the run's actions: {e}");
                HashSet::new()
            }
        };
        let theirs = self.attributed(&caller.run);
        {
            let this = self.clone();
            let runtime = runtime.clone();
            let token = caller.token.clone();
            let key = key.clone();
            let call = call.clone();
            tokio::spawn(async move {
                let result = runtime.call_tool(&token, &key.tool, input).await;
                call.result.send_replace(Some(result));
                // Unanswered, it is kept for the run's next identical call
                // until the run ends.
                let _ = runtime.wait(&key.run).await;
                this.forget(&key, &call);
            });
        }
        let mut ended = call.result.subscribe();
        loop {
            if let Ok(actions) = runtime.actions().list(None, Some(&caller.run)).await {
                let mut new: Vec<&ActionRequest> = actions
                    .items
                    .iter()
                    .filter(|a| {
                        let id = a.id.to_string();
                        !before.contains(&id) && !theirs.contains(&id)
                    })
                    .filter(|a| kind == Outbound::Operation || a.tool == key.tool)
                    .collect();
                new.sort_by_key(|a| a.created_at_ms);
                if !new.is_empty() {
                    *lock(&call.actions) = new.iter().map(|a| a.id.to_string()).collect();
                }
                if kind == Outbound::Tool && !new.is_empty() {
                    return;
                }
            }
            let now = Instant::now();
            if now >= deadline || ended.borrow_and_update().is_some() {
                return;
            }
            let poll = PROPOSAL_POLL.min(deadline - now);
            let _ = tokio::time::timeout(poll, ended.changed()).await;
        }
    }

    /// The actions the run's other outbound calls are known to have
    /// proposed.
    fn attributed(&self, run: &RunId) -> HashSet<String> {
        lock(&self.inner.outbound)
            .iter()
            .filter(|(key, _)| key.run == *run)
            .flat_map(|(_, call)| lock(&call.actions).clone())
            .collect()
    }

    /// Drops `call` from the outbound calls, unless another call has
    /// taken its key since.
    fn forget(&self, key: &CallKey, call: &Arc<OutboundCall>) {
        let mut calls = lock(&self.inner.outbound);
        if calls.get(key).is_some_and(|c| Arc::ptr_eq(c, call)) {
            calls.remove(key);
        }
        let run_left = calls.keys().any(|k| k.run == key.run);
        drop(calls);
        if !run_left {
            lock(&self.inner.proposing).remove(&key.run);
        }
    }

    /// The answer to an outbound call still under way: its actions and
    /// their states, as the ledger has them now.
    async fn pending(&self, call: &OutboundCall, tool: &str, kind: Outbound) -> CallToolResult {
        let ids = lock(&call.actions).clone();
        let mut actions = Vec::new();
        for id in &ids {
            match self.inner.runtime.actions().get(id).await {
                Ok(action) => actions.push(action),
                Err(e) => tracing::warn!(action = %id, "reading an action: {e}"),
            }
        }
        let again = format!(
            "Call `{}` again with the same input to learn what became of it.",
            model_tool_name(tool)
        );
        let value = match (kind, actions.as_slice()) {
            (Outbound::Tool, [action]) => {
                let mut value = action_state(action);
                value["detail"] = json!(format!(
                    "{} {again}",
                    value["detail"].as_str().unwrap_or_default()
                ));
                value
            }
            (Outbound::Tool, _) => json!({
                "state": "proposing",
                "detail": format!("The action is still being proposed; nothing has been sent. {again}"),
            }),
            (Outbound::Operation, actions) => json!({
                "state": "in_progress",
                "actions": actions.iter().map(action_state).collect::<Vec<_>>(),
                "detail": format!(
                    "The operation's actions are still being decided; nothing is sent before it is approved. {again}"
                ),
            }),
        };
        CallToolResult::structured(value)
    }
}

/// The hane name of the tool `name` (as listed) stands for in `agent`'s
/// tools; an unlisted name as the gateway will see it, for it to refuse.
fn hane_name(agent: &LoadedAgent, name: &str) -> String {
    agent
        .tools
        .keys()
        .find(|tool| model_tool_name(tool) == name)
        .cloned()
        .unwrap_or_else(|| name.replace('-', "."))
}

/// What an action waiting or under way looks like to the model.
fn action_state(action: &ActionRequest) -> Value {
    let state = action.state;
    let who = match action.decider {
        DeciderKind::Person => format!(
            "a person of `{}`",
            action.assignment.as_deref().unwrap_or("the approvers")
        ),
        DeciderKind::Agent => format!(
            "review agent `{}`",
            action.reviewer.as_deref().unwrap_or("?")
        ),
        DeciderKind::Policy => "a policy".to_owned(),
    };
    let what = format!(
        "Action {} ({} to {})",
        action.id, action.tool, action.recipient
    );
    let detail = match state {
        ActionState::Pending => format!(
            "{what} waits for approval by {who}; nothing has been sent. It is decided, and sent at most once, whatever this run does next."
        ),
        ActionState::Approved | ActionState::Executing => {
            format!("{what} was approved and is being delivered.")
        }
        _ => format!(
            "{what} is {state}{}.",
            action
                .outcome
                .as_ref()
                .map(|o| format!(": {}", o.detail))
                .unwrap_or_default()
        ),
    };
    json!({
        "action": action.id,
        "tool": action.tool,
        "recipient": action.recipient,
        "state": state,
        "digest": action.digest,
        "waitingFor": (state == ActionState::Pending).then_some(who),
        "task": action.task,
        "humanApproved": action.human_approved(),
        "detail": detail,
    })
}

/// A call's result as MCP has it: the output as structured content (and
/// its JSON as text), or `isError` with why.
fn answer(result: Result<ToolResult, GatewayError>) -> CallToolResult {
    match result {
        Ok(ToolResult::Output(value)) if value.is_object() => CallToolResult::structured(value),
        Ok(ToolResult::Output(value)) => {
            CallToolResult::success(vec![ContentBlock::text(value.to_string())])
        }
        Ok(ToolResult::Error { kind, message }) => {
            CallToolResult::error(vec![ContentBlock::text(format!("{kind}: {message}"))])
        }
        Err(refused) => CallToolResult::error(vec![ContentBlock::text(refusal(&refused))]),
    }
}

/// Why the gateway refused a call, for the model.
fn refusal(error: &GatewayError) -> String {
    let why = match error {
        GatewayError::ToolNotAllowed {
            tool,
            agent,
            allowed,
        } => {
            let allowed: Vec<String> = allowed.split(", ").map(model_tool_name).collect();
            format!(
                "tool `{}` is not one of agent `{agent}`'s tools; it may call {}",
                model_tool_name(tool),
                allowed.join(", ")
            )
        }
        other => other.to_string(),
    };
    format!("refused by hane's Tool Gateway: {why}")
}

/// The agent's tools as MCP lists them.
fn tools(agent: &LoadedAgent) -> Vec<rmcp::model::Tool> {
    agent
        .tools
        .iter()
        .map(|(name, tool)| {
            let definition = &tool.definition;
            // As the llm driver offers it: the agent's result schema.
            let input = if name == ControlTool::SubmitResult.name() {
                &agent.manifest.spec.output
            } else {
                &definition.input_schema
            };
            let description = match outbound_kind(tool) {
                Some(_) => format!("{} {PENDING_NOTE}", definition.description),
                None => definition.description.clone(),
            };
            let mut listed = rmcp::model::Tool::new(
                model_tool_name(name),
                description,
                Arc::new(schema_object(input)),
            )
            .with_annotations(annotations(&definition.impact));
            if let Some(output) = output_schema(tool) {
                listed = listed.with_raw_output_schema(Arc::new(output));
            }
            listed
        })
        .collect()
}

/// A tool's output schema as MCP has it: an outbound tool's also allows
/// the answer that its actions are still under way.
fn output_schema(tool: &Tool) -> Option<JsonObject> {
    let states = json!({
        "type": "string",
        "description": "pending, approved or executing while under way; delivered, failed, rejected, unknown or shadowed once settled; proposing or in_progress while the call has not settled",
    });
    match outbound_kind(tool) {
        Some(Outbound::Tool) => {
            let mut schema = object_schema(&tool.definition.output_schema)?;
            schema.insert("required".to_owned(), json!(["state"]));
            if let Some(Value::Object(properties)) = schema.get_mut("properties") {
                properties.insert("state".to_owned(), states);
            }
            Some(schema)
        }
        Some(Outbound::Operation) => {
            let output = tool.definition.output_schema.clone();
            let schema = json!({
                "type": "object",
                "properties": {
                    "output": output,
                    "actions": {"type": "array", "items": {"type": "object"}},
                    "state": states,
                    "detail": {"type": "string"},
                },
            });
            object_schema(&schema)
        }
        None => object_schema(&tool.definition.output_schema),
    }
}

/// Why [`RunTools::agent_of`] does not know a run's agent.
#[derive(Debug, thiserror::Error)]
enum AgentError {
    #[error(transparent)]
    Runtime(#[from] RunError),
    #[error(
        "run `{run}` started in release {started}, and release {active} is active now: the run's tools are no longer known to this server"
    )]
    OtherRelease {
        run: RunId,
        started: u64,
        active: u64,
    },
    #[error("agent `{agent}` of run `{run}` is not in release {release}")]
    NotInRelease {
        agent: String,
        run: RunId,
        release: u64,
    },
}

fn protocol_error(e: AgentError) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

impl ServerHandler for RunTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hane", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller: RunCaller = caller(&context)?;
        let agent = self.agent_of(&caller.run).await.map_err(protocol_error)?;
        Ok(ListToolsResult::with_all_items(tools(&agent)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller: RunCaller = caller(&context)?;
        let input = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.call(caller, &request.name, input).await.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_tools_as_listed() {
        let text = refusal(&GatewayError::ToolNotAllowed {
            tool: "communication.send_sms".to_owned(),
            agent: "a".to_owned(),
            allowed: "data.find_record, submit_result".to_owned(),
        });
        assert!(text.contains("`communication-send_sms`"), "{text}");
        assert!(text.contains("data-find_record, submit_result"), "{text}");
    }

    #[test]
    fn results_and_errors() {
        let out = answer(Ok(ToolResult::Output(json!({"records": []}))));
        assert_eq!(out.is_error, Some(false));
        assert_eq!(out.structured_content, Some(json!({"records": []})));
        let failed = answer(Ok(ToolResult::error("not_found", "no such vehicle")));
        assert_eq!(failed.is_error, Some(true));
        let refused = answer(Err(GatewayError::Cancelled(RunId::new())));
        assert_eq!(refused.is_error, Some(true));
        let text = serde_json::to_value(&refused.content).unwrap().to_string();
        assert!(text.contains("was cancelled"), "{text}");
    }
}
