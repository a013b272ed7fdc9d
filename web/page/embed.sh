#!/bin/sh
# web/page/embed.sh OUT FILE... -- writes OUT, a C file with each FILE as
# an array, the way `xxd -i` would (xxd comes with vim; od is in coreutils):
#   const unsigned char web_NAME[] = { 0x3c, ... };
#   const size_t web_NAME_len = sizeof web_NAME;
# NAME is the file's base name with '.' and '-' as '_' (index.html: web_index_html).
set -eu
out=$1
shift
tmp=$out.tmp
trap 'rm -f "$tmp"' EXIT
{
    echo "/* Generated from web/page/ by web/page/embed.sh: edit those files, not this one. */"
    echo "#include <stddef.h>"
    for f in "$@"; do
        name=web_$(basename "$f" | tr '.-' '__')
        [ -s "$f" ] || { echo "embed.sh: $f is empty or missing" >&2; exit 1; }
        echo "extern const unsigned char $name[];"
        echo "extern const size_t ${name}_len;"
        echo "const unsigned char $name[] = {"
        od -An -v -tx1 "$f" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'
        echo "};"
        echo "const size_t ${name}_len = sizeof $name;"
    done
} > "$tmp"
mv "$tmp" "$out"
