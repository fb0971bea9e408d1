#!/bin/bash
# Divingbell fidelity on a live host (issue 17): five exec scripts in name order whose fourth
# fails, on every apply the fifth still runs; a run-once script stays run when unrelated things
# change (a mount goes, users come and go); a user removed from the spec is expired with its home
# kept, and a later release with `users purge-expired=#true` removes it with its home, leaving
# the other accounts alone.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
share=$PWD
bellc=$share/bin/bellc
bell_run=$share/bin/bell-run
work=$(mktemp -d /root/bell-exec.XXXXXX)
ran=/var/tmp/bell-exec-ran
once=/var/tmp/bell-exec-once

# apply LABEL BUNDLE WANT: a live bell-run apply that must exit WANT; output in $work/LABEL.out.
apply() {
    local rc=0
    # The VM boots as `vmtest`; the bundles are e2e's (OUT/hosts/e2e): say it is to become e2e.
    "$bell_run" apply "$2" --host e2e >"$work/$1.out" 2>&1 || rc=$?
    sed "s/^/  bell-run: /" "$work/$1.out"
    [ "$rc" = "$3" ] || fail "bell-run apply ($1) exited $rc, not $3"
}
# build NAME: bellc build of $work/NAME.kdl (it warns that the default account stays: no user
# here has sudo, and none needs it).
build() {
    "$bellc" build "$work/$1.kdl" -o "$work/$1" >"$work/build.out" 2>&1 \
        || { cat "$work/build.out" >&2; fail "bellc build $1 failed"; }
}
# spec NAME PARTS...: the chain and the run-once script, then the given parts.
spec() {
    local name=$1
    shift
    {
        printf 'fleet "vm-exec" target="debian-12"\nhost "e2e"\n'
        for i in 1 2 3 4 5; do
            exit_code=0
            [ "$i" != 4 ] || exit_code=1
            printf 'exec "00%s.sh" rerun="always" {\n    script "#!/bin/sh\\necho 00%s >>%s\\nexit %s\\n"\n}\n' \
                "$i" "$i" "$ran" "$exit_code"
        done
        printf 'exec "init-motd" rerun="once-successfully" {\n    script "#!/bin/sh\\necho once >>%s\\n"\n}\n' "$once"
        printf '%s\n' "$@"
    } >"$work/$name.kdl"
}
count() { grep -c "^$2\$" "$1" 2>/dev/null || :; }

mount_part='mount "scratch" target="/srv/exec-scratch" device="tmpfs" type="tmpfs" options="size=8M"'
# Two mounts and two accounts due together: each kind's batch apply brings them live in one run;
# the mount nested under one of them comes after it and runs its own apply.
mount_two='mount "scratch2" target="/srv/exec-scratch2" device="tmpfs" type="tmpfs" options="size=8M"'
mount_inner='mount "inner" target="/srv/exec-scratch/inner" device="tmpfs" type="tmpfs" options="size=4M"'
spec first "$mount_part" "$mount_two" "$mount_inner" 'user "gone" shell="/bin/sh"' 'user "stay" shell="/bin/sh"'
spec second 'user "stay" shell="/bin/sh"' 'user "extra" shell="/bin/sh"'
spec third 'user "stay" shell="/bin/sh"' 'user "extra" shell="/bin/sh"' 'users purge-expired=#true'
for s in first second third; do build "$s"; done

# ---- the exec chain: a failed fourth script does not stop the fifth, on any apply ----
apply first "$work/first/hosts/e2e" 3
apply first-again "$work/first/hosts/e2e" 3
for i in 1 2 3 4 5; do
    [ "$(count "$ran" "00$i")" = 2 ] || fail "00$i.sh ran $(count "$ran" "00$i") times in two applies, not 2"
done
! grep -q skipped "$work/first.out" "$work/first-again.out" || fail "a script was skipped behind the failed 004.sh"
grep -Eq '^  ! exec:004\.sh +failed' "$work/first-again.out" || fail "004.sh is not reported failed"
grep -Eq '^  . exec:005\.sh +ok' "$work/first-again.out" || fail "005.sh is not reported ok"
[ "$(tr '\n' ' ' <"$ran")" = "001 002 003 004 005 001 002 003 004 005 " ] || fail "the scripts ran in another order: $(tr '\n' ' ' <"$ran")"
ok "exec: 004.sh fails, 005.sh still runs, in name order, on both applies (exit 3)"
[ "$(count "$once" once)" = 1 ] || fail "init-motd ran $(count "$once" once) times, not once"
for where in /srv/exec-scratch /srv/exec-scratch2 /srv/exec-scratch/inner; do
    findmnt --mountpoint "$where" >/dev/null || fail "$where is not mounted"
done
tab=$(printf '\t')
batch_log=/var/lib/bell/log/batch
for line in "mount:scratch${tab}ok" "mount:scratch2${tab}ok" "user:gone${tab}ok" "user:stay${tab}ok"; do
    grep -q "^$line" "$batch_log/${line%%:*}/apply.log" || fail "the batch apply did not say $line: $(cat "$batch_log/${line%%:*}/apply.log")"
done
! grep -q "^mount:inner" "$batch_log/mount/apply.log" || fail "the nested mount ran in the batch"
[ -f /var/lib/bell/log/mount/inner/apply.log ] || fail "the nested mount did not run its own apply"
ok "batch applies: two mounts and two accounts each brought live by one run; the nested mount by its own, after"
home_gone=$(getent passwd gone | cut -d: -f6)
[ -d "$home_gone" ] || fail "gone has no home"

# ---- unrelated changes: a mount leaves, users come and go; the run-once script stays run ----
apply second "$work/second/hosts/e2e" 3
[ "$(count "$once" once)" = 1 ] || fail "init-motd ran again after unrelated changes: $(grep init-motd "$work/second.out")"
for where in /srv/exec-scratch/inner /srv/exec-scratch /srv/exec-scratch2; do
    ! findmnt --mountpoint "$where" >/dev/null || fail "$where is still mounted"
done
ok "exec: init-motd (once-successfully) stays run after a mount left and users changed"
[ "$(getent shadow gone | cut -d: -f8)" = 1 ] || fail "gone is not expired"
[ -d "$home_gone" ] || fail "the home of gone was removed without purge-expired"
ok "users: gone (removed from the spec) expired, home $home_gone kept"

# ---- a later release purges it ----
apply third "$work/third/hosts/e2e" 3
! getent passwd gone >/dev/null || fail "gone is still there after purge-expired=#true"
[ ! -e "$home_gone" ] || fail "the home of gone is still there"
getent passwd stay >/dev/null || fail "stay was removed"
getent passwd extra >/dev/null || fail "extra was removed"
getent passwd root >/dev/null || fail "root was removed"
grep -Eq 'users:purge-expired +ok' "$work/third.out" || fail "users:purge-expired did not apply"
[ "$(count "$once" once)" = 1 ] || fail "init-motd ran again"

# Right after the apply the check finds everything in sync (exit 0), and it did look at the purge.
rc=0
"$bell_run" check --json >"$work/check.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "bell-run check exited $rc after the purge: $(cat "$work/check.out")"
grep -q '"key": "users:purge-expired"' "$work/check.out" || fail "the check did not look at users:purge-expired: $(cat "$work/check.out")"
ok "users: a later purge-expired=#true removed gone and its home; stay, extra and root kept"

echo "exec-and-purge: all passed"
