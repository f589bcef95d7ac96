//! The `driftwatch` binary: everything lives in the library; see `driftwatch::cli`.

/// mimalloc instead of glibc's malloc: the proxy allocates and frees small buffers on two
/// threads for every request, and glibc's allocator took about 13 % of the sidecar's CPU under
/// `scripts/bench-proxy` (perf); docs/benchmarks.md has the measured difference.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    driftwatch::cli::main()
}
