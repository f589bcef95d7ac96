//! A spec is input too (issue 14, defects 4 and 5): its `$ref`s read only regular files under
//! its own directory (or `spec.ref_root`), none for a spec fetched from a URL, every read is
//! bounded by `spec.max_bytes`, and no error repeats what a file holds. Each case was seen red
//! first: `/etc/passwd` was read, and a 2 MiB file was read whole past a 1 MiB bound.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use driftwatch::config::Config;
use driftwatch::settings::Settings;
use driftwatch::spec::{LoadOptions, RefRoot, Spec, SpecError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A spec whose one request body schema is `{$ref: <reference>}`.
fn spec_with_ref(reference: &str) -> String {
    format!(
        "openapi: 3.0.3\ninfo: {{title: t, version: '1'}}\npaths:\n  /x:\n    put:\n      requestBody:\n        content:\n          application/json:\n            schema: {{$ref: '{reference}'}}\n      responses: {{'200': {{description: ok}}}}\n"
    )
}

fn load(dir: &Path, reference: &str, options: &LoadOptions) -> Result<Spec, SpecError> {
    let path = dir.join("api.yaml");
    std::fs::write(&path, spec_with_ref(reference)).unwrap();
    Spec::load_with(&path, options)
}

#[test]
fn a_ref_reads_only_regular_files_under_the_spec_directory() {
    let d = dir("confined");
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let first_line = passwd.lines().next().unwrap().to_string();
    let defaults = LoadOptions::default();

    let e = load(&d, "../../../../../../../../etc/passwd", &defaults)
        .unwrap_err()
        .to_string();
    assert!(e.contains("points outside"), "{e}");
    assert!(!e.contains(&first_line), "the error repeats the file: {e}");
    let e = load(&d, "/etc/passwd#/root", &defaults)
        .unwrap_err()
        .to_string();
    assert!(e.contains("points outside"), "{e}");

    // A link inside the directory to a device, or to a file outside it.
    std::os::unix::fs::symlink("/dev/zero", d.join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.join("passwd.yaml")).unwrap();
    for link in ["zero.yaml", "passwd.yaml"] {
        let e = load(&d, &format!("{link}#/x"), &defaults)
            .unwrap_err()
            .to_string();
        assert!(e.contains("points outside"), "{link}: {e}");
    }
    // Under a configured root, a device is still not read.
    let rooted = LoadOptions {
        refs: RefRoot::Dir("/dev".into()),
        ..LoadOptions::default()
    };
    let e = load(&d, "/dev/zero#/x", &rooted).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");

    // Inside the directory: a file that is not a spec is named, never quoted.
    std::fs::write(d.join("notes.txt"), "the password is hunter2\n").unwrap();
    std::fs::write(d.join("broken.yaml"), "key: [hunter2, {\n").unwrap();
    for file in ["notes.txt", "broken.yaml"] {
        let e = load(&d, &format!("{file}#/x"), &defaults)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "the error repeats the file: {e}");
        assert!(e.contains(file), "{e}");
    }
    // What the confinement allows still works.
    std::fs::create_dir_all(d.join("models")).unwrap();
    std::fs::write(d.join("models/pet.yaml"), "Pet: {type: object}\n").unwrap();
    assert!(load(&d, "models/pet.yaml#/Pet", &defaults).is_ok());
}

#[test]
fn every_read_is_bounded() {
    let d = dir("bounded");
    let small = LoadOptions {
        max_bytes: 1 << 20,
        ..LoadOptions::default()
    };
    // A 2 MiB file, as the spec or as a ref target, is refused without reading it whole.
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2 << 20));
    std::fs::write(d.join("big.json"), &big).unwrap();
    let e = Spec::load_with(&d.join("big.json"), &small).unwrap_err();
    assert!(matches!(e, SpecError::TooLarge { .. }), "{e}");
    let e = load(&d, "big.json#/pad", &small).unwrap_err().to_string();
    assert!(e.contains("larger than 1048576 bytes"), "{e}");
    // `--spec /dev/zero` is refused unread (it ended at the bound, having read it).
    let started = Instant::now();
    let e = Spec::load_with(Path::new("/dev/zero"), &small).unwrap_err();
    assert!(matches!(e, SpecError::NotAFile { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A gzip bomb: 64 MiB of zeros in 64 KiB of gzip.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &vec![b' '; 64 << 20]).unwrap();
    std::fs::write(d.join("bomb.json.gz"), gz.finish().unwrap()).unwrap();
    let e = Spec::load_with(&d.join("bomb.json.gz"), &small).unwrap_err();
    assert!(matches!(e, SpecError::TooLarge { .. }), "{e}");
}

/// A loopback server that answers every request with `body` forever (or until the client
/// hangs up), `pace` between chunks.
async fn endless(head: &'static str, pace: Duration) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("4000\r\n{}\r\n", " ".repeat(0x4000));
                loop {
                    if stream.write_all(chunk.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(pace).await;
                }
            });
        }
    });
    addr
}

fn spec_url(url: &str) -> driftwatch::settings::SpecUrl {
    driftwatch::settings::SpecUrl {
        uri: url.parse().unwrap(),
        basic: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_url_that_never_ends_is_cut_off_by_size_or_time() {
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    let settings = Settings::default();
    let client = driftwatch::proxy::client(&settings).unwrap();
    let fast = endless(head, Duration::ZERO).await;
    // A key in the spec URL's query is sent, and masked wherever the URL is named.
    let url = spec_url(&format!("http://{fast}/openapi.json?token=s3cret"));
    let e = driftwatch::proxy::fetch(&client, Duration::from_secs(10), &url, None, 1 << 20)
        .await
        .err()
        .expect("refused");
    assert!(e.to_string().contains("larger than 1048576 bytes"), "{e}");
    assert!(e.to_string().contains("?token=****"), "{e}");
    let slow = endless(head, Duration::from_millis(50)).await;
    let url = spec_url(&format!("http://{slow}/openapi.json?token=s3cret"));
    let started = Instant::now();
    let e = driftwatch::proxy::fetch(&client, Duration::from_millis(500), &url, None, 1 << 30)
        .await
        .err()
        .expect("refused");
    assert!(e.to_string().contains("500 ms"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let closed = super::util::free_addr();
    let url = spec_url(&format!("http://{closed}/openapi.json?token=s3cret"));
    let e = driftwatch::proxy::fetch(&client, Duration::from_secs(10), &url, None, 1 << 20)
        .await
        .err()
        .expect("unreachable");
    for e in [e.to_string(), format!("{e:?}")] {
        assert!(!e.contains("s3cret"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_fetched_from_a_url_reads_no_file() {
    let doc = spec_with_ref("/etc/passwd#/root");
    let responder: super::upstream::TypedResponder =
        std::sync::Arc::new(move |_| (200, "application/yaml", doc.clone()));
    let api = super::upstream::start_typed(responder, Duration::ZERO, None).await;
    let mut config = Config::default();
    config.spec.url = Some(format!("http://{}/openapi.yaml", api.addr));
    config.proxy.upstream = Some(format!("http://{}", api.addr));
    config.events.output = "none".into();
    let settings = Settings::from_config(&config).unwrap();
    let e = driftwatch::start::build(settings, None, driftwatch::proxy::ToolSource::Header)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("fetched from a URL"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_past_the_bound_keeps_the_revision_in_force_and_is_counted() {
    use super::sidecar::{admin_get, config, raw, sample, scrape, start};
    let d = dir("reload");
    let path = d.join("api.yaml");
    let original = std::fs::read(super::util::example("channels.openapi.yaml")).unwrap();
    std::fs::write(&path, &original).unwrap();
    let up = super::upstream::start(super::upstream::ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(path.clone());
        c.spec.max_bytes = original.len() as u64 + 1024;
        c.spec.watch_interval_ms = 0;
    }))
    .await;
    let before = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    let mut grown = original.clone();
    grown.extend_from_slice(format!("\n# {}\n", "x".repeat(4096)).as_bytes());
    std::fs::write(&path, &grown).unwrap();
    let answer = raw(
        dw.admin,
        b"POST /spec/reload HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&answer.body).to_string();
    assert!(answer.status >= 400, "{} {text}", answer.status);
    assert!(text.contains("spec.max_bytes"), "{text}");
    assert_eq!(
        admin_get(dw.admin, "/spec").await.json()["revision"],
        before
    );
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_limit_hits_total{limit=\"spec_bytes\"}"),
        1.0
    );
    dw.stop().await;
}

/// A child process killed when the test lets go of it: a check that hangs on a named pipe
/// must not outlive a failed test.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run driftwatch with `args`; its exit code and stderr, once it exits (at most 10 s).
async fn exits(args: &[&str]) -> (Option<i32>, String) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    let what = format!("driftwatch {args:?} to exit");
    let status = super::util::eventually(&what, || {
        let status = child.0.try_wait().unwrap();
        async move { status }
    })
    .await;
    let mut err = String::new();
    let stderr = child.0.stderr.as_mut().unwrap();
    std::io::Read::read_to_string(stderr, &mut err).unwrap();
    (status.code(), err)
}

fn fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success());
}

/// Issue 64: a named pipe given as the spec, an overlay or a document made a start and
/// `overlay apply` wait for a writer that never came. Each is refused at once, by name, as a
/// device and a directory are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_overlay_or_document_that_is_not_a_regular_file_is_refused_at_once() {
    let d = dir("not-a-file");
    let pipe = d.join("pipe.yaml");
    fifo(&pipe);
    let folder = d.join("folder.yaml");
    std::fs::create_dir_all(&folder).unwrap();
    let spec = super::util::example("channels.openapi.yaml");
    let documents = d.join("documents.toml");
    std::fs::write(
        &documents,
        format!(
            "[spec]\ndocuments = [{{spec = {spec:?}, base_path = \"/\"}}, {{spec = {pipe:?}, base_path = \"/b\"}}]\n[proxy]\nupstream = \"http://127.0.0.1:9\"\n"
        ),
    )
    .unwrap();
    let (spec, pipe_s) = (spec.to_str().unwrap(), pipe.to_str().unwrap());
    let serve = ["serve", "--check", "--upstream", "http://127.0.0.1:9"];
    let with = |rest: &[&str]| -> Vec<String> {
        serve.iter().chain(rest).map(|s| s.to_string()).collect()
    };
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        ("the spec", with(&["--spec", pipe_s]), pipe_s.into()),
        (
            "an overlay",
            with(&["--spec", spec, "--overlay", pipe_s]),
            pipe_s.into(),
        ),
        (
            "a device as an overlay",
            with(&["--spec", spec, "--overlay", "/dev/zero"]),
            "/dev/zero".into(),
        ),
        (
            "a directory as an overlay",
            with(&["--spec", spec, "--overlay", folder.to_str().unwrap()]),
            folder.display().to_string(),
        ),
        (
            "a document",
            ["serve", "--check", "--config", documents.to_str().unwrap()]
                .map(String::from)
                .to_vec(),
            pipe_s.into(),
        ),
        (
            "overlay apply",
            ["overlay", "apply", "--spec", spec, "--overlay", pipe_s]
                .map(String::from)
                .to_vec(),
            pipe_s.into(),
        ),
    ];
    let mut wrong = Vec::new();
    for (case, args, named) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        let (code, err) = exits(&args).await;
        eprintln!("{case}: refused in {:?}", started.elapsed());
        let said = format!("{named}: not a regular file");
        if code != Some(2) || !err.contains(&said) {
            wrong.push(format!("{case}: exit {code:?}, {err}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Issue 64: an overlay (or the spec) replaced by a named pipe made `POST /spec/reload` never
/// answer. It answers with the refusal, and the revision in force stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_to_a_named_pipe_answers_and_keeps_the_revision_in_force() {
    use super::sidecar::{admin_get, config, raw, start};
    let d = dir("pipe-reload");
    let (path, overlay) = (d.join("api.yaml"), d.join("overlay.yaml"));
    std::fs::copy(super::util::example("channels.openapi.yaml"), &path).unwrap();
    let text = "overlay: 1.0.0\ninfo: {title: t, version: '1'}\nactions:\n  - target: $.info\n    update: {x-done: true}\n";
    std::fs::write(&overlay, text).unwrap();
    let up = super::upstream::start(super::upstream::ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(path.clone());
        c.spec.overlays = vec![overlay.clone()];
        c.spec.watch_interval_ms = 0;
    }))
    .await;
    let before = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    for pipe in [&overlay, &path] {
        let kept = std::fs::read(pipe).unwrap();
        std::fs::remove_file(pipe).unwrap();
        fifo(pipe);
        let reload = raw(
            dw.admin,
            b"POST /spec/reload HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        let Ok(answer) = tokio::time::timeout(Duration::from_secs(10), reload).await else {
            // Let the reader stuck in open(2) go, so that the runtime can stop.
            let stuck = pipe.clone();
            tokio::task::spawn_blocking(move || std::fs::write(stuck, b"{}"));
            panic!("POST /spec/reload did not answer in 10 s with {pipe:?} a named pipe");
        };
        let text = String::from_utf8_lossy(&answer.body).to_string();
        assert!(answer.status >= 400, "{} {text}", answer.status);
        let said = format!("{}: not a regular file", pipe.display());
        assert!(text.contains(&said), "{text}");
        assert_eq!(
            admin_get(dw.admin, "/spec").await.json()["revision"],
            before
        );
        assert_eq!(
            raw(
                dw.addr,
                b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n"
            )
            .await
            .status,
            200
        );
        std::fs::remove_file(pipe).unwrap();
        std::fs::write(pipe, kept).unwrap();
    }
    dw.stop().await;
}
