//! object_store's S3 client, talking to the in-process server over its
//! Unix socket.

use crate::server::{Credentials, BUCKET};
use crate::Error;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::client::{ClientOptions, HttpClient, HttpConnector};
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload, RetryConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A request that takes longer than this is a hung server, not a result.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Hands object_store a reqwest client that sends every request over the
/// socket (reqwest 0.13's `unix_socket`). object_store's own HTTP settings
/// (`ClientOptions`) do not reach a custom connector, so the timeout is set
/// here.
#[derive(Debug)]
struct UnixSocket(PathBuf);

impl HttpConnector for UnixSocket {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        let client = reqwest::Client::builder()
            .unix_socket(self.0.as_path())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| object_store::Error::Generic { store: "S3", source: Box::new(e) })?;
        Ok(HttpClient::new(client))
    }
}

/// A client of its own (its own connections) signing with `secret`.
pub fn store(socket: &Path, access_key: &str, secret: &str) -> Result<AmazonS3, Error> {
    Ok(AmazonS3Builder::new()
        .with_http_connector(UnixSocket(socket.to_path_buf()))
        // Over the socket the host is only a name in the URL and in the
        // signature; path-style keeps the bucket out of it.
        .with_endpoint("http://localhost")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .with_region("us-east-1")
        .with_bucket_name(BUCKET)
        .with_access_key_id(access_key)
        .with_secret_access_key(secret)
        // No retries: a retried conditional PUT whose first try landed
        // would come back refused and be counted as a loss. Every request
        // is made and counted once.
        .with_retry(RetryConfig { max_retries: 0, ..RetryConfig::default() })
        .build()?)
}

/// A client with the run's credentials.
pub fn authorised(socket: &Path, creds: &Credentials) -> Result<AmazonS3, Error> {
    store(socket, &creds.access_key, &creds.secret_key)
}

/// Auth must be on: a PUT signed with a wrong secret is refused, and
/// nothing is written. Anything else ends the run.
pub async fn check_auth_is_on(socket: &Path, creds: &Credentials) -> Result<(), Error> {
    let wrong = store(socket, &creds.access_key, &format!("{}-wrong", creds.secret_key))?;
    let key = Key::from("auth-check");
    match wrong.put(&key, PutPayload::from_static(b"must not land")).await {
        Err(object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }) => {}
        Err(e) => return Err(format!("auth check: a PUT with a wrong secret failed, but not as refused: {e}").into()),
        Ok(_) => return Err("auth check: the server ACCEPTED a PUT signed with a wrong secret: auth is off".into()),
    }
    match authorised(socket, creds)?.head(&key).await {
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(format!("auth check: cannot look for the refused object: {e}").into()),
        Ok(_) => Err("auth check: the refused PUT was written anyway".into()),
    }
}
