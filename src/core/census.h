/* census.h — the state census: every piece of state that can influence a
 * future step, checkpointed or not, written as text at the resume point
 * (docs/census.md).
 *
 * A leg writes one right after it saves at a save step (the through and
 * save legs: the state step K+1 will start from) and one right after it
 * loads (a resumed leg, before its first step). `run` compares the through
 * leg's census at K with the resumed leg's and names every field that
 * differs with both values. Shards say what was written; the census says
 * what each process holds in memory, including what no checkpoint carries
 * (the TE modules' process-local is_first_microbatch, the fp8 weight cache,
 * whether main_grad holds this process's gradients), so a load that
 * restores too little, or a save that changes the saving process, shows at
 * the step it happens instead of steps later or never.
 *
 * File: OUT/census/iter_%07d.rank%d.txt (io/layout.h), lines
 * FIELD<TAB>CLASS<TAB>VALUE[<TAB>NOTE] in a fixed order; CLASS `saved`
 * (the checkpoint carries it: a load must restore it) or `local`
 * (process-local by design; NOTE says what the config makes of it). */
#ifndef RC_CORE_CENSUS_H
#define RC_CORE_CENSUS_H

#include "base/error.h"
#include "core/model.h"

/* Writes this rank's census of m at m->iteration into out_dir/census/
 * (atomically). before_save: the census text taken just before a save at
 * this iteration, or NULL; when the save changed the process (the text
 * differs), it is kept beside it as the before-save census, so that `run`
 * can say a save changed the process that saved. RC_EXIT_IOERR if it
 * cannot be written. */
int rc_census_write(const rc_model *m, const char *out_dir, const char *before_save, rc_err *err);

/* The census text (malloc'd, NUL-terminated; caller frees), NULL when out of
 * memory. rc_census_write writes exactly this. */
char *rc_census_text(const rc_model *m, size_t *len);

#endif
