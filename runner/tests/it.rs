//! bell-run's integration tests, as one test binary: each file beside this one is a module of it (one
//! link instead of one per file, which was most of CI's disk and much of its time).
//! A new file is declared below; `every_test_file_is_built` fails until it is.

mod common;

mod apply_files;
mod batch_checks;
mod bundle_for_another_host;
mod check_drift;
mod closed_pipe;
mod commands;
mod crash;
mod deferred_is_not_drift;
mod disk_full;
mod divingbell_mistakes;
mod examples_apply_offline;
mod exec_policy;
mod health_probes;
mod hostile_state_dir;
mod live_only_scripts;
mod lock;
mod metrics_textfile;
mod module_imports;
mod reboot_required;
mod reports_name_what_runs;
mod store_answers_are_bounded;
mod tampered;
mod triggers;

#[test]
fn every_test_file_is_built() {
    bell_testkit::assert_every_test_file_is_built(env!("CARGO_MANIFEST_DIR"));
}
