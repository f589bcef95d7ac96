//! The `driftwatch` binary: everything lives in the library; see `driftwatch::cli`.

fn main() -> std::process::ExitCode {
    driftwatch::cli::main()
}
