#if canImport(Glibc)
    import Glibc
#endif

/// The monotonic clock in nanoseconds, for the bench tools' per-operation samples.
/// `clock_gettime` through the vDSO costs about 20–30 ns, a fixed offset on every sample.
@inline(__always)
public func nowNanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}
