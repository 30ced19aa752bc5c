//! The store under test: s3s-fs's `FileSystem` behind s3s's service (auth
//! on), served by hyper on a Unix socket inside a private folder. Nothing
//! listens on a TCP port, and nothing outside this process ever learns the
//! credentials.

use crate::Error;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{HttpError, HttpResponse};
use std::fs;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The one bucket the probes write into (a valid S3 name: s3s refuses
/// names shorter than 3 characters).
pub const BUCKET: &str = "s3probe-bucket";

/// Two servers from the same library: the published code, and the same
/// service with one lock around every request (the atomic reference: if
/// the probe counts right, this one has exactly one winner per race).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Stock,
    Serialized,
}

impl Variant {
    pub const ALL: [Variant; 2] = [Variant::Stock, Variant::Serialized];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Stock => "stock",
            Variant::Serialized => "serialized",
        }
    }
}

/// A fresh access key and secret for one run: drawn from the OS's random
/// source, held only in this process's memory (never on a command line,
/// in the environment or in a file).
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

impl Credentials {
    pub fn random() -> Result<Credentials, Error> {
        Ok(Credentials { access_key: format!("AK{}", random_hex(10)?), secret_key: random_hex(24)? })
    }
}

fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| format!("the OS's random source failed: {e}"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Makes a folder of unpredictable name in `parent`, mode 0700, and checks
/// that it got that mode (the umask could only have narrowed it). Removed
/// when the returned value is closed or dropped.
pub fn private_folder(parent: &Path) -> Result<tempfile::TempDir, Error> {
    if !parent.is_dir() {
        return Err(format!("--dir {}: not a folder", parent.display()).into());
    }
    let dir = tempfile::Builder::new()
        .prefix("s3probe-")
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|e| format!("cannot make a private folder in {}: {e}", parent.display()))?;
    let mode = fs::metadata(dir.path())?.permissions().mode() & 0o777;
    if mode != 0o700 {
        return Err(format!("{} has mode {mode:o}, not 700", dir.path().display()).into());
    }
    Ok(dir)
}

/// A running server; its accept loop ends when this is dropped.
pub struct Server {
    pub socket: PathBuf,
    accept: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Server {
    /// Serves `variant` from `folder` (its data in `folder/data`, its
    /// socket `folder/s3.sock`): `folder` must be inside the private folder.
    pub fn start(variant: Variant, folder: &Path, creds: &Credentials) -> Result<Server, Error> {
        let data = folder.join("data");
        // s3s-fs keeps each bucket as a folder under its root: making the
        // folder is making the bucket. Its files follow the umask, so the
        // folders are 0700 like the private folder above them.
        fs::DirBuilder::new().recursive(true).mode(0o700).create(data.join(BUCKET))?;
        let fs = s3s_fs::FileSystem::new(&data).map_err(|e| format!("s3s-fs on {}: {e:?}", data.display()))?;
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(creds.access_key.as_str(), creds.secret_key.as_str()));
        let service = Service {
            s3: builder.build(),
            lock: (variant == Variant::Serialized).then(|| Arc::new(Mutex::new(()))),
        };

        let socket = folder.join("s3.sock");
        let listener = UnixListener::bind(&socket).map_err(|e| format!("bind {}: {e}", socket.display()))?;
        // The folder is 0700 already; 0600 on the socket says the same
        // again should the folder ever be opened up.
        fs::set_permissions(&socket, fs::Permissions::from_mode(0o600))?;
        let accept = tokio::spawn(accept_loop(listener, service));
        Ok(Server { socket, accept })
    }
}

async fn accept_loop(listener: UnixListener, service: Service) {
    let http = ConnBuilder::new(TokioExecutor::new());
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let conn = http.serve_connection(TokioIo::new(stream), service.clone()).into_owned();
                tokio::spawn(async move {
                    // A client closing its connection mid-request is no
                    // concern of the server's; the client sees its own error.
                    let _ = conn.await;
                });
            }
            Err(e) => {
                // The probe's clients then fail with a connection error,
                // which ends the run: say why here.
                eprintln!("s3probe: the server stopped accepting: {e}");
                return;
            }
        }
    }
}

/// s3s's service, optionally behind one lock held for the whole request
/// (the request body is read inside s3s's call, so a PUT's check, write
/// and rename all happen under it).
#[derive(Clone)]
struct Service {
    s3: S3Service,
    lock: Option<Arc<Mutex<()>>>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Service {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let _held = match &this.lock {
                Some(lock) => Some(lock.clone().lock_owned().await),
                None => None,
            };
            hyper::service::Service::call(&this.s3, req).await
        })
    }
}
