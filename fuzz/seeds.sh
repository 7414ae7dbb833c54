#!/usr/bin/env bash
# Regenerate the seed corpus and dictionaries of the fuzz harnesses
# (fuzz/corpus/<harness>/seed-*, fuzz/dict/*.dict) from a built bagpipe:
#   fuzz/seeds.sh [path/to/bagpipe]        (default: build/bagpipe)
# Run it again when a file format or the option table changes; inputs of fixed
# crashes (fuzz/corpus/<harness>/crash-*) are kept as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
BP=${1:-build/bagpipe}
[ -x "$BP" ] || { echo "seeds.sh: no bagpipe at $BP (build it first)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
C=fuzz/corpus
mkdir -p $C/idx $C/safetensors $C/checkpoint $C/replica $C/options $C/json $C/report fuzz/dict
rm -f $C/*/seed-*
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SEP=$'\xff\xfe''BP-PART'$'\xfe\xff' # BP_FUZZ_SEP of fuzz/fuzz.h

# Byte 0 of an input is a flags byte; parts are joined with SEP.
seed() { # seed FILE FLAGS_OCTAL PART...
  local out=$1 flags=$2
  shift 2
  {
    [ -z "$flags" ] || printf "\\$flags"
    local first=1
    for part in "$@"; do
      [ $first -eq 1 ] || printf '%s' "$SEP"
      first=0
      cat "$part"
    done
  } >"$out"
}

# ---- checkpoints: the smallest gpt (adamw) and mlp (sgd), after one step: ckpt-00000001,
# the name the harness gives the directory
head -c 3000 /usr/share/dict/words 2>/dev/null >"$tmp/text.txt" ||
  true
[ -s "$tmp/text.txt" ] || printf 'In the beginning God created the heaven and the earth. %.0s' {1..60} >"$tmp/text.txt"
"$BP" train --data "$tmp/text.txt" --layers 1 --embd 4 --heads 1 --seq-len 4 --batch 1 --steps 1 \
  --eval-every 0 --progress none --out "$tmp/gpt" >/dev/null
"$BP" train --model mlp --hidden 1 --hidden-layers 1 --batch 1 --steps 1 --eval-every 0 \
  --progress none --out "$tmp/mlp" >/dev/null
# Shards of the second pipeline stage and of the second tensor-parallel rank.
mpi="scripts/mpirun.sh -np 2"
$mpi "$BP" train --data "$tmp/text.txt" --layers 2 --embd 4 --heads 1 --seq-len 4 --batch 2 \
  --steps 1 --eval-every 0 --progress none --pp 2 --partition 2,2 --out "$tmp/pp" >/dev/null
$mpi "$BP" train --data "$tmp/text.txt" --layers 1 --embd 4 --heads 2 --seq-len 4 --batch 1 \
  --steps 1 --eval-every 0 --progress none --tp 2 --out "$tmp/tp" >/dev/null
for s in pp:007:stage1-tp0 tp:013:stage0-tp1; do
  IFS=: read -r m flags shard <<<"$s"
  d="$tmp/$m/$(cat "$tmp/$m/latest")"
  seed $C/checkpoint/seed-$m $flags "$tmp/$m/latest" "$d/manifest.json" "$d/$shard.state" \
    "$d/$shard.safetensors"
done
for m in gpt mlp; do
  d="$tmp/$m/$(cat "$tmp/$m/latest")"
  # flags 3: fix checksums (a no-op here), open through `latest`; 0: neither.
  seed $C/checkpoint/seed-$m-latest 003 "$tmp/$m/latest" "$d/manifest.json" \
    "$d/stage0-tp0.state" "$d/stage0-tp0.safetensors"
  seed $C/checkpoint/seed-$m-dir 000 "$tmp/$m/latest" "$d/manifest.json" \
    "$d/stage0-tp0.state" "$d/stage0-tp0.safetensors"
  cp "$d/stage0-tp0.safetensors" $C/safetensors/seed-$m
  cp "$d/manifest.json" $C/json/seed-manifest-$m
  head -c "$((8 + $(od -An -tu8 -N8 "$d/stage0-tp0.safetensors")))" "$d/stage0-tp0.safetensors" |
    tail -c +9 >$C/json/seed-safetensors-header-$m
done
# The mlp's checkpoint with one field of its state crafted (the fifth part of
# fuzz_checkpoint's input; checksums fixed): field number, then the value.
le64() { for i in 0 1 2 3 4 5 6 7; do printf "\\$(printf %03o $((($1 >> (8 * i)) & 255)))"; done; }
for f in step:0:-5 pos:2:-100000 pos:2:-64 pos:2:2147483648 pos:2:100 pos:2:64 epoch:1:-1 \
  optim-step:3:9223372036854775807 optim-step:3:1; do
  IFS=: read -r name field value <<<"$f"
  { cat $C/checkpoint/seed-mlp-latest; printf '%s' "$SEP"; printf "\\$(printf %03o "$field")"; le64 "$value"; } \
    >"$C/checkpoint/seed-mlp-field-$name-${value/#-/minus}"
done
# ---- replica files (fuzz_replica's list: replica0.weights of 4 floats, then
# elastic_center of 2, at step 1); flags 001 recompute the CRC, so the last 4 bytes
# are a placeholder. The valid one, one of another step, one with the buffers
# swapped, one with its CRC left wrong.
le32() { for i in 0 1 2 3; do printf "\\$(printf %03o $((($1 >> (8 * i)) & 255)))"; done; }
rbuf() { le32 ${#1}; printf '%s' "$1"; le64 "$2"; head -c $((4 * $2)) /dev/zero | tr '\0' '\077'; }
replica() { # flags step first-name first-n second-name second-n
  printf "\\$1"; printf 'BPREPLC1'; le32 1; le64 "$2"; le32 2; rbuf "$3" "$4"; rbuf "$5" "$6"; le32 0
}
replica 001 1 replica0.weights 4 elastic_center 2 >$C/replica/seed-valid
replica 001 2 replica0.weights 4 elastic_center 2 >$C/replica/seed-other-step
replica 001 1 elastic_center 2 replica0.weights 4 >$C/replica/seed-swapped
replica 000 1 replica0.weights 4 elastic_center 2 >$C/replica/seed-crc-wrong
# A hand-written safetensors file: two tensors, one of them empty, and metadata.
h='{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}'
{
  printf "$(printf '\\%03o' $((${#h} & 255)) $((${#h} >> 8)) 0 0 0 0 0 0)"
  printf '%s' "$h"
  printf '\0\0\200\77\0\0\0\100'
} >$C/safetensors/seed-handmade

# ---- report: the metrics log and trace of 4 steps on 2 pipeline stages, then
# records with a number out of an integer's range (the readers refuse them)
$mpi "$BP" train --data "$tmp/text.txt" --layers 2 --embd 4 --heads 1 --seq-len 4 --batch 2 \
  --steps 4 --eval-every 2 --eval-batches 1 --log-every 1 --progress none --pp 2 \
  --micro-batches 2 --out "$tmp/rep" --trace "$tmp/rep/trace.json" >/dev/null
seed $C/report/seed-pp2 "" "$tmp/rep/metrics.jsonl" "$tmp/rep/trace.json"
head -n 3 "$tmp/rep/metrics.jsonl" >"$tmp/head.jsonl"
grep -m 1 '"ph":"X"' "$tmp/rep/trace.json" | sed 's/,$//' >"$tmp/event.json"
for f in step:1e300 step:-5 step:2.5 step:9007199254740993 step:null; do
  IFS=: read -r key value <<<"$f"
  { cat "$tmp/head.jsonl"; printf '{"type":"step","%s":%s,"loss":1}\n' "$key" "$value"; } \
    >"$tmp/bad.jsonl"
  seed "$C/report/seed-log-$key-${value/#-/minus}" "" "$tmp/bad.jsonl"
done
printf '{"type":"eval","step":1e19,"val_loss":1}\n' | cat "$tmp/head.jsonl" - >"$tmp/bad.jsonl"
seed $C/report/seed-log-eval-1e19 "" "$tmp/bad.jsonl"
for f in '"pid":[0-9]*|"pid":1e300' '"step":[0-9]*|"step":-1e300' \
  '"args":{|"args":{"micro":2147483648,' '"args":{|"args":{"pipeline":1e300,'; do
  IFS='|' read -r from to <<<"$f"
  { echo '{"traceEvents":['; sed "s/$from/$to/" "$tmp/event.json"; } >"$tmp/bad.json"
  name=$(sed -E 's/[^a-z0-9e]+/-/g; s/^-|-$//g' <<<"$to")
  seed "$C/report/seed-trace-$name" "" "$tmp/head.jsonl" "$tmp/bad.json"
done

# ---- IDX: 2 images of 2x3 pixels, labels 0 and 9 (flags: 10 classes) ---------
printf '\0\0\10\3\0\0\0\2\0\0\0\2\0\0\0\3\0\1\177\200\376\377\377\376\200\177\1\0' >"$tmp/images"
printf '\0\0\10\1\0\0\0\2\0\11' >"$tmp/labels"
seed $C/idx/seed-raw 044 "$tmp/images" "$tmp/labels"   # 10 classes, plain files
seed $C/idx/seed-gzip 047 "$tmp/images" "$tmp/labels"  # 10 classes, both gzip'ed

# ---- options: argv as NUL-separated strings; flags: world size - 1, 0x80 sample
opts() { # opts NAME FLAGS_OCTAL ARG...
  local out=$C/options/seed-$1 flags=$2
  shift 2
  { printf "\\$flags"; [ $# -eq 0 ] || printf '%s\0' "$@"; } >"$out"
}
opts default 000
opts gpt 000 --layers 2 --embd=64 --heads 4 --seq-len 32 --batch 8 --steps 50 --lr 3e-4 \
  --lr-schedule cosine --warmup 5 --min-lr-ratio 0.1 --clip 1.0 --seed 7 --out runs/x
opts mlp 000 --model mlp --hidden 128 --hidden-layers 3 --optim adamw --batch 32 --eval-every 0
opts dp 001 --dp 2 --dp-algo decentralized --peers all --interval 2 --bucket-mb 0.5 --no-overlap \
  --net bw=1Gbit,lat=1ms --comm-timeout 30 --comm-path mpi
opts powersgd 003 --dp-algo powersgd --rank 2 --powersgd-warmup 10 --grad-accum 2 --batch 16 \
  --hierarchical --node-size 2
opts easgd 001 --dp-algo=easgd --ea-alpha 0.3 --ea-period 3 --qadam-warmup 5 --skip-nonfinite \
  --resume runs/gpt --keep-checkpoints 3 --checkpoint-every 10 --progress lines
opts help 000 --seed 1 --help
opts bad 000 --embd 130 --heads 4
opts sample 200 --ckpt runs/gpt --prompt 'In the beginning' --length 20 --temperature 0.8 \
  --top-k 40 --seed 3

# ---- JSON --------------------------------------------------------------------
printf '%s' '{"a":[1,-2.5e3,0.125,true,false,null],"s":"tab\there \"q\" \\ \/ \u00e9","o":{},"e":[]}' \
  >$C/json/seed-values
printf '%s' '[[[[{"k":[{"k":"v"}]}]]]]' >$C/json/seed-nested

# ---- dictionaries ------------------------------------------------------------
{
  for cmd in train sample; do
    "$BP" $cmd --help | grep -oE '^  --[a-z0-9-]+' | sed 's/^  //'
    "$BP" $cmd --help | awk '$2 ~ /[|]/ {print $2}' | tr '|' '\n'
  done
  # --help cuts long choice lists short
  printf '%s\n' allreduce bytegrad qadam decentralized lp-decentralized async powersgd easgd
  printf '%s\n' = bw= lat= Gbit Mbit ms us kjv 1e308 -1 0
} | grep -v '^$' | sort -u | sed 's/.*/"&"/' >fuzz/dict/options.dict
cat >fuzz/dict/json.dict <<'DICT'
"{"
"}"
"["
"]"
":"
","
"\""
"\\u"
"true"
"false"
"null"
"-"
"1e9"
"0.5"
"\"dtype\""
"\"F32\""
"\"shape\""
"\"data_offsets\""
"\"__metadata__\""
"\"crc32\""
"\"format\""
"\"bagpipe-checkpoint\""
"\"shards\""
DICT
cp fuzz/dict/json.dict fuzz/dict/safetensors.dict
{
  cat fuzz/dict/json.dict
  printf '"%s"\n' BPSTATE1 ckpt-00000001 '"step"' '"dp"' '"pp"' '"tp"' '"replicas"' '"identical"' \
    '"averaged"' '"bagpipe.model"' '"gpt"' '"mlp"' '"bagpipe.n_embd"'
} >fuzz/dict/checkpoint.dict
ls -l $C/*/ fuzz/dict/
