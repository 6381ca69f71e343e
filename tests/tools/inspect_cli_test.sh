#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the built cairn-inspect on a good durable log segment (a checked-in
# fixture: a tenant record at LSN 1, at byte 28, and a create of "user/42"
# at LSN 2), on a copy with one byte flipped inside record 1 and on a missing
# path, and checks the exit statuses 0, 1 and 2 and the reported offset.
# usage: inspect_cli_test.sh <cairn-inspect> <fixture segment>
set -u
inspect=$1
fixture=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/cairn_inspect_cli_XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir "$work/wal"
cp "$fixture" "$work/wal/00000000000000000001.log"

out=$("$inspect" verify "$work/wal"); rc=$?
[ "$rc" -eq 0 ] || fail "verify of the good log exited $rc: $out"
grep -q '^durable_log segments=1 records=2 first_lsn=1 last_lsn=2' <<<"$out" ||
  fail "no summary line: $out"

out=$("$inspect" dump --json "$work/wal/00000000000000000001.log"); rc=$?
[ "$rc" -eq 0 ] || fail "dump of the segment exited $rc: $out"
grep -q '"key":"user/42"' <<<"$out" || fail "key not dumped: $out"
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys
for line in sys.stdin:
    json.loads(line)' <<<"$out" || fail "dump --json is not one JSON object per line: $out"
fi

# Flip one byte inside record 1's body (its frame starts at byte 28); the
# valid record after it makes this damage, not a torn tail.
printf '\x5a' | dd of="$work/wal/00000000000000000001.log" bs=1 seek=60 \
  conv=notrunc status=none
out=$("$inspect" verify "$work/wal"); rc=$?
[ "$rc" -eq 1 ] || fail "verify of the damaged log exited $rc: $out"
grep -q '^damage .* offset=28 .*bad frame' <<<"$out" ||
  fail "damage not reported at offset 28: $out"

out=$("$inspect" verify "$work/missing"); rc=$?
[ "$rc" -eq 2 ] || fail "verify of a missing path exited $rc: $out"

out=$("$inspect" --help); rc=$?
[ "$rc" -eq 0 ] || fail "--help exited $rc"
echo "cairn-inspect CLI: exit statuses 0, 1, 2 as documented"
