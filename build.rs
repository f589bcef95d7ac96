//! The source revision the binary was built from, for `driftwatch_build_info` and `--version`
//! readers: `BUILD_REVISION` when set (an image build, whose context holds no .git), else
//! `git rev-parse --short=12 HEAD`, else `unknown`.

fn main() {
    println!("cargo:rerun-if-env-changed=BUILD_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/logs/HEAD");
    let revision = std::env::var("BUILD_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| {
            let out = std::process::Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            let text = String::from_utf8(out.stdout).ok()?;
            out.status.success().then(|| text.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BUILD_REVISION={revision}");
}
