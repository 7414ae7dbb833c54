#!/usr/bin/env bash
# scripts/check-links.py: a link to a missing file or to a section a page does not have
# is reported with its file and line (exit 1), links inside code are not; and every
# link of the repository's Markdown files and docs/ pages resolves.
source "$(dirname "$0")/../lib.sh"
check="$(dirname "$0")/../../scripts/check-links.py"

mkdir -p "$WORK/repo/docs/sub"
cat >"$WORK/repo/README.md" <<'PAGE'
# Top

See [the page](docs/sub/page.md#a-section-with-code), [again](docs/sub/page.md#more-1),
[the folder](docs/sub/) and [the web](https://example.org/missing).
`[in code](nowhere.md)`

```
[in a block](nowhere.md)
```

[gone](docs/missing.md) and [no such part](docs/sub/page.md#nothing)
PAGE
cat >"$WORK/repo/docs/sub/page.md" <<'PAGE'
# A section with `code`

## More

## More

[up](../../README.md#top)
PAGE
cat >"$WORK/repo/docs/sub/index.html" <<'PAGE'
<img src="plot.svg"> <a href="page.md">page</a>
PAGE

set +e
out=$(python3 "$check" "$WORK/repo" 2>&1)
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "broken links gave exit $rc, not 1: $out"
expect="README.md:11: link 'docs/missing.md' does not resolve: no such file
README.md:11: link 'docs/sub/page.md#nothing' does not resolve: no section '#nothing' in docs/sub/page.md
docs/sub/index.html:1: link 'plot.svg' does not resolve: no such file"
[ "$out" = "$expect" ] || fail "expected:
$expect
got:
$out"

touch "$WORK/repo/docs/sub/plot.svg" "$WORK/repo/docs/missing.md"
sed -i 's/#nothing/#more/' "$WORK/repo/README.md"
python3 "$check" "$WORK/repo" || fail "resolving links were reported"

python3 "$check" || fail "the repository has links that do not resolve (above)"
echo OK
