//! Build-time checks of values whose syntax another tool defines: sysctl keys, crypt hashes,
//! SSH public keys, user and package names, Debian versions, paths, modes, ethtool features,
//! systemd unit names, AppArmor profile file names and limits.conf domains.
//!
//! bellc moves every decision to build time, so a value the host's tool would reject must be
//! rejected here, with a message that says what is wrong and a help line that teaches the fix.
//! Each check mirrors the rules of the tool that will consume the value; messages never repeat
//! secrets (password hashes) back.

mod apt;
mod crypt;
mod ethtool;
mod limits;
mod names;
mod paths;
mod ssh;
mod sudoers;
mod suggest;
mod sysctl;
mod time;
mod units;

pub use apt::{
    apt_package_name, apt_suites, apt_version, apt_words, unix_group_name, unix_user_name,
};
pub use crypt::sha512_crypt;
pub use ethtool::{ethtool_feature, ethtool_features};
pub use limits::limits_domain;
pub use names::{
    apt_snapshot, apt_url, host_address, host_name, interface_name, label, mount_target,
    pgp_public_key, resource_name, script_name, source_name, SNAPSHOT_PLACEHOLDER,
};
pub use paths::{
    absolute_path, file_mode, glob_not_bell_own, login_shell, not_bell_own, BELL_OWN, TRUST_FILE,
};
pub use ssh::{host_identity, ssh_public_key};
pub use sudoers::sudo_rule;
pub use suggest::did_you_mean;
pub use sysctl::{sysctl_key, sysctl_path};
pub use time::duration;
pub use units::{
    apparmor_profile_name, systemd_unit_name, unit_name_list, unit_setting, unit_setting_not_empty,
};

pub use crate::diagnostic::Invalid;

fn invalid(message: impl Into<String>, help: impl Into<String>) -> Invalid {
    Invalid {
        message: message.into(),
        help: help.into(),
    }
}

/// The first character of `text` that is neither an ASCII letter or digit nor in `extra`.
fn first_outside(text: &str, extra: &str) -> Option<char> {
    text.chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || extra.contains(c)))
}

/// The first character that is not allowed, shown so a user can find it.
pub fn show_char(c: char) -> String {
    if c.is_control() || c.is_whitespace() {
        format!("U+{:04X}", u32::from(c))
    } else {
        format!("`{c}`")
    }
}
