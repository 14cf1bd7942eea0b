#ifndef CZIP_SHIM_H
#define CZIP_SHIM_H
#include <zip.h>
#include <zlib.h>

/// deflateInit2 is a macro, which Swift cannot call: a raw deflate stream (no zlib header) at
/// `level`, with zlib's default memory level and strategy.
static inline int czip_deflate_init_raw(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}
#endif
