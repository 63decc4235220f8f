//! What only PostgreSQL has: a database that becomes a store, and a
//! schema newer than this build refused.

use hane_store::{Registry, StoreError};

#[test]
fn an_empty_database_becomes_a_store_once() {
    let db = hane_test_support::postgres::database();
    let first = Registry::open_postgres(&db.url).unwrap();
    assert!(first.created());
    let second = Registry::open_postgres(&db.url).unwrap();
    assert!(!second.created(), "the schema is made once");
    let server = hane_test_support::postgres::server();
    assert_eq!(
        server
            .psql(&db.name, "SELECT version FROM hane_schema")
            .unwrap()
            .trim(),
        "1"
    );
    assert_eq!(
        second.path().to_str().unwrap(),
        format!("127.0.0.1:{}/{}", server.port, db.name),
        "a PostgreSQL store is named by server and database"
    );
}

#[test]
fn a_newer_schema_is_refused_and_left_as_it_is() {
    let db = hane_test_support::postgres::database();
    drop(Registry::open_postgres(&db.url).unwrap());
    let server = hane_test_support::postgres::server();
    server
        .psql(&db.name, "UPDATE hane_schema SET version = 99")
        .unwrap();
    let err = Registry::open_postgres(&db.url).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NewerSchema {
                found: 99,
                supported: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("has schema version 99"), "{err}");
    assert_eq!(
        server
            .psql(&db.name, "SELECT version FROM hane_schema")
            .unwrap()
            .trim(),
        "99"
    );
}

#[test]
fn a_server_that_is_not_there_is_named() {
    let err = Registry::open_postgres("postgres://hane:secret@127.0.0.1:1/hane").unwrap_err();
    let message = err.to_string();
    assert!(message.contains("127.0.0.1:1/hane"), "{message}");
    assert!(!message.contains("secret"), "{message}");
}
