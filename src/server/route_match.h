/* sbx: the pure parts of request routing, apart from libmicrohttpd's
 * callbacks so that unit tests and fuzzers can call them directly: URL
 * unescaping with the %00 check, path splitting, route matching, and the
 * header values the server reads before any handler runs. */
#ifndef SBX_SERVER_ROUTE_MATCH_H
#define SBX_SERVER_ROUTE_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "server/request.h"

/* The daemon's route table, ended by an entry whose method is NULL. */
extern const struct sbx_route sbx_server_routes[];

/* Decode %XX escapes of s in place (MHD's unescaper); returns the decoded
   length and sets *had_nul when a %00 put a NUL inside it, which would
   cut the C string short. */
size_t sbx_route_unescape (char *s, int *had_nul);

/* Copy url (MHD's decoded path, without the query) into path (cap bytes)
   and split it at '/' into
   at most max_segs non-empty segments pointing into path. -1 when the URL
   does not fit or has more segments. */
int sbx_route_split (const char *url, char *path, size_t cap, char **segs, int max_segs,
                     int *nsegs);

/* 1 when pattern ("v1/sandboxes/x/files", "*" matching one segment)
   names exactly these segments. */
int sbx_route_pattern_matches (const char *pattern, char *const *segs, int nsegs);

/* Look segs up in table: 0 with *found set, 404 for no such path, 405
   when the path exists with other methods, which are listed in allow
   (comma-separated, always NUL-terminated, cut to allow_cap). Entries
   whose method is "*" (the port proxy) are never found here: they are
   routed from the raw URI (sbx_route_port_split). */
int sbx_route_find (const struct sbx_route *table, char *const *segs, int nsegs,
                    const char *method, const struct sbx_route **found, char *allow,
                    size_t allow_cap);

/* The port proxy's URLs, "/v1/sandboxes/ID/ports/PORT[/REST][?QUERY]",
   recognised in the raw request URI (as the client sent it, before any
   unescaping: what follows PORT goes to the server in the sandbox exactly
   as written, "%2F" and all). 1 when raw has that form and ID and PORT are
   non-empty: path (cap bytes) then holds the five segments v1, sandboxes,
   ID, ports, PORT that segs[0..4] point to (*nsegs = 5), and *target points
   into raw at what follows PORT: "", or text starting with '/' or '?'. 0
   otherwise, or when it does not fit path. */
int sbx_route_port_split (const char *raw, char *path, size_t cap, char **segs, int max_segs,
                          int *nsegs, const char **target);

/* A port number: decimal digits only, no leading zero, 1 to 65535. */
int sbx_route_port_number (const char *s, unsigned *port);

/* 1 when s is an HTTP token (RFC 9110 5.6.2: a method or a field name). */
int sbx_route_is_token (const char *s);

/* 1 when s is a request target the proxy sends on: it starts with '/' and
   has only visible ASCII (libmicrohttpd lets spaces and control bytes
   through in the request line). */
int sbx_route_target_ok (const char *s);

/* Content-Length as begin_request reads it: UINT64_MAX when absent. */
uint64_t sbx_route_content_length (const char *value);

/* The API key of a request from its Authorization ("Bearer KEY") and
   X-API-Key header values (either may be NULL), leading spaces skipped;
   NULL when neither gives one. Points into one of the values. */
const char *sbx_route_api_key (const char *authorization, const char *x_api_key);

#endif
