#!/usr/bin/env python3
"""Every relative link of the repository's Markdown files (and of the HTML pages under
docs/) resolves: the file or folder exists, and a #section names a heading of the
Markdown page it points into (GitHub's anchors: lower case, punctuation dropped, spaces
as hyphens, -1, -2, ... for repeats). Links to http(s) and mailto are not followed;
code blocks and inline code are skipped.
Prints each link that does not resolve as FILE:LINE: ... and exits 1; exits 0 when none.
Usage: scripts/check-links.py [ROOT]   (ROOT: the repository, by default this one)
Standard library only."""
import os
import re
import subprocess
import sys

MD_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"""(?:href|src)="([^"]*)\"""")
FENCE = re.compile(r"^\s*(```|~~~)")


def files(root):
    """The Markdown files git tracks (and new ones it does not ignore), else every one."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, text=True, check=True)
        names = out.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        names = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                 if "/.git" not in d and "/build" not in d for f in fs]
    md = sorted(n for n in names if n.endswith(".md"))
    html = sorted(n for n in names if n.startswith("docs/") and n.endswith(".html"))
    return [n for n in md + html if os.path.isfile(os.path.join(root, n))]


def prose_lines(text, keep_code=False):
    """(line number, line) outside fenced code blocks, inline code blanked unless kept."""
    fenced = False
    for i, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield i, line if keep_code else re.sub(r"`[^`]*`", "", line)


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read(), keep_code=True):
                m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if not m:
                    continue
                base = slug(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)))
                n = seen.get(base, 0)
                seen[base] = n + 1
                out.add(base if n == 0 else f"{base}-{n}")
        cache[path] = out
    return cache[path]


def check(root, name, target):
    """Why target (a link in file `name`) does not resolve, or None."""
    if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return None  # empty, or a URL (http:, https:, mailto:)
    path, _, frag = target.partition("#")
    here = os.path.dirname(os.path.join(root, name))
    dest = os.path.join(root, path.lstrip("/")) if path.startswith("/") else \
        os.path.normpath(os.path.join(here, path)) if path else os.path.join(root, name)
    if not os.path.exists(dest):
        return "no such file"
    if frag and dest.endswith(".md") and frag.lower() not in anchors(dest):
        return f"no section '#{frag}' in {os.path.relpath(dest, root)}"
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    bad = 0
    for name in files(root):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            text = f.read()
        pattern = HTML_LINK if name.endswith(".html") else MD_LINK
        lines = enumerate(text.splitlines(), 1) if name.endswith(".html") else prose_lines(text)
        for i, line in lines:
            for target in pattern.findall(line):
                why = check(root, name, target)
                if why:
                    print(f"{name}:{i}: link '{target}' does not resolve: {why}")
                    bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
