#!/bin/bash
# The Debian packages (issue 98) on a booted Debian 12 host, as an admin installs them: apt
# installs bell-run's package with its units disabled; `man bell-run-pull` shows its page; the
# host's options go into /etc/default/bell-run and `systemctl enable --now bell-run.timer`
# makes the timer pull the signed release; `apt-get remove` stops and disables the units and
# keeps /var/lib/bell (the host stays as its bundle left it); purge refuses while bell manages
# the host and, after `bell-run remove`, leaves nothing. bellc's package brings its man pages
# and bash completion. The image recipe of docs/images.md installs the package into an image
# root and enables the timer there with `systemctl --root`.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
share=$PWD
debs=$share/debs
bell_run_deb=$(echo "$debs"/bell-run_*.deb)
bellc_deb=$(echo "$debs"/bellc_*.deb)
{ [ -f "$bell_run_deb" ] && [ -f "$bellc_deb" ]; } || fail "no packages staged in $debs"
work=$(mktemp -d /root/bell-deb.XXXXXX)
mirror=/srv/bell-fleet
marker=/etc/bell-package-test

# man-db rebuilds its index after every install and removal (slow under TCG); `man PAGE` finds
# a page by its path without it.
echo "man-db man-db/auto-update boolean false" | debconf-set-selections

install_deb() {
    apt-get install -y -q "$1" >"$work/apt.out" 2>&1 \
        || { cat "$work/apt.out" >&2; fail "apt-get install $1 failed"; }
}

# --- bellc: the binary, its pages, its completion.
install_deb "$bellc_deb"
[ "$(dpkg -S /usr/bin/bellc | cut -d: -f1)" = bellc ] || fail "dpkg does not know /usr/bin/bellc"
man -P cat bellc-rollout 2>/dev/null | grep -q -- '--resume' || fail "man bellc-rollout does not show --resume"
offered=$(bash -c 'source /usr/share/bash-completion/completions/bellc
COMP_WORDS=(bellc rollout --); COMP_CWORD=2; COMP_LINE="bellc rollout --"; COMP_POINT=${#COMP_LINE}
_bellc bellc -- rollout; printf "%s\n" "${COMPREPLY[@]}"')
for flag in --resume --abort --pause; do
    grep -qx -- "$flag" <<<"$offered" || fail "bash does not complete bellc rollout $flag: $offered"
done
ok "bellc's package: /usr/bin/bellc, man bellc-rollout, bash completes rollout's flags"

# --- bell-run: installed, nothing enabled, its page.
install_deb "$bell_run_deb"
[ "$(dpkg -S /usr/sbin/bell-run | cut -d: -f1)" = bell-run ] || fail "dpkg does not know /usr/sbin/bell-run"
for unit in bell-run.timer bell-run.service bell-run-register.service bell-run-live.service; do
    [ -f "/usr/lib/systemd/system/$unit" ] || fail "$unit is not installed"
    state=$(systemctl is-enabled "$unit" 2>/dev/null || true)
    [ "$state" = disabled ] || fail "$unit is $state after the install, not disabled"
done
systemctl is-active --quiet bell-run.timer && fail "the install started bell-run.timer"
[ "$(stat -c '%a %U' /etc/bell)" = "755 root" ] || fail "/etc/bell is $(stat -c '%a %U' /etc/bell)"
man -P cat bell-run-pull >"$work/man.out" 2>&1 || { cat "$work/man.out"; fail "man bell-run-pull"; }
grep -q "fetch the release the fleet names for this host" "$work/man.out" || { cat "$work/man.out"; fail "man bell-run-pull shows another page"; }
grep -q -- "--gateway" "$work/man.out" || fail "man bell-run-pull lacks --gateway"
ok "bell-run's package: /usr/sbin/bell-run, its units installed and disabled, man bell-run-pull"

# --- The admin's part: the key, the options, the timer.
bellc keygen "$work/fleet" >/dev/null
install -m 0644 "$work/fleet.pub" /etc/bell/trusted.pub
cat >"$work/fleet.kdl" <<KDL
fleet "vm-deb" target="debian-12"
host "e2e"
file "$marker" { content "pulled by the packaged timer\n"; }
KDL
bellc build "$work/fleet.kdl" -o "$mirror" --sign-key "$work/fleet.key" >"$work/build.out" 2>&1 \
    || { cat "$work/build.out" >&2; fail "bellc build failed"; }
sed -i "s|^BELL_RUN_PULL=.*|BELL_RUN_PULL=\"--source $mirror --host e2e\"|" /etc/default/bell-run
# The timer's first tick is 2 minutes after boot, with up to a minute of random delay: a
# runtime drop-in (gone at the next boot) makes it tick now; the timer and the service it
# starts are the package's.
mkdir -p /run/systemd/system/bell-run.timer.d
printf '[Timer]\nOnActiveSec=1s\nRandomizedDelaySec=0\n' >/run/systemd/system/bell-run.timer.d/now.conf
systemctl daemon-reload
systemctl enable --now bell-run.timer
for _ in $(seq 60); do
    [ -f "$marker" ] && break
    sleep 1
done
[ -f "$marker" ] || { journalctl -u bell-run.service --no-pager -n 30; fail "the timer did not pull"; }
# The marker lands mid-run, before the run's output has reached the journal (journald reads the
# service's stream on its own time): wait for the run to end and its lines to arrive.
verified=no
for _ in $(seq 30); do
    journalctl --sync 2>/dev/null || :
    if [ "$(systemctl show -P ActiveState bell-run.service)" != activating ] \
        && journalctl -u bell-run.service --no-pager -o cat | grep -q "verified: key"; then
        verified=yes
        break
    fi
    sleep 1
done
[ "$verified" = yes ] \
    || { journalctl -u bell-run.service --no-pager -n 30; fail "the pull did not verify the release"; }
[ -L /etc/systemd/system/timers.target.wants/bell-run.timer ] || fail "enable made no link"
ok "systemctl enable --now bell-run.timer: the timer pulled and applied the signed release"

# --- Remove: units stopped, disabled and gone; the host and /var/lib/bell as they were.
for _ in $(seq 30); do
    [ "$(systemctl show -P ActiveState bell-run.service)" = activating ] || break
    sleep 1
done
apt-get remove -y -q bell-run >"$work/remove.out" 2>&1 || { cat "$work/remove.out"; fail "apt-get remove"; }
[ ! -e /usr/sbin/bell-run ] || fail "/usr/sbin/bell-run is still there"
for unit in bell-run.timer bell-run.service bell-run-register.service bell-run-live.service; do
    [ ! -e "/usr/lib/systemd/system/$unit" ] || fail "$unit is still installed"
done
[ -z "$(find /etc/systemd/system -name 'bell-run*')" ] || fail "links left: $(find /etc/systemd/system -name 'bell-run*')"
systemctl is-active --quiet bell-run.timer && fail "bell-run.timer still runs"
[ -f /var/lib/bell/state.json ] || fail "remove took /var/lib/bell"
[ -f "$marker" ] || fail "remove took the host's configuration"
[ -f /etc/default/bell-run ] || fail "remove took the conffile (that is purge's)"
ok "apt-get remove: units stopped, disabled and gone; state and the host's files kept"

# --- Purge while bell manages the host: refused, with the way out.
rc=0
apt-get purge -y -q bell-run >"$work/purge.out" 2>&1 || rc=$?
[ "$rc" != 0 ] || { cat "$work/purge.out"; fail "purge went through while bell manages the host"; }
grep -q "bell-run remove --yes" "$work/purge.out" || { cat "$work/purge.out"; fail "the refusal does not say what to do"; }
[ -f /var/lib/bell/state.json ] || fail "the refused purge took /var/lib/bell"
ok "apt-get purge refuses while bell manages the host, and says why"

# --- bell-run remove, then purge: nothing is left.
install_deb "$bell_run_deb"
bell-run remove --yes >"$work/bell-remove.out" 2>&1 || { cat "$work/bell-remove.out"; fail "bell-run remove"; }
[ ! -e "$marker" ] || fail "bell-run remove left $marker"
apt-get purge -y -q bell-run >"$work/purge.out" 2>&1 || { cat "$work/purge.out"; fail "purge after bell-run remove"; }
for path in /var/lib/bell /etc/bell /etc/default/bell-run /usr/sbin/bell-run /usr/share/man/man8/bell-run-pull.8.gz; do
    [ ! -e "$path" ] || fail "purge left $path"
done
dpkg -s bell-run >/dev/null 2>&1 && fail "dpkg still lists bell-run: $(dpkg -s bell-run | grep Status)"
ok "bell-run remove, then apt-get purge: nothing of bell is left"

# --- The image recipe of docs/images.md, into an image root: a writable copy of this host's
# root (an overlay over a bind of /, whose own mounts it does not carry).
mkdir -p "$work/lower" "$work/upper" "$work/overlay" "$work/image"
mount --bind / "$work/lower"
mount -t tmpfs tmpfs "$work/upper"
mkdir -p "$work/upper/data" "$work/upper/work"
mount -t overlay overlay -o "lowerdir=$work/lower,upperdir=$work/upper/data,workdir=$work/upper/work" "$work/image"
recipe=$(awk '/^```sh skip: the image recipe/ { on = 1; next } on && /^```/ { exit } on' "$share/docs/images.md")
[ -n "$recipe" ] || fail "no image recipe found in docs/images.md"
# What the recipe has at hand: the package and the fleet's key.
mkdir -p "$work/recipe"
cp "$bell_run_deb" "$work/fleet.pub" "$work/recipe/"
(cd "$work/recipe" && IMAGE=$work/image bash -euo pipefail -c "$recipe") >"$work/recipe.out" 2>&1 \
    || { cat "$work/recipe.out"; fail "the image recipe failed"; }
[ -x "$work/image/usr/sbin/bell-run" ] || fail "the recipe did not install bell-run into the image"
chroot "$work/image" dpkg -s bell-run | grep -q '^Status: install ok installed' || fail "the image's dpkg does not list bell-run"
for link in timers.target.wants/bell-run.timer multi-user.target.wants/bell-run.service; do
    [ -L "$work/image/etc/systemd/system/$link" ] || fail "the recipe did not enable $link in the image"
done
grep -q '^BELL_RUN_PULL="--source https://bundles.example/fleet/"' "$work/image/etc/default/bell-run" \
    || fail "the image's /etc/default/bell-run: $(grep BELL_RUN_PULL "$work/image/etc/default/bell-run")"
[ -f "$work/image/etc/bell/trusted.pub" ] || fail "the image has no trusted key"
[ ! -e /usr/sbin/bell-run ] || fail "the recipe installed bell-run on the build host"
systemctl is-active --quiet bell-run.timer && fail "the recipe started a timer on the build host"
umount "$work/image" "$work/upper" "$work/lower"
ok "the image recipe installs the package into the image root and enables its timer there"
