//! Both versions of Llama side by side with kube-apiserver serving the
//! two-version Llama CRD (v1beta1 stored, v1alpha deprecated), whose
//! conversion webhook runs the same Rust conversions
//! (tests/common/crd.rs): objects written in one version and read, patched
//! and applied in the other, the deprecated version's warning, validation
//! in each version's names, and managedFields across versions.

use super::apply::apply;
use crate::common::compare::{Comparison, Step};
use serde_json::{json, Value};

const MERGE: &str = "application/merge-patch+json";
const MIGRATOR: &str = "storage-version-migrator-controller";
const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";

fn v1beta1(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "{gv1beta1}", "kind": "Llama", "metadata": {"name": name}, "spec": spec})
}

fn v1alpha(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn both_versions_read_and_write_as_the_crds() {
    let cmp = Comparison::new("cmp-versions").await;
    cmp.run(&[
        Step::post("{v1beta1}")
            .json(v1beta1("cria", json!({"weightKg": 40, "heightM": 1.2, "pasture": "north"})))
            .expect(201),
        // Read in v1alpha: the pasture in its annotation, and the warning.
        Step::get("{llamas}/cria").expect(200),
        Step::patch("{llamas}/cria").patch_body(MERGE, json!({"spec": {"weight": 41.5}})).expect(200),
        Step::get("{v1beta1}/cria").expect(200),
        Step::get("{v1beta1}").expect(200),
        Step::get("{llamas}").expect(200),
        // Each version's columns.
        Step::get("{v1beta1}?includeObject=None").header("Accept", TABLE).expect(200).body_at(&["/columnDefinitions"]),
        Step::get("{llamas}?includeObject=None").header("Accept", TABLE).expect(200).body_at(&["/columnDefinitions"]),
        // Validation and CEL rules in each version's names.
        Step::post("{v1beta1}")
            .json(v1beta1("heavy", json!({"weightKg": 41, "heightM": 1, "maxWeightKg": 40})))
            .expect(422),
        Step::post("{llamas}").json(v1alpha("heavy", json!({"weight": 41, "height": 1, "maxWeight": 40}))).expect(422),
        Step::post("{v1beta1}")
            .json(v1beta1("lost", json!({"weightKg": 1, "heightM": 1, "pasture": "North_Field"})))
            .expect(422),
        // A body of the other version is refused.
        Step::post("{v1beta1}").json(v1alpha("mixed", json!({"weight": 1, "height": 1}))).expect(400),
        Step::delete("{llamas}/cria").expect(200),
    ])
    .await
    .assert_identical();
}

/// Managers of each version own fields by their version's names: an apply
/// in v1alpha conflicts with a v1beta1 applier on the weight (named as that
/// applier wrote it), forcing takes it, and an update in one version moves
/// ownership from managers of the other.
#[tokio::test]
async fn managed_fields_across_versions_are_the_crds() {
    let cmp = Comparison::new("cmp-versions-ssa").await;
    cmp.run(&[
        apply("{v1beta1}/herd", "beta", v1beta1("herd", json!({"weightKg": 30, "heightM": 1.5}))).expect(201),
        apply("{llamas}/herd", "alpha", v1alpha("herd", json!({"weight": 35, "height": 1.5}))).expect(409),
        apply("{llamas}/herd", "alpha", v1alpha("herd", json!({"weight": 30, "height": 1.5}))).expect(200),
        apply("{llamas}/herd?force=true", "alpha", v1alpha("herd", json!({"weight": 35, "height": 1.5}))).expect(200),
        Step::get("{v1beta1}/herd").expect(200),
        Step::patch("{v1beta1}/herd?fieldManager=editor")
            .patch_body(MERGE, json!({"spec": {"heightM": 1.6, "pasture": "west"}}))
            .expect(200),
        apply("{llamas}/herd", "alpha", v1alpha("herd", json!({"weight": 35, "height": 1.5}))).expect(409),
        Step::get("{llamas}/herd").expect(200),
        // kube-controller-manager's storage version migrator applies only the
        // type, the uid and the resourceVersion it saw: a stale one conflicts,
        // and an apply that owns nothing leaves no manager behind.
        apply(
            "{v1beta1}/herd",
            MIGRATOR,
            json!({"apiVersion": "{gv1beta1}", "kind": "Llama", "metadata": {"resourceVersion": "1"}}),
        )
        .expect(409),
        apply("{v1beta1}/herd", MIGRATOR, json!({"apiVersion": "{gv1beta1}", "kind": "Llama"})).expect(200),
    ])
    .await
    .assert_identical();
}
