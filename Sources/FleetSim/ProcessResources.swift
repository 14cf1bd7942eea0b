import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The process's own limits and usage: the open-file limit 1,000 agents need, and what the run
/// used of it and of memory.
enum ProcessResources {
    /// Raises the soft limit on open files to the hard limit and returns the limit now in force.
    /// Each agent keeps a state database open (a writer and up to a few readers, each with the
    /// database and its WAL), so 1,000 agents need thousands of descriptors.
    static func raiseOpenFileLimit() throws(ProcessFailure) -> UInt64 {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0 else {
            throw ProcessFailure(call: "getrlimit(RLIMIT_NOFILE)", errno: errno)
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            guard setrlimit(resource, &limit) == 0 else {
                throw ProcessFailure(call: "setrlimit(RLIMIT_NOFILE, \(limit.rlim_max))", errno: errno)
            }
        }
        return UInt64(limit.rlim_cur)
    }

    /// Descriptors open now (entries of /proc/self/fd, less the one listing it).
    static func openFiles() -> Int {
        max(((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1, 0)
    }

    /// The peak resident set size so far (`VmHWM`), in bytes; 0 when /proc cannot say.
    static func peakResidentBytes() -> Int64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kib = Int64(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kib * 1024
    }
}

/// A system call that failed, with its `errno`, in the system's words.
struct ProcessFailure: Error, CustomStringConvertible {
    var call: String
    var errno: Int32

    var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}
