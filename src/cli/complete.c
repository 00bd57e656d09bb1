/* complete.c — the flag tables as a plain list, for the build's generators
 * (cmake/completion.sh writes the bash completion from it, cmake/man.cmake
 * the man page's subcommand sections from --help itself). Reached through
 * --help with RC_HELP_FORMAT=complete in the environment, so the list comes
 * from the very tables the parser reads and no flag of any subcommand is
 * taken for it. Not a user interface: the format serves the generators. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

bool rc_cli_help_is_list(void) {
  const char *f = getenv("RC_HELP_FORMAT");
  return f && !strcmp(f, "complete");
}

/* One line per spelling: "NAME KIND METAVAR [CHOICE...]" where KIND is
 * bool, value or optional (the value may be left out), or hidden (parsed,
 * never offered: `run` lists the leg flags it refuses this way); METAVAR
 * is "-" when the row has none. Aliases get their own lines. */
static void list_row(const rc_flag_spec *f, const char *name, size_t len, FILE *out) {
  const char *kind = (f->tags & RC_FLAG_HIDDEN)     ? "hidden"
                     : f->kind == RC_FLAG_BOOL      ? "bool"
                     : (f->tags & RC_FLAG_OPTIONAL) ? "optional"
                                                    : "value";
  fprintf(out, "%.*s %s %s", (int)len, name, kind, f->metavar ? f->metavar : "-");
  for (int i = 0; f->choices && f->choices[i]; i++) fprintf(out, " %s", f->choices[i]);
  fputc('\n', out);
}

void rc_cli_print_flag_list(const rc_flag_cmd *cmd, FILE *out) {
  for (int g = 0; g < cmd->n_groups; g++)
    for (int k = 0; k < cmd->groups[g].n; k++) {
      const rc_flag_spec *f = &cmd->groups[g].flags[k];
      list_row(f, f->name, strlen(f->name), out);
      for (const char *p = f->aliases; p && *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w) list_row(f, p, w, out);
        p += w;
      }
    }
  fputs("--help bool -\n--version bool -\n", out);
}
