//! Helpers shared by the integration tests: where the shared specs and fixtures live, and
//! loading them. A missing spec is a failure, never a skip.

use std::path::PathBuf;

use driftwatch::contract::{Contract, ContractOptions};
use driftwatch::spec::Spec;

/// `../shared/specs/<rel>` beside the repository root.
pub fn shared_spec(rel: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/specs")
        .join(rel);
    assert!(
        path.exists(),
        "missing shared spec {} (tests never skip a missing spec)",
        path.display()
    );
    path
}

/// `examples/<rel>`: the bundled Channels and Billing specs and traffic.
pub fn example(rel: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel);
    assert!(path.exists(), "missing example {}", path.display());
    path
}

/// The string `field` of each item of the JSON list `list` (the kinds of an event's findings,
/// the operations of a list of events), failing on anything else.
pub fn strings<'v>(list: &'v serde_json::Value, field: &str) -> Vec<&'v str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| {
            item[field]
                .as_str()
                .unwrap_or_else(|| panic!("no string {field:?} in {item}"))
        })
        .collect()
}

pub fn contract(path: &std::path::Path) -> Contract {
    let spec = Spec::load(path).unwrap_or_else(|e| panic!("{e}"));
    Contract::compile(&spec, &ContractOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The one wait of the integration tests: poll `check` every 10 ms until it gives `Some`, and
/// fail naming `what` after 10 s. Late work (response audits, reloads) is awaited this way,
/// never with a bare sleep.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_within(what, 10, check).await
}

/// [`eventually`] for work of seconds of CPU each time it runs (the live catalog check of a
/// large catalog against a large spec is ~1 s in a debug build on an idle core, and runs again
/// as the learned map grows): `seconds` bounds the wait, which ends as soon as `check` holds.
pub async fn eventually_within<T, F, Fut>(what: &str, seconds: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited {seconds} s for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A loopback address no one listens on (yet), for a process the test starts to bind. Taken
/// below Linux's ephemeral range (32768-60999): a port the kernel hands out for `:0` or for
/// an outgoing connection (the many of a parallel run) could otherwise be taken between this
/// and the child's bind (seen in CI: "Address already in use"). Each call takes the next port,
/// from an offset of this process's own.
pub fn free_addr() -> std::net::SocketAddr {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 500) as u16 * 24;
    loop {
        let port = 20_000 + (base - 20_000 + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return listener.local_addr().unwrap();
        }
    }
}
