#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H
#include <zlib.h>

/// inflateInit2 is a macro, which Swift cannot call: an inflate stream whose format
/// `windowBits` chooses (15: zlib, -15: raw deflate, 31: gzip).
static inline int czlib_inflate_init(z_stream *stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}
#endif
