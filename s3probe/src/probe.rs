//! The races: W writers, each with a client of its own, released together
//! by a barrier into one conditional PUT each; R rounds, each recorded as a
//! `Round` for the report to count.

use crate::report::{Object, Round};
use crate::Error;
use object_store::aws::AmazonS3;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use std::sync::Arc;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Compare-and-swap: all read the same ETag, all PUT with If-Match.
    IfMatch,
    /// Put-if-absent (`lock_N`): all PUT a fresh key with If-None-Match: *.
    IfNoneMatch,
}

impl Probe {
    pub const ALL: [Probe; 2] = [Probe::IfMatch, Probe::IfNoneMatch];

    pub fn name(self) -> &'static str {
        match self {
            Probe::IfMatch => "if-match",
            Probe::IfNoneMatch => "if-none-match",
        }
    }

    /// The key of round `round`: one object overwritten round after round
    /// for If-Match, a new one each round for If-None-Match.
    fn key(self, round: usize) -> Key {
        match self {
            Probe::IfMatch => Key::from("if-match/object"),
            Probe::IfNoneMatch => Key::from(format!("if-none-match/lock_{round}")),
        }
    }

    /// The refusal a losing writer must get; any other error ends the run.
    fn is_refusal(self, e: &object_store::Error) -> bool {
        match self {
            Probe::IfMatch => matches!(e, object_store::Error::Precondition { .. }),
            Probe::IfNoneMatch => matches!(e, object_store::Error::AlreadyExists { .. }),
        }
    }
}

/// Runs `rounds` races of `writers.len()` writers; `setup` prepares each
/// round and reads what was stored after it.
pub async fn run(probe: Probe, setup: &AmazonS3, writers: &[Arc<AmazonS3>], rounds: usize) -> Result<Vec<Round>, Error> {
    let mut recorded = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let key = probe.key(round);
        let before = match probe {
            Probe::IfMatch => {
                let body = format!("init-r{round}").into_bytes();
                let put = setup.put(&key, PutPayload::from(body.clone())).await?;
                Some(Object { body, e_tag: e_tag(put.e_tag, "the round's first PUT")? })
            }
            Probe::IfNoneMatch => None,
        };
        let barrier = Arc::new(Barrier::new(writers.len()));
        // A JoinSet, not a list of handles: should one writer fail before
        // the barrier, returning drops the set, which aborts the others
        // instead of leaving them waiting at the barrier for ever.
        let mut tasks = JoinSet::new();
        for (w, client) in writers.iter().enumerate() {
            tasks.spawn(write(probe, client.clone(), key.clone(), barrier.clone(), format!("r{round}-w{w}")));
        }
        let mut winners = Vec::new();
        while let Some(done) = tasks.join_next().await {
            if let Some(won) = done.map_err(|e| format!("a writer task failed: {e}"))?.map_err(|e| format!("round {round}: {e}"))? {
                winners.push(won);
            }
        }
        recorded.push(Round { before, winners, after: read(setup, &key).await? });
    }
    Ok(recorded)
}

/// One writer's turn: read the ETag it will condition on (If-Match), wait
/// for the others, PUT its own body. `Some` with what its PUT returned when
/// it won, `None` when refused as a loser should be.
async fn write(probe: Probe, client: Arc<AmazonS3>, key: Key, barrier: Arc<Barrier>, body: String) -> Result<Option<Object>, Error> {
    let mode = match probe {
        Probe::IfMatch => {
            // Each writer reads for itself, as a real compare-and-swap
            // client would; the barrier below comes after every read, so
            // all of them see the round's first version.
            let meta = client.head(&key).await?;
            PutMode::Update(UpdateVersion { e_tag: meta.e_tag, version: meta.version })
        }
        Probe::IfNoneMatch => PutMode::Create,
    };
    barrier.wait().await;
    let body = body.into_bytes();
    match client.put_opts(&key, PutPayload::from(body.clone()), PutOptions::from(mode)).await {
        Ok(put) => Ok(Some(Object { body, e_tag: e_tag(put.e_tag, "a won PUT")? })),
        Err(e) if probe.is_refusal(&e) => Ok(None),
        Err(e) => Err(format!("{} PUT failed unexpectedly: {e}", probe.name()).into()),
    }
}

/// What is stored under `key` now (`None`: nothing).
async fn read(client: &AmazonS3, key: &Key) -> Result<Option<Object>, Error> {
    match client.get(key).await {
        Ok(got) => {
            let tag = e_tag(got.meta.e_tag.clone(), "the stored object")?;
            Ok(Some(Object { body: got.bytes().await?.to_vec(), e_tag: tag }))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An ETag the torn check needs: its absence is an error, not a blank.
fn e_tag(tag: Option<String>, what: &str) -> Result<String, Error> {
    tag.ok_or_else(|| format!("{what} came back without an ETag").into())
}
