//! A CustomResourceDefinition of the same shape as our Llama, for comparing
//! farm-apiserver with kube-apiserver serving the kind itself.

use super::cluster::ControlPlane;

/// The Llama CRD in API group `group` (its name is `llamas.<group>`), with the
/// status subresource and the very schema farm-apiserver serves for Llamas
/// (derived from the Rust types, `farm_apiserver::llama::llama_schema`), CEL
/// rules (`x-kubernetes-validations`) included, so kube-apiserver enforces the
/// same rules on the CRD. JSON, which `kubectl apply` reads as YAML.
pub fn llama_crd(group: &str) -> String {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("llamas.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "llamas", "singular": "llama", "kind": "Llama", "listKind": "LlamaList"},
            "versions": [{
                "name": "v1alpha",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": farm_apiserver::llama::llama_schema()},
            }],
        },
    })
    .to_string()
}

/// Installs the Llama CRD in `group` and waits until it is Established.
pub fn install_llama_crd(cp: &ControlPlane, group: &str) -> Result<(), String> {
    // Tests of one binary may install it at the same moment: one create wins,
    // and the other's apply, tried again, finds it and updates it.
    let crd = llama_crd(group);
    let mut refused = None;
    for _ in 0..3 {
        let out = super::kubectl_stdin(&cp.kubeconfig, &["apply", "-f", "-"], Some(&crd));
        refused = (!out.0).then_some(out);
        if refused.is_none() {
            break;
        }
    }
    if let Some(out) = refused {
        return Err(format!("installing CRD llamas.{group}: {out:?}"));
    }
    let out = cp.kubectl(&["wait", "--for=condition=Established", &format!("crd/llamas.{group}"), "--timeout=60s"]);
    if out.0 {
        Ok(())
    } else {
        Err(format!("CRD llamas.{group} not Established: {out:?}"))
    }
}
