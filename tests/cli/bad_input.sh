#!/usr/bin/env bash
# Every kind of bad input ends with one clear line and the documented exit code
# (2: usage or configuration, 1: runtime), and leaves nothing half-written.
source "$(dirname "$0")/lib.sh"

# Options
expect 2 "unknown option '--bogus'" -- "$BP" train --bogus
expect 2 "unknown command 'trian'" -- "$BP" trian
expect 2 "option --steps: 'ten' is not an integer" -- "$BP" train --steps ten
expect 2 "option --lr: -1 is out of range" -- "$BP" train --lr -1
expect 2 "option --eps: 0 is out of range" -- "$BP" train --eps 0
expect 2 "option --steps: 9223372036854775808 is out of range" -- "$BP" train --steps 9223372036854775808
# The largest --steps and --log-every start (memory does not grow with them): the
# run is stopped by SIGTERM after its first step.
rc=0
timeout --preserve-status -s TERM 3 "$BP" train "${TINY[@]}" --data "$TEXT" --eval-every 0 \
  --steps 1000000000000 --log-every 1000000000000 --out "$WORK/long" >/dev/null 2>"$WORK/stderr" || rc=$?
[ "$rc" -eq 3 ] || fail "--steps 1e12: exit $rc, expected 3 (stopped): $(cat "$WORK/stderr")"
# Values that would hold a step's data for hours without a word are refused, the
# bound stated; --batch's divisibility speaks of AvgPipe only when it runs.
expect 2 "option --grad-accum: 1048576 is out of range \[1, 4096\]" -- "$BP" train --grad-accum 1048576
expect 2 "option --eval-batches: 10001 is out of range \[1, 10000\]" -- "$BP" train --eval-batches 10001
expect 2 "option --trial-steps: 10001 is out of range \[0, 10000\]" -- "$BP" tune --trial-steps 10001
expect 2 "option --batch: 6 is not divisible by --dp 1 x --micro-batches 4$" -- "$BP" train --batch 6 --micro-batches 4
expect 2 "option --batch: 6 is not divisible by --dp 1 x --pipelines 2 x --micro-batches 2 \(with --avgpipe-batch split\)" -- \
  "$BP" train --batch 6 --micro-batches 2 --pipelines 2 --avgpipe-batch split
help=$("$BP" train --help)
grep -q -- "--grad-accum K.*at most 4096" <<<"$help" || fail "--help does not state --grad-accum's bound"
expect 2 "option --model: 'cnn' is not one of gpt\|mlp" -- "$BP" train --model cnn
expect 2 "option --heads: 3 does not divide --embd 128" -- "$BP" train --heads 3
expect 2 "option --warmup" -- "$BP" train --lr-schedule cosine --warmup 5 --steps 5

# Text data: missing, empty, too short; any bytes are fine.
expect 2 "option --data: $WORK/none does not exist" -- "$BP" train --data "$WORK/none"
: >"$WORK/empty"
expect 1 "option --data: data $WORK/empty: file is empty" -- "$BP" train --data "$WORK/empty" --out "$WORK/o"
printf 'abcdefghij' >"$WORK/short"
expect 1 "too short for --seq-len 16" -- "$BP" train "${TINY[@]}" --data "$WORK/short" --out "$WORK/o"
head -c 20000 /dev/urandom >"$WORK/binary"
"$BP" train "${TINY[@]}" --data "$WORK/binary" --steps 3 --out "$WORK/bin" >/dev/null \
  || fail "binary data must train (bytes are bytes)"

# Fashion-MNIST directory with damaged IDX files.
mk_idx_dir() { # dir: a copy of the dataset directory to damage
  mkdir -p "$1"
  cp /usr/share/datasets/fashion-mnist/*.gz "$1/"
}
mk_idx_dir "$WORK/trunc"
gzip -dc "$WORK/trunc/t10k-images-idx3-ubyte.gz" >"$WORK/images"
head -c 100000 "$WORK/images" | gzip >"$WORK/trunc/t10k-images-idx3-ubyte.gz"
expect 1 "t10k-images-idx3-ubyte.gz: truncated" -- "$BP" train --model mlp --data "$WORK/trunc" --steps 1 --out "$WORK/o"
mk_idx_dir "$WORK/magic"
{ printf '\0\0\x08\x04'; gzip -dc "$WORK/magic/train-labels-idx1-ubyte.gz" | tail -c +5; } | gzip >"$WORK/magic/x.gz"
mv "$WORK/magic/x.gz" "$WORK/magic/train-labels-idx1-ubyte.gz"
expect 1 "train-labels-idx1-ubyte.gz: wrong IDX magic 0x00000804" -- "$BP" train --model mlp --data "$WORK/magic" --steps 1 --out "$WORK/o"

# Checkpoints: a flipped byte, another configuration, a missing one.
"$BP" train "${TINY[@]}" --data "$TEXT" --steps 4 --out "$WORK/ck" >/dev/null
ckpt="$WORK/ck/ckpt-00000004"
cp -r "$WORK/ck" "$WORK/ck_orig"
# Another run into the same --out, neither resuming nor --overwrite: refused, the
# log and `latest` untouched; with --overwrite it starts over.
expect 2 "option --out: $WORK/ck already holds a run.*--resume $WORK/ck.*--overwrite" -- \
  "$BP" train "${TINY[@]}" --data "$TEXT" --steps 2 --out "$WORK/ck"
cmp "$WORK/ck/metrics.jsonl" "$WORK/ck_orig/metrics.jsonl" || fail "a refused run changed the metrics log"
"$BP" train "${TINY[@]}" --data "$TEXT" --steps 2 --out "$WORK/ck" --overwrite >/dev/null
[ "$(cat "$WORK/ck/latest")" = ckpt-00000002 ] || fail "--overwrite did not start over"
rm -rf "$WORK/ck" && cp -r "$WORK/ck_orig" "$WORK/ck"
# Two runs at once on one --out: the second is refused while the first holds it.
"$BP" train "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 100000000 --out "$WORK/busy" >/dev/null 2>&1 &
first=$!
for _ in $(seq 100); do [ -s "$WORK/busy/metrics.jsonl" ] && break; sleep 0.1; done
expect 2 "option --out: $WORK/busy is in use by another run" -- \
  "$BP" train "${TINY[@]}" --data "$TEXT" --steps 2 --out "$WORK/busy" --overwrite
kill -TERM "$first"
wait "$first" || true
printf '\x5a' | dd of="$ckpt/stage0-tp0.safetensors" bs=1 seek=5000 conv=notrunc status=none
expect 1 "stage0-tp0.safetensors is damaged" -- "$BP" train "${TINY[@]}" --data "$TEXT" --steps 8 --resume "$WORK/ck" --out "$WORK/ck"
cmp -s "$ckpt/stage0-tp0.state" "$WORK/ck_orig/ckpt-00000004/stage0-tp0.state" || fail "stage0-tp0.state changed"
[ ! -e "$WORK/ck/ckpt-00000008" ] || fail "a failed resume wrote a checkpoint"
rm -rf "$WORK/ck" && cp -r "$WORK/ck_orig" "$WORK/ck"
printf '\x01' | dd of="$ckpt/stage0-tp0.state" bs=1 seek=40 conv=notrunc status=none
expect 1 "stage0-tp0.state is damaged" -- "$BP" train "${TINY[@]}" --data "$TEXT" --steps 8 --resume "$WORK/ck"
rm -rf "$WORK/ck" && cp -r "$WORK/ck_orig" "$WORK/ck"
expect 2 "written with --embd 16 but this run has --embd 32" -- "$BP" train "${TINY[@]}" --embd 32 --data "$TEXT" --steps 8 --resume "$WORK/ck"
expect 2 "holds a gpt model but --model is mlp" -- "$BP" train --model mlp --resume "$WORK/ck"
# A bad partition read from a manifest (checksum fixed) is the manifest's, not an option's.
python3 - "$ckpt/manifest.json" <<'PY'
import re, sys, zlib
path = sys.argv[1]
text = open(path).read().replace('"partition":"3"', '"partition":"9"')
zeroed = re.sub(r'"crc32":"[0-9a-f]{8}"', '"crc32":"00000000"', text)
open(path, "w").write(zeroed.replace('"crc32":"00000000"', '"crc32":"%08x"' % zlib.crc32(zeroed.encode())))
PY
expect 2 "checkpoint .*/ck: its manifest's partition: '9' is not 1 positive block count" -- \
  "$BP" train "${TINY[@]}" --data "$TEXT" --steps 8 --resume "$WORK/ck" --out "$WORK/ck"
rm -rf "$WORK/ck" && cp -r "$WORK/ck_orig" "$WORK/ck"
expect 1 "cannot open $WORK/nothing/manifest.json" -- "$BP" sample --ckpt "$WORK/nothing"
# A metrics log that cannot be written (a full disk) fails the run naming it.
expect 1 "cannot write the metrics log /dev/full: No space left on device" -- \
  "$BP" train "${TINY[@]}" --data "$TEXT" --steps 2 --out "$WORK/full" --metrics /dev/full
# A checkpoint that cannot be written (a file size limit stands for a full disk)
# leaves no incomplete checkpoint directory behind. The limit caps every file the
# process writes, MPI's own included: MPICH's UCX keeps its shared memory in files
# under /dev/shm ("posix", several MB), and MPI_Init fails under the limit ("No
# resources are available"), so it is told to leave that transport out (SysV
# segments, which the limit does not cover, and TCP remain). Open MPI reads no UCX setting on one process.
UCX_TLS='^posix' expect 1 "saving checkpoint $WORK/fsize/ckpt-00000002: cannot write .*File too large" -- \
  bash -c "trap '' XFSZ; ulimit -f 4096; exec \"\$0\" \"\$@\"" "$BP" train "${TINY[@]}" --layers 4 \
  --embd 128 --data "$TEXT" --eval-every 0 --steps 2 --out "$WORK/fsize" --metrics "$WORK/fsize.jsonl"
[ ! -e "$WORK/fsize/ckpt-00000002" ] || fail "a failed save left $(ls "$WORK/fsize/ckpt-00000002")"
# What is not a regular file is refused at once: a FIFO would block forever, a
# device like /dev/zero would be read without end.
mkfifo "$WORK/fifo"
expect 1 "$WORK/fifo is not a regular file" -- timeout 20 "$BP" train "${TINY[@]}" --data "$WORK/fifo" --steps 1 --out "$WORK/o"
expect 1 "/dev/zero is not a regular file" -- timeout 20 "$BP" train "${TINY[@]}" --data /dev/zero --steps 1 --out "$WORK/o"
mkdir -p "$WORK/fifo_out" && mkfifo "$WORK/fifo_out/latest"
expect 1 "latest is not a regular file" -- timeout 20 "$BP" train "${TINY[@]}" --data "$TEXT" --steps 8 --resume "$WORK/fifo_out" --out "$WORK/o"
mkdir -p "$WORK/fifo_mnist" && mkfifo "$WORK/fifo_mnist/train-images-idx3-ubyte.gz"
expect 1 "train-images-idx3-ubyte.gz is not a regular file" -- timeout 20 "$BP" train --model mlp --data "$WORK/fifo_mnist" --steps 1 --out "$WORK/o"
no_partial_files "$WORK"
echo "ok"
