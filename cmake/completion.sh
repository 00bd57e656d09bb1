#!/usr/bin/env bash
# completion.sh BIN OUT — writes the bash completion of resumecheck to OUT
# from BIN's own flag tables (`RC_HELP_FORMAT=complete BIN SUB --help`,
# src/cli/complete.c), so a flag added to a table is completed by the next
# build. `run` completes its own flags and the `train` flags it forwards to
# every leg, less the ones it refuses (listed as hidden in its table).
set -euo pipefail
bin=$1 out=$2
list() { RC_HELP_FORMAT=complete "$bin" "$@" --help; }
subs=$(list | tr '\n' ' ')
declare -A seen=()
flags_of=() # "SUB FLAGS..." lines for the script's case
values=()   # case arms: '"SUB FLAG") echo "KIND [CHOICES]";;'
add_rows() { # SUB, then the list on stdin; first spelling of a name wins
  local sub=$1 name kind mv choices words=""
  while read -r name kind mv choices; do
    [ -n "${seen[$sub $name]:-}" ] && continue
    seen[$sub $name]=1
    [ "$kind" = hidden ] && continue
    # the canonical spelling is offered; aliases are listed only for their values
    words+=" $name"
    [ "$kind" = bool ] && continue
    local what=v
    if [ -n "$choices" ]; then
      what="c $choices"
    else
      case "$mv" in *FILE* | *DIR* | *PATH* | *.svg | *.h5) what=f ;; esac
    fi
    [ "$kind" = optional ] && what="o$what"
    values+=("    \"$sub $name\") echo \"$what\" ;;")
  done
  flags_of+=("    $sub) echo \"${words# }\" ;;")
}
for sub in $subs; do
  if [ "$sub" = run ]; then
    # run's hidden rows first (seen, not offered), then its own, then train's
    add_rows run < <(list run | awk '$2 == "hidden"'; list run | awk '$2 != "hidden"'; list train)
  else
    add_rows "$sub" < <(list "$sub")
  fi
done
tmp="$out.tmp.$$"
{
  cat <<HEAD
# bash completion for resumecheck — generated at build time by
# cmake/completion.sh from the flag tables of the binary; do not edit.
_resumecheck_flags() {
  case "\$1" in
$(printf '%s\n' "${flags_of[@]}")
  esac
}
# "c CHOICES" (one of them), "f" (a path), "v" (a free value); a leading
# "o" when the value may be left out; nothing for a flag without a value.
_resumecheck_value() {
  case "\$1 \$2" in
$(printf '%s\n' "${values[@]}")
  esac
}
_resumecheck() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev="" i
  COMPREPLY=()
  if [ "\$COMP_CWORD" -le 1 ]; then
    COMPREPLY=(\$(compgen -W "$subs--help --version" -- "\$cur"))
    return
  fi
  local sub=\${COMP_WORDS[1]}
  [ "\$COMP_CWORD" -ge 2 ] && prev=\${COMP_WORDS[COMP_CWORD - 1]}
  # '=' is a word break: "--flag=va" arrives as "--flag" "=" "va"
  if [ "\$cur" = "=" ]; then
    cur="" && prev=\${COMP_WORDS[COMP_CWORD - 1]}
  elif [ "\$prev" = "=" ] && [ "\$COMP_CWORD" -ge 3 ]; then
    prev=\${COMP_WORDS[COMP_CWORD - 2]}
  fi
  for ((i = 2; i < COMP_CWORD; i++)); do
    [ "\${COMP_WORDS[i]}" = "--" ] && { compopt -o default 2>/dev/null; return; }
  done
  local what=""
  case "\$prev" in --*) what=\$(_resumecheck_value "\$sub" "\$prev") ;; esac
  case "\$what" in o*) [[ "\$cur" == -* ]] && what="" || what=\${what#o} ;; esac
  case "\$what" in
  c\ *) COMPREPLY=(\$(compgen -W "\${what#c }" -- "\$cur")) ;;
  f) compopt -o default 2>/dev/null; COMPREPLY=() ;;
  v) COMPREPLY=() ;;
  *)
    if [[ "\$cur" == -* ]]; then
      COMPREPLY=(\$(compgen -W "\$(_resumecheck_flags "\$sub")" -- "\$cur"))
    else
      compopt -o default 2>/dev/null; COMPREPLY=()
    fi
    ;;
  esac
}
complete -F _resumecheck resumecheck
HEAD
} >"$tmp"
bash -n "$tmp"
mv -f "$tmp" "$out"
