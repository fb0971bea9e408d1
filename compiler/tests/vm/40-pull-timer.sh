#!/bin/bash
# Hosts that pull (issue 18), on a live host: `bell-run install-timer --source DIR` writes a
# service that systemd runs; it pulls the signed release from a mirror whose path holds every
# character systemd would split, expand or cut (space, quotes, `%`, `$`, `;`, `\`, a tab), so
# the quoting of the unit is checked by systemd itself. The service brings the host to release
# 1, then to release 2; a release whose signature does not match fails the service loudly, with
# the reason in the journal, and the host stays on release 2. Then `bell-run remove` takes bell
# off the host.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
share=$PWD
bellc=$share/bin/bellc
work=$(mktemp -d /root/bell-pull.XXXXXX)
ran=/var/tmp/bell-pull-ran
mirror=$'/srv/bell mirror/it\'s "100%" $HOME;\\x\tend'

install -m 0755 "$share/bin/bell-run" /usr/local/sbin/bell-run
# spec N: a host whose one exec script records which release ran it.
spec() {
    printf 'fleet "vm-pull" target="debian-12"\nhost "e2e"\nexec "mark.sh" rerun="always" {\n    script "#!/bin/sh\\necho release-%s >>%s\\n"\n}\n' \
        "$1" "$ran" >"$work/fleet.kdl"
}
# build: a signed build of the spec into the mirror, as CI would publish it.
build() {
    "$bellc" build "$work/fleet.kdl" -o "$mirror" --sign-key "$work/fleet.key" >"$work/build.out" 2>&1 \
        || { cat "$work/build.out" >&2; fail "bellc build failed"; }
    basename "$(readlink "$mirror/hosts/e2e")"
}
# run_service WANT: one run of the service, which must end WANT (success or failure).
run_service() {
    local rc=0
    systemctl start bell-run.service || rc=$?
    journalctl -u bell-run.service --no-pager -o cat -n 30 | sed 's/^/  journal: /' >"$work/journal.out"
    if [ "$1" = success ]; then
        [ "$rc" = 0 ] || { cat "$work/journal.out"; fail "bell-run.service failed"; }
    else
        [ "$rc" != 0 ] || { cat "$work/journal.out"; fail "bell-run.service succeeded"; }
    fi
    systemctl reset-failed bell-run.service 2>/dev/null || :
}
applied() { /usr/local/sbin/bell-run status | sed -n 's/^generation //p'; }

"$bellc" keygen "$work/fleet" >/dev/null
install -D -m 0644 "$work/fleet.pub" /etc/bell/trusted.pub
spec 1
first=$(build)
/usr/local/sbin/bell-run install-timer --source "$mirror" --host e2e >"$work/install.out" 2>&1 \
    || { cat "$work/install.out" >&2; fail "install-timer failed"; }
! grep -q warning "$work/install.out" || fail "install-timer warned: $(cat "$work/install.out")"
systemctl daemon-reload
systemd-analyze verify /etc/systemd/system/bell-run.service /etc/systemd/system/bell-run.timer \
    || fail "systemd-analyze rejects the units install-timer wrote"
[ "$(systemctl show -P ExecStart bell-run.service | grep -c 'bell mirror')" = 1 ] \
    || fail "systemd sees another command: $(systemctl show -P ExecStart bell-run.service)"

run_service success
[ "$(applied)" = "$first" ] || fail "the host runs $(applied), not release 1's bundle $first"
[ "$(tail -n 1 "$ran")" = release-1 ] || fail "mark.sh of release 1 did not run"
grep -q "verified: key" "$work/journal.out" || { cat "$work/journal.out"; fail "the pull did not say the release was verified"; }
ok "the pulling service brought the host to release 1 from '$mirror'"

spec 2
second=$(build)
[ "$second" != "$first" ] || fail "release 2 has the bundle of release 1"
run_service success
[ "$(applied)" = "$second" ] || fail "the host runs $(applied), not release 2's bundle $second"
[ "$(tail -n 1 "$ran")" = release-2 ] || fail "mark.sh of release 2 did not run"
ok "the next run brought it to release 2"

# A release whose signature does not match: the service fails with the reason, nothing moves.
cp "$mirror/release.json" "$work/release.json"
sed -i 's/"fleet": "vm-pull"/"fleet": "vm-pulls"/' "$mirror/release.json"
cmp -s "$mirror/release.json" "$work/release.json" && fail "the release was not changed"
before=$(wc -l <"$ran")
run_service failure
grep -qi "signature" "$work/journal.out" || { cat "$work/journal.out"; fail "the journal does not say why"; }
[ "$(applied)" = "$second" ] || fail "a tampered release moved the host to $(applied)"
[ "$(wc -l <"$ran")" = "$before" ] || fail "a script ran for a tampered release"
cp "$work/release.json" "$mirror/release.json"
ok "a tampered release fails the service, the reason in its journal, the host unchanged"

systemctl enable --now bell-run.timer
systemctl is-active --quiet bell-run.timer || fail "bell-run.timer is not active"
ok "bell-run.timer enabled and active"

# `bell-run remove` takes bell off the live host: the file bell took over gets its original
# back, the timer is stopped and its units go, and so does /var/lib/bell; a dry run before it
# changes nothing.
original=$(sha256sum /etc/motd)
spec 3
printf 'file "/etc/motd" {\n    content "managed by bell\\n"\n}\n' >>"$work/fleet.kdl"
third=$(build)
run_service success
[ "$(applied)" = "$third" ] || fail "the host runs $(applied), not release 3's bundle $third"
[ "$(cat /etc/motd)" = "managed by bell" ] || fail "release 3 did not take over /etc/motd"
/usr/local/sbin/bell-run remove --dry-run >"$work/remove.out" 2>&1 \
    || { cat "$work/remove.out" >&2; fail "remove --dry-run failed"; }
grep -q "file /etc/motd: restore the file from before bell" "$work/remove.out" \
    || { cat "$work/remove.out" >&2; fail "the dry run does not say /etc/motd comes back"; }
[ "$(cat /etc/motd)" = "managed by bell" ] || fail "a dry run changed /etc/motd"
systemctl is-active --quiet bell-run.timer || fail "a dry run stopped the timer"
/usr/local/sbin/bell-run remove --yes >"$work/remove.out" 2>&1 \
    || { cat "$work/remove.out" >&2; fail "remove --yes failed"; }
[ "$(sha256sum /etc/motd)" = "$original" ] || fail "/etc/motd is not the original: $(cat /etc/motd)"
! systemctl is-active --quiet bell-run.timer || fail "bell-run.timer is still active"
for f in bell-run.timer bell-run.service timers.target.wants/bell-run.timer; do
    [ ! -e "/etc/systemd/system/$f" ] && [ ! -L "/etc/systemd/system/$f" ] \
        || fail "/etc/systemd/system/$f is still there"
done
[ ! -e /var/lib/bell ] || fail "/var/lib/bell is still there"
ok "remove gave /etc/motd back, stopped the timer and took away its units and bell's state"
echo "pull-timer: all passed"
