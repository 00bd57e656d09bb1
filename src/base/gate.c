/* gate.c — the byte high-water mark of gate.h. */
#include "base/gate.h"

void rc_gate_init(rc_gate *g, uint64_t upto) {
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->upto = upto;
}

void rc_gate_destroy(rc_gate *g) {
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
}

void rc_gate_raise(rc_gate *g, uint64_t upto) {
  pthread_mutex_lock(&g->mu);
  if (upto > g->upto) {
    g->upto = upto;
    pthread_cond_broadcast(&g->cv);
  }
  pthread_mutex_unlock(&g->mu);
}

void rc_gate_wait(rc_gate *g, uint64_t upto) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  while (g->upto < upto) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}
