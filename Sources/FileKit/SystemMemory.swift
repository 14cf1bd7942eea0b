import ThreadKit

#if canImport(Glibc)
    import Glibc
#endif

/// Figures the kernel gives about the system's memory (`/proc/meminfo`).
public enum SystemMemory {
    /// The page-cache data waiting to be written or being written (`Dirty` plus `Writeback`), in
    /// bytes; nil when `/proc/meminfo` cannot be read or lacks either line.
    public static func dirtyBytes() -> Int64? {
        ProcFile.text("/proc/meminfo", limit: 1 << 20).flatMap(dirtyBytes(inMeminfo:))
    }

    /// `Dirty` plus `Writeback` of a `/proc/meminfo` text (lines such as `Dirty:   228 kB`), in
    /// bytes; nil when either line is missing or not a number of kB, or the sum overflows.
    static func dirtyBytes(inMeminfo text: String) -> Int64? {
        var found: [Substring: Int64] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 3, fields[0] == "Dirty:" || fields[0] == "Writeback:", fields[2] == "kB",
                let kib = Int64(fields[1]), kib >= 0
            else { continue }
            found[fields[0]] = kib
        }
        guard let dirty = found["Dirty:"], let writeback = found["Writeback:"] else { return nil }
        let (sum, overflowSum) = dirty.addingReportingOverflow(writeback)
        let (bytes, overflowBytes) = sum.multipliedReportingOverflow(by: 1024)
        return overflowSum || overflowBytes ? nil : bytes
    }
}
