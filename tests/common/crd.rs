//! A CustomResourceDefinition of the same shape as our Llama, for comparing
//! farm-apiserver with kube-apiserver serving the kind itself.

use std::sync::OnceLock;

use super::cluster::ControlPlane;
use super::webhook::WebhookServer;

/// The Llama CRD in API group `group` (its name is `llamas.<group>`): the very
/// definitions farm-apiserver serves Llamas from, the ones kube derives from
/// the Rust types (`Llama::crd()` of each version: status subresource, schema
/// and CEL rules, printer columns, selectable fields), merged into one CRD of
/// both versions with v1beta1 stored, moved to `group`, converting through
/// [`conversion_webhook`]. JSON, which `kubectl apply` reads as YAML.
pub fn llama_crd(group: &str) -> String {
    use farm_apiserver::llama::{v1alpha, v1beta1};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, WebhookClientConfig, WebhookConversion,
    };
    use kube::core::crd::merge_crds;
    use kube::core::CustomResourceExt;
    let mut crd = merge_crds(vec![v1alpha::Llama::crd(), v1beta1::Llama::crd()], "v1beta1")
        .expect("the two versions of Llama merge");
    crd.metadata.name = Some(format!("llamas.{group}"));
    crd.spec.group = group.to_string();
    let hook = conversion_webhook();
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                url: Some(format!("https://127.0.0.1:{}/convert", hook.port)),
                ca_bundle: Some(k8s_openapi::ByteString(hook.ca_pem.clone().into_bytes())),
                service: None,
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    });
    serde_json::to_string(&crd).expect("a CustomResourceDefinition encodes")
}

/// The conversion webhook of the test process's Llama CRDs: the same Rust
/// conversions farm-apiserver runs, behind kube's ConversionReview.
pub fn conversion_webhook() -> &'static WebhookServer {
    static HOOK: OnceLock<WebhookServer> = OnceLock::new();
    HOOK.get_or_init(|| futures::executor::block_on(WebhookServer::start(&[])))
}

/// The Herd CRD in API group `group`: the definition farm-apiserver serves
/// Herds from (`Herd::crd()`: status and scale subresources), moved to `group`.
pub fn herd_crd(group: &str) -> String {
    use farm_apiserver::herd::Herd;
    use kube::core::CustomResourceExt;
    let mut crd = Herd::crd();
    crd.metadata.name = Some(format!("herds.{group}"));
    crd.spec.group = group.to_string();
    serde_json::to_string(&crd).expect("a CustomResourceDefinition encodes")
}

/// Installs the Llama CRD in `group` and waits until it is Established.
pub fn install_llama_crd(cp: &ControlPlane, group: &str) -> Result<(), String> {
    install(cp, &format!("llamas.{group}"), &llama_crd(group))
}

/// Installs the Herd CRD in `group` and waits until it is Established.
pub fn install_herd_crd(cp: &ControlPlane, group: &str) -> Result<(), String> {
    install(cp, &format!("herds.{group}"), &herd_crd(group))
}

/// Installs the CRD `name` defined by `crd` and waits until it is Established.
fn install(cp: &ControlPlane, name: &str, crd: &str) -> Result<(), String> {
    // Tests of one binary may install it at the same moment: one create wins,
    // and the other's apply, tried again, finds it and updates it.
    let mut refused = None;
    for _ in 0..3 {
        let out = super::kubectl_stdin(&cp.kubeconfig, &["apply", "-f", "-"], Some(crd));
        refused = (!out.0).then_some(out);
        if refused.is_none() {
            break;
        }
    }
    if let Some(out) = refused {
        return Err(format!("installing CRD {name}: {out:?}"));
    }
    let out = cp.kubectl(&["wait", "--for=condition=Established", &format!("crd/{name}"), "--timeout=60s"]);
    if out.0 {
        Ok(())
    } else {
        Err(format!("CRD {name} not Established: {out:?}"))
    }
}
