//! The audit beside the parse it is measured against, side by side: alternating blocks of
//! about a millisecond each, so that both sides see the same machine. Criterion measures one
//! row after the other, and on a shared two-core VM the machine's speed moves by half between
//! rows (the same parse measured 5.9 µs and 9.8 µs ten minutes apart), so a ratio of two
//! criterion rows is noise; the median of 2,000 paired ratios is not. The parse measured
//! against is always `serde_json::from_slice::<Value>`.
//! Run: `cargo bench --bench paired` (issue 15's targets: request audit at most 1.15 times the
//! parse of its body, response audit and memory at most 1.1 times the parse of its body).

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

mod common;

use common::{CHANNEL, channel_response, channels, json_headers, stored_channel};
use driftwatch::audit::{audit_request, audit_response};
use driftwatch::memory::{HashKey, Key, Memory};
use driftwatch::request::RequestView;
use driftwatch::response::ResponseView;
use serde_json::Value;

/// The allocator the `driftwatch` binary runs with (src/main.rs), so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROUNDS: usize = 2_000;
const BLOCK: Duration = Duration::from_millis(1);

fn main() {
    let channels = channels();
    let json = json_headers();

    paired(
        "the audit's parse (driftwatch::json) / serde_json's, the 30-property body",
        || {
            drop(black_box(driftwatch::json::parse(black_box(
                CHANNEL.as_bytes(),
            ))))
        },
        || drop(black_box(parse(CHANNEL.as_bytes()))),
    );

    let put = RequestView::new("PUT", "/api/v1/channels/7", &json, Some(CHANNEL.as_bytes()));
    assert!(audit_request(&channels, &put).is_empty());
    paired(
        "request audit of the 30-property PUT / parse of its body",
        || drop(black_box(audit_request(&channels, black_box(&put)))),
        || drop(black_box(parse(CHANNEL.as_bytes()))),
    );

    // The channel as GET returns it (31 properties): one parse shared by the response audit
    // and the silent-clear memory, as the sidecar does.
    let stored = stored_channel();
    let (op, response) = channel_response(&channels, &json, &stored);
    let memory = Memory::new(10_000, Duration::from_secs(600), HashKey::random());
    let key = Key {
        path: "getChannel:7".into(),
        scope: 0,
    };
    paired(
        "response audit and memory of the 31-property GET / parse of its body",
        || {
            let parsed = driftwatch::json::parse(black_box(stored.as_bytes())).unwrap();
            let view = ResponseView {
                parsed: Some(parsed.root()),
                ..response
            };
            drop(black_box(audit_response(&channels, op, &view)));
            memory.remember(&key, "r", SystemTime::UNIX_EPOCH, &parsed.root());
        },
        || drop(black_box(parse(stored.as_bytes()))),
    );
}

fn parse(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

/// Time `a` and `b` in alternating blocks (the order swapped every round) and print each one's
/// median time per call and the median, 10th and 90th percentile of the per-round ratio a / b.
fn paired(name: &str, mut a: impl FnMut(), mut b: impl FnMut()) {
    let (na, nb) = (calls_per_block(&mut a), calls_per_block(&mut b));
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = per_call(&mut a, na);
            (x, per_call(&mut b, nb))
        } else {
            let y = per_call(&mut b, nb);
            (per_call(&mut a, na), y)
        };
        ta.push(x);
        tb.push(y);
        ratios.push(x / y);
    }
    println!(
        "{name}: {:.2} µs / {:.2} µs, ratio {:.3} (p10 {:.3}, p90 {:.3}; {ROUNDS} rounds)",
        quantile(&mut ta, 0.5) * 1e6,
        quantile(&mut tb, 0.5) * 1e6,
        quantile(&mut ratios, 0.5),
        quantile(&mut ratios, 0.1),
        quantile(&mut ratios, 0.9),
    );
}

/// Calls that take about one block, after a warm-up.
fn calls_per_block(f: &mut impl FnMut()) -> u32 {
    let mut n = 1u32;
    loop {
        let started = Instant::now();
        for _ in 0..n {
            f();
        }
        if started.elapsed() >= BLOCK {
            return n;
        }
        n *= 2;
    }
}

/// Seconds per call over a block of `n` calls.
fn per_call(f: &mut impl FnMut(), n: u32) -> f64 {
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed().as_secs_f64() / f64::from(n)
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}
