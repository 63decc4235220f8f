//! What every test shares: one sandbox per process, program loading and a
//! tiny HTTP server on loopback.

use std::cell::Cell;
use std::net::SocketAddr;

use hane_core::Policy;
use std::sync::OnceLock;

use hane_sandbox::{EngineKind, LoadedOperation, Sandbox, SandboxConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub use hane_test_support::{component_cache as cache_dir, examples};

thread_local! {
    /// The engine [`sandbox`] gives on this thread; see [`on_pulley`].
    static ENGINE: Cell<EngineKind> = const { Cell::new(EngineKind::Cranelift) };
}

/// The test process's sandbox of the engine this thread's test runs on
/// (cranelift unless [`on_pulley`] says otherwise).
pub fn sandbox() -> &'static Sandbox {
    sandbox_on(ENGINE.get())
}

/// The test process's sandbox on `engine`, one per engine: 64 instances
/// on cranelift, 16 on Pulley, on the shared component cache.
pub fn sandbox_on(engine: EngineKind) -> &'static Sandbox {
    static CRANELIFT: OnceLock<Sandbox> = OnceLock::new();
    static PULLEY: OnceLock<Sandbox> = OnceLock::new();
    let (cell, instances) = match engine {
        EngineKind::Cranelift => (&CRANELIFT, 64),
        EngineKind::Pulley => (&PULLEY, 16),
    };
    cell.get_or_init(|| {
        Sandbox::new(
            SandboxConfig::new()
                .cache_dir(Some(cache_dir()))
                .max_instances(instances)
                .engine(engine),
        )
        .expect("sandbox")
    })
}

/// Runs `test`, a `#[tokio::test]` (which builds its runtime on the
/// calling thread and runs its body there), with [`sandbox`], [`program`]
/// and [`builtin`] on Pulley.
pub fn on_pulley(test: fn()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ENGINE.set(EngineKind::Cranelift);
        }
    }
    ENGINE.set(EngineKind::Pulley);
    let _reset = Reset;
    test();
}

/// Runs the named tests of the calling module again on Pulley, as
/// `pulley::NAME`: the same bodies, loading their programs through
/// [`sandbox`] on the test's own thread.
macro_rules! on_pulley_too {
    ($($test:ident),* $(,)?) => {
        /// The tests above, on Pulley.
        mod pulley {
            $(
                #[test]
                fn $test() {
                    crate::harness::on_pulley(super::$test);
                }
            )*
        }
    };
}
pub(crate) use on_pulley_too;

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
