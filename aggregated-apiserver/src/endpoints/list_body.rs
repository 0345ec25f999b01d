//! A list answer written as it is sent: the stored bytes of each item are
//! copied into chunks of [`CHUNK`] bytes on their way to the connection, so a
//! list of 50,000 objects never has a second, whole-list buffer. Its length is
//! known up front (every item's bytes are already encoded), so the answer
//! carries a Content-Length, as a buffered one would.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

use crate::apimachinery::resource::Names;
use crate::registry::encode::ListMeta;

/// How much of the list is copied at once.
pub const CHUNK: usize = 64 * 1024;

/// `{"apiVersion":"g/v","kind":"<Kind>List","metadata":{...},"items":[<stored bytes>,...]}`
///
/// Items are anything holding an item's encoded bytes: stored objects go in
/// as they come from the store, without a second vector of their bytes.
pub struct ObjectListBody<Item = Bytes> {
    head: Option<Bytes>,
    items: std::vec::IntoIter<Item>,
    /// The first item is not preceded by a comma.
    first: bool,
    tail_sent: bool,
    remaining: u64,
}

const TAIL: &[u8] = b"]}";

impl<Item: AsRef<[u8]>> ObjectListBody<Item> {
    pub fn new(names: &Names, meta: &ListMeta, items: Vec<Item>) -> Self {
        let head = serde_json::json!({
            "apiVersion": names.api_version(),
            "kind": names.list_kind,
            "metadata": meta.to_json(true),
        });
        // `{"apiVersion":..,"kind":..,"metadata":{..}` then `,"items":[`;
        // serializing a Value cannot fail, and its keys are already in this order.
        let mut head = serde_json::to_vec(&head).unwrap_or_default();
        head.pop();
        head.extend_from_slice(b",\"items\":[");
        let items_len: usize = items.iter().map(|i| i.as_ref().len()).sum::<usize>() + items.len().saturating_sub(1);
        let remaining = (head.len() + items_len + TAIL.len()) as u64;
        Self { head: Some(Bytes::from(head)), items: items.into_iter(), first: true, tail_sent: false, remaining }
    }

    /// The next chunk: up to [`CHUNK`] bytes of items (a larger item alone).
    fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(head) = self.head.take() {
            return Some(head);
        }
        let mut out = BytesMut::new();
        while out.len() < CHUNK {
            let Some(item) = self.items.next() else { break };
            let item = item.as_ref();
            if out.is_empty() {
                out.reserve(CHUNK.max(item.len() + 1) + TAIL.len());
            }
            if !std::mem::take(&mut self.first) {
                out.put_u8(b',');
            }
            out.put_slice(item);
        }
        if self.items.len() == 0 && !self.tail_sent {
            self.tail_sent = true;
            out.put_slice(TAIL);
        }
        (!out.is_empty()).then(|| out.freeze())
    }

    /// The whole list in one buffer (for answers re-encoded as a whole: YAML).
    pub fn into_bytes(mut self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.remaining as usize);
        while let Some(chunk) = self.next_chunk() {
            out.put_slice(&chunk);
        }
        out.freeze()
    }
}

impl<Item: AsRef<[u8]> + Unpin> Body for ObjectListBody<Item> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let chunk = self.next_chunk();
        if let Some(c) = &chunk {
            self.remaining -= c.len() as u64;
        }
        Poll::Ready(chunk.map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    static NAMES: Names = Names {
        group: "example.com",
        version: "v1",
        kind: "Thing",
        list_kind: "ThingList",
        plural: "things",
        singular: "thing",
        short_names: &[],
        categories: &[],
    };

    fn stored(i: usize, size: usize) -> Bytes {
        Bytes::from(format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(size)))
    }

    async fn collect(items: Vec<Bytes>) -> (Vec<usize>, serde_json::Value, u64) {
        let meta = ListMeta { resource_version: 7, ..Default::default() };
        let whole = ObjectListBody::new(&NAMES, &meta, items.clone()).into_bytes();
        let mut body = ObjectListBody::new(&NAMES, &meta, items);
        let announced = body.size_hint().exact().unwrap();
        let mut chunks = Vec::new();
        let mut all = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            chunks.push(data.len());
            all.extend_from_slice(&data);
        }
        assert_eq!(all.len() as u64, announced, "the announced length is the length sent");
        assert_eq!(all, whole, "streamed and whole answers are the same bytes");
        (chunks, serde_json::from_slice(&all).unwrap(), announced)
    }

    #[tokio::test]
    async fn a_list_is_sent_in_bounded_chunks_and_reads_as_one_document() {
        let items: Vec<_> = (0..300).map(|i| stored(i, 1000)).collect();
        let (chunks, doc, _) = collect(items).await;
        assert!(chunks.len() > 4, "{chunks:?}");
        assert!(chunks.iter().all(|c| *c <= CHUNK + 1100), "{chunks:?}");
        assert_eq!(doc["kind"], "ThingList");
        assert_eq!(doc["metadata"]["resourceVersion"], "7");
        assert_eq!(doc["items"].as_array().unwrap().len(), 300);
        assert_eq!(doc["items"][299]["i"], 299);

        let (_, empty, _) = collect(Vec::new()).await;
        assert_eq!(empty["items"], serde_json::json!([]));
        let (chunks, big, _) = collect(vec![stored(0, 3 * CHUNK), stored(1, 10)]).await;
        assert_eq!(big["items"].as_array().unwrap().len(), 2);
        assert!(chunks.len() >= 3, "{chunks:?}");
    }
}
