/* fsutil.h — the few file-system operations everything uses, done safely:
 * atomic writes (temp name, fsync, rename, fsync of the directory), whole
 * file reads, mkdir -p. Errors come back as RC_EXIT_IOERR / RC_EXIT_NOINPUT
 * with the path and strerror in the message. */
#ifndef RC_BASE_FSUTIL_H
#define RC_BASE_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gate.h"

int rc_mkdir_p(const char *path, rc_err *err);
/* Writes path via path.tmp.<pid>: write all, fsync, rename, fsync parent dir.
 * For files a user names (reports), use rc_write_output below. */
int rc_write_file_atomic(const char *path, const void *data, size_t n, rc_err *err);
/* The same for a file that is the concatenation of buffers (written with
 * writev, no copy): a shard is its HDF5 metadata image plus tensor buffers. */
typedef struct {
  const void *p;
  size_t n;
} rc_piece;
int rc_write_pieces_atomic(const char *path, const rc_piece *pieces, int npieces, rc_err *err);
/* The same, streaming: each stretch of the file is written once `gate`
 * (NULL: at once) says its bytes are final, and write-back to the disk is
 * started as the file grows, so the final fsync has little left to wait
 * for. The bytes are those of rc_write_pieces_atomic. */
int rc_write_pieces_atomic_gated(const char *path, const rc_piece *pieces, int npieces,
                                 rc_gate *gate, rc_err *err);
/* The same, calling before_sync(ctx, tmp) once every byte is in the temp
 * file `tmp` and before it is made durable (fsync, rename): the moment a
 * reader in another process can already read the whole file (a checkpoint
 * handed to a waiting leg, io/handoff.c). NULL: none. */
typedef void (*rc_before_sync_fn)(void *ctx, const char *tmp);
int rc_write_pieces_atomic_hooked(const char *path, const rc_piece *pieces, int npieces,
                                  rc_gate *gate, rc_before_sync_fn before_sync, void *ctx,
                                  rc_err *err);
/* Writes path via path.tmp.<pid> and a rename, without fsync: atomic for
 * readers (they see the old file or the whole new one), not durable. Only
 * for notes between processes that are not state and never outlive the
 * run: an fsync of a small file can wait for gigabytes of another file's
 * write-back (ext4's ordered journal). Refuses to replace what is not a
 * regular file, as the others. */
int rc_write_file_visible(const char *path, const void *data, size_t n, rc_err *err);
/* Both atomic writers refuse (74) to rename over anything that exists and is
 * not a regular file: a device node, FIFO, socket, directory or symlink is
 * never replaced. */

/* Writes a file the user named (--json, --junit, --summary-md, --plot), by
 * what path is (docs/robustness.md, "Report files"):
 *  - missing or a regular file: replaced atomically (rc_write_file_atomic);
 *  - a character device or a FIFO: written through (open O_WRONLY, no
 *    create, no truncate; a FIFO without a reader is refused, never waited
 *    for); write errors such as ENOSPC from /dev/full are reported (74);
 *  - a symlink: followed to what it names, which then gets the rule above
 *    (a regular target is replaced atomically in its own directory, the
 *    link stays);
 *  - anything else (directory, socket, block device, dangling symlink):
 *    refused, 74, naming what it is. */
int rc_write_output(const char *path, const void *data, size_t n, rc_err *err);
/* Reads a whole file into a malloc'd buffer (NUL-terminated for text use):
 * rc_read_regular_file (below) with nofollow false and the cap
 * RC_READ_CAP_DEFAULT. A FIFO, a device, a directory or a socket is refused
 * (65), never read; a caller that knows how large its file may be passes
 * its own cap to rc_read_regular_file instead. */
int rc_read_file(const char *path, char **data, size_t *n, rc_err *err);
/* The cap of rc_read_file: larger than any file this tool reads whole
 * (traces, reports, manifests, event logs, a --data file of tokens). */
#define RC_READ_CAP_DEFAULT ((size_t)1 << 30)
/* Caps of the files the harness reads whole (docs/robustness.md, "Every
 * reader"): a trace of a million steps of 40 columns is about 400 MiB; a
 * JSON report, event log, note or args.json of more than 64 MiB is not one
 * this tool or a trainer wrote. */
#define RC_READ_CAP_TRACE ((size_t)1 << 30)
#define RC_READ_CAP_JSON ((size_t)64 << 20)
#define RC_READ_CAP_SMALL ((size_t)1 << 20) /* timing.csv, a log's tail window */
/* Whether anything is at path (lstat): a symbolic link counts even when it
 * dangles or loops, so that whoever reads it next refuses it by name
 * instead of taking it for a file never written. */
bool rc_path_exists(const char *path);
/* Test hook for crash-safety tests (docs/robustness.md), not a feature: with
 * RC_TEST_CRASH_AT_WRITE=N in the environment, the Nth call in this process
 * raises SIGKILL, so a test can stop a save at any of its write steps (temp
 * file created, half written, written, fsync'd, renamed, directory
 * fsync'd). Without the variable it only counts. `what` names the step; with
 * RC_TEST_CRASH_TRACE=1 each call prints "crash point N: what" to stderr. */
void rc_test_crash_point(const char *what, const char *path);
/* Turns the hook off in this process (it stays in the environment for the
 * processes it starts): `run` uses it so that the variable reaches the legs'
 * saves, not the harness's own files. */
void rc_test_crash_points_off(void);
/* Removes stale "NAME.tmp.<digits>" files in dir for the given names: left
 * by a process that was killed mid-save. Only the caller writes these names,
 * so any such file is stale. Failure to remove is ignored (a leftover temp
 * file is untidy, never loaded). */
void rc_remove_stale_temps(const char *dir, const char *const *names, int n);
bool rc_is_dir(const char *path);
/* path = dir + "/" + name; aborts if it does not fit. */
void rc_path_join(char *out, size_t cap, const char *dir, const char *name);

/* ---- reading files that a checkpoint consists of (docs/robustness.md,
 * "What a load opens"). Only regular files: a FIFO would block, a device
 * such as /dev/zero would never end, a directory is not data. */

/* "is a directory", "is a FIFO", "is a character device", ...: what a
 * non-regular file is, for messages. */
const char *rc_file_kind(unsigned mode);
/* Opens path read-only without blocking (O_NONBLOCK, cleared again once the
 * file is known to be regular) and, with nofollow, without following a
 * symbolic link in its last component (O_NOFOLLOW); fstat of the opened
 * descriptor; refuses anything but a regular file. On success *fd is open
 * and *size set. RC_EXIT_NOINPUT when missing; RC_EXIT_DATAERR naming the
 * file and what it is otherwise ("... is a FIFO, not a regular file", a
 * symbolic link that loops); RC_EXIT_IOERR for other failures. Every reader
 * of a file that another process or a person may have put in place opens
 * it here (whole-file reads through rc_read_regular_file), so a FIFO never
 * blocks and a device never streams. */
int rc_open_regular(const char *path, bool nofollow, int *fd, size_t *size, rc_err *err);
/* rc_open_regular, then reads the whole file (NUL-terminated) into a
 * malloc'd buffer; a file of more than cap bytes is refused before it is
 * read (RC_EXIT_DATAERR), one that grows past cap while read as well. */
int rc_read_regular_file(const char *path, size_t cap, bool nofollow, char **data, size_t *n,
                         rc_err *err);

/* b as "12.3 GiB" or "4.5 MiB", for messages. */
void rc_format_bytes(uint64_t b, char *buf, size_t cap);

#endif
