//! The customer API the connection tests talk to,
//! `examples/services/fleet-maintenance/app.py` on FastAPI
//! (`hane_test_support::fleet`): its committed OpenAPI document is the one
//! it generates, it refuses requests without its token, books once per
//! Idempotency-Key, serves the example ledger's vehicles, and misbehaves
//! when told to.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use hane_test_support::fleet::{self, FleetMode, FleetService, path_segment};

const TOKEN: &str = "fleet-test-token-5b1e";

/// The four operations, by operationId.
const OPERATIONS: [&str; 4] = [
    "bookServiceSlot",
    "getBooking",
    "getServiceHistory",
    "listServiceSlots",
];

/// The example ledger's vehicles: (registration, depot, mileage in km).
fn ledger_vehicles() -> Vec<(String, String, u64)> {
    let csv =
        std::fs::read_to_string(hane_test_support::examples().join("ledger/records/vehicles.csv"))
            .unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (registration, depot, mileage) = (
        column("registration"),
        column("depot"),
        column("mileage_km"),
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            (
                fields[registration].to_owned(),
                fields[depot].to_owned(),
                fields[mileage].parse().unwrap(),
            )
        })
        .collect()
}

/// The first open slot of `depot`.
fn first_slot(service: &FleetService, depot: &str) -> Value {
    let slots = service.api("GET", &format!("/slots?depot={depot}"), None, None);
    assert_eq!(
        slots.status,
        200,
        "{}",
        String::from_utf8_lossy(&slots.body)
    );
    slots.json()[0].clone()
}

#[test]
fn committed_openapi_document_is_the_generated_one() {
    let committed = std::fs::read_to_string(fleet::openapi_file()).unwrap();
    let generated = fleet::generated_openapi();
    assert!(
        committed == generated,
        "{} differs from what app.py generates; write it again with \
         `python3 app.py --print-openapi > openapi.json` in the provisioned Python",
        fleet::openapi_file().display()
    );

    let document: Value = serde_json::from_str(&generated).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1."));
    let mut operations: Vec<&str> = document["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|path| path.as_object().unwrap().values())
        .map(|operation| {
            assert_eq!(operation["security"], json!([{"HTTPBearer": []}]));
            assert!(operation["summary"].is_string() && operation["description"].is_string());
            operation["operationId"].as_str().unwrap()
        })
        .collect();
    operations.sort_unstable();
    assert_eq!(operations, OPERATIONS);
    assert!(
        !generated.contains("/_test/"),
        "the test controls stay out of the document"
    );
    assert_eq!(
        document["components"]["securitySchemes"]["HTTPBearer"]["scheme"],
        "bearer"
    );
    assert_eq!(
        document["paths"]["/bookings"]["post"]["requestBody"]["content"]["application/json"]["schema"]
            ["$ref"],
        "#/components/schemas/BookingRequest"
    );
    for schema in ["Booking", "ServiceRecord", "Slot", "Error"] {
        assert!(
            document["components"]["schemas"][schema].is_object(),
            "{schema}"
        );
    }
}

#[test]
fn refuses_requests_without_the_token() {
    let service = FleetService::start(TOKEN);
    let timeout = Duration::from_secs(30);
    let path = "/slots?depot=Shinagawa";

    let none = service.call("GET", path, &[], None, timeout).unwrap();
    assert_eq!(none.status, 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    assert!(none.json()["detail"].is_string(), "a JSON error");
    let wrong = [("Authorization", "Bearer not-the-token")];
    assert_eq!(
        service
            .call("GET", path, &wrong, None, timeout)
            .unwrap()
            .status,
        401
    );
    let booking = json!({"registration": "架空 300 あ 10-02", "slot": "SHI-20990101-0900"});
    let refused = service
        .call("POST", "/bookings", &[], Some(&booking), timeout)
        .unwrap();
    assert_eq!(refused.status, 401);
    assert_eq!(service.api("GET", path, None, None).status, 200);

    let seen = service.requests();
    assert_eq!(seen.total, 4);
    assert_eq!(seen.count("listServiceSlots"), 3);
    assert_eq!(seen.count("bookServiceSlot"), 1);
    let authorized: Vec<bool> = seen.requests.iter().map(|r| r.authorized).collect();
    assert_eq!(authorized, [false, false, false, true]);
    assert!(seen.bookings.is_empty());
    let raw = service
        .call("GET", "/_test/requests", &[], None, timeout)
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&raw.body).contains(TOKEN),
        "the token is never echoed"
    );
}

#[test]
fn books_once_per_idempotency_key() {
    let service = FleetService::start(TOKEN);
    let slot = first_slot(&service, "Kawasaki");
    let slot_id = slot["id"].as_str().unwrap();
    let body = json!({
        "registration": "架空 400 か 77-10",
        "slot": slot_id,
        "note": "Oil change due.",
    });

    let first = service.api("POST", "/bookings", Some(&body), Some("action-7f3a"));
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let booking = first.json();
    assert_eq!(booking["status"], "booked");
    assert_eq!(booking["slot"], slot_id);
    assert_eq!(booking["registration"], "架空 400 か 77-10");
    assert!(booking["createdAt"].is_string());
    let again = service.api("POST", "/bookings", Some(&body), Some("action-7f3a"));
    assert_eq!(again.status, 200);
    assert_eq!(again.json(), booking, "the same booking again");

    let seen = service.requests();
    assert_eq!(seen.count("bookServiceSlot"), 2);
    assert_eq!(seen.total, 3);
    assert_eq!(seen.bookings.len(), 1, "booked once: {:?}", seen.bookings);
    assert_eq!(seen.bookings[0].id, booking["id"].as_str().unwrap());
    assert_eq!(seen.bookings[0].slot, slot_id);
    assert!(
        seen.requests[1..]
            .iter()
            .all(|r| r.idempotency_key.as_deref() == Some("action-7f3a"))
    );

    // The slot is taken now: not listed, and a booking without the key,
    // or with another, is refused.
    assert_ne!(first_slot(&service, "Kawasaki")["id"], slot_id);
    let taken = service.api("POST", "/bookings", Some(&body), None);
    assert_eq!(taken.status, 409);
    assert!(taken.json()["detail"].is_string());
    assert_eq!(
        service
            .api("POST", "/bookings", Some(&body), Some("action-other"))
            .status,
        409
    );
    // The same key with another body is refused too.
    let other = json!({"registration": "架空 400 か 77-10", "slot": first_slot(&service, "Kawasaki")["id"]});
    assert_eq!(
        service
            .api("POST", "/bookings", Some(&other), Some("action-7f3a"))
            .status,
        422
    );
    let id = booking["id"].as_str().unwrap();
    let fetched = service.api("GET", &format!("/bookings/{id}"), None, None);
    assert_eq!((fetched.status, fetched.json()), (200, booking));
    assert_eq!(
        service.api("GET", "/bookings/B-9999", None, None).status,
        404
    );
    assert_eq!(service.requests().bookings.len(), 1);

    service.reset();
    let seen = service.requests();
    assert_eq!((seen.total, seen.bookings.len()), (0, 0));
    assert!(OPERATIONS.iter().all(|op| seen.count(op) == 0));
}

#[test]
fn serves_the_ledgers_vehicles() {
    let service = FleetService::start(TOKEN);
    let vehicles = ledger_vehicles();
    assert_eq!(vehicles.len(), 5);
    for (registration, depot, mileage) in &vehicles {
        let path = format!("/vehicles/{}/services", path_segment(registration));
        let history = service.api("GET", &path, None, None);
        assert_eq!(history.status, 200, "{registration}");
        for service in history.json().as_array().unwrap() {
            assert_eq!(
                service["depot"],
                depot.as_str(),
                "{registration}: {service}"
            );
            assert!(
                service["mileage"].as_u64().unwrap() <= *mileage,
                "{registration}: {service} is past the ledger's {mileage} km"
            );
            for field in ["date", "kind", "notes"] {
                assert!(service[field].is_string(), "{registration}: {service}");
            }
        }
    }
    let first = &vehicles[0].0;
    let path = format!("/vehicles/{}/services", path_segment(first));
    assert!(!service.api("GET", &path, None, None).json()[0].is_null());
    let unknown = service.api(
        "GET",
        "/vehicles/%E6%9E%B6%E7%A9%BA%20999/services",
        None,
        None,
    );
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.json()["detail"]
            .as_str()
            .unwrap()
            .contains("架空 999")
    );
    assert_eq!(
        service.requests().requests.last().unwrap().path,
        "/vehicles/架空 999/services"
    );

    // Slots: ISO dates, filtered by day.
    let slot = first_slot(&service, "Yokohama");
    let day = &slot["start"].as_str().unwrap()[..10];
    let that_day = service
        .api(
            "GET",
            &format!("/slots?depot=Yokohama&date={day}"),
            None,
            None,
        )
        .json();
    let that_day = that_day.as_array().unwrap();
    assert_eq!(that_day.len(), 3, "three slots a day: {that_day:?}");
    assert!(
        that_day
            .iter()
            .all(|s| s["start"].as_str().unwrap().starts_with(day))
    );
    assert_eq!(
        service.api("GET", "/slots", None, None).status,
        422,
        "depot is required"
    );
}

#[test]
fn misbehaves_when_told() {
    let service = FleetService::start(TOKEN);
    let auth = format!("Bearer {TOKEN}");
    let auth = [("Authorization", auth.as_str())];
    let slots = "/slots?depot=Shinagawa";

    // hang: counted, then nothing within the client's timeout; the other
    // operations still answer meanwhile.
    service.behave("listServiceSlots", FleetMode::Hang);
    let started = Instant::now();
    let hung = service.call("GET", slots, &auth, None, Duration::from_millis(500));
    assert!(hung.is_err(), "answered: {hung:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(service.requests().count("listServiceSlots"), 1);
    let history = format!("/vehicles/{}/services", path_segment("架空 300 あ 10-02"));
    assert_eq!(service.api("GET", &history, None, None).status, 200);

    // error: 503 with a JSON error.
    service.behave("listServiceSlots", FleetMode::Error);
    let failed = service.api("GET", slots, None, None);
    assert_eq!(failed.status, 503);
    assert!(failed.json()["detail"].is_string());

    // large: 8 MiB of JSON.
    service.behave("getServiceHistory", FleetMode::Large);
    let large = service.api("GET", &history, None, None);
    assert_eq!(large.status, 200);
    assert_eq!(large.body.len(), 8 * 1024 * 1024);
    assert_eq!(
        large.header("content-length"),
        Some((8 * 1024 * 1024).to_string().as_str())
    );
    assert!(large.json().is_object());

    // redirect: 302 elsewhere, and no booking made.
    service.behave("bookServiceSlot", FleetMode::Redirect);
    let body = json!({"registration": "架空 300 あ 10-02", "slot": "SHI-20990101-0900"});
    let redirected = service.api("POST", "/bookings", Some(&body), Some("k-1"));
    assert_eq!(redirected.status, 302);
    assert_eq!(
        redirected.header("location"),
        Some("http://127.0.0.1:9/elsewhere")
    );

    // Still refused without the token, whatever the mode.
    assert_eq!(
        service
            .call("GET", slots, &[], None, Duration::from_secs(30))
            .unwrap()
            .status,
        401
    );

    // normal again.
    service.behave("listServiceSlots", FleetMode::Normal);
    service.behave("getServiceHistory", FleetMode::Normal);
    service.behave("bookServiceSlot", FleetMode::Normal);
    assert_eq!(service.api("GET", slots, None, None).status, 200);
    assert!(service.api("GET", &history, None, None).body.len() < 10_000);
    let seen = service.requests();
    assert_eq!(seen.count("listServiceSlots"), 4);
    assert_eq!(seen.count("getServiceHistory"), 3);
    assert_eq!(seen.count("bookServiceSlot"), 1);
    assert!(seen.bookings.is_empty());
}
