/* limits.h - what `mlxcel serve` accepts from a client, in one place: every limit on a request's
 * size and shape, its default, the status a request over it gets, and the flag that raises it.
 * A refusal is one line in the API's error shape (request.c mxl_srv_error) that names the limit
 * and the flag, and the server goes on serving.
 *
 *  limit                                  default     over it  flag (env)
 *  -------------------------------------  ----------  -------  ----------------------------------------
 *  request body                           32 MiB      413      --max-body-bytes (MLXCEL_MAX_BODY_BYTES)
 *  request line + header fields, bytes    16 KiB      431      --max-header-bytes
 *  header fields                          100         431      --max-headers
 *  open connections per client address   64 (*)      429      --max-connections-per-ip
 *  JSON nesting depth of a body           64          400      --max-json-depth
 *  chat messages (messages / input items) 4096        400      --max-messages
 *  tools                                  128         400      --max-tools
 *  logit_bias entries (after expansion)   4096        400      --max-logit-bias
 *  grammar text, JSON schema text, and    256 KiB     400      --max-grammar-bytes
 *    the grammar made from a schema
 *  embedding inputs / rerank documents    2048        400      --max-inputs
 *  stop strings                           16          400      fixed (MXL_SEQ_MAX_STOP)
 *  n (choices), prompts of one request    16          400      fixed (MXL_SRV_MAX_CHOICES)
 *  top_logprobs / n_probs                 20          400      fixed (MXL_SEQ_MAX_PROBS)
 *  images per request, bytes per image    16, 64 MiB  400      --max-images, --max-image-payload-size
 *  waiting requests                       32          503      --max-queue-depth
 *  prompt tokens                          the slot's  400      --ctx-size (llama-server's
 *                                         context              exceed_context_size_error)
 *  max_tokens / n_predict                 not refused: generation ends at the slot's context with
 *                                         finish_reason "length", and a server started with
 *                                         --n-predict N caps every request at N (llama-server)
 *
 * (*) by default, loopback clients (127.0.0.0/8, ::1, a Unix socket) are not counted: a reverse
 * proxy on the same machine brings every client from there. A --max-connections-per-ip given
 * explicitly counts every address, loopback included; 0 turns the limit off. A connection over
 * the limit is answered 429 (and closed); past twice the limit new connections are closed at once,
 * so idle connections cannot hold more threads.
 *
 * Not limits but confinement: file paths a request names stay inside their directory (image
 * files under --media-path: no "..", absolute paths elsewhere or symlinks out of it; slot files:
 * a plain file name in --slot-save-path, never followed through a symlink); the API key is
 * compared in constant time (mxl_srv_key_equal). docs/server-limits.md lists the same. */
#ifndef MXL_SERVER_LIMITS_H
#define MXL_SERVER_LIMITS_H

#include <stdbool.h>
#include <stddef.h>

#define MXL_LIMIT_BODY_BYTES (32 << 20)
#define MXL_LIMIT_HEADER_BYTES (16 << 10)
#define MXL_LIMIT_HEADERS 100
#define MXL_LIMIT_CONN_PER_IP 64
#define MXL_LIMIT_JSON_DEPTH 64
#define MXL_LIMIT_JSON_DEPTH_MAX 2048 /* jansson's own parser limit (JSON_PARSER_MAX_DEPTH) */
#define MXL_LIMIT_MESSAGES 4096
#define MXL_LIMIT_TOOLS 128
#define MXL_LIMIT_LOGIT_BIAS 4096
#define MXL_LIMIT_GRAMMAR_BYTES (256 << 10)
#define MXL_LIMIT_INPUTS 2048
#define MXL_SRV_MAX_CHOICES 16 /* n, and the prompts of one request (gen_call.h's per-choice arrays) */

/* True when the JSON text b[0..n) nests arrays / objects at most max levels deep (the top-level
 * value is level 1); *depth gets the level reached (max + 1 when it stops early). Strings are
 * skipped, escapes included; invalid JSON is left to the parser. */
bool mxl_srv_json_depth_ok(const char *b, size_t n, int max, int *depth);

/* Constant-time comparison of a client's API key with the server's: both are hashed (SHA-256)
 * and the digests compared with CRYPTO_memcmp, so neither the key's bytes nor its length show in
 * the time taken. NULL given: false. */
bool mxl_srv_key_equal(const char *given, const char *key);

/* Opens a slot file for reading: a regular file, never through a symlink at its last component
 * (the file name is a plain name inside --slot-save-path; the directory is the operator's).
 * Returns the fd, or -1 with errno set (ELOOP: a symlink; EINVAL: not a regular file). */
int mxl_srv_open_regular(const char *path);

/* Creates a new private file beside `path` ("path.XXXXXX", O_EXCL: never an existing file or a
 * symlink) for writing the slot file; the caller renames it over path when it is whole, so a
 * symlink or hard link named path is replaced, never written through. tmp (cap bytes) gets the
 * name. Returns the fd, or -1 with errno set. */
int mxl_srv_create_beside(const char *path, char *tmp, size_t cap);

/* Opens for reading a file under root (an absolute, resolved path: realpath's): path relative
 * to root, or absolute and inside it. Every component is resolved inside root; a symlink that
 * leads out of it, "..", or an absolute path elsewhere is refused (EXDEV), and so is a file that
 * is not regular (EINVAL). Returns the fd, or -1 with errno set. */
int mxl_srv_open_under(const char *root, const char *path);

#endif
