//! A CustomResourceDefinition of the same shape as our Llama, for comparing
//! farm-apiserver with kube-apiserver serving the kind itself.

use super::cluster::ControlPlane;

/// The Llama CRD in API group `group` (its name is `llamas.<group>`): the very
/// definition farm-apiserver serves Llamas from, the one kube derives from the
/// Rust types (`Llama::crd()`: status subresource, schema and CEL rules,
/// printer columns, selectable fields), moved to `group`. JSON, which
/// `kubectl apply` reads as YAML.
pub fn llama_crd(group: &str) -> String {
    use kube::core::CustomResourceExt;
    let mut crd = farm_apiserver::llama::Llama::crd();
    crd.metadata.name = Some(format!("llamas.{group}"));
    crd.spec.group = group.to_string();
    serde_json::to_string(&crd).expect("a CustomResourceDefinition encodes")
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
