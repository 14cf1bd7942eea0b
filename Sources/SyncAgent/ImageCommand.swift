import ArgumentParser
import FileKit
import Foundation
import ItemCache
import Synchronization
import Transport

/// `sync-agent image`: image variants from the command line, in an item cache folder shared
/// with apps and other processes.
struct ImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Fetch an image through the cache and write a resized variant of it.",
        subcommands: [ImageGetCommand.self])
}

/// `sync-agent image get`.
package struct ImageGetCommand: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write a variant of an image (a size, mode and format) to stdout or a file.",
        discussion: """
            The original is fetched once through the item cache (HTTP freshness and \
            revalidation as for cache get) and checked as an image before it is kept: JPEG, \
            PNG, WebP or GIF by its bytes, whole, within 50 million pixels (20 million for a \
            progressive JPEG or interlaced PNG) and 64 MiB. Each variant is made once, in this \
            process and across all processes sharing the folder, and kept with its original: a \
            new version of the original gets new variants and the old ones go. A file:// URL \
            of a folder that sync-agent mirrors is read in place and keyed by its content. \
            Exit codes: 0 written; 3 for a failure of the network with nothing stored; 4 for an \
            image that is refused (nothing is written to stdout, nothing is cached); 5 for the \
            cache folder; 6 for a bad option; 8 for --offline with nothing stored; 22 or 23 \
            when the origin answered a 4xx or 5xx instead of the image.
            """)

    @Argument(help: "The image's URL: https://, http:// or file:// (an image in a mirrored folder).")
    package var url: String
    @OptionGroup package var folder: CacheFolderOptions

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "The box: WxH, Wx (free height) or xH (free width), each side 1 to 16384; the free side rounds to nearest.",
            valueName: "WxH"))
    package var size: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "fit (within the box, the default), fill (cover the box, cropped from the centre) or force (exactly the box, aspect changed).",
            valueName: "MODE"))
    package var mode: String?

    @Flag(
        name: .long,
        help: "Crop a fill where libvips' attention finds the subject, not the centre (implies --mode fill).")
    package var smartCrop = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "jpeg, png, webp or avif (default: the source's for JPEG, PNG and WebP; else png, which keeps alpha).",
            valueName: "FORMAT"))
    package var format: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("1 to 100 (default: JPEG 80, WebP 80, AVIF 60).", valueName: "Q"))
    package var quality: String?

    @Flag(
        name: .long,
        help: "Enlarge a source smaller than the box (by default a variant is never larger than its source).")
    package var upscale = false

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "The colour alpha is flattened onto for JPEG: white (default), black, #rrggbb, #rgb or r,g,b.",
            valueName: "COLOR"))
    package var background: String?

    @Flag(
        name: .long,
        help:
            "Never touch the network: a stored original (even expired, unless its origin said must-revalidate or no-cache) or exit 8."
    )
    package var offline = false

    @Flag(
        name: .long,
        help:
            "Print the variant's metadata as JSON instead of its bytes (which go to -o FILE when given): width, height, format, bytes, orientation, source, made, key and the original's."
    )
    package var info = false

    @Option(
        name: [.customShort("o"), .long],
        help: ArgumentHelp("Write the bytes to FILE (atomically) instead of stdout.", valueName: "FILE"))
    package var output: String?

    @Option(
        name: [.customShort("H"), .long],
        help: ArgumentHelp("A request header for the original (repeatable).", valueName: "'Name: value'"))
    package var header: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Keep the original and its variants for NAME (a user id) rather than for the credential sent, so the account's next token finds them.",
            valueName: "NAME"))
    package var account: String?

    /// The exit code of a refused image.
    package static let refusedExit: Int32 = 4

    /// Runs in sync-agent-image, which sets ``ImageHelper/implementation``; sync-agent execs it.
    package func run() async throws {
        if let output {
            try OutputFile.refuse(output, inside: folder.cache)
            try OutputFile.checkWritable(output)
        }
        guard let implementation = ImageHelper.implementation.withLock({ $0 }) else {
            try ImageHelper.execute()
        }
        try await implementation(self)
    }
}

/// `image get` makes variants with libvips, whose ~100 shared libraries would cost every other
/// command ~30 ms of start-up: so its work runs in `sync-agent-image`, a binary installed beside
/// sync-agent with the same command line, which sync-agent execs in its place (same arguments,
/// streams and exit code).
package enum ImageHelper {
    /// The helper's file name.
    package static let name = "sync-agent-image"

    /// How `image get` runs in process: set by sync-agent-image before it parses the command line.
    package static let implementation = Mutex<(@Sendable (ImageGetCommand) async throws -> Void)?>(nil)

    /// The helper beside this executable (the binary itself, through any symlink that started it).
    static var path: String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return (executable as NSString).deletingLastPathComponent + "/" + name
    }

    /// Replaces this process with the helper, given this process's arguments; returns only by
    /// throwing, when the helper cannot be started.
    static func execute() throws -> Never {
        let helper = path
        let arguments = [helper] + CommandLine.arguments.dropFirst()
        var pointers = arguments.map { strdup($0) }
        pointers.append(nil)
        execv(helper, pointers)
        let reason = String(cString: strerror(errno))
        throw CLIFailure(
            code: 1,
            message:
                "cannot start \(helper) (\(reason)), which makes images for `sync-agent image`; install it beside sync-agent (`make install` installs both; or build it with `swift build --product sync-agent-image`)"
        )
    }
}
