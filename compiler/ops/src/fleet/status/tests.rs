use super::judge::failure_detail;
use bell_store::{Report, ResourceResult, State};

#[test]
fn a_host_that_needs_a_reboot_is_flagged_and_says_why() {
    let host = bell_bundle::ReleaseHost {
        bundle: "b".repeat(64),
        address: None,
        labels: Default::default(),
        identity: None,
        secrets: None,
        snapshots: Default::default(),
        reboots: false,
        provides: Default::default(),
    };
    let release = bell_bundle::Release {
        format: 1,
        fleet: "f".into(),
        version: "v".repeat(64),
        hosts: [("h".to_string(), host)].into(),
        waves: Vec::new(),
        sequence: None,
        expires: None,
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    };
    let reason = "kernel-args:hugepages: hugepages=16 is not on the running kernel's \
                  command line";
    let report = Report {
        bundle: Some("b".repeat(64)),
        reboot_required: vec![reason.to_string()],
        ..Report::new("h", "f", "apply", State::Success, 9)
    };
    let view = |report: &Report| bell_store::HostView {
        report: Some(std::sync::Arc::new(report.clone())),
        status: [("apply".to_string(), State::Success)].into(),
        ..Default::default()
    };
    let status = super::fleet_status(
        &release,
        &[("h".to_string(), view(&report))].into(),
        10,
        None,
    );
    let row = &status.hosts[0];
    assert_eq!(row.state, super::HostState::UpToDate);
    assert!(row.flags.contains(&super::Flag::RebootRequired), "{row:?}");
    assert_eq!(row.detail, Some(format!("reboot required: {reason}")));
    let json = serde_json::to_value(row).unwrap();
    assert_eq!(json["flags"], serde_json::json!(["reboot-required"]));
    assert_eq!(json["reboot_required"].as_array().map(Vec::len), Some(1));
    assert!(json.get("rebooting").is_none());

    // Going down for the reboot its bundle ordered: flagged, and the detail says how.
    let going = Report {
        rebooting: Some("kexec into /boot/vmlinuz-6.1.0-28-amd64".into()),
        ..report
    };
    let status = super::fleet_status(
        &release,
        &[("h".to_string(), view(&going))].into(),
        10,
        None,
    );
    let row = &status.hosts[0];
    assert_eq!(row.state, super::HostState::UpToDate);
    let json = serde_json::to_value(row).unwrap();
    assert_eq!(
        json["flags"],
        serde_json::json!(["reboot-required", "rebooting"])
    );
    assert_eq!(
        row.detail,
        Some(format!(
            "rebooting (kexec into /boot/vmlinuz-6.1.0-28-amd64) for: {reason}"
        ))
    );
}

#[test]
fn a_failure_names_what_the_script_said_last() {
    let result = |key: &str, detail: Option<&str>, output: Option<&str>| ResourceResult {
        key: key.into(),
        result: bell_store::Status::Failed,
        detail: detail.map(str::to_string),
        output: output.map(str::to_string),
    };
    let report = Report {
        resources: vec![
            result(
                "exec:warm-cache",
                Some("exit 1"),
                Some("warming\ncache dir /srv/cache missing\n"),
            ),
            result(
                "sysctl:vm.x",
                Some("exit 1: sysctl:vm.x: refused"),
                Some("bell: sysctl:vm.x: refused"),
            ),
        ],
        ..Report::new("h", "f", "apply", State::Failed, 0)
    };
    assert_eq!(
        failure_detail(&report, "apply"),
        "exec:warm-cache (exit 1: cache dir /srv/cache missing), \
         sysctl:vm.x (exit 1: sysctl:vm.x: refused)"
    );
}
