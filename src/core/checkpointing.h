/* checkpointing.h — saving and loading the model's complete state. */
#ifndef RC_CORE_CHECKPOINTING_H
#define RC_CORE_CHECKPOINTING_H

#include "base/error.h"
#include "core/model.h"
#include "io/checkpoint.h"

/* Saves the state after m->iteration steps into ckpt_root/iter_%07d/. */
int rc_model_save(rc_model *m, const char *ckpt_root, const char *args_json, rc_err *err);
/* Loads iter_dir (validated: marker, hashes, format, config, shapes); on
 * failure the model must be discarded. */
int rc_model_load(rc_model *m, const char *iter_dir, rc_err *err);

#endif
