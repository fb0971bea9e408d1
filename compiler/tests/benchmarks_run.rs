//! The benchmarks behind the README's figures run with the test suite, small and once: a
//! benchmark whose setup no longer matches what the code accepts (the rollout controller
//! refusing an unsigned base, say) fails here, not when someone next measures. The figures
//! themselves come from the commands the README shows, at full size and in release builds.
//!
//! Each test runs a benchmark's own `main` with its size set in the environment: nextest runs
//! every test in a process of its own, so the environment is the test's alone.

// Each benchmark is its own binary with its own copy of the shared support module; here they
// share one test binary, so that module is loaded once per benchmark.
#![allow(clippy::duplicate_mod)]

mod common;

#[path = "../benches/fleet.rs"]
mod fleet;
#[path = "../benches/gateway.rs"]
mod gateway;
#[path = "../benches/rollout.rs"]
mod rollout;
#[path = "../benches/serve.rs"]
mod serve;
#[path = "../benches/store_load.rs"]
mod store_load;

fn set(vars: &[(&str, &str)]) {
    for (name, value) in vars {
        std::env::set_var(name, value);
    }
}

#[test]
fn the_rollout_benchmark_finishes_on_a_small_fleet() {
    if !bell_testkit::tool("etcd") {
        return;
    }
    set(&[
        ("BELL_ROLLOUT_HOSTS", "40"),
        ("BELL_ROLLOUT_WAVE", "10"),
        ("BELL_ROLLOUT_POLL_MS", "50"),
    ]);
    rollout::main();
}

#[test]
fn the_store_load_benchmark_runs_on_a_small_fleet() {
    if !bell_testkit::tool("etcd") {
        return;
    }
    set(&[("BELL_LOAD_HOSTS", "20"), ("BELL_LOAD_SECONDS", "2")]);
    store_load::main();
}

#[test]
fn the_gateway_benchmark_runs_on_a_small_fleet() {
    if !bell_testkit::tool("etcd") || !bell_testkit::tool("openssl") {
        return;
    }
    set(&[
        ("BELL_GATEWAY_HOSTS", "200"),
        ("BELL_GATEWAY_SECONDS", "2"),
        ("BELL_GATEWAY_CLIENTS", "4"),
    ]);
    gateway::main();
}

#[test]
fn the_page_benchmark_runs_on_a_small_signed_fleet() {
    if !bell_testkit::tool("etcd") {
        return;
    }
    set(&[("BELL_SERVE_HOSTS", "300"), ("BELL_SERVE_SIGNED", "1")]);
    serve::main();
}

#[test]
fn the_scale_benchmark_runs_on_its_smallest_fleet() {
    let runner = common::fleet::bell_run();
    set(&[
        ("BELL_BENCH_QUICK", "1"),
        ("BELL_BENCH_ONLY", "shared-1000"),
        ("BELL_BENCH_RUNS", "1"),
        ("BELL_VM_CACHE", "/nonexistent"),
        ("BELL_RUN_BIN", runner.to_str().unwrap()),
    ]);
    fleet::main();
}
