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

#include <stdio.h>

#include "base/error.h"
#include "core/model.h"

/* Writes this rank's census of m at m->iteration into out_dir/census/
 * (atomically). before_save: the census text taken just before a save at
 * this iteration, or NULL; when the save changed the process (the text
 * differs), it is kept beside it as the before-save census, so that `run`
 * can say a save changed the process that saved. RC_EXIT_IOERR if it
 * cannot be written. */
int rc_census_write(rc_model *m, const char *out_dir, const char *before_save, rc_err *err);

/* The census text (malloc'd, NUL-terminated; caller frees), NULL when out of
 * memory. rc_census_write writes exactly this. */
char *rc_census_text(const rc_model *m, size_t *len);

/* One line of the census of what a save wrote: the census field of the
 * checkpoint item `path` (dtype an io/state.h rc_dtype) and its value from
 * the staged bytes, in the form rc_census_text gives it ("model.X" and a
 * fingerprint for "/model/X", "data.consumed_samples" and a number for
 * "/data/consumed_samples", ...); fp, when not NULL, is a tensor's
 * fingerprint already taken of the same bytes (on the device). Items no census field stands for
 * write nothing. checkpointing.c writes them while a save stages its items (when
 * rc_model.census_of_save is set); rc_census_write writes the text as
 * iter_K.rankR.saved.txt (io/layout.h) and frees it. */
void rc_census_saved_line(FILE *f, const char *path, int dtype, const void *bytes, size_t nbytes,
                          const uint64_t *fp);

#endif
