/* text.h — UTF-8 lengths, terminal-safe text and the phrases reports share (text.c). */
#ifndef RC_BASE_TEXT_H
#define RC_BASE_TEXT_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid (an
 * overlong form, a surrogate, U+FFFE/U+FFFF: not XML characters either). */
int rc_utf8_len(const unsigned char *s);

/* Copies in to out (cap bytes, NUL-terminated) for a terminal: control
 * characters (C0 but \t, DEL, and C1 as UTF-8) and bytes that are not
 * UTF-8 become \xHH (C1: \u0080..\u009f), so a census value or a flag
 * holding ESC cannot drive the terminal. Cut short at a whole escape. */
void rc_text_escape(const char *in, char *out, size_t cap);

/* "grad_norm, lr differ" (or "lr differs") from the comma list "grad_norm,lr":
 * how a report names the trace columns that differ. Cut short to cap. */
void rc_text_differ_phrase(const char *list, char *buf, size_t cap);

#endif
