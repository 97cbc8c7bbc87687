/* sbx CLI: a line on a terminal while a create takes more than a second
   (progress.c). */
#ifndef SBX_CLI_PROGRESS_H
#define SBX_CLI_PROGRESS_H

#include <jansson.h>

/* Start waiting for the create of create_body: a handle, or -1 when
   stderr is not a terminal (nothing will be said). */
int sbx_cli_progress_start (const json_t *create_body);
/* The create answered: nothing more is said. */
void sbx_cli_progress_stop (int handle);

#endif
