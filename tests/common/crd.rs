//! A CustomResourceDefinition of the same shape as our Llama, for comparing
//! farm-apiserver with kube-apiserver serving the kind itself.

use super::cluster::ControlPlane;

/// The Llama CRD in API group `group` (its name is `llamas.<group>`), with the
/// status subresource and the schema of our Llama (src/resources/llama.rs), so
/// the two can be compared answer for answer. (Our selectable fields
/// spec.weight and spec.height have no CRD equivalent: a CRD may only select
/// string, boolean and integer fields.)
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
        required: [spec]
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
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type, status, lastTransitionTime, reason, message]
                  properties:
                    type: {{type: string}}
                    status: {{type: string, enum: ["True", "False", "Unknown"]}}
                    observedGeneration: {{type: integer, format: int64}}
                    lastTransitionTime: {{type: string, format: date-time}}
                    reason: {{type: string}}
                    message: {{type: string}}
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
