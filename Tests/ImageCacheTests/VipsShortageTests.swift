import Testing

@testable import ImageCache

/// libvips' errors that name a resource that ran out say nothing of the image: they are never a
/// refusal (which would drop a good original as damaged).
@Suite("libvips' resource shortages are not the image's fault")
struct VipsShortageTests {
    @Test(arguments: [
        ("glib: Error creating thread: Resource temporarily unavailable", "task limit"),
        ("vips_threadpool: unable to create thread", "task limit"),
        ("vips_tracked_malloc: out of memory --- size == 512MB", "out of memory"),
    ])
    func shortagesAreNamed(text: String, hint: String) {
        #expect(VipsRuntime.shortage(in: text)?.contains(hint) == true)
    }

    @Test(arguments: [
        "", "VipsJpeg: Premature end of JPEG file", "pngload_source: libpng read error",
        "webpload: image data truncated", "threaded rendering of a damaged tile",
    ])
    func damageIsNoShortage(text: String) {
        #expect(VipsRuntime.shortage(in: text) == nil)
    }
}
