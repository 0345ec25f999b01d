//! The registry's reads: get, list (selectors, paging and continue tokens)
//! and watch, at the resourceVersion semantics kube-apiserver's watch cache
//! gives them.

use std::time::Duration;

use base64::Engine;

use crate::apimachinery::errors::{self, ApiError, ApiResult, Reason, StatusDetails};
use crate::apimachinery::fields::FieldSelector;
use crate::apimachinery::gojson;
use crate::apimachinery::labels::LabelSelector;
use crate::apimachinery::options::{ListOptions, Rv, RvMatch};
use crate::registry::encode::ListMeta;
use crate::storage::{ListRequest, ObjectKey, StoreError, StoredObject, WatchStream};

use super::Registry;

/// How long a read naming a future resourceVersion waits for it, as the watch cache does.
pub(super) const RV_WAIT: Duration = Duration::from_secs(3);

/// Where a watch starts.
pub struct WatchPlan {
    pub initial: Vec<StoredObject>,
    pub stream: WatchStream,
    /// The revision the stream starts after.
    pub from: u64,
    /// Send the `k8s.io/initial-events-end` bookmark after `initial`, at this revision.
    pub initial_events_end: Option<u64>,
}

/// The outcome of starting a watch: a stream, or the 410 to send as an ERROR event.
pub enum WatchStart {
    Stream(Box<WatchPlan>),
    Expired(ApiError),
}

/// A compiled selector pair.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    /// For each field the selector uses: where to read it.
    field_slots: Vec<(String, FieldSlot)>,
}

enum FieldSlot {
    Name,
    Namespace,
    Index(usize),
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, o: &StoredObject) -> bool {
        self.labels.matches(&o.index.labels)
            && self.fields.matches(|f| {
                self.field_slots.iter().find(|(name, _)| name == f).map(|(_, slot)| match slot {
                    FieldSlot::Name => o.key.name.as_str(),
                    FieldSlot::Namespace => o.key.namespace.as_str(),
                    FieldSlot::Index(i) => o.index.fields.get(*i).map(|f| &**f).unwrap_or_default(),
                })
            })
    }
}

/// The opaque continue token: the snapshot revision and the last key served.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    ns: String,
    name: String,
    /// Items served by the earlier pages of an unfiltered list (so the store
    /// need not count the rest for `remainingItemCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    served: Option<u64>,
}

pub(super) fn encode_continue(rv: u64, key: &ObjectKey, served: Option<u64>) -> String {
    let t = ContinueToken { v: "meta.k8s.io/v1".into(), rv, ns: key.namespace.clone(), name: key.name.clone(), served };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default())
}

pub(super) fn decode_continue(token: &str) -> ApiResult<(u64, ObjectKey, Option<u64>)> {
    // kube's storage words: "invalid continue token: continue key is not valid: ...".
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: continue key is not valid{why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|e| {
        // Go's base64 CorruptInputError names the offending input offset.
        let at = match e {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            base64::DecodeError::InvalidLength(len) => len.saturating_sub(1),
            base64::DecodeError::InvalidPadding => token.len().saturating_sub(1),
        };
        invalid(&format!(": illegal base64 data at input byte {at}"))
    })?;
    if let Err(e) = gojson::decode_json(&raw) {
        let why = e.strip_prefix(gojson::VERSION_KIND_ERROR_PREFIX).unwrap_or(&e).to_string();
        return Err(invalid(&format!(": {why}")));
    }
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| invalid(""))?;
    if t.v != "meta.k8s.io/v1" {
        return Err(invalid(": server does not recognize this encoded version"));
    }
    if t.rv == 0 {
        return Err(invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
    }
    Ok((t.rv, ObjectKey::new(t.ns, t.name), t.served))
}

/// 504 "Too large resource version", as kube-apiserver answers a read of a
/// revision it has not reached.
pub(super) fn too_large_rv(e: &StoreError) -> ApiError {
    let cause = errors::cause("ResourceVersionTooLarge", "Too large resource version", "");
    let mut err = ApiError::new(504, Reason::Timeout, e.to_string())
        .with_details(StatusDetails { causes: Some(vec![cause]), ..Default::default() });
    err.retry_after = Some(1);
    err
}

pub(super) fn expired_continue() -> ApiError {
    ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
}

impl Registry {
    /// The revision a read of the latest state is served at, once this
    /// replica's reads reflect it ([`crate::storage::Store::sync_latest`]);
    /// a store that is always at its latest is not called asynchronously.
    async fn latest_revision(&self, name: &str) -> ApiResult<u64> {
        if self.store.always_latest() {
            return Ok(self.store.current_rv());
        }
        self.store.sync_latest().await.map_err(|e| self.store_error(name, e))
    }

    /// GET: the latest state (resourceVersion unset), any cached state ("0"),
    /// or one not older than a revision, as kube-apiserver serves reads.
    pub async fn get(&self, ns: &str, name: &str, rv: Rv) -> ApiResult<StoredObject> {
        match rv {
            Rv::Unset => {
                self.latest_revision(name).await?;
            }
            Rv::At(n) => self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?,
            Rv::Any => {}
        }
        self.store
            .get(&self.key_parts(ns, name))
            .map_err(|e| self.store_error(name, e))?
            .ok_or_else(|| ApiError::not_found(self.target(name)))
    }

    /// Compiles label and field selectors, rejecting fields the kind cannot select on.
    pub fn filter(&self, opts: &ListOptions) -> ApiResult<Filter> {
        let labels = LabelSelector::parse(&opts.label_selector).map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(&opts.field_selector).map_err(ApiError::bad_request)?;
        let mut field_slots = Vec::new();
        for f in fields.fields() {
            let slot = match f {
                "metadata.name" => FieldSlot::Name,
                "metadata.namespace" => FieldSlot::Namespace,
                other => match self.kind.selectable_fields().iter().position(|s| *s == other) {
                    Some(i) => FieldSlot::Index(i),
                    None => return Err(ApiError::bad_request(format!("field label not supported: {other}"))),
                },
            };
            field_slots.push((f.to_string(), slot));
        }
        Ok(Filter { labels, fields, field_slots })
    }

    /// A list with kube-apiserver's resourceVersion, paging and selector rules.
    pub async fn list(&self, ns: Option<&str>, opts: &ListOptions) -> ApiResult<(ListMeta, Vec<StoredObject>)> {
        let filter = self.filter(opts)?;
        let (at, start_after, offset) = match &opts.continue_token {
            Some(token) => {
                let (rv, key, served) = decode_continue(token)?;
                if matches!(opts.rv, Rv::At(_)) {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                // The first page may have come from a replica further ahead.
                self.store.wait_for_rv(rv, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
                (Some(rv), Some(key), served)
            }
            None => (self.read_revision(opts.rv, opts.rv_match).await?, None, Some(0)),
        };
        let filter_fn = |o: &StoredObject| filter.matches(o);
        let req = ListRequest {
            namespace: ns,
            at,
            start_after: start_after.as_ref(),
            offset,
            limit: opts.limit,
            filter: if filter.is_empty() { None } else { Some(&filter_fn) },
        };
        let page = match self.store.list(req).await {
            Ok(p) => p,
            Err(StoreError::Expired { .. }) if opts.continue_token.is_some() => return Err(expired_continue()),
            Err(StoreError::Expired { .. }) => {
                return Err(ApiError::expired("The resourceVersion for the provided list is too old."))
            }
            Err(e) => return Err(self.store_error("", e)),
        };
        let meta = ListMeta {
            resource_version: page.rv,
            continue_token: page.next_start_after.as_ref().map(|k| {
                let served = offset.filter(|_| filter.is_empty()).map(|o| o + page.items.len() as u64);
                encode_continue(page.rv, k, served)
            }),
            remaining: page.remaining,
        };
        Ok((meta, page.items))
    }

    /// The revision a list reads at: None = latest.
    pub(super) async fn read_revision(&self, rv: Rv, rv_match: RvMatch) -> ApiResult<Option<u64>> {
        match (rv, rv_match) {
            (Rv::Unset, _) => {
                self.latest_revision("").await?;
                Ok(None)
            }
            (Rv::Any, _) => Ok(None),
            (Rv::At(n), RvMatch::Exact) => {
                self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
                Ok(Some(n))
            }
            (Rv::At(n), _) => {
                self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
                Ok(None)
            }
        }
    }

    /// Starts a watch of the objects in `ns` (all namespaces when None) that
    /// `opts` select, from the resourceVersion it names.
    pub async fn watch(&self, ns: Option<&str>, opts: &ListOptions) -> ApiResult<WatchStart> {
        // Selectors are checked before the stream starts so bad ones get a plain 400.
        self.filter(opts)?;
        let initial_events = match opts.send_initial_events {
            Some(send) => send,
            None => matches!(opts.rv, Rv::Unset | Rv::Any),
        };
        if let Rv::At(n) = opts.rv {
            if opts.send_initial_events.is_some() || n > self.store.current_rv() {
                self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
            }
        }
        let (initial, from) = if initial_events {
            // From resourceVersion=0 the cache's state as it is, as kube's
            // cacher starts it (so such a watch starts while etcd is down);
            // otherwise the latest state.
            let rv = if opts.rv == Rv::Any { Rv::Any } else { Rv::Unset };
            let (meta, items) =
                self.list(ns, &ListOptions { limit: None, continue_token: None, rv, ..opts.clone() }).await?;
            (items, meta.resource_version)
        } else {
            match opts.rv {
                Rv::At(n) => (Vec::new(), n),
                Rv::Unset => (Vec::new(), self.latest_revision("").await?),
                Rv::Any => (Vec::new(), self.store.current_rv()),
            }
        };
        match self.store.watch(ns, from).await {
            Ok(stream) => Ok(WatchStart::Stream(Box::new(WatchPlan {
                initial,
                stream,
                from,
                initial_events_end: (opts.send_initial_events == Some(true)).then_some(from),
            }))),
            Err(e @ StoreError::Expired { .. }) => Ok(WatchStart::Expired(ApiError::expired(e.to_string()))),
            Err(e) => Err(self.store_error("", e)),
        }
    }
}
