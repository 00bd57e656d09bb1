#!/usr/bin/env bash
# ci_junit_usage.sh — `run --junit F` with a command line that is refused
# (exit 64) still writes F: one failed testcase "usage" naming the refusal,
# whether the refusal is run's own (a bad value, a missing flag) or the
# forwarded train flags' (an unknown flag, named in the file although train
# printed it). The exit code stays 64, also when F cannot be written.
# Controls: a command line that runs writes the usual report, with no usage
# testcase; a --junit after `--` is not run's and writes nothing.
. "$(dirname "$0")/run_lib.sh"
cd "$T" || exit 1
xml_usage() { # FILE: prints the usage testcase's failure message, or fails
  python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
assert root.get("tests") == "1" and root.get("failures") == "1", root.attrib
assert len(cases) == 1 and cases[0].get("name") == "usage", [c.attrib for c in cases]
f = cases[0].find("failure")
assert f is not None and f.get("type") == "usage-error"
props = {p.get("name"): p.get("value") for p in root.iter("property")}
assert props.get("exit_code") == "64", props
print(f.get("message"))
PY
}
check_usage() { # NAME WANT-IN-MESSAGE FILE
  expect_rc 64 "$1" "$1"
  if [ ! -f "$3" ]; then fail "$1: no JUnit file $3"; return; fi
  msg=$(xml_usage "$3") || { fail "$1: JUnit file malformed"; cat "$3" >&2; return; }
  case "$msg" in *"$2"*) ;; *) fail "$1: message '$msg' lacks '$2'" ;; esac
}

run_rc bogus --junit "$T/bogus.xml" --bogus-flag --steps 4 --save-at 2 --out "$T/r1"
check_usage bogus "unknown flag '--bogus-flag'" "$T/bogus.xml"
run_rc jobs "--junit=$T/jobs.xml" --steps 4 --save-at 2 --jobs 0 --out "$T/r2"
check_usage jobs "--jobs: 0 is out of range" "$T/jobs.xml"
run_rc nosteps --save-at 2 --out "$T/r3" --junit "$T/nosteps.xml"
check_usage nosteps "--steps N is required" "$T/nosteps.xml"
run_rc twice --junit "$T/twice.xml" --junit "$T/twice2.xml" --steps 4 --save-at 2 --out "$T/r4"
check_usage twice "given twice" "$T/twice.xml"
run_rc saveat --junit "$T/saveat.xml" --steps 4 --save-at 9 --out "$T/r5"
check_usage saveat "--save-at" "$T/saveat.xml"
# a JUnit path that cannot be written: said, and the exit code stays 64
mkdir -p "$T/adir"
run_rc unwritable --junit "$T/adir" --bogus-flag --steps 4 --save-at 2 --out "$T/r6"
expect_rc 64 "unwritable JUnit path" unwritable
contains "$T/unwritable.err" "writing the JUnit file"
[ -d "$T/adir" ] || fail "the directory given as --junit was replaced"

# controls: a run that runs has no usage testcase; after `--` it is not run's flag
run_rc good --junit "$T/good.xml" --steps 4 --save-at 2 --out "$T/r7" --progress off
expect_rc 0 "good run" good
if [ -f "$T/good.xml" ]; then
  if xml_usage "$T/good.xml" >/dev/null 2>&1; then fail "a run that ran wrote a usage testcase"; fi
  contains "$T/good.xml" 'name="RESUME'
else
  fail "good run: no JUnit file"
fi
run_rc dashdash --bogus-flag --steps 4 --save-at 2 --out "$T/r8" -- --junit "$T/dd.xml"
expect_rc 64 "--junit after --" dashdash
[ ! -e "$T/dd.xml" ] || fail "--junit after -- was taken as run's"

[ "$fails" = 0 ] && echo "ci_junit_usage: all checks passed"
exit $((fails > 0))
