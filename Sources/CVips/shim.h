#ifndef CVIPS_SHIM_H
#define CVIPS_SHIM_H
// Typed, non-variadic wrappers over libvips' calls that Swift cannot make: libvips' option
// lists are variadic and NULL-terminated, and a wrong one is undefined behaviour, so each
// option list is written here once, with its types, and each wrapper has a test
// (Tests/ImageCacheTests/CVipsWrapperTests.swift). Every symbol is prefixed `cvips_`.
#include <vips/vips.h>

/// vips_init, once per process (libvips ignores later calls). 0 on success.
static inline int cvips_init(const char *argv0) { return vips_init(argv0); }
static void cvips_drop_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain;
    (void)level;
    (void)message;
    (void)data;
}
/// libvips' warnings (`g_warning` in its "VIPS" log domain: libpng's and libjpeg's complaints
/// about a damaged file) are dropped rather than printed raw to the process's stderr: a
/// refused image's error carries libvips' error buffer, and a library prints nothing itself.
static inline void cvips_drop_warnings(void) {
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG,
                      cvips_drop_log, NULL);
}
/// The libvips version: 0 major, 1 minor, 2 micro.
static inline int cvips_version(int part) { return vips_version(part); }
/// libvips' operation cache: 0 entries keeps no decoded input alive between calls.
static inline void cvips_cache_set_max(int max) { vips_cache_set_max(max); }
/// Worker threads per pipeline (1: the caller's own pool provides the parallelism).
static inline void cvips_concurrency_set(int concurrency) { vips_concurrency_set(concurrency); }
/// Blocks every operation libvips marks untrusted (8.13+).
static inline void cvips_block_untrusted_set(int state) { vips_block_untrusted_set(state ? TRUE : FALSE); }
/// Blocks or unblocks an operation class and its subclasses by name (`VipsForeignLoad`,
/// `VipsForeignLoadJpeg`), process-wide (8.13+).
static inline void cvips_operation_block_set(const char *name, int state) {
    vips_operation_block_set(name, state ? TRUE : FALSE);
}
/// The name of the loader that would open these bytes (`VipsForeignLoadJpegBuffer`), or NULL
/// when none may (unknown or blocked).
static inline const char *cvips_find_load_buffer(const void *data, size_t length) {
    return vips_foreign_find_load_buffer(data, length);
}
/// The image in these bytes, header read, pixels not yet decoded; NULL on error (see
/// cvips_error_buffer). The bytes must outlive the image. Sequential access; `fail` refuses a
/// truncated or damaged image (`fail_on=error`) instead of filling it grey.
static inline VipsImage *cvips_image_new_from_buffer(const void *data, size_t length, int fail) {
    return vips_image_new_from_buffer(
        data, length, "", "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
        fail ? VIPS_FAIL_ON_ERROR : VIPS_FAIL_ON_NONE, NULL);
}
static inline int cvips_image_width(VipsImage *image) { return vips_image_get_width(image); }
static inline int cvips_image_height(VipsImage *image) { return vips_image_get_height(image); }
static inline int cvips_image_bands(VipsImage *image) { return vips_image_get_bands(image); }
/// Pages (or frames) in the file; 1 for a still image.
static inline int cvips_image_pages(VipsImage *image) { return vips_image_get_n_pages(image); }
/// A black image (one band, uchar) of this size: test input. 0 on success.
static inline int cvips_black(VipsImage **out, int width, int height, int bands) {
    return vips_black(out, width, height, "bands", bands, NULL);
}
/// The image as JPEG bytes at quality `q`, metadata stripped; free `*data` with cvips_free.
static inline int cvips_jpegsave_buffer(VipsImage *image, void **data, size_t *length, int q) {
    return vips_jpegsave_buffer(image, data, length, "Q", q, "strip", TRUE, NULL);
}
/// The image as PNG bytes, metadata stripped; free `*data` with cvips_free.
static inline int cvips_pngsave_buffer(VipsImage *image, void **data, size_t *length) {
    return vips_pngsave_buffer(image, data, length, "strip", TRUE, NULL);
}
/// A thumbnail of the image in these bytes: shrink-on-load, EXIF orientation applied, colour
/// to sRGB. `size`: 0 fit down only, 1 fit up or down, 2 force both sides; `crop`: 0 none
/// (fit), 1 centre, 2 attention (smart). `height` VIPS_MAX_COORD for a free height.
static inline int cvips_thumbnail_buffer(const void *data, size_t length, VipsImage **out, int width, int height,
                                         int size, int crop) {
    VipsSize sizes[] = {VIPS_SIZE_DOWN, VIPS_SIZE_BOTH, VIPS_SIZE_FORCE};
    VipsInteresting crops[] = {VIPS_INTERESTING_NONE, VIPS_INTERESTING_CENTRE, VIPS_INTERESTING_ATTENTION};
    return vips_thumbnail_buffer((void *)data, length, out, width, "height", height, "size",
                                 sizes[size < 0 || size > 2 ? 0 : size], "crop",
                                 crops[crop < 0 || crop > 2 ? 0 : crop], "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
/// Whether the image has an alpha band.
static inline int cvips_image_hasalpha(VipsImage *image) { return vips_image_hasalpha(image) ? 1 : 0; }
/// The image flattened onto an RGB background (alpha removed). 0 on success.
static inline int cvips_flatten(VipsImage *image, VipsImage **out, double red, double green, double blue) {
    VipsArrayDouble *background = vips_array_double_newv(3, red, green, blue);
    int status = vips_flatten(image, out, "background", background, NULL);
    vips_area_unref(VIPS_AREA(background));
    return status;
}
/// The image as WebP bytes at quality `q`, metadata stripped; free `*data` with cvips_free.
static inline int cvips_webpsave_buffer(VipsImage *image, void **data, size_t *length, int q) {
    return vips_webpsave_buffer(image, data, length, "Q", q, "strip", TRUE, NULL);
}
/// The image as JPEG bytes keeping its metadata (EXIF orientation): test input.
static inline int cvips_jpegsave_buffer_keep(VipsImage *image, void **data, size_t *length, int q) {
    return vips_jpegsave_buffer(image, data, length, "Q", q, NULL);
}
/// Sets an integer metadata field (`orientation`).
static inline void cvips_image_set_int(VipsImage *image, const char *name, int value) {
    vips_image_set_int(image, name, value);
}
/// The band values of one pixel, up to `capacity`; returns how many, or -1 on error.
static inline int cvips_getpoint(VipsImage *image, int x, int y, double *values, int capacity) {
    double *vector = NULL;
    int count = 0;
    if (vips_getpoint(image, &vector, &count, x, y, NULL)) return -1;
    int kept = count < capacity ? count : capacity;
    for (int i = 0; i < kept; i++) values[i] = vector[i];
    g_free(vector);
    return kept;
}
/// A constant image: `bands` bands of `value` (RGBA test input with `bands` 4). 0 on success.
static inline int cvips_constant(VipsImage **out, int width, int height, double red, double green, double blue,
                                 double alpha, int bands) {
    VipsImage *black = NULL;
    if (vips_black(&black, width, height, "bands", bands, NULL)) return -1;
    double values[] = {red, green, blue, alpha};
    double ones[] = {0, 0, 0, 0};
    int status = vips_linear(black, out, ones, values, bands, "uchar", TRUE, NULL);
    g_object_unref(black);
    return status;
}
/// An integer metadata field (`orientation`, `interlaced`), or `fallback` when the image has
/// none or it is not an integer.
static inline int cvips_image_get_int_or(VipsImage *image, const char *name, int fallback) {
    int value = 0;
    if (vips_image_get_typeof(image, name) == 0) return fallback;
    if (vips_image_get_int(image, name, &value)) {
        vips_error_clear();
        return fallback;
    }
    return value;
}
/// The image as AVIF bytes (HEIF with AV1, libheif and libaom) at quality `q` and encoder
/// effort `effort` (0 fastest – 9 slowest), metadata stripped; free `*data` with cvips_free.
static inline int cvips_avifsave_buffer(VipsImage *image, void **data, size_t *length, int q, int effort) {
    return vips_heifsave_buffer(image, data, length, "Q", q, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1,
                                "effort", effort, "strip", TRUE, NULL);
}
/// The image as a progressive (interlaced) JPEG keeping its metadata: test input.
static inline int cvips_jpegsave_buffer_progressive(VipsImage *image, void **data, size_t *length, int q) {
    return vips_jpegsave_buffer(image, data, length, "Q", q, "interlace", TRUE, NULL);
}
/// An image of `bands` uchar bands over a copy of `data` (width × height × bands bytes): test
/// input. 0 on success.
static inline int cvips_image_new_from_memory_copy(const void *data, size_t length, int width, int height, int bands,
                                                   VipsImage **out) {
    *out = vips_image_new_from_memory_copy(data, length, width, height, bands, VIPS_FORMAT_UCHAR);
    return *out ? 0 : -1;
}
/// A source reading a copy of the file descriptor `descriptor` (libvips dups it, so the caller
/// closes its own), from the descriptor's current offset. NULL on error.
static inline VipsSource *cvips_source_new_from_descriptor(int descriptor) {
    return vips_source_new_from_descriptor(descriptor);
}
/// A source over `length` bytes at `data`, which must outlive it. NULL on error.
static inline VipsSource *cvips_source_new_from_memory(const void *data, size_t length) {
    return vips_source_new_from_memory(data, length);
}
static inline void cvips_source_unref(VipsSource *source) { g_object_unref(source); }
/// The name of the loader that would open this source (`VipsForeignLoadJpegSource`), or NULL.
static inline const char *cvips_find_load_source(VipsSource *source) { return vips_foreign_find_load_source(source); }
/// The image in this source, header read, pixels not yet decoded; NULL on error. Sequential
/// access; `fail` refuses a damaged image (`fail_on=error`).
static inline VipsImage *cvips_image_new_from_source(VipsSource *source, int fail) {
    return vips_image_new_from_source(source, "", "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                      fail ? VIPS_FAIL_ON_ERROR : VIPS_FAIL_ON_NONE, NULL);
}
/// A JPEG decoded at 1/`shrink` of its size by libjpeg's DCT scaling (`shrink` 1, 2, 4 or 8),
/// sequential, `fail_on=warning`: libjpeg reports damaged scan data (a file cut short with an
/// end marker after the cut, a bad Huffman code) only as a warning and fills the rest grey, so
/// any warning of libjpeg's refuses the image, as sharp's default `failOn` does. (EXIF is parsed
/// by libexif, not libjpeg: a damaged EXIF block gives no warning here.) 0 on success.
static inline int cvips_jpegload_source_shrink(VipsSource *source, VipsImage **out, int shrink) {
    return vips_jpegload_source(source, out, "shrink", shrink, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                VIPS_FAIL_ON_WARNING, NULL);
}
/// The image computed into memory (every pixel decoded now, so a damaged input fails here, not
/// halfway through an encoder). 0 on success.
static inline int cvips_copy_memory(VipsImage *image, VipsImage **out) {
    *out = vips_image_copy_memory(image);
    return *out ? 0 : -1;
}
/// A copy of the image without any of its metadata (EXIF, XMP, IPTC, ICC profile, comments,
/// orientation, page layout): every field in its metadata table is removed, the pixels and
/// their size, bands and format stay. libvips 8.14's `strip` does not strip WebP's EXIF and
/// XMP; this does, for every encoder alike. 0 on success.
static inline int cvips_strip_metadata(VipsImage *image, VipsImage **out) {
    if (vips_copy(image, out, NULL)) return -1;
    gchar **fields = vips_image_get_fields(*out);
    for (int i = 0; fields && fields[i]; i++) (void)vips_image_remove(*out, fields[i]);
    g_strfreev(fields);
    return 0;
}
/// As cvips_thumbnail_buffer, from a source.
static inline int cvips_thumbnail_source(VipsSource *source, VipsImage **out, int width, int height, int size,
                                         int crop) {
    VipsSize sizes[] = {VIPS_SIZE_DOWN, VIPS_SIZE_BOTH, VIPS_SIZE_FORCE};
    VipsInteresting crops[] = {VIPS_INTERESTING_NONE, VIPS_INTERESTING_CENTRE, VIPS_INTERESTING_ATTENTION};
    return vips_thumbnail_source(source, out, width, "height", height, "size", sizes[size < 0 || size > 2 ? 0 : size],
                                 "crop", crops[crop < 0 || crop > 2 ? 0 : crop], "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
/// As cvips_thumbnail_buffer, from an image already loaded (no shrink-on-load): EXIF
/// orientation applied, colour to sRGB.
static inline int cvips_thumbnail_image(VipsImage *in, VipsImage **out, int width, int height, int size, int crop) {
    VipsSize sizes[] = {VIPS_SIZE_DOWN, VIPS_SIZE_BOTH, VIPS_SIZE_FORCE};
    VipsInteresting crops[] = {VIPS_INTERESTING_NONE, VIPS_INTERESTING_CENTRE, VIPS_INTERESTING_ATTENTION};
    return vips_thumbnail_image(in, out, width, "height", height, "size", sizes[size < 0 || size > 2 ? 0 : size],
                                "crop", crops[crop < 0 || crop > 2 ? 0 : crop], NULL);
}
/// The image converted to CMYK (libvips' built-in profile): test input. 0 on success.
static inline int cvips_colourspace_cmyk(VipsImage *image, VipsImage **out) {
    return vips_colourspace(image, out, VIPS_INTERPRETATION_CMYK, NULL);
}
/// The encoded image in these bytes decoded to 8-bit sRGB with alpha (RGBA, not premultiplied),
/// row by row with no padding: `*data` holds width × height × 4 bytes; free it with cvips_free.
/// 0 on success.
static inline int cvips_rgba8_buffer(const void *buffer, size_t length, void **data, size_t *size, int *width,
                                     int *height) {
    VipsImage *in = vips_image_new_from_buffer(buffer, length, "", "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    if (!in) return -1;
    VipsImage *srgb = NULL, *rgba = NULL, *bytes = NULL;
    int status = -1;
    *data = NULL;
    if (vips_colourspace(in, &srgb, VIPS_INTERPRETATION_sRGB, NULL)) goto done;
    if (vips_image_get_bands(srgb) == 3) {
        if (vips_bandjoin_const1(srgb, &rgba, 255, NULL)) goto done;
    } else if (vips_image_get_bands(srgb) == 4) {
        rgba = srgb;
        g_object_ref(rgba);
    } else {
        vips_error("cvips", "%d bands after sRGB conversion", vips_image_get_bands(srgb));
        goto done;
    }
    if (vips_cast_uchar(rgba, &bytes, NULL)) goto done;
    *width = vips_image_get_width(bytes);
    *height = vips_image_get_height(bytes);
    *data = vips_image_write_to_memory(bytes, size);
    status = *data ? 0 : -1;
done:
    if (bytes) g_object_unref(bytes);
    if (rgba) g_object_unref(rgba);
    if (srgb) g_object_unref(srgb);
    g_object_unref(in);
    return status;
}
/// Releases an image.
static inline void cvips_unref(VipsImage *image) { g_object_unref(image); }
/// Frees a buffer libvips allocated.
static inline void cvips_free(void *data) { g_free(data); }
/// libvips' accumulated error text (this thread's); cleared by cvips_error_clear.
static inline const char *cvips_error_buffer(void) { return vips_error_buffer(); }
static inline void cvips_error_clear(void) { vips_error_clear(); }

#endif
