//! bell-run: applies a bundle built by bellc on a host. See the README.
fn main() {
    eprintln!("bell-run: not built yet");
    std::process::exit(2);
}
