//! Storage: the `Store` contract on both backends, and farm-apiserver
//! replicas sharing one real etcd (directly and behind the aggregator).

mod contract;
mod encryption;
mod replicas;
