//! A customer API through `hane serve`, as a host runs it: the example
//! release's connection to the fleet-maintenance service (FastAPI, started
//! on loopback), its credential in the server's environment. A booking
//! approved over HTTP is sent once; the server killed (`kill -9`) while
//! the service holds the booking leaves the action `unknown`, and the
//! service saw it once. The credential is in no log line and no byte of
//! the store.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hane_test_support::fleet::{FleetMode, FleetService};
use serde_json::{Value, json};

use crate::common::{hane_on, ok, operator_key, request};

const TOKEN: &str = "fleet-token-e2a94d17";

/// A copy of `examples/` whose connection is to `service`.
fn examples_for(service: &FleetService) -> tempfile::TempDir {
    let examples = hane_test_support::examples_copy();
    let connection = examples.path().join("integrations/fleet-maintenance.yaml");
    let text = std::fs::read_to_string(&connection).unwrap();
    std::fs::write(
        &connection,
        text.replace("http://127.0.0.1:8765", &service.url()),
    )
    .unwrap();
    examples
}

/// `hane serve` on `store` with the connection's credential, every line
/// it writes to stderr kept in `log`; its address.
fn serve_logged(store: &Path, log: &Arc<Mutex<String>>) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("HANE_CREDENTIAL_FLEET_MAINTENANCE", TOKEN)
        .env("HANE_LEASE", "1")
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("hane serve said where it listens")
            .unwrap();
        log.lock().unwrap().push_str(&line);
        log.lock().unwrap().push('\n');
        if let Some(addr) = line.strip_prefix("listening on http://") {
            break addr.to_owned();
        }
    };
    let log = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut log = log.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    (child, addr)
}

/// The action of `run` once it is in `state`.
fn action_in(addr: &str, key: &str, run: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, list) = request(
            addr,
            "GET",
            &format!("/v1/agents/action-requests?run={run}"),
            key,
            None,
        );
        assert_eq!(status, 200, "{list}");
        if let Some(action) = list["actionRequests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["state"] == state)
        {
            return action.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no {state} action of {run}: {list}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_booking_approved_over_http_is_sent_once_and_a_killed_server_leaves_it_unknown() {
    let service = FleetService::start(TOKEN);
    let examples = examples_for(&service);
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let activated = ok(&hane_on(
        &store,
        &["release", "activate", examples.path().to_str().unwrap()],
    ));
    assert!(
        activated.contains("1 connection, 2 tool exposures"),
        "{activated}"
    );
    let key = operator_key(&store);
    let log = Arc::new(Mutex::new(String::new()));
    let (mut server, addr) = serve_logged(&store, &log);

    let start = |depot: &str| {
        let (status, run) = request(
            &addr,
            "POST",
            "/v1/agents/runs",
            &key,
            Some(
                &json!({"agent": "service-booker", "input": {"vehicle": "架空 300 あ 10-02", "depot": depot}}),
            ),
        );
        assert_eq!(status, 201, "{run}");
        run["id"].as_str().unwrap().to_owned()
    };
    let approve = |addr: &str, action: &Value| {
        let path = format!(
            "/v1/agents/action-requests/{}/approve",
            action["id"].as_str().unwrap()
        );
        hane_test_support::try_request(
            addr,
            "POST",
            &path,
            &key,
            Some(&json!({"digest": action["digest"]})),
            Duration::from_secs(60),
        )
    };

    // Approved over HTTP: booked once.
    let run = start("Shinagawa");
    let action = action_in(&addr, &key, &run, "pending");
    assert_eq!(action["content"]["operation"], "bookServiceSlot");
    assert_eq!(service.requests().count("bookServiceSlot"), 0);
    let (status, approved) = approve(&addr, &action).unwrap();
    assert_eq!(
        (status, &approved["state"]),
        (200, &json!("delivered")),
        "{approved}"
    );
    assert_eq!(service.requests().count("bookServiceSlot"), 1);
    assert_eq!(service.requests().bookings.len(), 1);

    // The server dies while the service holds the next booking.
    service.reset();
    service.behave("bookServiceSlot", FleetMode::Hang);
    let run = start("Kawasaki");
    let action = action_in(&addr, &key, &run, "pending");
    let approving = {
        let addr = addr.clone();
        let action = action.clone();
        let key = key.clone();
        std::thread::spawn(move || {
            let path = format!(
                "/v1/agents/action-requests/{}/approve",
                action["id"].as_str().unwrap()
            );
            hane_test_support::try_request(
                &addr,
                "POST",
                &path,
                &key,
                Some(&json!({"digest": action["digest"]})),
                Duration::from_secs(60),
            )
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while service.requests().count("bookServiceSlot") == 0 {
        assert!(
            Instant::now() < deadline,
            "the booking never reached the service"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
    assert!(
        approving.join().unwrap().is_err(),
        "the approval had no answer"
    );

    // A new server finds the delivery's process gone: `unknown`, never
    // sent again.
    let (mut again, addr) = serve_logged(&store, &log);
    let unknown = action_in(&addr, &key, &run, "unknown");
    assert!(
        unknown["outcome"]["detail"]
            .as_str()
            .unwrap()
            .contains("reconcile"),
        "{unknown}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(service.requests().count("bookServiceSlot"), 1);
    let (status, refused) = approve(&addr, &unknown).unwrap();
    assert_eq!(status, 409, "{refused}");
    assert_eq!(service.requests().count("bookServiceSlot"), 1);
    again.kill().unwrap();
    again.wait().unwrap();

    // The credential reached the service only.
    let log = log.lock().unwrap().clone();
    assert!(
        log.contains("bookServiceSlot") || log.contains("fleet-maintenance"),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "a log line holds the credential");
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "{} holds the credential",
                path.display()
            );
        }
    }
}

#[test]
fn the_demo_reads_through_the_connection_and_shows_the_booking_it_rejects() {
    let service = FleetService::start(TOKEN);
    let examples = examples_for(&service);
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["demo", "--examples", examples.path().to_str().unwrap()])
        .arg("--store")
        .arg(dir.path().join("hane.db"))
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("HANE_CREDENTIAL_FLEET_MAINTENANCE", TOKEN)
        .output()
        .unwrap();
    let out = ok(&out);
    assert!(
        out.contains("service-booker reads the fleet-maintenance company's API"),
        "{out}"
    );
    assert!(
        out.contains("integration.execute fleet-maintenance POST /bookings (bookServiceSlot)"),
        "{out}"
    );
    assert!(out.contains("fleet.service_history"), "{out}");
    assert!(out.contains("service-booker  succeeded"), "{out}");
    assert!(out.contains(r#""status": "rejected""#), "{out}");
    assert!(!out.contains(TOKEN));
    let seen = service.requests();
    assert_eq!(seen.count("getServiceHistory"), 1, "{seen:?}");
    assert_eq!(seen.count("listServiceSlots"), 1, "{seen:?}");
    assert_eq!(seen.count("bookServiceSlot"), 0, "{seen:?}");
    assert!(seen.requests.iter().all(|r| r.authorized), "{seen:?}");
}
