#!/usr/bin/env bash
# run_md_escape.sh — text that a trainer controls reaches the Markdown
# summary as it is: an exec trainer writes a checkpoint file named
# "0 a|b`c*d_e<f<newline>g\|h.txt" ('|', a backtick, '*', '_', '<', a line
# break and a backslash before a '|'), whose bytes differ after the resume.
# Its name is the first difference, in a table cell (the RESUME row) and in
# a list item; the summary's bytes are checked against the GFM rules of
# harness/report_md.c, and, where the cmarkgfm module (GitHub's cmark-gfm)
# is installed, the rendered HTML shows the name verbatim in both places
# with the table's three columns intact. Negative control: the same
# document with the list item written as the writer did before ("\|" in a
# single-backtick span) renders differently, and the check says so.
source "$(dirname "$0")/run_lib.sh"

name=$'0 a|b`c*d_e<f\ng\\|h.txt'
cat >"$T/trainer.sh" <<'SH'
#!/usr/bin/env bash
# the fake trainer, plus a copy of optim.txt under a hostile name in each checkpoint
out="" prev=""
for a in "$@"; do
  [ "$prev" = --out ] && out=$a
  prev=$a
done
bash "$RC_FAKE" "$@" || exit $?
for d in "$out"/ckpt/iter_*; do
  [ -f "$d/optim.txt" ] && cp "$d/optim.txt" "$d/$RC_HOSTILE_NAME"
done
exit 0
SH
export RC_FAKE="$FAKE" RC_HOSTILE_NAME="$name"
tpl="bash '$T/trainer.sh' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} --bug forget-momentum"
run_rc md --trainer exec --train-cmd "$tpl" --steps 6 --save-at 3 --out "$T/o" --summary-md "$T/s.md" --progress off
expect_rc 1 "a resume divergence" md
[ -f "$T/o/resume@3/ckpt/iter_0000006/$name" ] || fail "the trainer did not write the hostile file"

# the bytes: outside the table verbatim in a double-backtick span (one
# backtick inside), the line break a space; in the cell every '|' is "\|"
shown=$'0 a|b`c*d_e<f g\\|h.txt (bytes:'
contains "$T/s.md" "- first differing file: \`\`$shown"
contains "$T/s.md" $'; first differing file ``0 a\\|b`c*d_e<f g\\\\|h.txt (bytes:'
lacks "$T/s.md" 'file: `0 a\|b'
contains "$T/s.md" 'grad\_norm differs'

have_py || { echo "note: no python3, the summary is not rendered"; finish; }
# render FILE: how many <code> elements begin with the name as shown, and
# whether every table row has three cells; exit 77 without cmarkgfm
render() {
  python3 - "$1" "${shown% (bytes:}" <<'PY'
import html, re, sys
try:
    import cmarkgfm
    from cmarkgfm.cmark import Options
except ImportError:
    sys.exit(77)
out = cmarkgfm.github_flavored_markdown_to_html(open(sys.argv[1]).read(), options=Options.CMARK_OPT_UNSAFE)
codes = [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", out, re.S)]
rows = re.findall(r"<tr>(.*?)</tr>", out, re.S)
three = all(len(re.findall(r"<t[dh]>", r)) in (3, 4) for r in rows)
first = [r for r in rows if "RESUME@3" in r]
cells = len(re.findall(r"<td>", first[0])) if first else 0
n = sum(1 for c in codes if c.startswith(sys.argv[2] + " (bytes:"))
print(n, int(three and cells == 3), int("grad\\_norm" not in out and "grad_norm" in out))
PY
}
got=$(render "$T/s.md")
r=$?
if [ $r = 77 ]; then
  echo "note: no cmarkgfm module, the summary is not rendered (bytes checked above)"
else
  [ "$got" = "2 1 1" ] || fail "rendered summary: '$got', want '2 1 1' (the name in 2 code elements, rows of 3 cells, grad_norm plain)"
  # negative control: the list item as the writer wrote it before
  old=$(printf '%s' "${shown% (bytes:}" | sed 's/|/\\|/g')
  awk -v old="$old" 'BEGIN { FS = "``" } /^- first differing file: ``/ { sub(/ \(bytes:.*/, "", $2); print "- first differing file: `" old "`"; next } { print }' "$T/s.md" >"$T/old.md"
  grep -qF 'file: `0 a\|b' "$T/old.md" || fail "could not build the old-style summary"
  got=$(render "$T/old.md")
  [ "${got%% *}" = 1 ] || fail "the old-style list item was not caught: '$got' (negative control)"
fi
finish
