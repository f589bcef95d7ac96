//! The `driftwatch` binary: everything lives in the library; see `driftwatch::cli`.

/// mimalloc instead of glibc's malloc: parsing a JSON body allocates one small string per key,
/// and under proxy load glibc's arenas showed up at ~12% of driftwatch's profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    driftwatch::cli::main()
}
