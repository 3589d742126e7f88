#!/usr/bin/env bash
# gpusort-mpi as a user runs it (issue 41): shards written by `gpusort gen`, sorted on 3 ranks
# into new files and in place, one rank's shard empty; the parts concatenated in rank order are
# checked by `gpusort verify --original` against the concatenated input (the CLI's own checker,
# not the code under test), the balanced shares and the global argsort against NumPy; a missing
# shard fails every rank with exit 74 and writes nothing; a rank killed or hanging mid-job ends
# the job on every rank within the timeout, no file changed; and a rank's peak memory stays
# near its shard (the exchange and the merge work in blocks, not in a second copy).
# Arguments: MPIEXEC GPUSORT_MPI GPUSORT
set -euo pipefail
mpiexec=$1 program=$2 cli=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
run() { "$mpiexec" --oversubscribe -np 3 "$program" "$@"; }
counts=(100003 0 54321)
for r in 0 1 2; do
  "$cli" gen --dtype i64 --dist staggered --count "${counts[$r]}" --seed "$r" --out "in.$r.bin" \
    --values-out "v.$r.bin" --value-bytes 8 --quiet
done
cat in.0.bin in.1.bin in.2.bin > all-in.bin

# Into new files, pairs, many exchange rounds.
run sort 'in.%r.bin' --dtype i64 --values 'v.%r.bin' --out 'out.%r.bin' --values-out 'vo.%r.bin' \
  --round-bytes 64Ki --json > summary.json
grep -q '"elements":154324' summary.json || { echo "summary: $(cat summary.json)"; exit 1; }
for r in 0 1 2; do
  [ "$(stat -c %s "out.$r.bin")" = "$(stat -c %s "in.$r.bin")" ] ||
    { echo "rank $r's part has another size"; exit 1; }
done
cat out.0.bin out.1.bin out.2.bin > all-out.bin
"$cli" verify all-out.bin --dtype i64 --original all-in.bin

# In place, descending.
run sort 'in.%r.bin' --dtype i64 --descending
cat in.0.bin in.1.bin in.2.bin > all-place.bin
"$cli" verify all-place.bin --dtype i64 --descending --original all-in.bin

# A missing shard: exit 74 on the job, no output made.
set +e
run sort 'missing.%r.bin' --dtype i64 --out 'never.%r.bin' 2> err.txt
code=$?
set -e
[ "$code" = 74 ] || { echo "a missing shard exited $code"; cat err.txt; exit 1; }
grep -q "cannot open missing.0.bin" err.txt || { cat err.txt; exit 1; }
if ls never.* 2> /dev/null; then echo "an output was written"; exit 1; fi
# Balanced shares, into new files: 154324 elements are 51442, 51441 and 51441.
cat in.0.bin in.1.bin in.2.bin > all-in.bin  # (sorted in place above)
run sort 'in.%r.bin' --dtype i64 --out 'bal.%r.bin' --balanced --round-bytes 64Ki
shares=(51442 51441 51441)
for r in 0 1 2; do
  [ "$(stat -c %s "bal.$r.bin")" = $((shares[$r] * 8)) ] ||
    { echo "rank $r's balanced part is $(stat -c %s "bal.$r.bin") bytes"; exit 1; }
done
cat bal.0.bin bal.1.bin bal.2.bin > all-bal.bin
"$cli" verify all-bal.bin --dtype i64 --original all-in.bin

# The global argsort, balanced: the concatenated indices are NumPy's stable argsort of the input.
run sort 'in.%r.bin' --dtype i64 --argsort --balanced --out 'idx.%r.bin'
cat idx.0.bin idx.1.bin idx.2.bin > all-idx.bin
cmp all-in.bin <(cat in.0.bin in.1.bin in.2.bin) || { echo "the argsort wrote its keys"; exit 1; }
/usr/bin/python3 - <<'PY'
import numpy as np
keys = np.fromfile("all-in.bin", dtype="<i8")
got = np.fromfile("all-idx.bin", dtype="<i8")
want = np.argsort(keys, kind="stable")
assert got.shape == want.shape and (got == want).all(), "the argsort differs from NumPy's"
PY

# A rank killed, or hanging, once the shards are read: the job ends on every rank (the hung one
# after --timeout), with an error, no output and every input as it was.
cp in.0.bin in0.copy
for fault in kill:1 hang:2; do
  set +e
  GPUSORT_MPI_FAULT=$fault timeout 120 "$mpiexec" --oversubscribe -np 3 -x GPUSORT_MPI_FAULT \
    "$program" sort 'in.%r.bin' --dtype i64 --timeout 3 2> err.txt
  code=$?
  set -e
  [ "$code" != 0 ] && [ "$code" != 124 ] ||
    { echo "$fault: the job exited $code"; cat err.txt; exit 1; }
  if [ "$fault" = hang:2 ]; then
    grep -q "waited 3 s" err.txt || { echo "$fault: no timeout said"; cat err.txt; exit 1; }
  fi
  cmp in.0.bin in0.copy || { echo "$fault: rank 0's shard changed"; exit 1; }
  if ls in.*.tmp 2> /dev/null; then echo "$fault: a temporary was left"; exit 1; fi
done

# Memory: 4 ranks of 48 MiB shards each; a rank's peak beyond an empty job's stays below 1.5
# shards (the exchange once received into a second copy: 2 shards and more). The local sort
# runs lean within a small host budget.
printf 'devices: cpu\nhost_memory_budget: 8MiB\n' > lean.yaml
for r in 0 1 2 3; do
  "$cli" gen --dtype u64 --dist uniform --count 6291456 --seed $((r + 10)) --out "big.$r.bin" --quiet
  : > "none.$r.bin"
done
peak() { "$mpiexec" --oversubscribe -np 4 "$program" sort "$1" --dtype u64 --config lean.yaml \
           --round-bytes 4Mi --json | sed 's/.*"max_rss":\([0-9]*\).*/\1/'; }
empty=$(peak 'none.%r.bin')
full=$(peak 'big.%r.bin')
shard=$((6291456 * 8))
echo "peak RSS: empty job $empty, 48 MiB shards $full"
[ $((full - empty)) -lt $((shard * 3 / 2)) ] ||
  { echo "a rank took $((full - empty)) bytes beyond an empty job for a $shard-byte shard"; exit 1; }
cat big.0.bin big.1.bin big.2.bin big.3.bin | "$cli" verify - --dtype u64

echo "gpusort-mpi: ok"
