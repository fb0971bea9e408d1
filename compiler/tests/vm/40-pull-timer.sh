#!/bin/bash
# Hosts that pull (issue 18), on a live host: `bell-run install-timer --source DIR` writes a
# service that systemd runs; it pulls the signed release from a mirror whose path holds every
# character systemd would split, expand or cut (space, quotes, `%`, `$`, `;`, `\`, a tab), so
# the quoting of the unit is checked by systemd itself. The service brings the host to release
# 1, then to release 2; a release whose signature does not match fails the service loudly, with
# the reason in the journal, and the host stays on release 2. Then (issue 53) a release adds a
# kernel argument under a `reboot method="kexec"` policy with the fleet's store (an etcd
# in the guest): outside its window the host applies it, reports `reboot-required` and frees its slot;
# with the window open it keeps the slot, runs `before-reboot`, reports, and kexecs into the
# installed kernel with the new command line; on the next boot the enabled service pulls at
# boot, finds the argument in /proc/cmdline, runs `after-boot` and the probe, reports up to date
# and healthy, and frees the slot. A release that cuts the host off its store under `confirm`
# is taken back by the host itself (issue 97). Then `bell-run remove` takes bell off the host.
# vm: reboots (.ci/vm runs it with run-in-vm.sh -R: it runs again after the kexec)
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
share=$PWD
bellc=$share/bin/bellc
# The second boot (after the kexec) goes on with the same work directory.
if [ "${VMTEST_BOOT:-1}" = 1 ]; then
    work=$(mktemp -d /root/bell-pull.XXXXXX)
    echo "$work" >/var/tmp/bell-pull-work
else
    work=$(cat /var/tmp/bell-pull-work)
fi
ran=/var/tmp/bell-pull-ran
store=etcd://127.0.0.1:2379
mirror=$'/srv/bell mirror/it\'s "100%" $HOME;\\x\tend'

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
    # The run's last lines may still be on their way to journald (it reads the service's stream
    # on its own time): have it take in what was written before reading.
    journalctl --sync 2>/dev/null || :
    journalctl -u bell-run.service --no-pager -o cat -n 30 | sed 's/^/  journal: /' >"$work/journal.out"
    if [ "$1" = success ]; then
        [ "$rc" = 0 ] || { cat "$work/journal.out"; fail "bell-run.service failed"; }
    else
        [ "$rc" != 0 ] || { cat "$work/journal.out"; fail "bell-run.service succeeded"; }
    fi
    systemctl reset-failed bell-run.service 2>/dev/null || :
}
applied() { /usr/local/sbin/bell-run status | sed -n 's/^generation //p'; }
# reboot_spec WINDOW_LINE: release 2 plus the argument, a probe and the reboot policy.
reboot_spec() {
    spec 2
    cat >>"$work/fleet.kdl" <<KDL
kernel-args "vmtest" {
    arg "bell.test=1"
}
health "up" { run "test -s /etc/hostname"; }
reboot method="kexec" {
$1
    before-reboot "echo drained >>/var/tmp/bell-hooks"
    after-boot "echo uncordoned >>/var/tmp/bell-hooks"
}
KDL
}
publish() {
    "$bellc" publish "$mirror" --store "$store" >"$work/publish.out" 2>&1 \
        || { cat "$work/publish.out" >&2; fail "bellc publish failed"; }
}
host_row() { "$bellc" status "$mirror" --store "$store" --all | grep '^e2e '; }
holds_slot() { "$bellc" lock status --store "$store" --fleet vm-pull | grep -q '^  e2e '; }

if [ "${VMTEST_BOOT:-1}" = 1 ]; then
install -m 0755 "$share/bin/bell-run" /usr/local/sbin/bell-run
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

# Releases 4 and 5: a kernel argument under `reboot method="kexec"`, pulled through the fleet's
# store (an etcd the test runs as a unit, from the test machine's static binary). The VM has no
# boot loader: a stub update-grub stands in, and the
# initrd QEMU booted with stands in for the one the kernel package made (built with
# MODULES=list, it cannot mount /dev/vda). kexec-tools must not load a kernel of its own.
[ -x "$share/bin/etcd" ] || fail "no etcd staged at bin/etcd (install etcd-server where .ci/vm runs)"
install -m 0755 "$share/bin/etcd" /usr/local/bin/etcd
cat >/etc/systemd/system/bell-test-etcd.service <<'UNIT'
[Unit]
Description=The fleet store of the pull test
[Service]
ExecStart=/usr/local/bin/etcd --data-dir /var/lib/bell-test-etcd --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now bell-test-etcd.service 2>/dev/null
printf '#!/bin/sh\necho ran >>/var/tmp/update-grub.runs\n' >/usr/local/sbin/update-grub
chmod 0755 /usr/local/sbin/update-grub
printf 'LOAD_KEXEC=false\n' >/etc/default/kexec
cp "$share/boot/initrd.img" "/boot/initrd.img-$(uname -r)"
# A window that is not open now: an hour, twelve hours on.
reboot_spec "    window \"$(date -u -d '+12 hours' +%H):00-$(date -u -d '+13 hours' +%H):00\""
build >/dev/null
publish
/usr/local/sbin/bell-run install-timer --source "$mirror" --host e2e --fleet vm-pull \
    --store "$store" --report "$store" >"$work/install.out" 2>&1 \
    || { cat "$work/install.out" >&2; fail "install-timer --store failed"; }
grep -q "systemctl enable bell-run.service" "$work/install.out" \
    || fail "install-timer does not say how to pull at boot: $(cat "$work/install.out")"
mkdir -p /etc/systemd/system/bell-run.service.d
printf '[Unit]\nWants=bell-test-etcd.service\nAfter=bell-test-etcd.service\n' \
    >/etc/systemd/system/bell-run.service.d/store.conf
systemctl daemon-reload
systemctl enable bell-run.service 2>/dev/null
run_service success
grep -q "reboot: waits for its window" "$work/journal.out" \
    || { cat "$work/journal.out"; fail "the pull does not say it waits for its window"; }
host_row | grep -q reboot-required || fail "status does not flag reboot-required: $(host_row)"
! holds_slot || fail "a host waiting for its window holds its slot"
[ ! -e /var/tmp/bell-hooks ] || fail "before-reboot ran outside the window"
ok "outside its window the host applied the argument, reports reboot-required, frees its slot"

# Release 5: any time. The service pulls, keeps the slot, drains, reports, and kexecs.
reboot_spec ""
build >/dev/null
publish
! grep -qw bell.test=1 /proc/cmdline || fail "bell.test=1 is on the command line already"
cat /proc/sys/kernel/random/boot_id >/var/tmp/bell-boot-1
echo "kexec: the service reboots the guest; the test goes on at the next boot"
systemctl start bell-run.service || :
sleep infinity
fi

# Boot 2: the enabled service pulled at boot (the end of boot waits for it).
[ "${VMTEST_BOOT:-1}" = 2 ] || fail "boot ${VMTEST_BOOT:-1}: one kexec was expected"
[ "$(cat /proc/sys/kernel/random/boot_id)" != "$(cat /var/tmp/bell-boot-1)" ] \
    || fail "the boot id did not change"
grep -qw bell.test=1 /proc/cmdline || fail "the kexec'd kernel lacks bell.test=1: $(cat /proc/cmdline)"
# journald takes a service's output on its own time: read until the run's last line is there.
for _ in 1 2 3 4 5 6 7 8 9 10; do
    journalctl -b -u bell-run.service --no-pager -o cat >"$work/boot-journal.out"
    grep -q "reboot: back from its reboot" "$work/boot-journal.out" && break
    sleep 0.5
done
{ [ "$(systemctl show -P Result bell-run.service)" = success ] \
    && [ -n "$(systemctl show -P ExecMainStartTimestamp bell-run.service)" ]; } \
    || { cat "$work/boot-journal.out"; fail "the pull at boot did not run or failed"; }
grep -q "reboot: back from its reboot: the reasons are gone and it is healthy" "$work/boot-journal.out" \
    || { cat "$work/boot-journal.out"; fail "the pull at boot does not say the host is back"; }
[ "$(cat /var/tmp/bell-hooks)" = "$(printf 'drained\nuncordoned')" ] \
    || fail "the hooks ran as: $(cat /var/tmp/bell-hooks)"
[ ! -e /var/lib/bell/rebooting.json ] || fail "the reboot record is still open"
! holds_slot || fail "the host holds its slot after a healthy return"
row=$(host_row)
case $row in *up-to-date*) ;; *) fail "status after the boot: $row" ;; esac
case $row in *reboot*) fail "status still says reboot: $row" ;; esac
/usr/local/sbin/bell-run check >"$work/check.out" 2>&1 || { cat "$work/check.out"; fail "check failed"; }
! grep -q "reboot required" "$work/check.out" || { cat "$work/check.out"; fail "check still wants a reboot"; }
ok "kexec'd with bell.test=1; the pull at boot ran after-boot and the probe, reports up to date and healthy, slot free"

# The live layer on a live host (issue 94): e2e provides `web` (its probe: no
# /run/bell-web-sick) and follows it with a live file whose reload is a real unit's
# `systemctl reload`. `bell-run live`, run by the unit install-timer wrote, drops e2e from the
# file within seconds when its probe fails, reloading the unit once (not restarting it), and
# takes it back when the probe passes; `bellc status` counts the service's ready providers.
identity=$(/usr/local/sbin/bell-run identity --init --host e2e)
cat >/usr/local/bin/bell-test-lb-reload <<'SH'
#!/bin/sh
printf '[%s]\n' "$(paste -s -d ' ' /etc/bell-test/backends)" >>/var/tmp/bell-lb-reloads
SH
chmod 0755 /usr/local/bin/bell-test-lb-reload
cat >/etc/systemd/system/bell-test-lb.service <<'UNIT'
[Unit]
Description=A load balancer stand-in: each reload records the backends it read
[Service]
ExecStart=/bin/sleep infinity
ExecReload=/usr/local/bin/bell-test-lb-reload
UNIT
systemctl daemon-reload
systemctl start bell-test-lb.service
mkdir -p /etc/bell-test
lb_pid=$(systemctl show -P MainPID bell-test-lb.service)
spec 3
sed -i "s|^host \"e2e\"\$|host \"e2e\" address=\"127.0.0.1\" role=\"web\" identity=\"$identity\"|" "$work/fleet.kdl"
grep -q "identity=" "$work/fleet.kdl" || fail "the spec has no identity: $(cat "$work/fleet.kdl")"
cat >>"$work/fleet.kdl" <<'KDL'
override "web" {
    match role="web"
    service "web" port=8080
}
health "web" retries=1 { run "test ! -e /run/bell-web-sick"; }
live "/etc/bell-test/backends" service="web" {
    template "{% for s in services.web %}{{ s.host }} {{ s.address }}:{{ s.port }}\n{% endfor %}"
    reload "systemctl reload bell-test-lb.service"
}
KDL
build >/dev/null
publish
run_service success
systemctl enable --now bell-run-live.service 2>/dev/null
backends() { paste -s -d " " /etc/bell-test/backends 2>/dev/null || :; }
# until WANT: seconds until the file lists WANT (at most 30).
until_listed() {
    local start now
    start=$(date +%s.%N)
    while [ "$(backends)" != "$1" ]; do
        now=$(date +%s.%N)
        if awk -v a="$start" -v b="$now" 'BEGIN { exit !(b - a > 30) }'; then
            journalctl -u bell-run-live.service --no-pager -o cat -n 30 | sed 's/^/  live: /'
            fail "the live file lists '$(backends)', not '$1', after 30 s"
        fi
        sleep 0.1
    done
    awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}
# until_reloaded WANT: until the unit's last reload read WANT (the file is in place first).
until_reloaded() {
    local n=0
    while [ "$(tail -n 1 /var/tmp/bell-lb-reloads 2>/dev/null)" != "[$1]" ]; do
        n=$((n + 1))
        [ "$n" -lt 100 ] || fail "the last reload read $(tail -n 1 /var/tmp/bell-lb-reloads), not [$1]"
        sleep 0.1
    done
}
until_listed "e2e 127.0.0.1:8080" >/dev/null
until_reloaded "e2e 127.0.0.1:8080"
reloads=$(wc -l </var/tmp/bell-lb-reloads)
touch /run/bell-web-sick
out=$(until_listed "")
until_reloaded ""
sleep 2
[ "$(wc -l </var/tmp/bell-lb-reloads)" = $((reloads + 1)) ] \
    || fail "the unit was reloaded $(($(wc -l </var/tmp/bell-lb-reloads) - reloads)) times, not once"
[ "$(systemctl show -P MainPID bell-test-lb.service)" = "$lb_pid" ] || fail "the unit was restarted, not reloaded"
"$bellc" status "$mirror" --store "$store" >"$work/status.out" 2>&1 || :
grep -q "service web: 0 of 1 providers ready; out: e2e" "$work/status.out" \
    || { cat "$work/status.out"; fail "status does not say web has none ready"; }
rm /run/bell-web-sick
back=$(until_listed "e2e 127.0.0.1:8080")
until_reloaded "e2e 127.0.0.1:8080"
[ "$(systemctl show -P MainPID bell-test-lb.service)" = "$lb_pid" ] || fail "the unit was restarted, not reloaded"
ok "bell-run-live.service took e2e out of the live file in ${out} s and back in ${back} s, reloading (not restarting) the unit each time"

# Confirm or revert (issue 97): a release under `confirm timeout="15s"` whose unit takes the
# host's loopback down, cutting it off its store (the etcd on 127.0.0.1). The pull applies it,
# cannot reach the store, and when the timeout passes applies the generation before again (the
# unit stopped: its ExecStop brings the link back), reports `reverted` naming the release it
# took back, and fails the service; the next pull refuses that release and changes nothing.
before=$(applied)
cat >>"$work/fleet.kdl" <<'KDL'
confirm timeout="15s"
unit "bell-test-cut.service" enable=#true start=#true {
    content "[Unit]\nDescription=Takes the host off its network\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c 'ip link set lo down'\nExecStop=/bin/sh -c 'ip link set lo up'\n[Install]\nWantedBy=multi-user.target\n"
}
KDL
cut=$(build)
publish
cut_release=$(sed -n 's/.*"version": *"\([0-9a-f]*\)".*/\1/p' "$mirror/release.json" | head -n 1)
[ -n "$cut_release" ] || fail "no version in the cutting release"
start=$(date +%s)
run_service failure
took=$(($(date +%s) - start))
grep -q "was not confirmed in time" "$work/journal.out" \
    || { cat "$work/journal.out"; fail "the pull does not say the generation was not confirmed"; }
ip -o link show lo | grep -q "[<,]UP[,>]" || fail "the loopback is still down: $(ip -o link show lo)"
[ "$(applied)" = "$before" ] || fail "the host runs $(applied), not the generation before ($before); the cut one was $cut"
! systemctl is-active --quiet bell-test-cut.service || fail "the cutting unit is still active"
rc=0
"$bellc" status "$mirror" --store "$store" --all >"$work/status.out" 2>&1 || rc=$?
[ "$rc" = 3 ] || { cat "$work/status.out"; fail "status exits $rc with a reverted host, not 3 (its --fail-on)"; }
row=$(grep '^e2e ' "$work/status.out" || :)
case $row in *reverted*"took back release ${cut_release:0:12}"*) ;; *) fail "status after the revert: $row" ;; esac
run_service failure
grep -q "was taken back on this host" "$work/journal.out" \
    || { cat "$work/journal.out"; fail "the next pull does not refuse the release taken back"; }
[ "$(applied)" = "$before" ] || fail "the next pull applied $(applied)"
ip -o link show lo | grep -q "[<,]UP[,>]" || fail "the next pull took the loopback down again"
ok "a release that cut the host off its store was taken back in ${took} s (confirm 15s), reported reverted, and refused by the next pull"

# `bell-run remove` takes bell off the live host: the file bell took over gets its original
# back, the timer is stopped and its units go, and so does /var/lib/bell; a dry run before it
# changes nothing.
original=$(sha256sum /etc/motd)
spec 4
printf 'file "/etc/motd" {\n    content "managed by bell\\n"\n}\n' >>"$work/fleet.kdl"
third=$(build)
publish
run_service success
[ "$(applied)" = "$third" ] || fail "the host runs $(applied), not release 3's bundle $third"
[ "$(cat /etc/motd)" = "managed by bell" ] || fail "release 3 did not take over /etc/motd"
[ ! -e /etc/bell-test/backends ] || fail "the live file is still there without its resource"
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
! systemctl is-active --quiet bell-run-live.service || fail "bell-run-live.service is still active"
for f in bell-run.timer bell-run.service timers.target.wants/bell-run.timer \
    multi-user.target.wants/bell-run.service bell-run-live.service \
    multi-user.target.wants/bell-run-live.service; do
    { [ ! -e "/etc/systemd/system/$f" ] && [ ! -L "/etc/systemd/system/$f" ]; } \
        || fail "/etc/systemd/system/$f is still there"
done
[ ! -e /var/lib/bell ] || fail "/var/lib/bell is still there"
ok "remove gave /etc/motd back, stopped the timer and took away its units and bell's state"
echo "pull-timer: all passed"
