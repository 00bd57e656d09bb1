#!/usr/bin/env bash
# bisect_loaded_state.sh — when the checkpoint the resumed leg loaded already
# differs from through@K, bisect names the first differing state tensor
# instead of an event (the events would only show its consequences). The
# run is made to look so by putting another state in through/ckpt/iter_5.
# Negative control: the untouched run is located by an event, and its loaded
# state is reported identical.
. "$(dirname "$0")/bisect_lib.sh"

mkrun opt 1 --inject optimizer-step-not-saved

# negative control first: the untouched run
bisect opt
expect_rc 1 "bisect of the untouched run" opt
lacks "$T/opt.txt" "already differs"
contains "$T/opt.txt" "loaded state: save@5's checkpoint iter_0000005 (" 
contains "$T/opt.txt" "datasets) compared with through@5's: identical. Both processes wrote the same bytes; this does not show the state is complete or right"
contains "$T/opt.txt" "located: step 6, optimizer"

# report.json names the legs by absolute path: swap the state in place
rm -rf "$T/opt/through/ckpt/iter_0000005"
cp -r "$T/opt/through/ckpt/iter_0000010" "$T/opt/through/ckpt/iter_0000005"
bisect opt
expect_rc 1 "bisect with a different loaded state" opt
contains "$T/opt.txt" "already differs from through@5: first differing state tensor /"
jq_true "$T/opt.json" 'd["loaded_state"]["identical"] is False and d["loaded_state"]["first_difference"].startswith("/")' "loaded_state names a tensor"
finish
