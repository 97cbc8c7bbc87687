/* sbx CLI: sbx cp of a directory tree, either way (cp_tree.c). */
#ifndef SBX_CLI_CP_TREE_H
#define SBX_CLI_CP_TREE_H

#include "cli/api.h"

/* LOCAL's tree to ID:RPATH, or into it (RPATH/basename) when dst_is_dir.
   The exit status; a summary (and progress on a terminal) on stderr. */
int sbx_cli_cp_tree_up (struct sbx_api *api, const char *local, const char *id, const char *rpath,
                        int dst_is_dir);
/* ID:RPATH's tree to LOCAL, or into it when LOCAL is a directory. */
int sbx_cli_cp_tree_down (struct sbx_api *api, const char *id, const char *rpath,
                          const char *local);

#endif
