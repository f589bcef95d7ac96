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
