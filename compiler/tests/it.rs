//! The compiler's integration tests, as one test binary: each file beside this one is a module of it (one
//! link instead of one per file, which was most of CI's disk and much of its time).
//! Two stay binaries of their own (Cargo.toml): `hostile_specs` and `benchmarks_run` each
//! install a `#[global_allocator]`, which is the whole process's.
//! A new file is declared below; `every_test_file_is_built` fails until it is.

mod common;

mod accounts_checked_against_the_image;
mod accounts_made_offline_as_useradd_makes_them;
mod apparmor_check_reads_the_kernels_list;
mod apparmor_strict_check;
mod apt_snapshots_pin_a_release;
mod apt_sources_are_bell_owned_files;
mod artifacts_real_tools;
mod assign_by_count;
mod budget_under_load;
mod build_time_clashes;
mod default_account_stays_without_a_sudo_user_who_can_log_in;
mod determinism;
mod disruption_budget;
mod docs_links;
mod docs_recipes;
mod drift_check_netns;
mod enable_links_removed_behind_bells_back_are_drift_offline;
mod enroll_and_assign;
mod escape_hostile;
mod etcd_cluster;
mod ethtool_check_script;
mod exec_order_is_not_dependency;
mod exec_policy;
mod exit_codes;
mod explain_parses_back;
mod field_of_reads_as_awk_did;
mod file_script_in_temp_root;
mod fleet_status;
mod fleetgen;
mod graph_implicit_edges;
mod graph_resource_cycle;
mod health_probes;
mod hold_a_host;
mod host_identities;
mod host_links;
mod hostile_strings;
mod image_bake_without_the_host_key;
mod image_root_needs_account_databases;
mod image_scripts_run_inside_the_root;
mod import_divingbell;
mod import_divingbell_sites;
mod independent_errors_in_one_run;
mod inventory_and_includes;
mod kernel_args;
mod key_rotation;
mod kind_scripts_snapshot;
mod language_contract;
mod live_only_scripts_change_nothing_offline;
mod malicious_roots;
mod modprobe_kind;
mod mount_and_unit_scripts_offline;
mod mount_check_reads_the_mount_table;
mod mutated_examples;
mod newcomer_mistakes;
mod no_panic_on_mangled_specs;
mod nodes_in_the_wrong_place;
mod one_bundle_id_everywhere;
mod overrides;
mod package_scripts_with_stubbed_apt;
mod parallel_serial_and_one_host_change;
mod parts_render_as_a_whole;
mod perm_scripts_in_temp_root;
mod plan_against;
mod publish_pending;
mod pull_is_bounded;
mod pull_over_http;
mod pull_resolves_names_without_libc;
mod pull_signed_releases;
mod pull_signs_with_the_identity_given;
mod query_across_hosts;
mod quiet_store;
mod readers_verify_the_release;
mod readme_tree;
mod reboot_in_window;
mod reboot_settings;
mod register_and_pending;
mod release_diff;
mod render_cache;
mod reports_only_their_host_can_write;
mod rollout_controller;
mod rollout_trusts_only_the_key;
mod rollout_waves_fleet;
mod scripts_reach_the_root_through_in_root;
mod secrets_reach_only_their_host;
mod secrets_sealed_to_their_host;
mod secrets_stay_private;
mod services_provider_without_address;
mod services_runtime_cycle;
mod services_unmet_count;
mod shared_file_drift_is_counted;
mod signed_releases;
mod snapshots_up_to_date;
mod stage_imports;
mod status_page;
mod status_rows;
mod store_text_is_escaped;
mod store_users_and_roles;
mod streamed_build;
mod sudo_policies_pass_visudo;
mod sysctl_check_script;
mod sysctl_scripts_in_private_netns;
mod ten_mistakes;
mod three_role_etcd;
mod trust_model_side_doors;
mod unverified_is_never_up_to_date;
mod user_accounts_apply_and_revert_in_a_temp_root;
mod user_and_package_validations_point_at_the_value;
mod user_check_finds_accounts_changed_behind_bells_back;
mod user_package_exec_renderings;
mod user_package_exec_scripts_pass_shellcheck;
mod validate_crypt;
mod validate_ethtool;
mod validate_names;
mod validate_paths;
mod validate_ssh;
mod validate_sysctl;
mod value_diff;

#[test]
fn every_test_file_is_built() {
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(
        bell_testkit::undeclared_test_files(package),
        Vec::<String>::new(),
        "declare each in tests/it.rs (`mod NAME;`), or give it its own [[test]] in Cargo.toml"
    );
}
