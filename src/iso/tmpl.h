/* sbx: the template store (tmpl_store.c, in the privileged parent) and
 * the archive extractor it runs in a confined child (tmpl_extract.c).
 *
 * STATE/templates/            root 0755
 *   layers/HEX/               root 0700: one read-only layer, by content
 *   sbx/                      the generated /etc and mount points (top layer)
 *   by-name/NAME/             0755: layers (bottom first), meta.json, owner
 *   tmp/                      builds in progress; emptied at start
 */
#ifndef SBX_ISO_TMPL_H
#define SBX_ISO_TMPL_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_TMPL_PATH_MAX 4096
#define SBX_TMPL_META_MAX 65536
#define SBX_TMPL_NAME_MAX 31
#define SBX_TMPL_MAX_LAYERS 64

enum sbx_tmpl_format
{
  SBX_TMPL_DIR = 1, /* a tar of a directory tree: one layer */
  SBX_TMPL_OCI = 2, /* an OCI image archive or docker save's */
  SBX_TMPL_RECIPE = 3, /* "release R\npackage P\n..." (tmpl_recipe.c; the administrator's) */
};

struct sbx_tmpl_limits
{
  uint64_t max_bytes;  /* file content, all layers together */
  uint64_t max_inodes; /* entries, all layers together */
};

/* In the confined child: 0, -1 (invalid input) or -2 (over a limit), with
   a message for the client in msg. */
int sbx_tmpl_extract (int in_fd, int build_dir, enum sbx_tmpl_format format,
                      const struct sbx_tmpl_limits *lim, char *msg, size_t msg_len);

/* A template name: [a-z0-9][a-z0-9._-]{0,30}, not a built-in one. */
int sbx_tmpl_name_ok (const char *name);

/* Recipes (tmpl_recipe.c, in the parent): "release R\n", "package P\n"
   lines, then "run CMD\n" lines (build commands, run in a build sandbox). */
#define SBX_TMPL_RUN_MAX 32
#define SBX_TMPL_RUN_LEN 1000
int sbx_tmpl_recipe_parse (const char *text, char *release, size_t rlen, char *include,
                           size_t ilen);
/* progress_fd: where debootstrap's output goes as it runs (-1: a log in
   the build directory). */
int sbx_tmpl_recipe_build (int in_fd, int build, const char *build_path, const char *mirror,
                           const char *cache_dir, int progress_fd, int store_layers,
                           sbx_error_t **err);

/* The recipe build cache (tmpl_cache.c). A build holds the descriptor
   sbx_tmpl_cache_hold returns (a shared flock; -1: no cache, build
   without) while it reads or writes the cache. */
struct sbx_tmpl_cache_usage
{
  unsigned entries; /* builds kept, and copies a crashed build left */
  uint64_t bytes;   /* disk space, as du counts it */
};
int sbx_tmpl_cache_hold (const char *cache_dir);
int sbx_tmpl_cache_usage (const char *cache_dir, struct sbx_tmpl_cache_usage *u,
                          sbx_error_t **err);
/* Everything in it, unless a build (any daemon's) holds it: then
   SBX_E_CONFLICT and nothing removed. */
int sbx_tmpl_cache_prune (const char *cache_dir, struct sbx_tmpl_cache_usage *removed,
                          sbx_error_t **err);
/* The store's cache directory (--template-cache or STATE/templates/cache). */
const char *sbx_tmpl_cache_dir (void);

/* tmpl_recipe.c: make a tree a layer: every entry root's, setuid/setgid
   dropped, FIFOs and sockets removed; device nodes removed, or, for an
   overlay's upper (upper = 1), 0/0 whiteouts kept and any other device
   setting *bad. *bytes grows by the regular files' sizes. */
void sbx_tmpl_sanitize (int dir, int depth, uint64_t *bytes, int upper, int *bad);

/* tmpl_run.c: run the recipe's commands (cmds, NUL-terminated) in a build
   sandbox over the layer at path `lower`; their changes are left as the
   layer build/layers/KEY. 0, or -1 with err (SBX_E_INVALID naming the
   failing command, its exit status and its last output lines). */
int sbx_tmpl_run_commands (int build, const char *build_path, const char *lower, const char *key,
                           char *cmds[], int ncmds, const char *mirror, int log_fd,
                           sbx_error_t **err);

/* tmpl_run.c: debootstrap's second stage (the packages' maintainer
   scripts) in a build sandbox whose root is `target`, the tree its first
   stage unpacked, with its owners at SBX_TMPL_BUILD_ID_BASE + k. 0, or -1
   with err. */
int sbx_tmpl_run_second_stage (const char *target, const char *mirror, int log_fd,
                               sbx_error_t **err);

/* The build sandbox's ids: 0..65535 inside are this + k on the host, a
   range no host account and no running sandbox has (snapstore.h's). */
#define SBX_TMPL_BUILD_ID_BASE 0xFFFE0000u

/* The egress channel (the front end's end) build commands' proxy
   connections go to, with a policy allowing the mirror's host only. */
void sbx_tmpl_recipe_set_egress (int fd);
/* Where builds' cgroups go: the engine's parent, beside the sandboxes'. */
struct sbx_cgroup_root;
void sbx_tmpl_recipe_set_cgroups (const struct sbx_cgroup_root *root);

/* Parent side. mirror: the Debian mirror recipes use; cache_dir: where
   recipe builds are kept ("": STATE/templates/cache). */
int sbx_tmpl_store_open (const char *state_dir, const char *mirror, const char *cache_dir,
                         sbx_error_t **err);
int sbx_tmpl_build (int in_fd, const char *name, const char *owner, enum sbx_tmpl_format format,
                    const struct sbx_tmpl_limits *lim, sbx_error_t **err);
/* in_use(name) is asked under the store's lock, which sbx_tmpl_mount also
   takes: a create that reserved its slot before is seen, one after finds
   the template gone. */
int sbx_tmpl_remove (const char *name, int (*in_use) (const char *name), sbx_error_t **err);
/* 1 when `name` is a stored template, 0 when not. */
int sbx_tmpl_exists (const char *name);
/* fn(name) for each stored template until it returns non-zero (that
   value); -1 when the store cannot be read. */
int sbx_tmpl_each (int (*fn) (const char *name, void *arg), void *arg);
/* A detached read-only overlay mount of the template's layers under the
   generated top layer, for init's CONFIG. */
int sbx_tmpl_mount (const char *name, sbx_error_t **err);

#endif
