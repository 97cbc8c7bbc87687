/* sbx CLI: -t, a terminal in the sandbox the size of ours (tty.c). */
#ifndef SBX_CLI_TTY_H
#define SBX_CLI_TTY_H

#include "util/error.h"

/* Our window size (stdin's, stdout's or stderr's terminal; 80x24 without
   one), within the API's 1 .. 1000. */
void sbx_cli_tty_size (unsigned *cols, unsigned *rows);
/* Our terminal (stdin) raw until sbx_cli_tty_restore, which exit also
   calls. */
int sbx_cli_tty_raw (sbx_error_t **err);
void sbx_cli_tty_restore (void);
/* From now on each SIGWINCH sends our size to the process's terminal
   (POST .../processes/PID/resize), from a thread of its own. */
int sbx_cli_tty_forward_resizes (const char *id, long long pid, sbx_error_t **err);

#endif
