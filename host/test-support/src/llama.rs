//! A real language model over HTTP on loopback for the tests:
//! `tests/llama/server.py`, llama.cpp's own server (the xllamacpp package)
//! serving SmolLM2-135M-Instruct with `tests/llama/chatml-tools.jinja` as
//! its chat template, so that tool calls work. The interpreter and the
//! model are the ones `cargo xtask test` provisions, passed as
//! `HANE_TEST_PYTHON` and `HANE_TEST_MODEL` or found where it puts them.
//!
//! It answers OpenAI's chat completions (`/v1/chat/completions`) and
//! Responses (`/v1/responses`), and Anthropic's Messages (`/v1/messages`,
//! `/v1/messages/count_tokens`), each plain or streamed, plus `GET /health`
//! and `/v1/models`. Every request but `/health` needs the key
//! ([`LlamaServer::api_key`]), as `Authorization: Bearer KEY` or
//! `x-api-key: KEY`; without it the answer is 401.
//!
//! The model is tiny: assert on structure (a valid call, a well-formed
//! stream, usage counted), never on wording, with `temperature: 0` and small
//! output caps. To force one tool call, all of: `tool_choice: "required"`
//! (Messages: `{"type": "any"}`), the messages ending with an assistant turn
//! whose content is `"<tool_call>\n"`, and the stop sequence `</tool_call>`
//! (this build ignores `parallel_tool_calls: false` and would otherwise
//! repeat the call until the output cap).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::python::{self, PROVISION};

/// The name clients send as the model.
const ALIAS: &str = "smollm2";

/// How long the launcher may take to load the model and answer `/health`
/// (about 1.5 s when the machine is idle).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The provisioned model: `HANE_TEST_MODEL`, else where `cargo xtask` puts
/// it in the workspace's target directory.
fn model() -> PathBuf {
    match std::env::var_os("HANE_TEST_MODEL").filter(|p| !p.is_empty()) {
        Some(model) => PathBuf::from(model),
        None => crate::repository().join("target/test-env/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
}

/// `tests/llama/server.py`, run as a child process and killed when dropped
/// (it also exits when our end of its stdin closes, so even the
/// [shared](LlamaServer::shared) one, never dropped, ends with the test
/// process).
pub struct LlamaServer {
    child: Child,
    _stdin: ChildStdin,
    port: u16,
    api_key: String,
    log: tempfile::NamedTempFile,
}

impl LlamaServer {
    /// Starts a server (model load ~1.5 s).
    ///
    /// # Panics
    ///
    /// When it cannot: the provisioned Python, its xllamacpp or the model
    /// missing (naming the command that provisions them), or the server not
    /// coming up (with its log).
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// One server shared by every test of this process, started by the
    /// first that asks. It serves one request at a time (`n_parallel` 1):
    /// the others queue.
    ///
    /// # Panics
    ///
    /// As [`LlamaServer::start`].
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<LlamaServer> = OnceLock::new();
        SHARED.get_or_init(Self::start)
    }

    fn try_start() -> Result<Self> {
        let model = model();
        if !model.is_file() {
            bail!(
                "the model tests need the model that {PROVISION} provisions; there is no {}",
                model.display()
            );
        }
        let python = python::require("xllamacpp", "the model tests")?;
        let api_key = random_key()?;
        let log = tempfile::NamedTempFile::new()?;
        let tests = crate::repository().join("tests/llama");
        let started = python::spawn(
            Command::new(&python)
                .arg(tests.join("server.py"))
                .arg("--model")
                .arg(&model)
                .args(["--alias", ALIAS, "--api-key", &api_key, "--port", "0"])
                .arg("--template")
                .arg(tests.join("chatml-tools.jinja"))
                .stderr(log.reopen()?),
            START_TIMEOUT,
        )?;
        let line = started.line;
        let mut server = Self {
            child: started.child,
            _stdin: started.stdin,
            port: 0,
            api_key,
            log,
        };
        let port = line
            .trim()
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|port| port.parse().ok());
        match port {
            Some(port) => server.port = port,
            None => bail!(
                "the llama.cpp test server did not say where it listens within {}s (got {line:?}); \
                 its log:\n{}",
                START_TIMEOUT.as_secs(),
                server.log()
            ),
        }
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash or `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The key every request but `/health` must carry, random per server.
    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    /// The model's name in requests: `smollm2`.
    pub fn model(&self) -> &str {
        ALIAS
    }

    /// What the server wrote to its log so far (llama.cpp's included).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 32 hex digits from the system's random source.
fn random_key() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for the test server's API key")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
