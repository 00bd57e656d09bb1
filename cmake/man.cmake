# man.cmake — the man page resumecheck.1, from the binary's own --help
# (help2man), at build time:
#   cmake -DBIN=... -DHELP2MAN=... -DOUT=.../resumecheck.1 -P man.cmake
# One page: `resumecheck --help` for the synopsis and description, then a
# SUBCOMMANDS section with each subcommand's full --help, so `man resumecheck`
# holds every flag and `/--flag` finds it. The subcommands come from the
# binary (RC_HELP_FORMAT=complete, src/cli/complete.c).
foreach(v BIN HELP2MAN OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "man.cmake: -D${v}= is required")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env RC_HELP_FORMAT=complete ${BIN} --help
                OUTPUT_VARIABLE subs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "man.cmake: ${BIN} --help failed (${rc})")
endif()
string(STRIP "${subs}" subs)
string(REPLACE "\n" ";" subs "${subs}")

# roff for preformatted text: a backslash is \e, a line may not start with
# a control character ('.' or '\'')
function(roff_verbatim text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(inc "[SYNOPSIS]\n.B resumecheck\n.I SUBCOMMAND\n\\&[flags]\n")
foreach(sub ${subs})
  string(APPEND inc ".br\n.B resumecheck ${sub}\n\\&[flags]\n")
endforeach()
string(APPEND inc "[SUBCOMMANDS]\n")
foreach(sub ${subs})
  execute_process(COMMAND ${BIN} ${sub} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "man.cmake: ${BIN} ${sub} --help failed (${rc})")
  endif()
  roff_verbatim("${help}" help)
  string(APPEND inc ".SS \"resumecheck ${sub}\"\n.nf\n${help}.fi\n")
endforeach()
string(APPEND inc "[ENVIRONMENT]
.TP
.B RC_CUDA_MODULE
path of the CUDA backend module; by default it is looked for beside the
executable, then in
.I ../lib/resumecheck/
from it (an installed tree)
.TP
.B GITHUB_STEP_SUMMARY
set (as GitHub Actions does) and no
.B \\-\\-summary\\-md
given:
.B run
appends its Markdown summary to that file
.TP
.B RC_HEARTBEAT_S
seconds between the progress lines a running leg prints when stderr is not
a terminal (default 60; a line also at every 10% of its steps)
[FILES]
.TP
.I lib/resumecheck/libresumecheck_cuda.so
the CUDA backend, opened only by legs with
.B \\-\\-device cuda
.TP
.I share/doc/resumecheck/
README.md and docs/*.md: formats, reports, CI and cluster recipes
[SEE ALSO]
.I share/doc/resumecheck/README.md
of the installation prefix (usually /usr/local), and docs/ beside it.
")
get_filename_component(dir ${OUT} DIRECTORY)
set(inc_file ${dir}/resumecheck.h2m)
file(WRITE ${inc_file} "${inc}")
execute_process(
  COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section 1
          --name "checkpoint-resume determinism verifier for LLM training"
          --include ${inc_file} --output ${OUT}.tmp ${BIN}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "man.cmake: help2man failed (${rc})")
endif()
file(RENAME ${OUT}.tmp ${OUT})
