//! etcd's current revision, as a read of the latest state needs it: one
//! linearizable request answers every reader that asked before it was sent,
//! so concurrent reads share round trips without ever being answered with a
//! revision learned before they arrived.

use std::time::Duration;

use etcd_client::{Client, GetOptions};
use tokio::sync::{mpsc, oneshot};

type Reply = oneshot::Sender<Result<u64, String>>;

pub struct RevisionReader {
    requests: mpsc::UnboundedSender<Reply>,
}

impl RevisionReader {
    /// Asks etcd about `key` (a count-only range: cheap whatever is stored).
    pub fn spawn(client: Client, key: Vec<u8>, timeout: Duration) -> Self {
        let (requests, mut queue) = mpsc::unbounded_channel::<Reply>();
        tokio::spawn(async move {
            let mut kv = client.kv_client();
            while let Some(first) = queue.recv().await {
                // Readers already running on the workers (requests parsed,
                // their handlers started) join this round trip instead of
                // the next: under load a fetch is shared by many more reads.
                // With nothing else runnable this returns at once.
                tokio::task::yield_now().await;
                // Everyone queued now arrived before the request below is sent.
                let mut waiting = vec![first];
                while let Ok(more) = queue.try_recv() {
                    waiting.push(more);
                }
                let fetch = kv.get(key.clone(), Some(GetOptions::new().with_count_only()));
                let result = match tokio::time::timeout(timeout, fetch).await {
                    Ok(Ok(resp)) => resp
                        .header()
                        .map(|h| h.revision() as u64)
                        .ok_or_else(|| "etcd answered without a header".to_string()),
                    Ok(Err(e)) => Err(format!("reading etcd's revision: {e}")),
                    Err(_) => Err(format!("reading etcd's revision: no answer within {timeout:?}")),
                };
                for reply in waiting {
                    let _ = reply.send(result.clone());
                }
            }
        });
        Self { requests }
    }

    /// etcd's revision as of some moment after this call.
    pub async fn current(&self) -> Result<u64, String> {
        let (reply, answer) = oneshot::channel();
        self.requests.send(reply).map_err(|_| "the revision reader stopped".to_string())?;
        answer.await.map_err(|_| "the revision reader stopped".to_string())?
    }
}
