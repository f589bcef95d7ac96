//! `driftwatch wrap` where an operator runs it (issue 49): a server started through `sh -c`
//! (as `npx` does) is stopped whole on SIGTERM; a read-only `ca_dir` and a second wrapped
//! server beside the first both start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::util::{example, free_addr};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("driftwatch-hwrap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `driftwatch wrap` of the Channels spec around `command`, its admin port at `admin`.
fn wrap(admin: std::net::SocketAddr, extra: &[&str], command: &[&str]) -> Command {
    let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    wrap.args(["wrap", "--spec"])
        .arg(example("channels.openapi.yaml"))
        .args(["--upstream", "http://127.0.0.1:9", "--admin-listen"])
        .arg(admin.to_string())
        .args(extra)
        .arg("--")
        .args(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wrap
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    // A zombie has exited: only a running process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn pid_in(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// Issue 49, defect 8: a server started through `sh -c` survived wrap's SIGTERM; over stdio
/// wrap kept running until the client closed stdin (41 s). Now the server's whole process
/// group gets SIGTERM, and wrap exits at once with the client's stdin still open.
#[test]
fn sigterm_stops_a_server_started_through_a_shell_and_wrap_exits() {
    let dir = scratch("sigterm");
    let pid_file = dir.join("server.pid");
    // `sleep` is the grandchild, holding the relayed stdout open, as `npx`'s node does.
    let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let admin = free_addr();
    let mut child = wrap(admin, &[], &["sh", "-c", &script]).spawn().unwrap();
    wait_for("the server to start", || pid_in(&pid_file).is_some());
    let server = pid_in(&pid_file).unwrap();
    assert!(alive(server));
    let stopped = Instant::now();
    let wrap_pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(wrap_pid, rustix::process::Signal::TERM).unwrap();
    wait_for("wrap to exit", || child.try_wait().unwrap().is_some());
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "wrap took {:?} with the client's stdin open",
        stopped.elapsed()
    );
    wait_for("the grandchild to be gone", || !alive(server));
    drop(child.stdin.take());
}

fn stop(mut child: std::process::Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    wait_for("wrap to exit", || child.try_wait().unwrap().is_some());
}

/// Issue 49, defect 9: wrap wrote `bundle.pem` into `ca_dir`, so a read-only one (the Secret
/// mount the docs recommend) stopped it (`Permission denied`). The bundle now goes to a
/// directory of wrap's own, removed when it ends; `ca_dir` is only read.
#[test]
fn wrap_only_reads_the_ca_directory() {
    let dir = scratch("ro-ca");
    let ca_dir = dir.join("ca");
    let made = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["ca", "--ca-dir"])
        .arg(&ca_dir)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let config = dir.join("forward.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nkind = \"forward\"\n[forward]\nca_dir = {:?}\n[[api]]\nname = \"channels\"\nspec = {:?}\nhosts = [\"api.test:443\"]\nupstream = \"https://127.0.0.1:9\"\n",
            ca_dir.display().to_string(),
            example("channels.openapi.yaml").display().to_string()
        ),
    )
    .unwrap();
    let told = dir.join("told");
    let script = format!(
        "echo \"$SSL_CERT_FILE\" > {}; exec sleep 300",
        told.display()
    );
    let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    wrap.args(["wrap", "--config"])
        .arg(&config)
        .args([
            "--admin-listen",
            &free_addr().to_string(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let child = wrap.spawn().unwrap();
    wait_for("the server to be told its trust", || {
        std::fs::read_to_string(&told).is_ok_and(|t| t.ends_with('\n'))
    });
    let bundle = PathBuf::from(std::fs::read_to_string(&told).unwrap().trim());
    assert!(!bundle.starts_with(&ca_dir), "{}", bundle.display());
    let ca = std::fs::read_to_string(ca_dir.join("ca.pem")).unwrap();
    assert!(std::fs::read_to_string(&bundle).unwrap().starts_with(&ca));
    let mut written: Vec<String> = std::fs::read_dir(&ca_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["ca.key", "ca.pem"], "wrap wrote into ca_dir");
    stop(child);
    assert!(!bundle.exists(), "the bundle outlived wrap");
}

/// Issue 49, defect 9: a second wrapped server in the same client config could not start
/// (`cannot listen on 127.0.0.1:9090`). Without `--admin-listen`, the second takes a free
/// port and says so.
#[test]
fn two_wrapped_servers_with_the_default_admin_port_both_start() {
    let dir = scratch("two");
    let started: Vec<_> = (0..2)
        .map(|i| {
            let marker = dir.join(format!("started-{i}"));
            let script = format!("echo up > {}; exec sleep 300", marker.display());
            let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
            wrap.args(["wrap", "--spec"])
                .arg(example("channels.openapi.yaml"))
                .args([
                    "--upstream",
                    "http://127.0.0.1:9",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let child = wrap.spawn().unwrap();
            wait_for("a wrapped server to start", || marker.exists());
            child
        })
        .collect();
    for mut child in started {
        assert!(child.try_wait().unwrap().is_none(), "a wrap exited");
        stop(child);
    }
}
