/* run_deferred.c — --through-checkpoints on-demand: telling the through leg
 * whether to write its shard at N.
 *
 * A through leg's full shard at N serves one purpose: when RESUME@N (or
 * A/A@N) differs, the report names the differing values. When every check
 * at N is identical it is 2.5 GB written and fsync'd for nothing, and on a
 * GPU it is the run's tail (bench/NOTES.md). So with on-demand the through
 * leg stages and hashes its state at N (`train --save-deferred-at N`),
 * leaves the hashes in ITER.deferred.json and waits on a pipe (its fd 3,
 * RC_DECIDE_FD) for one byte. `run` polls: once the note is there and every
 * leg compared with through at N has its checkpoint complete, it compares
 * the note's chunk hashes with each one's manifest. All the same bytes:
 * 'H', the through leg keeps hashes only (the checks then decide by
 * SHA-256 and find them identical). Any difference, or a manifest that
 * cannot be read: 'F', the shard is written and the checks compare values.
 * A leg compared at N that ended without its checkpoint does not hold the
 * decision up (its check is skipped). A leg compared at N that has no job
 * slot while the through leg holds one would never come: 'F' at once. The
 * pipe's end (run gone, or the leg stopped) means 'F' to the leg.
 * Neither side waits for a peer that cannot answer: a note that `run` has
 * read and that is then missing before the word was sent was removed by
 * someone else ('X': the leg fails with 65, `run` exits 70), and the leg
 * watches its note itself while it waits (leg.c, decide_full), so a note
 * removed before `run` ever read it ends the wait too; a leg that dies is
 * reaped (its pipe closed), and `run`'s death closes the pipe. */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "io/checkpoint.h"
#include "io/layout.h"

/* Test hook (docs/robustness.md), not a feature: RC_TEST_DEFERRED_BLOCKING=1
 * takes a missing note for "not there yet" however long it was there, as
 * before; the through leg then waits in one blocking read too. */
static bool deferred_blocking(void) {
  const char *v = getenv("RC_TEST_DEFERRED_BLOCKING");
  return v && !strcmp(v, "1");
}

static void iter_dir_of(const rc_leg *leg, int64_t step, char *buf, size_t cap) {
  rc_bufprintf(buf, cap, "%s/" RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT, leg->dir, step);
}

/* Sends the decision and closes the pipe: the leg reads one byte. */
static void decide(rc_leg *leg, char c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(leg->decision_why, sizeof leg->decision_why, fmt, ap);
  va_end(ap);
  ssize_t w;
  do w = write(leg->decide_wfd, &c, 1);
  while (w < 0 && errno == EINTR);
  close(leg->decide_wfd);
  leg->decide_wfd = 0;
  leg->decision = c;
}

/* Whether a and b describe the same bytes: size and every chunk hash. */
static bool same_bytes(const rc_mf_shard *a, const rc_mf_shard *b, int *chunk) {
  *chunk = -1;
  if (a->bytes != b->bytes || a->chunk_bytes != b->chunk_bytes || a->nchunks != b->nchunks)
    return false;
  for (int k = 0; k < a->nchunks; k++)
    if (strcmp(a->chunk_sha256[k], b->chunk_sha256[k])) {
      *chunk = k;
      return false;
    }
  return true;
}

typedef enum { NOT_YET, SAME, DIFFERS } cmp_state;

/* One check at N against the through leg's hashes: NOT_YET while the other
 * side's checkpoint may still come; DIFFERS with why when it differs or
 * cannot be read; SAME otherwise (or when it will not come). */
static cmp_state compare_one(rc_run *run, const rc_check *c, int self, const rc_mf_shard *mine,
                             int running, char *why, size_t cap) {
  int other_i = c->leg_a == self ? c->leg_b : c->leg_a;
  const rc_leg *other = &run->legs[other_i];
  if (other->state == RC_LEG_PENDING) {
    if (running < run->opts.jobs) return NOT_YET;
    rc_bufprintf(why, cap, "%s has no job slot while through waits (--jobs %d)", other->label,
                 run->opts.jobs);
    return DIFFERS;
  }
  if (other->state != RC_LEG_RUNNING && other->state != RC_LEG_OK) return SAME; /* skipped check */
  char dir[RC_RUN_PATH_CAP + 64], marker[RC_RUN_PATH_CAP + 80];
  iter_dir_of(other, c->step, dir, sizeof dir);
  rc_bufprintf(marker, sizeof marker, "%s/" RC_COMPLETE_NAME, dir);
  if (!rc_path_exists(marker)) return other->state == RC_LEG_RUNNING ? NOT_YET : SAME;
  rc_manifest m;
  rc_err err = {0};
  int chunk = -1;
  cmp_state st = SAME;
  if (rc_checkpoint_manifest_read(dir, &m, &err)) {
    rc_bufprintf(why, cap, "%s: %s", c->name, err.msg);
    st = DIFFERS;
  } else if (m.world_size != 1 || m.hashes_only || !same_bytes(&m.shards[0], mine, &chunk)) {
    if (chunk >= 0)
      rc_bufprintf(why, cap, "%s differs (chunk %d of the shard)", c->name, chunk);
    else
      rc_bufprintf(why, cap, "%s differs (the shard's size or layout)", c->name);
    st = DIFFERS;
  }
  rc_manifest_free(&m);
  return st;
}

/* The decision for the through leg `self`, if it can be made now. */
static void poll_leg(rc_run *run, int self, int running) {
  rc_leg *leg = &run->legs[self];
  char dir[RC_RUN_PATH_CAP + 64], why[512], names[256] = "";
  iter_dir_of(leg, leg->deferred_step, dir, sizeof dir);
  rc_mf_shard mine;
  int64_t iteration = 0;
  rc_err err = {0};
  int rc = rc_deferred_note_read(dir, &iteration, &mine, &err);
  if (rc == RC_EXIT_NOINPUT && leg->deferred_seen && !deferred_blocking()) {
    /* it was there and the leg has not been told: only the leg removes it
     * after the word, so someone else did, and waiting would wait for ever */
    decide(leg, 'X', "its note at %" PRId64 " vanished before run could decide",
           leg->deferred_step);
    return;
  }
  if (rc == RC_EXIT_NOINPUT) return; /* not there yet */
  leg->deferred_seen = true;
  if (rc || iteration != leg->deferred_step) {
    if (!rc) rc_mf_shard_free(&mine);
    decide(leg, 'F', "its hashes at %" PRId64 " are unreadable: %s", leg->deferred_step,
           rc ? err.msg : "another iteration");
    return;
  }
  cmp_state all = SAME;
  int n = 0;
  for (int i = 0; i < run->n_checks && all == SAME; i++) {
    const rc_check *c = &run->checks[i];
    if (c->what != RC_CHECK_STATE || c->step != leg->deferred_step ||
        (c->leg_a != self && c->leg_b != self))
      continue;
    all = compare_one(run, c, self, &mine, running, why, sizeof why);
    if (all == SAME) {
      size_t len = strlen(names);
      rc_bufprintf(names + len, sizeof names - len, "%s%s", n++ ? ", " : "", c->name);
    }
  }
  rc_mf_shard_free(&mine);
  if (all == NOT_YET) return;
  if (all == DIFFERS)
    decide(leg, 'F', "written in full: %s", why);
  else
    decide(leg, 'H', "kept as hashes: %s byte-identical by chunk hashes",
           n ? names : "no check at N compared it");
}

void rc_run_deferred_poll(rc_run *run, int running) {
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *leg = &run->legs[i];
    if (leg->deferred_step > 0 && leg->decide_wfd > 0 && !leg->decision &&
        leg->state == RC_LEG_RUNNING)
      poll_leg(run, i, running);
  }
}
