/* gate.h — a high-water mark of bytes that are final.
 *
 * A save streams: one thread copies a shard's datasets from the device into
 * a host buffer while others write the file and hash it. Each follower
 * waits on the gate until the bytes it needs are below the mark; the copier
 * raises the mark as datasets land. The mark only rises. A NULL gate is
 * always open (everything is final), so code that reads a finished buffer
 * and code that follows a copy are the same code. */
#ifndef RC_BASE_GATE_H
#define RC_BASE_GATE_H

#include <pthread.h>
#include <stdint.h>

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t upto; /* bytes [0, upto) are final (under mu) */
} rc_gate;

void rc_gate_init(rc_gate *g, uint64_t upto);
void rc_gate_destroy(rc_gate *g);
/* Raises the mark to upto (never lowers it) and wakes the waiters. */
void rc_gate_raise(rc_gate *g, uint64_t upto);
/* Returns once bytes [0, upto) are final; at once for a NULL gate. */
void rc_gate_wait(rc_gate *g, uint64_t upto);

#endif
