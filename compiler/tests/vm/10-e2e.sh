#!/bin/bash
# Issue 4, end to end: bellc builds a bundle inside a booted Debian 12 host, bell-run applies it
# live, and the host's own tools (sysctl, systemctl, findmnt, AppArmor's kernel interface, id,
# chage, sudo, a real SSH login, dpkg) say that every resource took effect. A second apply of the
# same bundle must change and write nothing; a second spec without those resources must put the
# host back as it was. Unit tests run the scripts against an image root or in namespaces; only
# this shows that they work on a real host with systemd as PID 1.
#
# The spec is generated from specs/e2e.kdl.in: an SSH key pair and a password hash are made here,
# at test time, so that no private key lives in the repository; the hash is encrypted at rest
# (secrets/e2e.hash.age) and the build opens it with the SSH key (--secrets-key).
#
# The package comes from a local flat apt repository (lib/make-local-repo.sh) that bell adds
# with an `apt-source` resource. apt-source cannot express `[trusted=yes]` (it renders
# `Signed-By:` from an armoured `key` only), so the repository is signed for real. The image has
# no gpg (only gpgv), so specs/pgp.pl makes the OpenPGP key and the Release signature with openssl
# and perl-base; apt verifies them with gpgv as on any host. The mirror's sources.list is moved
# aside first, so that the apt-update trigger reads only the local repository (no network, and
# none of the 40 s a mirror update takes under TCG).
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
# run-in-vm.sh runs a copy of this script with the share as cwd; .ci/vm staged the tests there.
share=$PWD
here=$share/tests/vm
bellc=$share/bin/bellc
bell_run=$share/bin/bell-run
work=$(mktemp -d /root/bell-e2e.XXXXXX)

user=bellops
pkg=bell-e2e-pkg
unit=srv-scratch.mount
where=/srv/scratch
profile=bell-e2e
app_conf=/etc/bell-e2e/app.conf
limits_conf=/etc/security/limits.d/60-bell.conf
sysctl_conf=/etc/sysctl.d/60-bell.conf
sudoers=/etc/sudoers.d/bell-$user
apt_sources=/etc/apt/sources.list.d/bell-e2e-repo.sources
apt_keyring=/etc/apt/keyrings/bell-e2e-repo.asc
repo=/srv/repo
key=$work/id_ed25519
profiles=/sys/kernel/security/apparmor/profiles

# apply LABEL BUNDLE: a live bell-run apply that must exit 0; its output is kept in $work/LABEL.out.
apply() {
    local rc=0
    # The VM boots as `vmtest`; the bundles are e2e's (OUT/hosts/e2e): say it is to become e2e.
    "$bell_run" apply "$2" --host e2e >"$work/$1.out" 2>&1 || rc=$?
    sed "s/^/  bell-run: /" "$work/$1.out"
    if [ "$rc" != 0 ]; then
        find /var/lib/bell/log -name '*.log' -newer "$work/$1.out" -o -name '*.log' -mmin -2 | sort -u \
            | while read -r log; do echo "--- $log" >&2; tail -n 20 "$log" >&2; done
        fail "bell-run apply ($1) exited $rc"
    fi
}
# build SPEC OUT: bellc build, which must succeed without warnings.
build() {
    "$bellc" --deny-warnings --secrets-key "$key" build "$1" -o "$2" >"$work/build.out" 2>&1 \
        || { cat "$work/build.out" >&2; fail "bellc build $1 failed"; }
}
# ssh_as COMMAND: log in as the managed user with the generated key and run COMMAND.
ssh_as() {
    ssh -i "$key" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
        -o LogLevel=ERROR -o ConnectTimeout=20 "$user@127.0.0.1" "$@"
}
# stamps FILE...: path, mtime and ctime (nanoseconds) of each file, or "absent".
stamps() {
    local f
    for f in "$@"; do
        stat -c '%n %y %z' "$f" 2>/dev/null || echo "$f absent"
    done
}
# complain_mode_names: the profile names aa-status lists in complain mode.
complain_mode_names() {
    local out
    out=$(aa-status) || fail "aa-status failed"
    awk '/profiles are in complain mode/ { f = 1; next } /^[0-9]+ / { f = 0 } f { print $1 }' <<<"$out"
}
# candidate PACKAGE: the version apt would install, "(none)" when no source has it.
candidate() {
    local out
    out=$(apt-cache policy "$1") || fail "apt-cache policy $1 failed"
    awk '$1 == "Candidate:" { c = $2 } END { print (c == "" ? "(none)" : c) }' <<<"$out"
}

# ---- the host before bell ----
orig_forward=$(sysctl -n net.ipv4.ip_forward)
orig_swappiness=$(sysctl -n vm.swappiness)
[ "$orig_forward" != 1 ] || fail "net.ipv4.ip_forward is already 1; the test could not see a change"
[ "$orig_swappiness" != 17 ] || fail "vm.swappiness is already 17; the test could not see a change"
! id "$user" >/dev/null 2>&1 || fail "user $user exists before the test"
[ ! -e "$where" ] || fail "$where exists before the test"
! grep -q "^$profile " "$profiles" || fail "profile $profile is loaded before the test"
! dpkg -s "$pkg" >/dev/null 2>&1 || fail "$pkg is installed before the test"
systemctl start ssh.service
systemctl is-active --quiet ssh.service || fail "sshd does not run"
ok "host before bell: ip_forward=$orig_forward swappiness=$orig_swappiness, no $user, $where, $profile or $pkg"

# ---- inputs made at test time ----
ssh-keygen -q -t ed25519 -N '' -C bell-e2e -f "$key"
pubkey=$(cat "$key.pub")
password_hash=$(openssl passwd -6 "e2e-$RANDOM-$RANDOM")
[[ $password_hash =~ ^\$6\$[./A-Za-z0-9]+\$[./A-Za-z0-9]+$ ]] || fail "openssl passwd -6 gave '$password_hash'"

"$here/lib/make-local-repo.sh" "$repo" "$pkg" 1.0 >/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/repo-key.pem" 2>/dev/null
created=$(($(date +%s) - 60))
perl "$here/specs/pgp.pl" key "$work/repo-key.pem" "$created" >"$work/repo-key.asc"
perl "$here/specs/pgp.pl" sign "$work/repo-key.pem" "$created" "$repo/Release" >"$repo/Release.gpg"
repo_key=$(sed 's/^/        /' "$work/repo-key.asc")
spec=$(<"$here/specs/e2e.kdl.in")
# Quoted replacements: no `&` expansion (bash 5.2 patsub_replacement).
spec=${spec//@SSH_KEY@/"$pubkey"}
spec=${spec//@REPO_KEY@/"$repo_key"}
# The host's identity, as `bell-run identity` reads it: sshd's host key, made at first boot.
host_key=$("$bell_run" identity | cut -d' ' -f1-2)
[[ $host_key == ssh-ed25519\ * ]] || fail "bell-run identity gave '$host_key'"
spec=${spec//@HOST_KEY@/"$host_key"}
! grep -q '@[A-Z_]*@' <<<"$spec" || fail "placeholders left in the spec: $(grep -o '@[A-Z_]*@' <<<"$spec" | tr '\n' ' ')"
printf '%s\n' "$spec" >"$work/e2e.kdl"
# The hash at rest, as a fleet's repository keeps it: an age file encrypted to the build's key
# (the test's SSH key: bellc takes ssh-ed25519 keys as recipients), written by `bellc secrets
# edit` through an editor that pastes it; the spec's tree holds it only encrypted.
printf 'build "%s"\nsecret "secrets/e2e.hash.age"\n' "$(cut -d' ' -f1-2 "$key.pub")" >"$work/secrets.kdl"
cat >"$work/paste.sh" <<'EOF'
#!/bin/sh
printf %s "$HASH" >"$1"
EOF
chmod 755 "$work/paste.sh"
HASH=$password_hash EDITOR="$work/paste.sh" VISUAL='' \
    "$bellc" secrets edit secrets/e2e.hash.age --spec "$work/e2e.kdl" >/dev/null \
    || fail "bellc secrets edit secrets/e2e.hash.age failed"
! grep -rqF -- "$password_hash" "$work/e2e.kdl" "$work/secrets.kdl" "$work/secrets" \
    || fail "the password hash is in the spec's tree in the clear"
"$bellc" --secrets-key "$key" secrets check "$work/e2e.kdl" >/dev/null \
    || fail "bellc secrets check fails on the spec's tree"
cp "$here/specs/e2e-after.kdl" "$work/e2e-after.kdl"
[ "$(candidate "$pkg")" = "(none)" ] || fail "apt knows $pkg before bell adds its source"
if [ -e /etc/apt/sources.list ]; then mv /etc/apt/sources.list /etc/apt/sources.list.e2e-aside; fi
ok "ssh key pair, password hash (encrypted at rest) and a signed local apt repository $repo made"

# ---- first apply ----
build "$work/e2e.kdl" "$work/out1"
bundle1=$work/out1/hosts/e2e
[ -f "$bundle1/bundle.json" ] || fail "bellc build wrote no bundle for host e2e"
"$bell_run" verify "$bundle1" >/dev/null || fail "bell-run verify rejects the fresh bundle"
ok "bellc build in the VM, bundle $(basename "$(readlink -f "$bundle1")" | cut -c1-12) verifies"
# The password hash is sealed to the host: nowhere in OUT in the clear.
! grep -rqF -- "$password_hash" "$work/out1" || fail "the password hash is in OUT in the clear"
ls "$work/out1/secrets/e2e/"*.age >/dev/null || fail "no sealed secret for e2e in OUT/secrets/e2e"
ok "the password hash is only in OUT sealed to the host's key"
apply first "$bundle1"
ok "first apply exited 0"

# sysctl
[ "$(sysctl -n net.ipv4.ip_forward)" = 1 ] || fail "net.ipv4.ip_forward is $(sysctl -n net.ipv4.ip_forward), not 1"
[ "$(sysctl -n vm.swappiness)" = 17 ] || fail "vm.swappiness is $(sysctl -n vm.swappiness), not 17"
grep -qx 'net.ipv4.ip_forward = 1' "$sysctl_conf" || fail "$sysctl_conf lacks net.ipv4.ip_forward: $(cat "$sysctl_conf")"
grep -qx 'vm.swappiness = 17' "$sysctl_conf" || fail "$sysctl_conf lacks vm.swappiness"
# Both keys were due: set by one run of the sysctl batch's apply, each with its own original.
batch_log=/var/lib/bell/log/batch/sysctl/apply.log
grep -qx "$(printf 'sysctl:net.ipv4.ip_forward\tok\t')" "$batch_log" \
    || fail "the sysctl batch's apply did not set net.ipv4.ip_forward: $(cat "$batch_log" 2>&1)"
[ ! -e /var/lib/bell/log/sysctl/vm.swappiness/apply.log ] || fail "vm.swappiness ran an apply of its own"
[ "$(cat /var/lib/bell/state/sysctl/net.ipv4.ip_forward/original)" = "$orig_forward" ] \
    || fail "the original of net.ipv4.ip_forward is not $orig_forward"
ok "sysctl: net.ipv4.ip_forward=1 and vm.swappiness=17 live and in $sysctl_conf, by one batch apply"

# mount
[ "$(systemctl is-active "$unit")" = active ] || fail "$unit is $(systemctl is-active "$unit"), not active"
[ "$(systemctl is-enabled "$unit")" = enabled ] || fail "$unit is $(systemctl is-enabled "$unit"), not enabled"
fs=$(findmnt -n -o FSTYPE --mountpoint "$where") || fail "findmnt: nothing mounted on $where"
[ "$fs" = tmpfs ] || fail "$where is $fs, not tmpfs"
opts=$(findmnt -n -o OPTIONS --mountpoint "$where")
for o in nosuid nodev size=16384k mode=750; do
    [[ ,$opts, == *",$o,"* ]] || fail "$where is mounted with '$opts', without $o"
done
ok "mount: $unit active and enabled, findmnt shows tmpfs on $where ($opts)"

# apparmor
grep -qx "$profile (complain)" "$profiles" || fail "profile $profile not loaded in complain mode: $(grep "^$profile " "$profiles" || echo absent)"
grep -qx "$profile" <<<"$(complain_mode_names)" || fail "aa-status does not list $profile in complain mode"
ok "apparmor: $profile loaded in complain mode (kernel and aa-status)"

# user
id "$user" >/dev/null || fail "id: no user $user"
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd "$user") || fail "getent passwd: no $user"
{ [ "$home" = "/home/$user" ] && [ -d "$home" ]; } || fail "home of $user is '$home'"
[ "$shell" = /bin/bash ] || fail "shell of $user is '$shell', not /bin/bash"
[ "$(getent shadow "$user" | cut -d: -f2)" = "$password_hash" ] || fail "the password hash of $user is not the spec's"
chage -l "$user" | grep -Eq '^Account expires[[:space:]]*: never$' || { chage -l "$user"; fail "$user expires"; }
chage -l "$user" | grep -Eq '^Password expires[[:space:]]*: never$' || { chage -l "$user"; fail "the password of $user expires"; }
sudo -l -U "$user" | grep -Eq '\(ALL : ALL\) NOPASSWD: ALL' || { sudo -l -U "$user"; fail "sudo -l -U $user does not grant ALL"; }
cmp -s "$key.pub" "$home/.ssh/authorized_keys" || fail "$home/.ssh/authorized_keys is not the spec's key"
ok "user: id $uid, /bin/bash, the spec's hash, not expired (chage -l), sudo ALL (sudo -l -U)"
login=$(ssh_as 'id -un; ulimit -Sn; ulimit -Hn; sudo -n id -u') || fail "ssh login as $user with the key failed"
[ "$(sed -n 1p <<<"$login")" = "$user" ] || fail "ssh login ran as '$(sed -n 1p <<<"$login")'"
[ "$(sed -n 4p <<<"$login")" = 0 ] || fail "sudo -n id -u over ssh gave '$(sed -n 4p <<<"$login")'"
ok "user: ssh login with the key to 127.0.0.1, sudo -n works there"

# limit: the file, and pam_limits applying it to the ssh session
[ "$(sed -e '/^#/d' -e 's/[[:space:]]\+/ /g' "$limits_conf")" = "$user - nofile 4242" ] \
    || fail "$limits_conf says: $(cat "$limits_conf")"
[ "$(sed -n 2,3p <<<"$login" | tr '\n' ' ')" = "4242 4242 " ] \
    || fail "nofile limits in the ssh session are $(sed -n 2,3p <<<"$login" | tr '\n' ' '), not 4242 4242"
ok "limit: $limits_conf holds '$user - nofile 4242' and the ssh session gets it"

# apt-source
grep -qx "Signed-By: $apt_keyring" "$apt_sources" || fail "$apt_sources lacks Signed-By: $(cat "$apt_sources")"
grep -qx "URIs: file:$repo" "$apt_sources" || fail "$apt_sources lacks the URI: $(cat "$apt_sources")"
cmp -s "$apt_keyring" "$work/repo-key.asc" || fail "$apt_keyring is not the spec's key"
grep -Eq '^  \^ trigger:apt-update +ok$' "$work/first.out" || fail "the apt-update trigger did not run"
[ "$(candidate "$pkg")" = 1.0 ] || fail "apt's candidate for $pkg is $(candidate "$pkg"), not 1.0"
ok "apt-source: deb822 file with Signed-By $apt_keyring; apt update verified the signed repository"

# package
dpkg -s "$pkg" 2>/dev/null | grep -qx 'Status: install ok installed' || fail "dpkg -s $pkg: not installed"
[ "$(cat "/usr/share/$pkg/version")" = 1.0 ] || fail "$pkg 1.0 files missing"
ok "package: dpkg -s $pkg says install ok installed (from $repo)"

# file
[ "$(cat "$app_conf")" = "$(printf 'host=e2e\nfleet=vm-e2e')" ] || fail "$app_conf holds: $(cat "$app_conf")"
[ "$(stat -c '%a %U %G' "$app_conf")" = "640 daemon adm" ] || fail "$app_conf is $(stat -c '%a %U %G' "$app_conf")"
ok "file: $app_conf content rendered, mode 640, daemon:adm"

# ---- second apply of the same bundle: nothing to do ----
mapfile -t managed < <(grep -o '"path": "/[^"]*"' "$bundle1/bundle.json" | cut -d'"' -f4)
[ ${#managed[@]} -ge 6 ] || fail "bundle.json lists only ${#managed[@]} host files"
watched=("${managed[@]}" "$sudoers" "$home/.ssh/authorized_keys" /etc/passwd /etc/shadow /etc/group)
before=$(stamps "${watched[@]}")
mount_since=$(systemctl show -P ActiveEnterTimestampMonotonic "$unit")
apply second "$bundle1"
grep -Eqx 'result: 0 changed, [0-9]+ unchanged' "$work/second.out" || fail "second apply did not report 'result: 0 changed'"
! grep -q 'trigger:' "$work/second.out" || fail "the second apply ran a trigger"
ok "second apply: exit 0, 0 changed, no trigger"
after=$(stamps "${watched[@]}")
if [ "$before" != "$after" ]; then
    diff <(echo "$before") <(echo "$after") >&2 || :
    fail "the second apply wrote managed files"
fi
[ "$(systemctl show -P ActiveEnterTimestampMonotonic "$unit")" = "$mount_since" ] || fail "the second apply restarted $unit"
ok "second apply: no managed file written (mtime and ctime of ${#watched[@]} files), $unit not restarted"

# ---- drift behind bell's back: bell-run check finds it, an apply of the same bundle repairs it ----
# check LABEL: bell-run check; its exit status in $check_rc, its output in $work/LABEL.out.
check() {
    check_rc=0
    "$bell_run" check >"$work/$1.out" 2>&1 || check_rc=$?
    sed "s/^/  bell-run: /" "$work/$1.out"
}
# drifted LABEL: the resources the check named drifted, sorted, one per line.
drifted() { sed -n 's/^drifted \([^ ]*\): .*/\1/p' "$work/$1.out" | sort; }
check in-sync
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc right after the apply"
grep -Eq '^check of [0-9a-f]+: 0 drifted, 0 errors \([0-9]+ files, [0-9]+ resource checks\)$' "$work/in-sync.out" \
    || fail "bell-run check did not report 0 drifted, 0 errors"
ok "check after the apply: exit 0, in sync"

systemctl stop "$unit"
apparmor_parser -R "/etc/apparmor.d/$profile" || fail "apparmor_parser -R $profile failed"
: >"$home/.ssh/authorized_keys"
sysctl -q -w vm.swappiness=30
check drifted
[ "$check_rc" = 2 ] || fail "bell-run check exited $check_rc after the drift, not 2"
want_drift=$(printf '%s\n' apparmor:bell-e2e mount:scratch sysctl:vm.swappiness "user:$user" | sort)
[ "$(drifted drifted)" = "$want_drift" ] || fail "bell-run check named $(drifted drifted | tr '\n' ' ')instead of $(tr '\n' ' ' <<<"$want_drift")"
grep -qx "drifted mount:scratch: $unit is inactive, the bundle starts it; nothing is mounted on $where, the bundle mounts tmpfs (tmpfs)" "$work/drifted.out" \
    || fail "the mount drift is not described as expected"
grep -qx "drifted apparmor:bell-e2e: profile $profile is not loaded" "$work/drifted.out" || fail "the apparmor drift is not described as expected"
grep -qx "drifted user:$user: authorized_keys of $user lacks a key of the bundle: $pubkey" "$work/drifted.out" \
    || fail "the user drift is not described as expected"
grep -qx "drifted sysctl:vm.swappiness: vm.swappiness is 30, the bundle sets 17" "$work/drifted.out" \
    || fail "the sysctl drift is not described as expected"
ok "check after drifting: exit 2 naming exactly $(tr '\n' ' ' <<<"$want_drift")"

apply repair "$bundle1"
for r in $want_drift; do
    grep -Eq "^  \* $r +ok" "$work/repair.out" || fail "the repairing apply did not apply $r again as drifted"
done
[ "$(grep -c '^  \* ' "$work/repair.out")" = 4 ] || fail "the repairing apply applied other resources again"
[ "$(systemctl is-active "$unit")" = active ] || fail "$unit is not active after the repair"
findmnt --mountpoint "$where" >/dev/null || fail "$where is not mounted after the repair"
grep -qx "$profile (complain)" "$profiles" || fail "profile $profile is not loaded after the repair"
cmp -s "$key.pub" "$home/.ssh/authorized_keys" || fail "authorized_keys is not the spec's key after the repair"
[ "$(sysctl -n vm.swappiness)" = 17 ] || fail "vm.swappiness is $(sysctl -n vm.swappiness) after the repair"
check repaired
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc after the repair"
ok "apply of the same bundle repaired the four drifted resources; check exits 0"

# Another file system in the mount's place: systemd has the unit active again (it follows the
# mount table), so only what the table says is mounted there tells the drift.
umount "$where"
mount -t tmpfs bell-other "$where"
[ "$(systemctl is-active "$unit")" = active ] || fail "$unit is not active with bell-other mounted"
check swapped
[ "$check_rc" = 2 ] || fail "bell-run check exited $check_rc with another file system mounted, not 2"
grep -qx "drifted mount:scratch: $where has bell-other tmpfs mounted, the bundle mounts tmpfs (tmpfs)" "$work/swapped.out" \
    || fail "the swapped mount is not described as expected"
umount "$where"
systemctl start "$unit"
check restored
[ "$check_rc" = 0 ] || fail "bell-run check exited $check_rc with the spec's tmpfs mounted again"
ok "another file system mounted in the mount's place is drift, told from the mount table"

# ---- a spec without those resources: the host goes back ----
build "$work/e2e-after.kdl" "$work/out2"
apply revert "$work/out2/hosts/e2e"

[ "$(sysctl -n net.ipv4.ip_forward)" = "$orig_forward" ] || fail "net.ipv4.ip_forward is $(sysctl -n net.ipv4.ip_forward), not the original $orig_forward"
[ "$(sysctl -n vm.swappiness)" = 17 ] || fail "vm.swappiness (still in the spec) is $(sysctl -n vm.swappiness), not 17"
! grep -q ip_forward "$sysctl_conf" || fail "$sysctl_conf still sets net.ipv4.ip_forward"
ok "sysctl: net.ipv4.ip_forward back to $orig_forward, vm.swappiness (kept) still 17"

state=$(systemctl is-active "$unit" || :)
[ "$state" = inactive ] || [ "$state" = unknown ] || fail "$unit is $state after the revert"
! findmnt --mountpoint "$where" >/dev/null || fail "$where is still mounted: $(findmnt --mountpoint "$where")"
[ ! -e "/etc/systemd/system/$unit" ] || fail "/etc/systemd/system/$unit still exists"
[ ! -e "/etc/systemd/system/local-fs.target.wants/$unit" ] || fail "$unit is still wanted by local-fs.target"
[ ! -e "$where" ] || fail "$where (created by bell) still exists"
ok "mount: $unit $state, unit file and enable link gone, $where unmounted and removed"

! grep -q "^$profile " "$profiles" || fail "profile $profile is still loaded: $(grep "^$profile " "$profiles")"
! grep -qx "$profile" <<<"$(complain_mode_names)" || fail "aa-status still lists $profile"
[ ! -e "/etc/apparmor.d/$profile" ] || fail "/etc/apparmor.d/$profile still exists"
ok "apparmor: $profile unloaded, its file gone"

# `users purge-expired=#false` (the default): an account bell created is locked and expired.
getent passwd "$user" >/dev/null || fail "$user was removed, but purge-expired is #false"
[ "$(getent shadow "$user" | cut -d: -f8)" = 1 ] || fail "$user is not expired: $(getent shadow "$user" | cut -d: -f8)"
chage -l "$user" | grep -Eq '^Account expires[[:space:]]*: .*1970$' || { chage -l "$user"; fail "chage -l: $user does not expire"; }
[[ $(getent shadow "$user" | cut -d: -f2) == '!'* ]] || fail "the password of $user is not locked"
[ ! -e "$sudoers" ] || fail "$sudoers still exists"
sudo_now=$(sudo -l -U "$user" 2>&1 || :)
! grep -q NOPASSWD <<<"$sudo_now" || fail "sudo -l -U $user still grants sudo: $sudo_now"
# sudo's own answer, so that an error (an unknown user, a broken sudoers) does not pass.
grep -q "$user is not allowed to run sudo" <<<"$sudo_now" || fail "sudo -l -U $user: $sudo_now"
if ssh_as true 2>"$work/ssh.err"; then fail "ssh login as the expired $user still works"; fi
! grep -q 'Connection refused' "$work/ssh.err" || fail "sshd is not running, the login refusal shows nothing"
# sshd's own word on why, so that a refusal for another reason (a broken key) does not pass.
# journald may not have stored sshd's line yet when the refused login returns: ask a few times.
# By identifier, not unit: journald loses the unit of a preauth child that exited before it read
# its cgroup.
why=
for _ in 1 2 3 4 5 6 7 8 9 10; do
    why=$(journalctl -q -o cat -t sshd --no-pager | grep -Ei "$user.*(expired|locked)|(expired|locked).*$user" | tail -n 1 || :)
    [ -z "$why" ] || break
    sleep 0.5
done
[ -n "$why" ] || { journalctl -q -u ssh.service --no-pager | tail -n 5 >&2; fail "sshd logged no expired or locked account for $user"; }
ok "user: $user kept but expired (chage -l: 1970) and locked, sudoers drop-in gone, ssh login refused (sshd: $why)"

! dpkg -s "$pkg" >/dev/null 2>&1 || dpkg -s "$pkg" | grep -q '^Status: deinstall' \
    || fail "$pkg (installed by bell) is still installed: $(dpkg -s "$pkg" | grep ^Status)"
[ ! -e "/usr/share/$pkg/version" ] || fail "files of $pkg are still there"
ok "package: $pkg removed (bell installed it)"

[ ! -e "$apt_sources" ] || fail "$apt_sources still exists"
[ ! -e "$apt_keyring" ] || fail "$apt_keyring still exists"
grep -Eq '^  \^ trigger:apt-update +ok$' "$work/revert.out" || fail "the apt-update trigger did not run after the source left"
[ "$(candidate "$pkg")" = "(none)" ] || fail "apt still offers $pkg ($(candidate "$pkg")) after its source left"
ok "apt-source: sources file and keyring gone, apt no longer offers $pkg"

[ ! -e "$limits_conf" ] || fail "$limits_conf still exists: $(cat "$limits_conf")"
ok "limit: $limits_conf gone"
[ ! -e "$app_conf" ] || fail "$app_conf still exists"
ok "file: $app_conf gone"

apply revert-again "$work/out2/hosts/e2e"
grep -Eqx 'result: 0 changed, [0-9]+ unchanged' "$work/revert-again.out" || fail "applying the second bundle again did not report 'result: 0 changed'"
ok "second bundle applied again: 0 changed"

# ---- package repository snapshots ----
# Two dated snapshots of a signed repository, and a source of the image's own (not bell's) that
# offers a newer version still: a release pinned to snapshot s1 installs s1's version, the next
# release, pinned to s2, upgrades to s2's and not to the image source's, whose package lists
# bell's updates leave in place.
snap_pkg=bell-snap-pkg
for snapshot in s1 s2; do
    "$here/lib/make-local-repo.sh" "/srv/snapshots/$snapshot" "$snap_pkg" 1.0 >/dev/null
done
"$here/lib/make-local-repo.sh" /srv/snapshots/s2 "$snap_pkg" 2.0 >/dev/null
for snapshot in s1 s2; do
    perl "$here/specs/pgp.pl" sign "$work/repo-key.pem" "$created" "/srv/snapshots/$snapshot/Release" \
        >"/srv/snapshots/$snapshot/Release.gpg"
done
"$here/lib/make-local-repo.sh" /srv/image-repo "$snap_pkg" 3.0 >/dev/null
printf 'Types: deb\nURIs: file:/srv/image-repo\nSuites: ./\nTrusted: yes\n' >/etc/apt/sources.list.d/image.sources
apt-get -q update -o Dir::Etc::sourcelist=sources.list.d/image.sources -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0 >/dev/null || fail "apt-get update of the image's source failed"
[ "$(candidate "$snap_pkg")" = 3.0 ] || fail "the image's source offers $(candidate "$snap_pkg"), not 3.0"
snap_spec() {
    cat <<EOF
fleet "vm-e2e" target="debian-12"
host "e2e"
apt-source "snap" url="file:/srv/snapshots/{snapshot}" snapshot="$1" suites="./" {
    key #"""
$repo_key
        """#
}
package "$snap_pkg"
apt upgrade=#true
EOF
}
installed() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null; }
# snap_apply LABEL: applies release LABEL's bundle live, reporting to $work/reports.
snap_apply() {
    "$bell_run" apply "$work/$1/hosts/e2e" --host e2e --report "$work/reports" >"$work/$1.out" 2>&1 \
        || { cat "$work/$1.out" >&2; fail "applying the $1 release failed"; }
}
snap_spec s1 >"$work/snap.kdl"
build "$work/snap.kdl" "$work/snap1"
grep -q '"snap": "s1"' "$work/snap1/release.json" || fail "release.json does not record snapshot s1"
snap_apply snap1
[ "$(installed "$snap_pkg")" = 1.0 ] || fail "$snap_pkg is at '$(installed "$snap_pkg")', not s1's 1.0"
grep -Eq '"snap": ?"s1"' "$work/reports/e2e.json" || fail "the report does not say s1: $(cat "$work/reports/e2e.json")"
ok "snapshot s1: $snap_pkg installed at 1.0 from the pinned snapshot, not 3.0 from the image's source; the release and the report say s1"

snap_spec s2 >"$work/snap.kdl"
build "$work/snap.kdl" "$work/snap2"
snap_apply snap2
grep -Eq '^  ~ apt:upgrade ' "$work/snap2.out" || { cat "$work/snap2.out" >&2; fail "the new snapshot did not apply apt:upgrade again"; }
[ "$(installed "$snap_pkg")" = 2.0 ] || fail "$snap_pkg is at '$(installed "$snap_pkg")', not s2's 2.0"
grep -Eq '"snap": ?"s2"' "$work/reports/e2e.json" || fail "the report does not say s2"
[ "$(candidate "$snap_pkg")" = 3.0 ] || fail "the image source's lists are gone: apt offers $(candidate "$snap_pkg")"
ok "snapshot s2: apt:upgrade applied again and upgraded $snap_pkg to s2's 2.0, nothing newer; the image source's lists kept"

# ---- a kernel command line, and why a reboot is due ----
# The VM boots its kernel directly, without GRUB: a stub update-grub stands in for it. What is
# real here is what bell-run reads back from the running system: /proc/cmdline, /proc/modules,
# the /vmlinuz link and /run/reboot-required.
printf '#!/bin/sh\necho ran >>/run/bell-e2e-update-grub.runs\n' >/usr/local/sbin/update-grub
chmod +x /usr/local/sbin/update-grub
module=$(awk 'NR == 1 { print $1 }' /proc/modules)
{
    printf 'fleet "vm-e2e" target="debian-12"\nhost "e2e"\n'
    printf 'kernel-args "e2e" {\n    arg "bell.test=1"\n}\n'
    [ -z "$module" ] || printf 'modprobe "%s" blacklist=#true\n' "$module"
} >"$work/kargs.kdl"
build "$work/kargs.kdl" "$work/kargs"
"$bell_run" apply "$work/kargs/hosts/e2e" --host e2e >"$work/kargs.out" 2>&1 \
    || { cat "$work/kargs.out" >&2; fail "applying kernel-args failed"; }
[ "$(wc -l </run/bell-e2e-update-grub.runs)" = 1 ] || fail "update-grub did not run once"
grep -qx "GRUB_CMDLINE_LINUX=\"\$GRUB_CMDLINE_LINUX bell.test=1\"" /etc/default/grub.d/60-bell-e2e.cfg \
    || fail "the drop-in says: $(cat /etc/default/grub.d/60-bell-e2e.cfg)"
grep -qx "reboot required: kernel-args:e2e: not yet on the running kernel's command line: bell.test=1" "$work/kargs.out" \
    || { cat "$work/kargs.out" >&2; fail "the apply does not say the command line waits for a reboot"; }
if [ -n "$module" ]; then
    grep -qx "reboot required: modprobe:$module: $module is loaded; blacklisted, it is not loaded from the next boot" "$work/kargs.out" \
        || { cat "$work/kargs.out" >&2; fail "the apply does not say the loaded $module waits for a reboot"; }
fi
"$bell_run" check >"$work/kargs-check.out" 2>&1 || { cat "$work/kargs-check.out" >&2; fail "check after kernel-args exited non-zero"; }
grep -q '0 drifted, 0 errors' "$work/kargs-check.out" || fail "a change waiting for a reboot counted as drift"
grep -q 'reboot required: kernel-args:e2e' "$work/kargs-check.out" || fail "check does not say a reboot is required"
ok "kernel-args: drop-in written, update-grub run; apply and check say a reboot is required (command line${module:+, blacklisted $module loaded}), not drift"

vmlinuz=$(readlink /vmlinuz || :)
ln -sfn boot/vmlinuz-9.9.9-bell-e2e /vmlinuz
printf '*** System restart required ***\n' >/run/reboot-required
printf 'libc6\n' >/run/reboot-required.pkgs
"$bell_run" check >"$work/kargs-check2.out" 2>&1 || fail "check exited non-zero"
grep -qx "reboot required: kernel 9.9.9-bell-e2e is installed for the next boot; $(uname -r) is running" "$work/kargs-check2.out" \
    || { cat "$work/kargs-check2.out" >&2; fail "check does not name the kernel of the next boot"; }
grep -qx "reboot required: /run/reboot-required is present (for libc6)" "$work/kargs-check2.out" \
    || { cat "$work/kargs-check2.out" >&2; fail "check does not name /run/reboot-required"; }
rm -f /run/reboot-required /run/reboot-required.pkgs /vmlinuz
[ -z "$vmlinuz" ] || ln -s "$vmlinuz" /vmlinuz
ok "reboot reasons: a newer kernel behind /vmlinuz and the packages of /run/reboot-required are named"

echo "e2e: all passed"
