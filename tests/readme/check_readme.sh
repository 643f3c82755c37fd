#!/usr/bin/env bash
# The README's C examples against the built library: a block with a main() is compiled,
# linked with libfrost.a and run (it must exit 0); any other block is a fragment, compiled
# as the body of a function whose free buffer pointers (the *_ptr names, workspace and
# stream) are declared by this script.  Warnings are errors, so an example that drifts from
# the public header fails here.
# Usage: check_readme.sh <C compiler> <README.md> <include dir> <libfrost.a> [compiler flags...]
# (the flags the library was built with that a program linking it needs, e.g. -fsanitize=...)
set -euo pipefail
cc=$1 readme=$2 inc=$3 lib=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -Wno-unused-variable -I "$inc" "$@")
# every ```c block into its own file, block1.c, block2.c, ...
awk -v dir="$tmp" '/^```c[[:space:]]*$/ { n++; out = dir "/block" n ".c"; printf "" > out; next }
                   /^```/ { out = ""; next }
                   out != "" { print > out }' "$readme"
shopt -s nullglob
blocks=("$tmp"/block*.c)
if [ ${#blocks[@]} -eq 0 ]; then
    echo "no \`\`\`c block in $readme"
    exit 1
fi
pass=0 fail=0
for b in "${blocks[@]}"; do
    name=$(basename "$b" .c)
    if grep -q '^int main' "$b"; then
        if "$cc" "${flags[@]}" "$b" "$lib" -lm -ldl -lpthread -o "$tmp/$name" 2>"$tmp/$name.err" &&
            "$tmp/$name" >"$tmp/$name.out" 2>&1; then
            pass=$((pass + 1))
        else
            echo "FAIL $name (a program): $(head -c 2000 "$tmp/$name.err" "$tmp/$name.out" 2>/dev/null)"
            fail=$((fail + 1))
        fi
        continue
    fi
    frag=$tmp/${name}_fn.c
    {
        grep '^#include' "$b"
        echo '#include <stdio.h>'
        echo 'void readme_fragment(void);'
        echo 'void readme_fragment(void)'
        echo '{'
        grep -o '\b[a-z_]*_ptr\b' "$b" | sort -u | sed 's/.*/    void *& = NULL;/'
        echo '    void *workspace = NULL, *stream = NULL;'
        grep -v '^#include' "$b"
        echo '}'
    } >"$frag"
    if "$cc" "${flags[@]}" -c "$frag" -o "$tmp/$name.o" 2>"$tmp/$name.err"; then
        pass=$((pass + 1))
    else
        echo "FAIL $name (a fragment):"
        cat -n "$frag"
        cat "$tmp/$name.err"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
