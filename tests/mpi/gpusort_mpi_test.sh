#!/usr/bin/env bash
# gpusort-mpi as a user runs it (issue 41): shards written by `gpusort gen`, sorted on 3 ranks
# into new files and in place, one rank's shard empty; the parts concatenated in rank order are
# checked by `gpusort verify --original` against the concatenated input (the CLI's own checker,
# not the code under test); a missing shard fails every rank with exit 74 and writes nothing.
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
echo "gpusort-mpi: ok"
