//! A CustomResourceDefinition of the same shape as our Llama, for comparing
//! farm-apiserver with kube-apiserver serving the kind itself.

use super::cluster::ControlPlane;

/// The Llama CRD in API group `group` (its name is `llamas.<group>`), with the
/// status subresource.
pub fn llama_crd(group: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: llamas.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: llamas, singular: llama, kind: Llama, listKind: LlamaList}}
  versions:
  - name: v1alpha
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [weight, height]
            properties:
              weight: {{type: number, minimum: 0, exclusiveMinimum: true}}
              height: {{type: number, minimum: 0, exclusiveMinimum: true}}
          status:
            type: object
            properties:
              observedGeneration: {{type: integer, format: int64}}
              conditions:
                type: array
                items: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#
    )
}

/// Installs the Llama CRD in `group` and waits until it is Established.
pub fn install_llama_crd(cp: &ControlPlane, group: &str) -> Result<(), String> {
    cp.apply(&llama_crd(group));
    let out = cp.kubectl(&["wait", "--for=condition=Established", &format!("crd/llamas.{group}"), "--timeout=60s"]);
    if out.0 {
        Ok(())
    } else {
        Err(format!("CRD llamas.{group} not Established: {out:?}"))
    }
}
