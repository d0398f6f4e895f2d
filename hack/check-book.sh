#!/usr/bin/env bash
# Builds the operator's book (docs/, mdBook) into target/book and checks that
# every relative link and #anchor in the built HTML points to a file that
# exists and to an id that exists in it. External (http/https and other
# scheme) links are not checked.
#
#   bash hack/check-book.sh
#
# mdbook is taken from $MDBOOK when set, else from PATH.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ -n "${MDBOOK:-}" ]]; then
  mdbook="$MDBOOK"
  if [[ ! -x "$mdbook" ]]; then
    echo "check-book: MDBOOK=$mdbook is not an executable file" >&2
    exit 1
  fi
elif mdbook="$(command -v mdbook)"; then
  :
else
  echo "check-book: mdbook not found: set MDBOOK=/path/to/mdbook or put mdbook on PATH" >&2
  echo "check-book: install it with: cargo install mdbook --locked --root /tmp/mdbook" >&2
  exit 1
fi

book_dir="$root/target/book"
rm -rf "$book_dir"
echo "check-book: $("$mdbook" --version) build docs"
"$mdbook" build docs

if [[ ! -f "$book_dir/index.html" ]]; then
  echo "check-book: mdbook produced no $book_dir/index.html" >&2
  exit 1
fi

python3 - "$book_dir" <<'PY'
import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

book = os.path.realpath(sys.argv[1])


class Page(HTMLParser):
    """Collects the ids, the <base href> and the links of one HTML page."""

    LINK_ATTRS = {"a": "href", "link": "href", "area": "href",
                  "img": "src", "script": "src", "iframe": "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.base = None
        self.links = []  # (line, url)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag == "base" and attrs.get("href") is not None:
            self.base = attrs["href"]
        attr = self.LINK_ATTRS.get(tag)
        if attr and attrs.get(attr) is not None:
            self.links.append((self.getpos()[0], attrs[attr]))

    handle_startendtag = handle_starttag


pages = {}
for dirpath, _, files in os.walk(book):
    for name in files:
        if name.endswith(".html"):
            path = os.path.join(dirpath, name)
            parser = Page()
            with open(path, encoding="utf-8") as f:
                parser.feed(f.read())
            pages[os.path.realpath(path)] = parser

broken = []
checked = 0
for path, page in sorted(pages.items()):
    rel_page = os.path.relpath(path, book)
    here = os.path.dirname(path)
    if page.base is not None and urlsplit(page.base).scheme == "":
        base = page.base
        here = os.path.join(book, base.lstrip("/")) if base.startswith("/") \
            else os.path.join(here, base)
    for line, url in page.links:
        parts = urlsplit(url)
        if parts.scheme or url.startswith("//"):
            continue  # external (http, https, mailto, data, ...): not checked
        checked += 1
        if parts.path:
            if parts.path.startswith("/"):
                target = os.path.join(book, unquote(parts.path).lstrip("/"))
            else:
                target = os.path.join(here, unquote(parts.path))
            if parts.path.endswith("/") or os.path.isdir(target):
                target = os.path.join(target, "index.html")
            target = os.path.realpath(target)
        else:
            target = path
        where = f"{rel_page}:{line}: {url}"
        if not target.startswith(book + os.sep) and target != book:
            broken.append(f"{where} (points outside the book)")
            continue
        if not os.path.isfile(target):
            broken.append(f"{where} (no file {os.path.relpath(target, book)})")
            continue
        fragment = unquote(parts.fragment)
        if fragment:
            if target not in pages:
                broken.append(f"{where} (#{fragment} in a file that is not HTML)")
            elif fragment not in pages[target].ids:
                broken.append(
                    f"{where} (no id {fragment!r} in {os.path.relpath(target, book)})")

if broken:
    print(f"check-book: {len(broken)} broken link(s) of {checked} checked:", file=sys.stderr)
    for b in broken:
        print(f"  {b}", file=sys.stderr)
    sys.exit(1)
print(f"check-book: {checked} links in {len(pages)} pages, none broken")
PY
