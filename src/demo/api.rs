//! The demo's Channels API: an in-memory store behind a small hyper server, behaving like a
//! real ASP.NET-style API would: a PUT replaces the whole channel (every property not sent is
//! reset, which is how `graphicsElementIds` gets silently cleared), unknown query parameters
//! are ignored, and a value that does not bind to its type is a 400. A channel's `ETag` is a
//! hash of its content; a PUT whose `If-Match` is not the current one is answered 412 and
//! changes nothing (a concurrency token, as ASP.NET's `[ConcurrencyCheck]` gives).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;

type Store = Arc<Mutex<BTreeMap<u64, Map<String, Value>>>>;

/// Integer properties of a channel: a string there fails model binding (400).
const INTEGERS: [&str; 5] = [
    "ffmpegProfileId",
    "watermarkId",
    "fallbackFillerId",
    "mirrorSourceChannelId",
    "epgTimeShiftMinutes",
];

/// Channel 7 as the demo starts: it shows two graphics elements on air.
pub fn seed() -> Map<String, Value> {
    let v = json!({
        "id": 7, "uniqueId": "5f0c7a36-1d3e-4c59-9a57-2d1c3e7f9b10", "number": "7", "name": "Retro TV", "group": "Classics",
        "categories": null, "ffmpegProfileId": 1, "streamingMode": "TransportStreamHybrid", "watermarkId": 4,
        "fallbackFillerId": null, "preferredAudioLanguageCode": "eng", "preferredAudioTitle": null,
        "preferredSubtitleLanguageCode": null, "subtitleMode": "None", "musicVideoCreditsMode": "None",
        "musicVideoCreditsTemplate": null, "songVideoMode": "Default", "transcodeMode": "OnDemand",
        "idleBehavior": "StopOnDisconnect", "isEnabled": true, "showInEpg": true, "playoutSource": "Generated",
        "playoutMode": "Continuous", "mirrorSourceChannelId": null, "playoutOffset": null, "slugSeconds": null,
        "streamSelectorMode": "Default", "streamSelector": null, "graphicsElementIds": [3, 7], "sortNumber": 7,
        "logo": null, "epgTimeShiftMinutes": 0
    });
    v.as_object().cloned().unwrap_or_default()
}

/// A second channel, for an agent that finds what to edit by listing the channels.
pub fn seed_9() -> Map<String, Value> {
    let mut channel = seed();
    channel.insert("id".into(), json!(9));
    channel.insert(
        "uniqueId".into(),
        json!("0b6f3a52-8c1d-4e7a-b2f4-6a9d1c3e5f70"),
    );
    channel.insert("number".into(), json!("9"));
    channel.insert("name".into(), json!("Cartoon Hour"));
    channel.insert("graphicsElementIds".into(), json!([2]));
    channel.insert("sortNumber".into(), json!(9));
    channel
}

/// What a full replace leaves in a property the body did not send.
fn reset(name: &str, current: &Value) -> Value {
    match current {
        Value::Array(_) => json!([]),
        Value::Bool(_) => json!(false),
        Value::Number(_)
            if name == "ffmpegProfileId"
                || name == "sortNumber"
                || name == "epgTimeShiftMinutes" =>
        {
            json!(0)
        }
        _ => Value::Null,
    }
}

/// Serve the API on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener) {
    let store: Store = Arc::new(Mutex::new(BTreeMap::from([(7, seed()), (9, seed_9())])));
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (store, builder) = (store.clone(), builder.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(store.clone(), req));
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(store: Store, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().clone();
    let req_if_match = req.headers().get(http::header::IF_MATCH).cloned();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let if_match = req_if_match;
    let (status, value) = match (&method, segments.as_slice()) {
        (&Method::GET, ["api", "v1", "channels", id]) => match id
            .parse::<u64>()
            .ok()
            .and_then(|id| store.lock().ok()?.get(&id).cloned())
        {
            Some(channel) => (StatusCode::OK, Value::Object(channel)),
            None => not_found(),
        },
        (&Method::GET, ["api", "v1", "channels"]) => match store.lock() {
            Ok(channels) => (
                StatusCode::OK,
                channels.values().cloned().map(Value::Object).collect(),
            ),
            Err(_) => not_found(),
        },
        (&Method::PUT, ["api", "v1", "channels", id]) => replace(&store, id, &body, if_match),
        (&Method::PATCH, ["api", "v1", "channels", id]) => patch(&store, id, &body),
        (&Method::PUT, ["api", "v1", "schedules", _]) => schedule(&body),
        (&Method::GET, ["api", "v1", "playouts"]) => playouts(&query),
        (&Method::GET, ["api", "v1", "playouts", _, "items"]) => items(&query),
        _ => not_found(),
    };
    let channel = segments.get(2) == Some(&"channels") && status == StatusCode::OK;
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string())));
    *resp.status_mut() = status;
    if let (true, Some(channel)) = (channel, value.as_object()) {
        resp.headers_mut().insert(http::header::ETAG, etag(channel));
    }
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

fn not_found() -> (StatusCode, Value) {
    (
        StatusCode::NOT_FOUND,
        json!({"title": "Not Found", "status": 404}),
    )
}

fn bad_request(field: &str, message: &str) -> (StatusCode, Value) {
    (
        StatusCode::BAD_REQUEST,
        json!({"title": "One or more validation errors occurred.", "status": 400, "errors": {field: [message]}}),
    )
}

/// A channel's strong `ETag`: a hash of what it holds.
fn etag(channel: &Map<String, Value>) -> http::HeaderValue {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    Value::Object(channel.clone()).to_string().hash(&mut h);
    http::HeaderValue::from_str(&format!("\"{:016x}\"", h.finish())).expect("hex is header text")
}

fn replace(
    store: &Store,
    id: &str,
    body: &[u8],
    if_match: Option<http::HeaderValue>,
) -> (StatusCode, Value) {
    write(store, id, body, |current, sent| {
        if if_match.is_some_and(|tag| tag != "*" && tag != etag(current)) {
            return (
                StatusCode::PRECONDITION_FAILED,
                json!({"title": "Precondition Failed", "status": 412}),
            );
        }
        let mut next = Map::new();
        for (name, value) in current.iter() {
            let kept = matches!(name.as_str(), "id" | "uniqueId");
            let value = if kept {
                value.clone()
            } else {
                sent.get(name)
                    .cloned()
                    .unwrap_or_else(|| reset(name, value))
            };
            next.insert(name.clone(), value);
        }
        *current = next.clone();
        (StatusCode::OK, Value::Object(next))
    })
}

/// A write to channel `id` with `body`: `change` gets the channel and what was sent, once both
/// are there (404 for no such channel, 400 for a body it refuses).
fn write(
    store: &Store,
    id: &str,
    body: &[u8],
    change: impl FnOnce(&mut Map<String, Value>, Map<String, Value>) -> (StatusCode, Value),
) -> (StatusCode, Value) {
    let Ok(id) = id.parse::<u64>() else {
        return not_found();
    };
    let sent = match sent(body) {
        Ok(sent) => sent,
        Err(refused) => return refused,
    };
    let Ok(mut channels) = store.lock() else {
        return not_found();
    };
    match channels.get_mut(&id) {
        Some(current) => change(current, sent),
        None => not_found(),
    }
}

/// A write's body: a JSON object whose integers are integers, or the answer refusing it.
fn sent(body: &[u8]) -> Result<Map<String, Value>, (StatusCode, Value)> {
    let Ok(Value::Object(sent)) = serde_json::from_slice::<Value>(body) else {
        return Err(bad_request("$", "The request body is not a JSON object."));
    };
    if let Some(name) = INTEGERS
        .iter()
        .find(|n| sent.get(**n).is_some_and(|v| !v.is_null() && !v.is_i64()))
    {
        let why = "The JSON value could not be converted to System.Int32.";
        return Err(bad_request(name, why));
    }
    Ok(sent)
}

/// `PATCH` as a JSON merge patch (RFC 7396) of the channel's top level: each field sent is
/// set, `null` resets it, the rest stay; `id` and `uniqueId` are the server's.
fn patch(store: &Store, id: &str, body: &[u8]) -> (StatusCode, Value) {
    write(store, id, body, |current, sent| {
        for (name, value) in sent {
            if matches!(name.as_str(), "id" | "uniqueId") || !current.contains_key(&name) {
                continue;
            }
            let value = match value {
                Value::Null => reset(&name, &current[&name]),
                value => value,
            };
            current.insert(name, value);
        }
        (StatusCode::OK, Value::Object(current.clone()))
    })
}

fn schedule(body: &[u8]) -> (StatusCode, Value) {
    match serde_json::from_slice::<Value>(body) {
        Ok(v)
            if v.get("padToNearestMinute")
                .is_some_and(|p| !p.is_null() && !p.is_i64()) =>
        {
            bad_request(
                "padToNearestMinute",
                "The JSON value could not be converted to System.Nullable`1[System.Int32].",
            )
        }
        Ok(v @ Value::Object(_)) => (StatusCode::OK, v),
        _ => bad_request("$", "The request body is not a JSON object."),
    }
}

fn playouts(query: &str) -> (StatusCode, Value) {
    // Like many APIs, unknown parameters are ignored: `page_size` silently does nothing.
    let size = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "pageSize")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(50);
    let all: Vec<Value> = (1..=3)
        .map(|i| json!({"id": i, "channelId": 7, "name": format!("Playout {i}")}))
        .collect();
    (
        StatusCode::OK,
        json!({"pageSize": size, "items": all.into_iter().take(size).collect::<Vec<_>>()}),
    )
}

fn items(query: &str) -> (StatusCode, Value) {
    match form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "showFiller") {
        Some((_, v)) if v != "true" && v != "false" => {
            bad_request("showFiller", "The value is not valid for showFiller.")
        }
        _ => (StatusCode::OK, json!({"items": []})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        Arc::new(Mutex::new(BTreeMap::from([(7, seed())])))
    }

    #[test]
    fn a_put_replaces_the_whole_channel_and_clears_what_it_omits() {
        let s = store();
        let mut body = seed();
        body.remove("graphicsElementIds");
        body.remove("id");
        body.insert("name".into(), json!("Retro TV HD"));
        let (status, stored) = replace(&s, "7", Value::Object(body).to_string().as_bytes(), None);
        assert_eq!(status, 200);
        assert_eq!(stored["graphicsElementIds"], json!([]));
        assert_eq!(stored["name"], "Retro TV HD");
        assert_eq!(stored["id"], 7, "the id is kept");
        assert_eq!(stored["watermarkId"], 4);
    }

    #[test]
    fn a_string_where_an_integer_belongs_is_a_400_and_changes_nothing() {
        let s = store();
        let mut body = seed();
        body.insert("ffmpegProfileId".into(), json!("2"));
        let (status, err) = replace(&s, "7", Value::Object(body).to_string().as_bytes(), None);
        assert_eq!(status, 400);
        assert!(err["errors"]["ffmpegProfileId"].is_array());
        assert_eq!(s.lock().unwrap()[&7]["ffmpegProfileId"], 1);
    }

    #[test]
    fn a_put_whose_if_match_is_not_the_current_etag_is_412_and_changes_nothing() {
        let s = store();
        let tag = etag(&seed());
        let mut body = seed();
        body.insert("name".into(), json!("Retro TV HD"));
        let text = Value::Object(body).to_string();
        let stale = http::HeaderValue::from_static("\"0\"");
        assert_eq!(replace(&s, "7", text.as_bytes(), Some(stale)).0, 412);
        assert_eq!(s.lock().unwrap()[&7]["name"], "Retro TV");
        assert_eq!(replace(&s, "7", text.as_bytes(), Some(tag.clone())).0, 200);
        assert_eq!(
            replace(&s, "7", text.as_bytes(), Some(tag)).0,
            412,
            "the tag moved on"
        );
    }

    #[test]
    fn unknown_query_parameters_are_ignored_and_bad_booleans_refused() {
        assert_eq!(
            playouts("page_size=1").1["items"].as_array().unwrap().len(),
            3
        );
        assert_eq!(
            playouts("pageSize=1").1["items"].as_array().unwrap().len(),
            1
        );
        assert_eq!(items("showFiller=yes").0, 400);
        assert_eq!(items("showFiller=true").0, 200);
        assert_eq!(
            schedule(br#"{"name":"a","padToNearestMinute":"30"}"#).0,
            400
        );
        assert_eq!(schedule(br#"{"name":"a","padToNearestMinute":30}"#).0, 200);
    }
}
