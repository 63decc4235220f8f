//! What the server refuses, and a server that is not there.

use std::time::Duration;

use hane_core::credential::Secret;
use hane_model::{AdapterConfig, Api, ModelError};

use super::{MODES, config, text_request};

#[tokio::test]
async fn a_wrong_key_is_an_authentication_error_that_does_not_quote_it() {
    for (api, stream) in MODES {
        let mut config = config(api, stream);
        config.credential = Some(Secret::new("sk-wrong-key-0123456789"));
        let error = hane_model::adapter(config)
            .unwrap()
            .send(&text_request(), None)
            .await
            .unwrap_err();
        assert!(
            matches!(error, ModelError::Authentication { .. }),
            "{api:?} stream={stream}: {error:?}"
        );
        assert!(!error.is_retryable());
        assert!(!error.to_string().contains("sk-wrong-key"), "{error}");
        assert!(!format!("{error:?}").contains("sk-wrong-key"), "{error:?}");
    }
}

#[tokio::test]
async fn an_unreachable_port_is_a_transport_error() {
    // A port just bound and released: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (api, stream) in MODES {
        let mut config = AdapterConfig::new(api, format!("http://127.0.0.1:{port}/v1"));
        config.stream = stream;
        config.timeout = Duration::from_secs(10);
        let error = hane_model::adapter(config)
            .unwrap()
            .send(&text_request(), None)
            .await
            .unwrap_err();
        assert!(
            matches!(error, ModelError::Transport(_)),
            "{api:?}: {error:?}"
        );
        assert!(error.is_retryable());
    }
}

#[test]
fn a_bad_base_url_is_refused_naming_it() {
    for url in ["not a url", "ftp://example.com/v1", "http:///v1"] {
        let error = hane_model::adapter(AdapterConfig::new(Api::ChatCompletions, url)).unwrap_err();
        assert!(error.to_string().contains(url), "{error}");
    }
}
