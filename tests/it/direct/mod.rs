//! The server alone: the real binary on a free loopback port, over HTTPS, with
//! kubectl and kube-rs pointed straight at it (no aggregator; every installed
//! kubectl version in `kubectl_versions`). Most suites run on both stores
//! (`on_both_stores!`: memory and etcd). `yaml` and `options` then send the
//! same requests through the aggregator to our Llamas and to the Llama CRD
//! served by kube-apiserver, and compare the answers live.

mod audit;
mod keep_alive;
mod kube_client;
mod kubectl;
mod kubectl_versions;
mod options;
mod reads;
mod server_ops;
mod writes;
mod yaml;
