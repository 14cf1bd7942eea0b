// The floor under any libvips-based JPEG variant maker on this machine (issue 22's goal against
// Pillow): the CPU time each stage of "camera JPEG -> 720 px wide JPEG" costs at its cheapest.
//
//   cc -O2 bench/jpeg_floor.c -o jpeg_floor $(pkg-config --cflags --libs vips) -ljpeg
//   ./jpeg_floor WIDTH QUALITY FILE...
//
// Per file, process CPU time (libvips' worker thread included) of:
//   decode_1_8   libjpeg-turbo at scale 1/8: the DCT is DC-only, so this is the entropy decoding
//                every decoder pays whatever the scale (the floor of any decode);
//   decode_best  libjpeg-turbo at the smallest M/8 scale still at least WIDTH wide (3/8 for 2725 px
//                to 720: finer than libvips' shrink, which has only 1/2, 1/4 and 1/8);
//   decode_vips  libvips' jpegload with the shrink ImageCache uses (the largest of 2/4/8 still at
//                least WIDTH wide), to memory;
//   reduce_K     libvips' vips_reduce from decode_best's pixels to WIDTH wide, kernel K (nearest,
//                linear, cubic, lanczos3), to memory;
//   save         libvips' jpegsave of the WIDTH-wide image at QUALITY, metadata stripped.
// Prints one JSON object: the median over the files of each stage, in milliseconds.
// Errors: a file that is not a baseline-decodable JPEG stops the run with its name.
#include <stdio.h>  // before jpeglib.h, which needs size_t and FILE
#include <stdlib.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <string.h>
#include <time.h>
#include <vips/vips.h>

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct failing_error {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
};

static void fail_exit(j_common_ptr info) { longjmp(((struct failing_error *)info->err)->jump, 1); }

// Decodes `data` at scale num/8 to RGB; returns the pixels (g_free them) or NULL.
static unsigned char *decode(const unsigned char *data, size_t length, int num, int *width, int *height) {
    struct jpeg_decompress_struct info;
    struct failing_error error;
    unsigned char *volatile pixels = NULL;
    info.err = jpeg_std_error(&error.pub);
    error.pub.error_exit = fail_exit;
    if (setjmp(error.jump)) {
        jpeg_destroy_decompress(&info);
        g_free(pixels);
        return NULL;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, length);
    jpeg_read_header(&info, TRUE);
    info.scale_num = num;
    info.scale_denom = 8;
    info.out_color_space = JCS_RGB;
    jpeg_start_decompress(&info);
    *width = info.output_width;
    *height = info.output_height;
    size_t stride = (size_t)info.output_width * 3;
    pixels = g_malloc(stride * info.output_height);
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = pixels + stride * info.output_scanline;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    return pixels;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *values, int count) {
    qsort(values, count, sizeof(double), compare);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

enum { DECODE_1_8, DECODE_BEST, DECODE_VIPS, REDUCE_NEAREST, REDUCE_LINEAR, REDUCE_CUBIC, REDUCE_LANCZOS3, SAVE, STAGES };
static const char *names[STAGES] = {"decode_1_8",   "decode_best",  "decode_vips",     "reduce_nearest",
                                    "reduce_linear", "reduce_cubic", "reduce_lanczos3", "save"};

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s WIDTH QUALITY FILE...\n", argv[0]);
        return 2;
    }
    if (VIPS_INIT(argv[0])) return 1;
    vips_cache_set_max(0);
    vips_concurrency_set(1);  // as ImageCache and the peers' single-threaded processes
    int target = atoi(argv[1]), quality = atoi(argv[2]), files = argc - 3;
    double *times[STAGES];
    for (int s = 0; s < STAGES; s++) times[s] = g_new0(double, files);
    int best_num = 8, vips_shrink = 1;
    for (int f = 0; f < files; f++) {
        const char *path = argv[3 + f];
        gchar *data = NULL;
        gsize length = 0;
        if (!g_file_get_contents(path, &data, &length, NULL)) {
            fprintf(stderr, "jpeg_floor: cannot read %s\n", path);
            return 1;
        }
        int w = 0, h = 0;
        double t = cpu_ms();
        unsigned char *tiny = decode((unsigned char *)data, length, 1, &w, &h);
        times[DECODE_1_8][f] = cpu_ms() - t;
        int full_w = w * 8;  // close enough to choose scales (rounded up by libjpeg)
        g_free(tiny);
        best_num = 8;
        for (int m = 1; m <= 8; m++)
            if ((full_w * m + 7) / 8 >= target) {
                best_num = m;
                break;
            }
        vips_shrink = 1;
        for (int s = 8; s >= 2; s /= 2)
            if ((full_w + s - 1) / s >= target) {
                vips_shrink = s;
                break;
            }
        t = cpu_ms();
        unsigned char *pixels = decode((unsigned char *)data, length, best_num, &w, &h);
        times[DECODE_BEST][f] = cpu_ms() - t;
        if (!pixels) {
            fprintf(stderr, "jpeg_floor: %s is not a JPEG libjpeg can decode\n", path);
            return 1;
        }
        t = cpu_ms();
        VipsImage *loaded = vips_image_new_from_buffer(data, length, "", "shrink", vips_shrink, "access",
                                                       VIPS_ACCESS_SEQUENTIAL, NULL);
        VipsImage *copy = loaded ? vips_image_copy_memory(loaded) : NULL;
        times[DECODE_VIPS][f] = cpu_ms() - t;
        if (!copy) {
            fprintf(stderr, "jpeg_floor: libvips cannot load %s: %s\n", path, vips_error_buffer());
            return 1;
        }
        g_object_unref(copy);
        g_object_unref(loaded);
        VipsImage *image = vips_image_new_from_memory(pixels, (size_t)w * h * 3, w, h, 3, VIPS_FORMAT_UCHAR);
        VipsKernel kernels[] = {VIPS_KERNEL_NEAREST, VIPS_KERNEL_LINEAR, VIPS_KERNEL_CUBIC, VIPS_KERNEL_LANCZOS3};
        double shrink = (double)w / target;
        VipsImage *small = NULL;
        for (int k = 0; k < 4; k++) {
            VipsImage *reduced = NULL, *out = NULL;
            t = cpu_ms();
            if (vips_reduce(image, &reduced, shrink, shrink, "kernel", kernels[k], NULL) ||
                !(out = vips_image_copy_memory(reduced))) {
                fprintf(stderr, "jpeg_floor: vips_reduce failed on %s: %s\n", path, vips_error_buffer());
                return 1;
            }
            times[REDUCE_NEAREST + k][f] = cpu_ms() - t;
            g_object_unref(reduced);
            if (small) g_object_unref(small);
            small = out;
        }
        void *encoded = NULL;
        size_t encoded_length = 0;
        t = cpu_ms();
        if (vips_jpegsave_buffer(small, &encoded, &encoded_length, "Q", quality, "strip", TRUE, NULL)) {
            fprintf(stderr, "jpeg_floor: jpegsave failed on %s: %s\n", path, vips_error_buffer());
            return 1;
        }
        times[SAVE][f] = cpu_ms() - t;
        g_free(encoded);
        g_object_unref(small);
        g_object_unref(image);
        g_free(pixels);
        g_free(data);
    }
    printf("{\"files\":%d,\"best_scale\":\"%d/8\",\"vips_shrink\":%d", files, best_num, vips_shrink);
    for (int s = 0; s < STAGES; s++) printf(",\"%s\":%.3f", names[s], median(times[s], files));
    printf("}\n");
    return 0;
}
