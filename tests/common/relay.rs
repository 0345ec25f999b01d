//! A TCP relay that tests cut and restore to simulate a network partition.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// A TCP relay to a server (kube-apiserver, etcd) that a test can cut, as a
/// partition would, and restore.
pub struct Relay {
    pub port: u16,
    up: Arc<AtomicBool>,
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl Relay {
    pub async fn start(target: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (up2, gen2) = (up.clone(), generation.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener.into_std().unwrap()).unwrap();
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else { continue };
                    if !up2.load(Ordering::SeqCst) {
                        drop(inbound);
                        continue;
                    }
                    let (target, up3, gen3) = (target.clone(), up2.clone(), gen2.clone());
                    let born = gen3.load(Ordering::SeqCst);
                    tokio::spawn(async move {
                        let Ok(mut outbound) = TcpStream::connect(&target).await else { return };
                        let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                        let cut = async {
                            while up3.load(Ordering::SeqCst) && gen3.load(Ordering::SeqCst) == born {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        };
                        tokio::select! { _ = copy => {}, _ = cut => {} }
                    });
                }
            });
        });
        Relay { port, up, generation }
    }

    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}
