#!/bin/bash
# The live paths of the `unit` and `ethtool` kinds, end to end: bellc builds bundles inside a
# booted Debian 12 host and bell-run applies them with systemd as PID 1 and a real NIC
# (virtio-net). systemctl and `ethtool -k` say whether each took effect; `bell-run check` must
# see a service stopped behind bell's back (and not a oneshot that finished); a changed unit file
# must be reloaded and the service restarted; a spec without them must put the host back; a
# feature the driver fixes must fail the resource with a reason that names it.
#
# The specs are put together at test time from specs/units.kdl.in and specs/ethtool.kdl.in: the
# interface, and which of its features can be flipped or is fixed, are only known in the VM.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
# run-in-vm.sh runs a copy of this script with the share as cwd; .ci/vm staged the tests there.
share=$PWD
here=$share/tests/vm
bellc=$share/bin/bellc
bell_run=$share/bin/bell-run
work=$(mktemp -d /root/bell-units.XXXXXX)
units=/etc/systemd/system
hello=bell-e2e-hello.service
idle=bell-e2e-idle.service
once=bell-e2e-once.service

# apply_rc LABEL BUNDLE: a live bell-run apply; its exit status in $apply_rc, its output in
# $work/LABEL.out.
apply_rc() {
    apply_rc=0
    # The VM boots as `vmtest`; the bundles are e2e's (OUT/hosts/e2e): say it is to become e2e.
    "$bell_run" apply "$2" --host e2e >"$work/$1.out" 2>&1 || apply_rc=$?
    sed "s/^/  bell-run: /" "$work/$1.out"
}
# apply LABEL BUNDLE: a live bell-run apply that must exit 0.
apply() {
    apply_rc "$@"
    if [ "$apply_rc" != 0 ]; then
        find /var/lib/bell/log -name '*.log' -mmin -2 | sort | while read -r log; do
            echo "--- $log" >&2
            tail -n 20 "$log" >&2
        done
        fail "bell-run apply ($1) exited $apply_rc"
    fi
}
# check LABEL: bell-run check; its exit status in $check_rc, its output in $work/LABEL.out.
check() {
    check_rc=0
    "$bell_run" check >"$work/$1.out" 2>&1 || check_rc=$?
    sed "s/^/  bell-run: /" "$work/$1.out"
}
# drifted LABEL: the resources the check named drifted, sorted, one per line.
drifted() { sed -n 's/^drifted \([^ ]*\): .*/\1/p' "$work/$1.out" | sort; }
# spec NAME PART...: a spec for host e2e made of the given parts, written to $work/NAME.kdl.
spec() {
    local name=$1
    shift
    printf 'fleet "vm-units" target="debian-12"\nhost "e2e"\n' >"$work/$name.kdl"
    printf '%s\n' "$@" >>"$work/$name.kdl"
    ! grep -q '@[A-Z_]*@' "$work/$name.kdl" || fail "placeholders left in $name.kdl"
}
# build NAME: bellc build of $work/NAME.kdl into $work/NAME, which must succeed without warnings;
# the bundle's directory in $bundle.
build() {
    "$bellc" --deny-warnings build "$work/$1.kdl" -o "$work/$1" >"$work/build.out" 2>&1 \
        || { cat "$work/$1.kdl" "$work/build.out" >&2; fail "bellc build $1 failed"; }
    bundle=$work/$1/hosts/e2e
    [ -f "$bundle/bundle.json" ] || fail "bellc build $1 wrote no bundle for host e2e"
}
# units_part DESCRIPTION: specs/units.kdl.in with the service's description.
units_part() {
    local part
    part=$(<"$here/specs/units.kdl.in")
    printf '%s\n' "${part//@DESCRIPTION@/"$1"}"
}
# ethtool_part IFACE FEATURE VALUE: specs/ethtool.kdl.in for one feature.
ethtool_part() {
    local part
    part=$(<"$here/specs/ethtool.kdl.in")
    part=${part//@IFACE@/"$1"}
    part=${part//@FEATURE@/"$2"}
    printf '%s\n' "${part//@VALUE@/"$3"}"
}
# feature NAME: the value `ethtool -k` shows for NAME on $iface (`on`, `off [fixed]`, ...).
feature() {
    ethtool -k "$iface" | awk -v f="$1" '{ sub(/^[ \t]+/, "") } index($0, f ": ") == 1 { print substr($0, length(f) + 3); exit }'
}
# A reload probe: a unit that systemd holds with one description while its file, changed
# since, says another. Loaded units are read again by a daemon-reload and by nothing else, so
# `reloaded` says whether one ran since `arm_reload_probe` (systemd keeps no count of them).
probe=bell-e2e-reload-probe.service probe_n=0 probe_held=''
arm_reload_probe() {
    probe_held=$(systemctl show -P Description "$probe")
    probe_n=$((probe_n + 1))
    printf '[Unit]\nDescription=reload probe %s\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n' \
        "$probe_n" >"$units/$probe"
}
reloaded() { [ "$(systemctl show -P Description "$probe")" != "$probe_held" ]; }
is_enabled() { systemctl is-enabled "$1" 2>/dev/null || :; }
is_active() { systemctl is-active "$1" 2>/dev/null || :; }

# ---- the host before bell ----
for u in "$hello" "$idle" "$once"; do
    [ ! -e "$units/$u" ] || fail "$units/$u exists before the test"
done
iface=$(find /sys/class/net -mindepth 1 -maxdepth 1 ! -name lo -printf '%f\n' | sort | head -n 1)
[ -n "$iface" ] || fail "the VM has no network interface but lo"
ethtool_unit=bell-ethtool-$iface.service
orig_features=$(ethtool -k "$iface") || fail "ethtool -k $iface failed"
toggle='' toggle_orig=''
for f in generic-receive-offload tx-checksum-ip-generic tx-tcp-segmentation tx-scatter-gather; do
    v=$(feature "$f")
    case $v in
        on | off) toggle=$f toggle_orig=$v; break ;;
    esac
done
[ -n "$toggle" ] || { echo "$orig_features" >&2; fail "no toggleable feature of $iface among the candidates"; }
if [ "$toggle_orig" = on ]; then toggle_new=off; else toggle_new=on; fi
ok "host before bell: no bell-e2e units; $iface: $toggle is $toggle_orig, the test sets it $toggle_new"

# ---- first apply: the units and the feature ----
spec first "$(units_part 'bell e2e hello, first')" "$(ethtool_part "$iface" "$toggle" "$toggle_new")"
build first
bundle1=$bundle
arm_reload_probe
systemctl start "$probe" # active, so that systemd keeps it loaded
arm_reload_probe
reloaded && fail "the reload probe says systemd reloaded before the first apply"
apply first "$bundle1"
ok "first apply exited 0"
# Every unit file is new: systemd reads each when first asked for it, so the trigger runs and
# does not reload (a reload re-reads every unit: seconds on a busy host).
grep -Eq '^  \^ trigger:systemd-daemon-reload +ok$' "$work/first.out" || fail "the daemon-reload trigger did not run on the first apply"
! reloaded || fail "the first apply reloaded systemd, though every unit file was new"
ok "first apply: the trigger ran and found every new unit loaded from its new file, without a reload"

[ "$(is_enabled "$hello")" = enabled ] || fail "$hello is $(is_enabled "$hello"), not enabled"
[ "$(is_active "$hello")" = active ] || fail "$hello is $(is_active "$hello"), not active"
[ "$(systemctl show -P Description "$hello")" = 'bell e2e hello, first' ] || fail "$hello has description $(systemctl show -P Description "$hello")"
ok "unit: $hello enabled and active"
[ "$(is_enabled "$idle")" = enabled ] || fail "$idle is $(is_enabled "$idle"), not enabled"
[ "$(is_active "$idle")" = inactive ] || fail "$idle (start=#false) is $(is_active "$idle"), not inactive"
ok "unit: $idle (start=#false) enabled, inactive"
[ "$(is_enabled "$once")" = enabled ] || fail "$once is $(is_enabled "$once"), not enabled"
[ "$(is_active "$once")" = inactive ] || fail "$once is $(is_active "$once"), not inactive after it ran"
[ "$(systemctl show -P Result "$once")" = success ] || fail "$once result: $(systemctl show -P Result "$once")"
[ "$(systemctl show -P ExecMainStatus "$once")" = 0 ] || fail "$once did not run /bin/true: $(systemctl show -P ExecMainStatus "$once")"
ok "unit: $once (oneshot) enabled, ran successfully, inactive"

[ "$(feature "$toggle")" = "$toggle_new" ] || fail "$toggle of $iface is $(feature "$toggle"), not $toggle_new"
[ "$(is_enabled "$ethtool_unit")" = enabled ] || fail "$ethtool_unit is $(is_enabled "$ethtool_unit"), not enabled"
grep -Eq "^ExecStart=/usr/sbin/ethtool -K \"?$iface\"? \"?$toggle\"? $toggle_new\$" "$units/$ethtool_unit" \
    || fail "$ethtool_unit does not set $toggle: $(cat "$units/$ethtool_unit")"
ok "ethtool: ethtool -k $iface shows $toggle $toggle_new; $ethtool_unit enabled"
# What a boot does: the unit sets the feature again after something else changed it.
ethtool -K "$iface" "$toggle" "$toggle_orig" || fail "ethtool -K $iface $toggle $toggle_orig failed"
[ "$(feature "$toggle")" = "$toggle_orig" ] || fail "ethtool -K did not put $toggle back to $toggle_orig"
systemctl start "$ethtool_unit" || { journalctl -q -u "$ethtool_unit" --no-pager | tail -n 5 >&2; fail "systemctl start $ethtool_unit failed"; }
[ "$(feature "$toggle")" = "$toggle_new" ] || fail "$ethtool_unit left $toggle at $(feature "$toggle")"
ok "ethtool: $ethtool_unit, started as at boot, sets $toggle $toggle_new again"

# ---- the same bundle again: nothing to do ----
hello_pid=$(systemctl show -P MainPID "$hello")
apply again "$bundle1"
grep -Eqx 'result: 0 changed, [0-9]+ unchanged' "$work/again.out" || fail "the second apply did not report 'result: 0 changed'"
[ "$(systemctl show -P MainPID "$hello")" = "$hello_pid" ] || fail "the second apply restarted $hello"
[ "$(feature "$toggle")" = "$toggle_new" ] || fail "$toggle of $iface is $(feature "$toggle") after the second apply"
ok "second apply: 0 changed, $hello not restarted (MainPID $hello_pid)"

# ---- drift behind bell's back ----
check in-sync
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc right after the apply (a finished oneshot is not drift)"
grep -Eq '^check of [0-9a-f]+: 0 drifted, 0 errors' "$work/in-sync.out" || fail "bell-run check did not report 0 drifted, 0 errors"
ok "check after the apply: exit 0, in sync ($once finished and inactive is not drift)"

systemctl stop "$hello"
check drifted
[ "$check_rc" = 2 ] || fail "bell-run check exited $check_rc after $hello was stopped, not 2"
[ "$(drifted drifted)" = "unit:$hello" ] || fail "bell-run check named '$(drifted drifted | tr '\n' ' ')' instead of unit:$hello"
grep -qx "drifted unit:$hello: $hello is inactive, the bundle starts it" "$work/drifted.out" \
    || fail "the unit drift is not described as expected"
ok "check after stopping $hello: exit 2 naming unit:$hello only"

apply repair "$bundle1"
grep -Eq "^  \* unit:$hello +ok" "$work/repair.out" || fail "the repairing apply did not apply unit:$hello again as drifted"
[ "$(grep -c '^  \* ' "$work/repair.out")" = 1 ] || fail "the repairing apply applied other resources again"
[ "$(is_active "$hello")" = active ] || fail "$hello is $(is_active "$hello") after the repair"
check repaired
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc after the repair"
ok "apply of the same bundle started $hello again; check exits 0"

# The units are read back by one `systemctl show` for all of them, a block of properties each:
# a unit systemd cannot find (its file gone) must not shift the answers of the units after it.
mv "$units/$hello" "$work/hello.unit"
systemctl daemon-reload
systemctl disable --quiet "$idle"
check lost
grep -qx "drifted unit:$idle: $idle is disabled, the bundle enables it" "$work/lost.out" \
    || fail "the check after $hello's unit file went did not find $idle disabled"
! grep -Eq "^(drifted|error) unit:$once:" "$work/lost.out" || fail "the check after $hello's unit file went got $once wrong"
grep -Eq "^(drifted|error) unit:$hello: " "$work/lost.out" || fail "the check did not name unit:$hello, whose unit file went"
mv "$work/hello.unit" "$units/$hello"
systemctl daemon-reload
apply relinked "$bundle1"
check relinked
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc after $idle was enabled again"
ok "a unit systemd cannot find: the units after it are still read back ($idle disabled found), the apply enables $idle again"

# A NIC feature changed behind bell's back is drift too, named by its check script.
ethtool -K "$iface" "$toggle" "$toggle_orig" || fail "ethtool -K $iface $toggle $toggle_orig failed"
check nic-drifted
[ "$check_rc" = 2 ] || fail "bell-run check exited $check_rc after $toggle of $iface was changed, not 2"
[ "$(drifted nic-drifted)" = "ethtool:$iface" ] || fail "bell-run check named '$(drifted nic-drifted | tr '\n' ' ')' instead of ethtool:$iface"
grep -q "feature $toggle of $iface is $toggle_orig, the bundle sets $toggle_new" "$work/nic-drifted.out" \
    || fail "the ethtool drift is not described: $(cat "$work/nic-drifted.out")"
apply nic-repair "$bundle1"
[ "$(feature "$toggle")" = "$toggle_new" ] || fail "the repairing apply left $toggle at $(feature "$toggle")"
check nic-repaired
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc after the NIC repair"
ok "check after ethtool -K behind bell's back: exit 2 naming ethtool:$iface; apply puts $toggle back"

# ---- a changed unit file: daemon-reload, then a restart ----
hello_pid=$(systemctl show -P MainPID "$hello")
[ "$hello_pid" -gt 0 ] || fail "$hello has no main process"
spec second "$(units_part 'bell e2e hello, second')" "$(ethtool_part "$iface" "$toggle" "$toggle_new")"
build second
arm_reload_probe
apply changed "$bundle"
grep -Eq '^  \^ trigger:systemd-daemon-reload +ok$' "$work/changed.out" || fail "the daemon-reload trigger did not run"
reloaded || fail "the trigger did not reload systemd for a changed unit file"
grep -Eq "^  ~ unit:$hello +ok" "$work/changed.out" || fail "unit:$hello was not applied as changed"
[ "$(grep -Ec '^  [-+~*] ' "$work/changed.out")" = 1 ] || fail "the changed unit file applied other resources too"
[ "$(systemctl show -P NeedDaemonReload "$hello")" = no ] || fail "systemd did not reload $hello"
[ "$(systemctl show -P Description "$hello")" = 'bell e2e hello, second' ] || fail "systemd still describes $hello as: $(systemctl show -P Description "$hello")"
new_pid=$(systemctl show -P MainPID "$hello")
{ [ "$new_pid" -gt 0 ] && [ "$new_pid" != "$hello_pid" ]; } || fail "$hello was not restarted: MainPID $hello_pid, then $new_pid"
[ "$(is_active "$hello")" = active ] || fail "$hello is $(is_active "$hello") after the restart"
ok "changed unit file: daemon-reload ran, systemd reads the new description, $hello restarted (MainPID $hello_pid -> $new_pid)"

# A new drop-in for a unit systemd holds: a new file, but the unit was loaded without it.
dropin='file "/etc/systemd/system/'"$hello"'.d/10-bell.conf" { content "[Unit]\nDescription=bell e2e hello, drop-in\n"; }'
spec dropin "$(units_part 'bell e2e hello, second')" "$(ethtool_part "$iface" "$toggle" "$toggle_new")" "$dropin"
build dropin
arm_reload_probe
apply dropin "$bundle"
reloaded || fail "the trigger did not reload systemd for a new drop-in of a loaded unit"
[ "$(systemctl show -P Description "$hello")" = 'bell e2e hello, drop-in' ] || fail "systemd does not read the new drop-in of $hello: $(systemctl show -P Description "$hello")"
ok "new drop-in of a loaded unit: the trigger reloaded, systemd reads it"

# ---- a spec without them: the host goes back ----
# One file stays: bellc cannot yet write a bundle without any file.
kept='file "/etc/bell-e2e/kept.conf" { content "kept\n"; }'
spec empty "$kept"
build empty
bundle_empty=$bundle
apply revert "$bundle_empty"
for u in "$hello" "$idle" "$once"; do
    state=$(is_active "$u")
    [ "$state" = inactive ] || [ "$state" = unknown ] || fail "$u is $state after the revert"
    [ ! -e "$units/$u" ] || fail "$units/$u still exists"
    [ ! -e "$units/multi-user.target.wants/$u" ] || fail "$u is still wanted by multi-user.target"
    enabled=$(is_enabled "$u")
    [ "$enabled" != enabled ] || fail "$u is still enabled"
done
! pgrep -f '^/bin/sleep infinity$' >/dev/null || fail "a sleep of the units still runs: $(pgrep -af '^/bin/sleep infinity$')"
ok "units: stopped, disabled, unit files and enable links gone"
[ "$(feature "$toggle")" = "$toggle_orig" ] || fail "$toggle of $iface is $(feature "$toggle"), not the original $toggle_orig"
if [ "$(ethtool -k "$iface")" != "$orig_features" ]; then
    diff <(echo "$orig_features") <(ethtool -k "$iface") >&2 || :
    fail "the features of $iface differ from before the test"
fi
[ ! -e "$units/$ethtool_unit" ] || fail "$units/$ethtool_unit still exists"
[ ! -e "$units/multi-user.target.wants/$ethtool_unit" ] || fail "$ethtool_unit is still wanted by multi-user.target"
state=$(is_active "$ethtool_unit")
[ "$state" = inactive ] || [ "$state" = unknown ] || fail "$ethtool_unit is $state after the revert"
ok "ethtool: $toggle back to $toggle_orig (all features of $iface as before), $ethtool_unit gone"

# ---- a feature the driver fixes: the resource fails, naming it ----
fixed='' fixed_value=''
while read -r name value rest; do
    name=${name%:}
    [ "$rest" = "[fixed]" ] || continue
    # bellc knows only the names an ethtool accepts for -K; skip the ones it rejects.
    spec fixed "$kept" "$(ethtool_part "$iface" "$name" "$([ "$value" = on ] && echo off || echo on)")"
    if "$bellc" --deny-warnings build "$work/fixed.kdl" -o "$work/fixed" >/dev/null 2>&1; then
        fixed=$name fixed_value=$value
        break
    fi
done < <(ethtool -k "$iface" | sed 1d)
[ -n "$fixed" ] || { echo "$orig_features" >&2; fail "no [fixed] feature of $iface that bellc accepts"; }
apply_rc fixed "$work/fixed/hosts/e2e"
[ "$apply_rc" = 3 ] || fail "applying a change of the fixed $fixed exited $apply_rc, not 3"
grep -Eqx "result: [0-9]+ changed, [0-9]+ unchanged, 1 failed \\(ethtool:$iface\\)" "$work/fixed.out" || fail "the apply did not report ethtool:$iface alone as failed"
line=$(grep -E "^  \+ ethtool:$iface +failed" "$work/fixed.out") || fail "no failure line for ethtool:$iface"
# bell-run names the script's log; the script's last word there is the reason.
log=$(sed -n 's/.*(output in \(.*\))$/\1/p' <<<"$line")
[ -f "$log" ] || fail "the failure line names no log: $line"
reason=$(tail -n 1 "$log")
[ "$reason" = "bell: ethtool:$iface: feature $fixed of $iface is fixed at $fixed_value [fixed] by its driver" ] || { cat "$log" >&2; fail "the last line of $log does not name the feature $fixed: $reason"; }
[ "$(feature "$fixed")" = "$fixed_value [fixed]" ] || fail "$fixed is $(feature "$fixed") after the failed apply"
ok "fixed feature: changing $fixed ($fixed_value [fixed]) fails, exit 3; $log ends: $reason"

apply after-fixed "$bundle_empty"
if [ "$(ethtool -k "$iface")" != "$orig_features" ]; then
    diff <(echo "$orig_features") <(ethtool -k "$iface") >&2 || :
    fail "the features of $iface differ from before the test"
fi
[ ! -e "$units/$ethtool_unit" ] || fail "$units/$ethtool_unit still exists"
ok "a spec without the fixed feature: applies, $iface as before, $ethtool_unit gone"

echo "units-ethtool: all passed"
