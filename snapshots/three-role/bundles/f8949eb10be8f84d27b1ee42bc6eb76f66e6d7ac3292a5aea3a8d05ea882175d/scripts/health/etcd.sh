# health probe `etcd`: run by bell-run after every apply and check, from the bundle's
# directory, with BELL_ROOT, BELL_OFFLINE and BELL_RESOURCE set like every script.
# Exit 0 is healthy; anything else, or no answer within 5s, is a failed attempt
# (5 attempts, 2s apart).
[ "$BELL_OFFLINE" = 1 ] || curl -fsS http://127.0.0.1:2379/health
