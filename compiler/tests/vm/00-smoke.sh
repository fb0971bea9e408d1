#!/bin/bash
# The VM is what every e2e test stands on: check that it is a real booted host with the parts
# bell manages (systemd as PID 1, live sysctl, AppArmor, useradd, sshd, sudo, ethtool), that
# the staged binaries are there, and that a local apt repository installs packages. A failure
# here points at the image or the harness, not at bell.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
# run-in-vm.sh runs a copy of this script with the share as cwd; .ci/vm staged the tests there.
share=$PWD
here=$share/tests/vm

[ "$(readlink /proc/1/exe)" = /usr/lib/systemd/systemd ] || fail "PID 1 is $(readlink /proc/1/exe), not systemd"
state=$(systemctl is-system-running || true)
[ "$state" = running ] || { systemctl --failed --no-pager || true; fail "system state is '$state' (boot state seen by the runner: ${VMTEST_BOOT_STATE:-unset})"; }
ok "systemd is PID 1, system $state"

sysctl -qw net.ipv4.ip_forward=1
[ "$(sysctl -n net.ipv4.ip_forward)" = 1 ] || fail "sysctl -w net.ipv4.ip_forward did not stick"
echo 'vm.swappiness = 17' >/etc/sysctl.d/90-smoke.conf
systemctl restart systemd-sysctl.service
[ "$(sysctl -n vm.swappiness)" = 17 ] || fail "systemd-sysctl did not apply /etc/sysctl.d/90-smoke.conf"
ok "sysctl live and through sysctl.d"

[ "$(aa-enabled)" = Yes ] || fail "AppArmor is not enabled"
cat >/etc/apparmor.d/bell-smoke <<'PROFILE'
#include <tunables/global>
profile bell-smoke /usr/local/bin/bell-smoke flags=(complain) {
  #include <abstractions/base>
}
PROFILE
apparmor_parser -r /etc/apparmor.d/bell-smoke
grep -q '^bell-smoke (complain)$' /sys/kernel/security/apparmor/profiles || fail "profile bell-smoke not loaded"
ok "AppArmor enabled, a profile loads in complain mode"

useradd -m -s /bin/bash bellsmoke
if ! [ -d /home/bellsmoke ] || ! id bellsmoke >/dev/null; then fail "useradd did not create bellsmoke"; fi
ok "useradd"

for tool in /usr/sbin/sshd /usr/bin/ssh /usr/bin/ssh-keygen /usr/bin/sudo /usr/sbin/visudo /usr/sbin/ethtool; do
    [ -x "$tool" ] || fail "$tool missing from the image (VMTEST_EXTRA_PACKAGES)"
done
/usr/sbin/sshd -t || fail "sshd -t rejects the stock configuration"
systemctl is-enabled --quiet ssh.service || fail "ssh.service is not enabled"
visudo -c >/dev/null || fail "visudo -c rejects the stock sudoers"
nic=$(ip -o link show | awk -F': ' '$2 != "lo" { print $2; exit }')
ethtool -i "$nic" >/dev/null || fail "ethtool cannot query the NIC '$nic'"
ok "sshd, sudo, ethtool present"

for b in bellc bell-run; do
    file=$share/bin/$b
    [ -x "$file" ] || fail "$file missing from the share"
    [ "$(head -c 4 "$file" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "$file is not an ELF binary"
done
ok "bellc and bell-run staged in $share/bin"

# A flat repository on the local disk, updated alone (the mirror is never contacted).
repo=/srv/bell-repo
"$here/lib/make-local-repo.sh" -q answer "$repo" bell-smoke 1.0 >/etc/apt/sources.list.d/bell-test.list
"$here/lib/make-local-repo.sh" "$repo" bell-smoke 1.1 >/dev/null
only_local=(-o Dir::Etc::sourcelist=sources.list.d/bell-test.list -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
apt-get "${only_local[@]}" update -q
echo 'bell-smoke bell-smoke/answer string forty two' | debconf-set-selections
DEBIAN_FRONTEND=noninteractive apt-get install -y -q bell-smoke=1.0
[ "$(cat /usr/share/bell-smoke/version)" = 1.0 ] || fail "bell-smoke 1.0 not installed"
[ "$(cat /var/lib/bell-smoke/answer)" = 'forty two' ] || fail "debconf preseed not seen: $(cat /var/lib/bell-smoke/answer)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q bell-smoke
[ "$(dpkg-query -W -f '${Version}' bell-smoke)" = 1.1 ] || fail "bell-smoke did not upgrade to 1.1"
ok "local apt repository: install with a debconf preseed, then upgrade"

echo "smoke: all passed"
