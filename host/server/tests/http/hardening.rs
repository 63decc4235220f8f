//! The server under abusive and ambiguous requests: slow and idle
//! connections are closed on time while others are served, and make room
//! for them at the cap; connections over the cap are refused when none can, hyper's own refusals and every other error are
//! in the JSON envelope, and requests that could be read two ways are
//! refused.

use std::time::{Duration, Instant};

use hane_server::ServeConfig;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{FOUND, Server, assert_matches, examples, parse, send};

/// Reads until the server closes the connection (or resets it), and
/// returns what came; gives up after `limit`.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(answer),
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
    }
}

/// Three new clients in turn, each answered within a second.
async fn served_at_once(server: &Server) -> anyhow::Result<()> {
    for _ in 0..3 {
        let started = Instant::now();
        let reply = send(server.addr, "GET", "/healthz", &[], None).await?;
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "served after {:?}",
            started.elapsed()
        );
    }
    Ok(())
}

async fn serving(config: ServeConfig) -> anyhow::Result<Server> {
    Server::start_serving(examples(), hane_delivery::DeliveryConfig::new(), config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_within_the_header_timeout() -> anyhow::Result<()> {
    const SLOW: usize = 2000;
    let header_timeout = Duration::from_secs(2);
    let server = serving(ServeConfig {
        header_timeout,
        idle_timeout: Duration::from_secs(60),
        max_connections: 4 * SLOW,
        ..ServeConfig::default()
    })
    .await?;
    let addr = server.addr;
    let opened = Instant::now();
    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        let mut stream = TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await?;
        slow.push(stream);
    }
    // Each sends one more byte of a header every 300 ms, never ending it:
    // only the header timeout can close them, not the idle one.
    let dribbling = slow.into_iter().map(|mut stream| {
        tokio::spawn(async move {
            let started = Instant::now();
            loop {
                if stream.write_all(b"X").await.is_err() {
                    return started.elapsed();
                }
                let mut byte = [0u8; 1];
                match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte)).await
                {
                    Err(_) => {}
                    Ok(_) => return started.elapsed(),
                }
                if started.elapsed() > Duration::from_secs(30) {
                    return started.elapsed();
                }
            }
        })
    });
    let dribbling: Vec<_> = dribbling.collect();
    // Meanwhile the server answers others at once.
    for _ in 0..10 {
        let started = Instant::now();
        let reply = send(addr, "GET", "/healthz", &[], None).await?;
        assert_eq!(reply.status, 200);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut slowest = Duration::ZERO;
    for task in dribbling {
        slowest = slowest.max(task.await?);
    }
    // Closed within the header timeout of their first byte, and some
    // slack for 2,000 connections on a busy machine.
    let whole = opened.elapsed();
    assert!(
        slowest <= header_timeout + Duration::from_secs(3),
        "the slowest was closed after {slowest:?}"
    );
    assert!(whole < Duration::from_secs(20), "{whole:?}");
    let reply = send(addr, "GET", "/healthz", &[], None).await?;
    assert_eq!(reply.status, 200);
    server.stop().await
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() -> anyhow::Result<()> {
    let idle_timeout = Duration::from_millis(1500);
    let server = serving(ServeConfig {
        idle_timeout,
        ..ServeConfig::default()
    })
    .await?;
    // One that never sends a byte, and one kept alive after a request.
    let mut silent = TcpStream::connect(server.addr).await?;
    let mut kept = TcpStream::connect(server.addr).await?;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    let started = Instant::now();
    let silent_answer = read_until_closed(&mut silent, Duration::from_secs(10)).await;
    let silent_after = started.elapsed();
    let kept_answer = read_until_closed(&mut kept, Duration::from_secs(10)).await;
    let kept_after = started.elapsed();
    assert_eq!(
        silent_answer.as_deref(),
        Some(&b""[..]),
        "closed without a word"
    );
    assert!(
        silent_after >= idle_timeout - Duration::from_millis(100)
            && silent_after < idle_timeout + Duration::from_secs(2),
        "{silent_after:?}"
    );
    let kept_answer = kept_answer.expect("closed");
    assert_eq!(
        parse(&kept_answer)?.status,
        200,
        "the request was answered first"
    );
    assert!(
        kept_after < idle_timeout + Duration::from_secs(2),
        "{kept_after:?}"
    );
    server.stop().await
}

#[tokio::test]
async fn connections_over_the_cap_are_answered_503_and_closed() -> anyhow::Result<()> {
    let server = serving(ServeConfig {
        max_connections: 2,
        ..ServeConfig::default()
    })
    .await?;
    let doc = send(server.addr, "GET", "/v1/openapi.json", &[], None)
        .await?
        .body;
    // Two requests being answered (each waits for the rest of its body):
    // neither connection is idle nor sending a head, so neither makes room.
    let head = format!(
        "POST /v1/agents/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"agent\": ",
        server.operator
    );
    let mut first = TcpStream::connect(server.addr).await?;
    let mut second = TcpStream::connect(server.addr).await?;
    for held in [&mut first, &mut second] {
        held.write_all(head.as_bytes()).await?;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reply = send(server.addr, "GET", "/healthz", &[], None).await?;
    let message = reply.error(503, "unavailable");
    assert!(message.contains("connections"), "{message}");
    assert_matches(&doc, "Error", &reply.body);
    assert_eq!(reply.header("connection"), Some("close"));
    // A place freed is taken again.
    drop(first);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        send(server.addr, "GET", "/healthz", &[], None)
            .await?
            .status,
        200
    );
    server.stop().await
}

/// Idle connections, silent ones and kept-alive ones, cannot lock a new
/// client out: at the cap, the one idle longest is closed to make room.
#[tokio::test]
async fn idle_connections_make_room_for_new_clients() -> anyhow::Result<()> {
    const CAP: usize = 64;
    let server = serving(ServeConfig {
        max_connections: CAP,
        ..ServeConfig::default()
    })
    .await?;
    // The oldest: one request kept alive, then idle.
    let mut oldest = TcpStream::connect(server.addr).await?;
    oldest
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    let mut answer = [0; 512];
    let read = oldest.read(&mut answer).await?;
    assert!(
        answer[..read].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &answer[..read]
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The rest: connected, silent.
    let mut silent = Vec::new();
    for _ in 1..CAP {
        silent.push(TcpStream::connect(server.addr).await?);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    served_at_once(&server).await?;
    // The one idle longest was the one closed first.
    let closed = read_until_closed(&mut oldest, Duration::from_secs(5)).await;
    assert_eq!(
        closed,
        Some(Vec::new()),
        "the oldest idle connection is closed"
    );
    server.stop().await
}

/// Slow clients, each sending its request head a byte at a time, hold at
/// most their own address's places: with every place taken by them, a
/// client from another address is served at once, the slow address's
/// oldest connection closed for it.
#[tokio::test]
async fn slow_clients_make_room_for_others_from_their_own_places() -> anyhow::Result<()> {
    const CAP: usize = 64;
    let server = serving(ServeConfig {
        max_connections: CAP,
        ..ServeConfig::default()
    })
    .await?;
    // From 127.0.0.2 (loopback too): each starts a head and never ends it.
    let mut slow = Vec::new();
    for _ in 0..CAP {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind("127.0.0.2:0".parse()?)?;
        let mut stream = socket.connect(server.addr).await?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            .await?;
        slow.push(stream);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    served_at_once(&server).await?;
    // The slow address's oldest was the one closed (each client here
    // closes its connection after its answer, so one place served all
    // three); its newest stays.
    let closed = read_until_closed(&mut slow[0], Duration::from_secs(2)).await;
    assert!(closed.is_some(), "the oldest slow connection is closed");
    let newest = slow.last_mut().unwrap();
    assert_eq!(
        read_until_closed(newest, Duration::from_millis(300)).await,
        None,
        "the newest slow connection is left to its header timeout"
    );
    server.stop().await
}

#[tokio::test]
async fn heads_hyper_refuses_are_answered_in_the_envelope() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    // Over the head's cap: 431.
    let big = format!("X-Filler: {}", "a".repeat(hane_server::MAX_HEAD_BYTES));
    let reply = send(server.addr, "GET", "/healthz", &[big], None).await?;
    let message = reply.error(431, "headers_too_large");
    assert!(message.contains("65536"), "{message}");
    assert_matches(&doc, "Error", &reply.body);
    // Far over it, hyper stops reading and the connection's own answer is
    // rewritten into the envelope.
    let huge = format!("X-Filler: {}", "a".repeat(4 * hane_server::MAX_HEAD_BYTES));
    let reply = send(server.addr, "GET", "/healthz", &[huge], None).await?;
    reply.error(431, "headers_too_large");
    assert_matches(&doc, "Error", &reply.body);
    // A target over its cap: 414.
    let long = format!(
        "/v1/agents/runs?x={}",
        "a".repeat(hane_server::MAX_URI_BYTES)
    );
    let reply = server.get(&long, Some(&server.viewer)).await?;
    reply.error(414, "uri_too_long");
    assert_matches(&doc, "Error", &reply.body);
    // Not HTTP at all: 400.
    let mut stream = TcpStream::connect(server.addr).await?;
    stream.write_all(b"NOT HTTP AT ALL\r\n\r\n").await?;
    let answer = read_until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("closed");
    let reply = parse(&answer)?;
    reply.error(400, "bad_request");
    assert_matches(&doc, "Error", &reply.body);
    // Each is in the document.
    let responses = &doc["paths"]["/v1/agents/runs"]["post"]["responses"];
    for status in ["400", "408", "414", "431", "503"] {
        assert!(
            responses.get(status).is_some(),
            "no {status} in {responses}"
        );
    }
    server.stop().await
}

#[tokio::test]
async fn a_body_slower_than_its_timeout_is_408_and_a_cut_one_is_not_called_json()
-> anyhow::Result<()> {
    let server = serving(ServeConfig {
        body_timeout: Duration::from_millis(800),
        ..ServeConfig::default()
    })
    .await?;
    let head = |length: usize| {
        format!(
            "POST /v1/agents/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
            server.operator
        )
    };
    let mut stream = TcpStream::connect(server.addr).await?;
    stream.write_all(head(100).as_bytes()).await?;
    stream.write_all(b"{\"agent\": ").await?;
    let started = Instant::now();
    let answer = read_until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("answered");
    let reply = parse(&answer)?;
    let message = reply.error(408, "request_timeout");
    assert!(message.contains("did not arrive within"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // A body cut off by the client is a failed read, not broken JSON.
    let mut stream = TcpStream::connect(server.addr).await?;
    stream.write_all(head(100).as_bytes()).await?;
    stream.write_all(b"{\"agent\": ").await?;
    stream.shutdown().await?;
    if let Some(answer) = read_until_closed(&mut stream, Duration::from_secs(10)).await
        && !answer.is_empty()
    {
        let reply = parse(&answer)?;
        let message = reply.error(400, "bad_request");
        assert!(message.contains("could not be read"), "{message}");
        assert!(!message.contains("not valid JSON"), "{message}");
    }
    server.stop().await
}

#[tokio::test]
async fn two_authorization_headers_are_refused_whichever_comes_first() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let body = json!({"agent": "vehicle-check-scripted", "input": {"vehicle": FOUND}}).to_string();
    for keys in [
        [&server.viewer, &server.operator],
        [&server.operator, &server.viewer],
    ] {
        let headers: Vec<String> = keys
            .iter()
            .map(|key| format!("Authorization: Bearer {key}"))
            .collect();
        let reply = send(
            server.addr,
            "POST",
            "/v1/agents/runs",
            &headers,
            Some(&body),
        )
        .await?;
        let message = reply.error(400, "bad_request");
        assert!(message.contains("more than one Authorization"), "{message}");
    }
    let runs = server.get("/v1/agents/runs", Some(&server.viewer)).await?;
    assert_eq!(runs.body["runs"], json!([]), "nothing started");
    server.stop().await
}

#[tokio::test]
async fn a_body_giving_a_key_twice_is_refused_naming_it() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let key = Some(server.operator.as_str());
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let body = format!(
        r#"{{"agent": "no-such-agent", "agent": "vehicle-check-scripted", "input": {{"vehicle": "{FOUND}"}}}}"#
    );
    let reply = server.post("/v1/agents/runs", key, &body).await?;
    let message = reply.error(400, "bad_request");
    assert!(message.contains("`agent` twice"), "{message}");
    assert_eq!(reply.body["error"]["path"], "/agent");
    assert_matches(&doc, "Error", &reply.body);
    let body = format!(
        r#"{{"agent": "vehicle-check-scripted", "input": {{"vehicle": "x", "vehicle": "{FOUND}"}}}}"#
    );
    let reply = server.post("/v1/agents/runs", key, &body).await?;
    reply.error(400, "bad_request");
    assert_eq!(reply.body["error"]["path"], "/input/vehicle");
    let runs = server.get("/v1/agents/runs", Some(&server.viewer)).await?;
    assert_eq!(runs.body["runs"], json!([]), "nothing started");
    server.stop().await
}

#[tokio::test]
async fn an_invalid_id_is_not_echoed_whole() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let id = format!("run_{}", "a".repeat(7000));
    let reply = server
        .get(&format!("/v1/agents/runs/{id}"), Some(&server.viewer))
        .await?;
    let message = reply.error(400, "bad_request");
    assert!(message.len() < 300, "{} bytes: {message}", message.len());
    assert!(message.contains("run_aaaa"), "{message}");
    server.stop().await
}
