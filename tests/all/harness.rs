//! What every test shares: one sandbox per process, program loading and a
//! tiny HTTP server on loopback.

use std::net::SocketAddr;

use hane_core::Policy;
use std::sync::OnceLock;

use hane_sandbox::{LoadedOperation, Sandbox, SandboxConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub use hane_test_support::{component_cache as cache_dir, examples};

/// The test process's sandbox: 64 instances, on the shared component cache.
pub fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        Sandbox::new(
            &SandboxConfig::new()
                .cache_dir(Some(cache_dir()))
                .max_instances(64)
                .clone(),
        )
        .expect("sandbox")
    })
}

/// The test program `file` (such as `hostile_loop`) loaded under `policy`.
pub async fn program(file: &str, policy: &Policy) -> LoadedOperation {
    let path = hane_builtins::test_programs::ALL
        .iter()
        .find(|(name, _)| *name == file)
        .unwrap_or_else(|| panic!("no test program {file}"))
        .1;
    sandbox()
        .load_file(path.as_ref(), policy)
        .await
        .unwrap_or_else(|e| panic!("loading {file}: {e}"))
}

/// The built-in operation `name` loaded under `policy`.
pub async fn builtin(name: &str, policy: &Policy) -> LoadedOperation {
    let bytes = hane_builtins::get(name).unwrap_or_else(|| panic!("no builtin {name}"));
    sandbox()
        .load(name, bytes, policy)
        .await
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// A policy whose only grant is HTTP to the loopback server at `addr`.
pub fn allow_loopback(addr: SocketAddr) -> Policy {
    Policy {
        http: vec![format!("http://127.0.0.1:{}", addr.port()).parse().unwrap()],
        ..Policy::default()
    }
}

/// Serves every request on loopback with status 200, a fixed header and
/// `body`; returns its address. Lives as long as the runtime.
pub async fn http_server(body: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-hane-test: yes\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

/// The resident set size of this process in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("rss pages");
    pages * 4096
}
