//! What both benches audit: the Channels contract, its 30-property full-replace `PUT` body, and
//! the channel as its `GET` returns it (31 properties), with that `GET`'s operation.

use std::path::Path;

use driftwatch::contract::{Contract, ContractOptions, Operation};
use driftwatch::request::RequestView;
use driftwatch::response::ResponseView;
use driftwatch::spec::Spec;

/// The body of a full-replace PUT /api/v1/channels/{id}: all 30 writable properties.
pub const CHANNEL: &str = include_str!("../../examples/channel.json").trim_ascii_end();

pub fn contract(path: &Path) -> Contract {
    Contract::compile(&Spec::load(path).unwrap(), &ContractOptions::default()).unwrap()
}

pub fn channels() -> Contract {
    contract(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/channels.openapi.yaml"))
}

pub fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".into(), "application/json".into())]
}

/// The channel as `GET /api/v1/channels/7` returns it: the body plus its `id`.
pub fn stored_channel() -> String {
    format!("{{\"id\":7,{}", &CHANNEL[1..])
}

/// The `GET` operation of a channel, and its response carrying `stored` (not parsed yet);
/// the response audits clean.
pub fn channel_response<'a>(
    channels: &'a Contract,
    headers: &'a Vec<(String, String)>,
    stored: &'a str,
) -> (&'a Operation, ResponseView<'a>) {
    let get = RequestView::new("GET", "/api/v1/channels/7", headers, None);
    let op = driftwatch::audit::audit(channels, &get).operation.unwrap();
    let response = ResponseView {
        status: 200,
        headers,
        body: Some(stored.as_bytes()),
        parsed: None,
    };
    assert!(driftwatch::audit::audit_response(channels, op, &response).is_empty());
    (op, response)
}
